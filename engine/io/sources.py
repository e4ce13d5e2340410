"""The values of a ``Tensor`` source block, made the same way by the block and exported scripts.

``generate(fill, shape, dtype, seed, values, path)`` is the one definition of every fill:
zeros, ones, ``arange`` (1, 2, ..., n in row-major order), seeded ``random_normal`` (mean 0,
std 1) and ``random_uniform`` in [-1, 1), literal ``values`` (a number or nested list; a
scalar becomes shape [1]) and a ``.npy`` ``file`` (:mod:`engine.io.npy`: strict header, no
pickle, integers only when they convert exactly). The result is a C-contiguous array of ``dtype``
(a TensorFlow float name).

float64 random and arange values are made in one call. Other dtypes are made in chunks of
:data:`CHUNK` elements written into the result, so no float64 array of the whole shape is ever
made (:func:`workspace_bytes` is the extra memory). Random values for float32, float16 and
bfloat16 are drawn directly in float32 (``Generator.standard_normal(dtype=float32)``, ``random``
for uniform: faster than float64 draws and half the bytes; 0.6 s instead of 0.7-1.0 s for
64x128x128x64 here) and cast for the half types;
arange values are exact integers in float64 cast into the result. Values are deterministic per
seed and independent of the chunk size (one generator drawn in sequence); they are not the
float64 values of the same seed rounded (which earlier versions made). A cancelled run
(:mod:`engine.base.cancel`) stops between chunks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.base.cancel import checkpoint
from engine.base.dtypes import to_dtype
from engine.io import npy

FILLS = ("zeros", "ones", "arange", "random_normal", "random_uniform", "values", "file")
#: Elements made at a time in float64 for a dtype other than float64.
CHUNK = 1 << 20
_CHUNKED = ("arange", "random_normal", "random_uniform")


def values_array(values: Any) -> np.ndarray:
    """Literal values as float64, at least 1-D."""
    arr = np.asarray(values, dtype=np.float64)
    return arr.reshape(1) if arr.ndim == 0 else arr


def generate(fill: str, shape: Sequence[int], dtype: str, seed: int = 0, values: Any = None,
             path: str | None = None) -> np.ndarray:
    """The source tensor (see the module docstring)."""
    dt, shape = to_dtype(dtype), tuple(int(s) for s in shape)
    if fill == "zeros":
        return np.zeros(shape, dt)
    if fill == "ones":
        return np.ones(shape, dt)
    if fill in _CHUNKED:
        return _chunked(fill, shape, dt, seed, math.prod(shape) if dt == np.float64 else CHUNK)
    if fill == "values":
        return np.ascontiguousarray(values_array(values), dtype=dt)
    if fill == "file":
        return npy.read_array(str(path), dtype)
    raise ValueError(f"fill {fill!r} is not one of {', '.join(FILLS)}")


def _chunked(fill: str, shape: tuple[int, ...], dt: np.dtype, seed: int,
             chunk: int) -> np.ndarray:
    """arange or random values made ``chunk`` elements at a time into a ``dt`` array (one
    generator drawn in sequence: the same values whatever the chunk)."""
    n = math.prod(shape)
    if chunk >= n and dt == np.float64:  # one call, exactly as before chunking existed
        return _float64_values(fill, np.random.default_rng(seed), 0, n).reshape(shape)
    out = np.empty(shape, dt)
    flat = out.reshape(-1)
    rng = np.random.default_rng(seed)
    make = _float64_values if dt == np.float64 or fill == "arange" else _float32_values
    for lo in range(0, n, max(1, chunk)):
        checkpoint()
        hi = min(n, lo + max(1, chunk))
        with np.errstate(over="ignore"):  # arange past float16's 65504 casts to Inf, as NumPy does
            flat[lo:hi] = make(fill, rng, lo, hi)
    return out


def _float64_values(fill: str, rng: np.random.Generator, lo: int, hi: int) -> np.ndarray:
    """Elements ``[lo, hi)`` of the fill in float64 (random ones drawn next from ``rng``)."""
    if fill == "arange":
        return np.arange(lo + 1, hi + 1, dtype=np.float64)
    if fill == "random_normal":
        return rng.standard_normal(hi - lo)
    return rng.uniform(-1.0, 1.0, hi - lo)


def _float32_values(fill: str, rng: np.random.Generator, lo: int, hi: int) -> np.ndarray:
    """``hi - lo`` random values drawn next from ``rng`` directly in float32 (``2u - 1`` is
    exact in float32 for the uniform ``u`` in [0, 1) on its 2**-24 grid)."""
    if fill == "random_normal":
        return rng.standard_normal(hi - lo, dtype=np.float32)
    u = rng.random(hi - lo, dtype=np.float32)
    u *= 2
    u -= 1
    return u


def workspace_bytes(fill: str, shape: Sequence[int], dtype: str, values: Any = None,
                    path: str | None = None) -> int:
    """Bytes :func:`generate` needs besides its result (an upper bound)."""
    dt, n = to_dtype(dtype), math.prod(int(s) for s in shape)
    if fill in _CHUNKED:
        return 0 if dt == np.float64 else 2 * 8 * min(n, CHUNK)
    if fill == "values":
        return 0 if dt == np.float64 else 8 * values_array(values).size
    if fill == "file":
        return npy.read_workspace(npy.read_header(str(path)), dtype)
    return 0
