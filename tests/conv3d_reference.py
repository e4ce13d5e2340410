"""A slow float64 reference for the Conv3D family (any number of spatial dims), from the
definition: one Python loop over output positions and taps, skipping the taps that read
padding. It shares no code with the kernels: sizes and paddings come from
:func:`tests.reference.window` (TensorFlow's documented rule, written in the tests).

Each function returns ``(value, bound)``: the result and the sum of |products| of every
element (the scale the documented tolerance :data:`engine.base.dtypes.RTOL` applies to).
Arrays are channels last; filters ``[*taps, Q, O]``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from tests.reference import window


@dataclass(frozen=True)
class Geo:
    """Sizes of one case, channels last."""

    batch: int
    spatial: tuple[int, ...]
    depth: int
    taps: tuple[int, ...]
    q: int
    out_depth: int
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    out: tuple[int, ...]
    before: tuple[int, ...]

    @property
    def groups(self) -> int:
        return self.depth // self.q

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.batch, *self.spatial, self.depth)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (self.batch, *self.out, self.out_depth)

    @property
    def filter_shape(self) -> tuple[int, ...]:
        return (*self.taps, self.q, self.out_depth)


def geo(input_shape, filter_shape, strides, dilations, padding) -> Geo:
    """A channels-last case's sizes (strides, dilations: the spatial entries only)."""
    batch, *spatial, depth = input_shape
    *taps, q, out_depth = filter_shape
    wins = [window(n, k, d, s, padding) for n, k, d, s in zip(spatial, taps, dilations, strides)]
    return Geo(batch, tuple(spatial), depth, tuple(taps), q, out_depth, tuple(strides),
               tuple(dilations), tuple(w[0] for w in wins), tuple(w[1] for w in wins))


def _terms(g: Geo):
    """(output position, input position, tap) of every term that reads a real element."""
    for p in itertools.product(*(range(o) for o in g.out)):
        for t in itertools.product(*(range(k) for k in g.taps)):
            idx = tuple(pi * s + ti * d - b for pi, ti, s, d, b
                        in zip(p, t, g.strides, g.dilations, g.before))
            if all(0 <= i < n for i, n in zip(idx, g.spatial)):
                yield p, idx, t


def _groups(g: Geo):
    og = g.out_depth // g.groups
    for k in range(g.groups):
        yield slice(k * g.q, (k + 1) * g.q), slice(k * og, (k + 1) * og)


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` as a plain sum of products (IEEE NaN/Inf rules, no BLAS)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return (a[:, :, None] * b[None, :, :]).sum(axis=1)


@np.errstate(invalid="ignore", over="ignore")  # NaN/Inf terms are the answer
def forward(x: np.ndarray, w: np.ndarray, g: Geo) -> tuple[np.ndarray, np.ndarray]:
    """``out[n, p, o] = sum_{t, q} x[n, p*s + t*d - before, g(o)*Q + q] * w[t, q, o]``."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    out, bound = np.zeros(g.output_shape), np.zeros(g.output_shape)
    for p, idx, t in _terms(g):
        for ci, co in _groups(g):
            a, b = x[(slice(None), *idx, ci)], w[(*t, slice(None), co)]
            out[(slice(None), *p, co)] += _mm(a, b)
            bound[(slice(None), *p, co)] += _mm(abs(a), abs(b))
    return out, bound


@np.errstate(invalid="ignore", over="ignore")  # NaN/Inf terms are the answer
def backprop_filter(x: np.ndarray, dy: np.ndarray, g: Geo) -> tuple[np.ndarray, np.ndarray]:
    """``dw[t, q, o] = sum_{n, p} x[n, p*s + t*d - before, g(o)*Q + q] * dy[n, p, o]``."""
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    dw, bound = np.zeros(g.filter_shape), np.zeros(g.filter_shape)
    for p, idx, t in _terms(g):
        for ci, co in _groups(g):
            a, b = x[(slice(None), *idx, ci)], dy[(slice(None), *p, co)]
            dw[(*t, slice(None), co)] += _mm(a.T, b)
            bound[(*t, slice(None), co)] += _mm(abs(a).T, abs(b))
    return dw, bound


@np.errstate(invalid="ignore", over="ignore")  # NaN/Inf terms are the answer
def backprop_input(w: np.ndarray, dy: np.ndarray, g: Geo) -> tuple[np.ndarray, np.ndarray]:
    """``dx[n, h, g*Q + q] = sum over terms reading h of sum_{o in g} dy[n, p, o] w[t, q, o]``."""
    w, dy = w.astype(np.float64), dy.astype(np.float64)
    dx, bound = np.zeros(g.input_shape), np.zeros(g.input_shape)
    for p, idx, t in _terms(g):
        for ci, co in _groups(g):
            a, b = dy[(slice(None), *p, co)], w[(*t, slice(None), co)]
            dx[(slice(None), *idx, ci)] += _mm(a, b.T)
            bound[(slice(None), *idx, ci)] += _mm(abs(a), abs(b).T)
    return dx, bound


def within(got: np.ndarray, want: np.ndarray, bound: np.ndarray, rtol: float,
           extra: float | np.ndarray = 0.0) -> float:
    """The worst ``|got - want| - (rtol * bound + extra)`` (<= 0: within the tolerance)."""
    err = np.abs(got.astype(np.float64) - want)
    if err.size == 0:
        return 0.0
    return float(np.max(err - (rtol * bound + extra)))
