"""The values of a ``Tensor`` source block, made the same way by the block and exported scripts.

``generate(fill, shape, dtype, seed, values, path)`` is the one definition of every fill:
zeros, ones, ``arange`` (1, 2, ..., n in row-major order), seeded ``random_normal`` (mean 0,
std 1) and ``random_uniform`` in [-1, 1), literal ``values`` (a number or nested list; a
scalar becomes shape [1]) and a ``.npy`` ``file`` (read without pickle). The result is a
C-contiguous array of ``dtype`` (a TensorFlow float name).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.dtypes import to_dtype

FILLS = ("zeros", "ones", "arange", "random_normal", "random_uniform", "values", "file")


def values_array(values: Any) -> np.ndarray:
    """Literal values as float64, at least 1-D."""
    arr = np.asarray(values, dtype=np.float64)
    return arr.reshape(1) if arr.ndim == 0 else arr


def generate(fill: str, shape: Sequence[int], dtype: str, seed: int = 0, values: Any = None,
             path: str | None = None) -> np.ndarray:
    """The source tensor (see the module docstring)."""
    dt, shape = to_dtype(dtype), tuple(int(s) for s in shape)
    if fill == "zeros":
        out = np.zeros(shape, dt)
    elif fill == "ones":
        out = np.ones(shape, dt)
    elif fill == "arange":
        out = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float64).reshape(shape)
    elif fill == "random_normal":
        out = np.random.default_rng(seed).standard_normal(shape)
    elif fill == "random_uniform":
        out = np.random.default_rng(seed).uniform(-1.0, 1.0, shape)
    elif fill == "values":
        out = values_array(values)
    elif fill == "file":
        out = np.load(path, allow_pickle=False)
    else:
        raise ValueError(f"fill {fill!r} is not one of {', '.join(FILLS)}")
    return np.ascontiguousarray(out, dtype=dt)
