"""A case (a geometry, dtype, seed, memory layout and kind of values) and its arrays.

Values are random normals for the sweep and structured for the minimal case (``arange`` input
1, 2, ..., n, a one-hot filter and a one-hot output gradient), so a wrong element names the
terms it holds. Every value is exact in the case's dtype; the float64 reference is computed from
those same values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from engine.base.dtypes import to_dtype
from engine.verify.conventions import TF_OPS, Call, Geometry, make_call, shapes_nd, tf_op_of


@dataclass(frozen=True)
class Case:
    """One case: ``edge`` is its catalogue class (``random`` for the random search),
    ``memory`` ``contiguous``, ``noncontiguous`` or ``readonly``, ``values`` ``random`` or
    ``structured``."""

    op: str
    convention: str
    geometry: Geometry
    dtype: str = "float32"
    edge: str = "random"
    seed: int = 0
    memory: str = "contiguous"
    values: str = "random"

    def with_(self, **changes: Any) -> Case:
        return replace(self, **changes)


def _exact(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return a.astype(dtype).astype(np.float64)


def _one_hot(shape: tuple[int, ...]) -> np.ndarray:
    a = np.zeros(shape)
    if a.size:
        a.flat[0] = 1.0
    return a


def arrays(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The forward input, filter (HWIO; 3-D: DHWIO) and output gradient in TF layout, float64."""
    cg = shapes_nd(case.geometry)
    dtype = to_dtype(case.dtype)
    sizes = (cg.input_shape, cg.filter_shape, cg.output_shape)
    if case.values == "structured":
        x = np.arange(1, np.prod(sizes[0]) + 1, dtype=np.float64).reshape(sizes[0])
        return _exact(x, dtype), _one_hot(sizes[1]), _one_hot(sizes[2])
    rng = np.random.default_rng(case.seed)
    return tuple(_exact(rng.standard_normal(s), dtype) for s in sizes)  # type: ignore


def call(case: Case) -> Call:
    """The user's call and the canonical TF call of ``case``."""
    x, w, dy = arrays(case)
    if case.values == "structured" and TF_OPS[tf_op_of(case.op, case.convention)][3] == "input":
        dy = _exact(np.arange(1, dy.size + 1, dtype=np.float64).reshape(dy.shape),
                    to_dtype(case.dtype))
    return make_call(case.op, case.convention, case.geometry, x, w, dy, to_dtype(case.dtype))


def array_sizes(case: Case) -> list[int]:
    """Elements of each array argument, in the TF op's order (from the shapes alone): the
    size of a case, which shrinking makes smaller and reports show."""
    cg = shapes_nd(case.geometry)
    sizes = {"input": cg.input_shape, "filter": cg.filter_shape,
             "out_backprop": cg.output_shape}
    return [math.prod(sizes[role]) for role in TF_OPS[tf_op_of(case.op, case.convention)][1]]
