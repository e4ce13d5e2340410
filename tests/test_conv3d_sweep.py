"""A seeded random sweep of the Conv3D family against the slow float64 reference
(tests/conv3d_reference.py): :data:`CASES` geometries per op, each run in every dtype and
both layouts alternately, within the documented tolerance (``RTOL[dtype]`` times the sum of
|products|). The values are multiples of 1/64 below 4 in magnitude, exact in every dtype, so
the reference is the same for all four and the verdict cannot depend on summation order.
Also the NaN/Inf contract on cases with non-finite operands."""

from __future__ import annotations

import numpy as np
import pytest

from engine import kernels
from engine.base.dtypes import DTYPES, RTOL
from tests import conv3d_reference as ref

CASES = 2000
OPS = ("forward", "filter", "input")


def _case(rng: np.random.Generator):
    """(NDHWC input shape, filter shape, strides, dilations, padding, data_format)."""
    while True:
        taps = tuple(int(k) for k in rng.integers(1, 4, 3))
        dil = tuple(int(d) for d in rng.choice([1, 1, 2], 3))
        spatial = tuple(int(n) for n in rng.integers(1, 6, 3))
        strides = tuple(int(s) for s in rng.integers(1, 4, 3))
        padding = str(rng.choice(["SAME", "VALID"]))
        groups, q, og = (int(v) for v in rng.integers(1, 3, 3))
        xs = (int(rng.integers(1, 3)), *spatial, groups * q)
        ws = (*taps, q, groups * og)
        if padding == "VALID" and any(n - (k - 1) * d - 1 + s < 0 for n, k, d, s
                                      in zip(spatial, taps, dil, strides)):
            continue  # a negative output size: refused (tests/test_conv3d_refusals.py)
        g = ref.geo(xs, ws, strides, dil, padding)
        if np.prod(g.out) * np.prod(taps) <= 400:  # the reference's loop stays short
            return xs, ws, strides, dil, padding, str(rng.choice(["NDHWC", "NCDHW"])), g


def _values(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.integers(-255, 256, shape) / 64.0


def _vec(spatial, fmt: str) -> list[int]:
    return [1, *spatial, 1] if fmt == "NDHWC" else [1, 1, *spatial]


def _first(a: np.ndarray, fmt: str) -> np.ndarray:
    return a if fmt == "NDHWC" else np.ascontiguousarray(np.moveaxis(a, -1, 1))


def _last(a: np.ndarray, fmt: str) -> np.ndarray:
    return a if fmt == "NDHWC" else np.moveaxis(a, 1, -1)


def _run(op: str, x, w, dy, xs, ws, attrs, fmt):
    if op == "forward":
        return _last(kernels.conv3d(_first(x, fmt), w, **attrs), fmt)
    if op == "filter":
        return kernels.conv3d_backprop_filter(_first(x, fmt), list(ws), _first(dy, fmt), **attrs)
    sizes = list(_first(np.empty(xs, np.int8), fmt).shape)
    return _last(kernels.conv3d_backprop_input(sizes, w, _first(dy, fmt), **attrs), fmt)


def _reference(op: str, x, w, dy, g):
    if op == "forward":
        return ref.forward(x, w, g)
    if op == "filter":
        return ref.backprop_filter(x, dy, g)
    return ref.backprop_input(w, dy, g)


@pytest.mark.parametrize("op", OPS)
def test_random_conv3d_cases_agree_with_the_float64_reference(op):
    rng = np.random.default_rng({"forward": 31, "filter": 32, "input": 33}[op])
    failures = []
    for i in range(CASES):
        xs, ws, strides, dil, padding, fmt, g = _case(rng)
        x, w = _values(rng, xs), _values(rng, ws)
        dy = _values(rng, g.output_shape)
        want, bound = _reference(op, x, w, dy, g)
        attrs = {"strides": _vec(strides, fmt), "padding": padding, "data_format": fmt,
                 "dilations": _vec(dil, fmt)}
        for name, dt in DTYPES.items():
            got = _run(op, x.astype(dt), w.astype(dt), dy.astype(dt), xs, ws, attrs, fmt)
            if got.dtype != dt or got.shape != want.shape or ref.within(
                    got, want, bound, RTOL[name]) > 0:
                failures.append((i, name, xs, ws, strides, dil, padding, fmt))
    assert not failures, failures[:5]


@pytest.mark.parametrize("op", OPS)
def test_nonfinite_operands_follow_the_contract(op):
    """NaN/Inf exactly where a real term is (padding contributes nothing), every dtype."""
    rng = np.random.default_rng({"forward": 41, "filter": 42, "input": 43}[op])
    for _ in range(150):
        xs, ws, strides, dil, padding, fmt, g = _case(rng)
        arrays = [_values(rng, s) for s in (xs, ws, g.output_shape)]
        for a in arrays:
            flat = a.reshape(-1)
            hit = rng.random(flat.size) < 0.08
            flat[hit] = rng.choice([np.nan, np.inf, -np.inf, 0.0], int(hit.sum()))
        x, w, dy = arrays
        want, bound = _reference(op, x, w, dy, g)
        attrs = {"strides": _vec(strides, fmt), "padding": padding, "data_format": fmt,
                 "dilations": _vec(dil, fmt)}
        for name, dt in DTYPES.items():
            got = _run(op, x.astype(dt), w.astype(dt), dy.astype(dt), xs, ws, attrs, fmt)
            got = got.astype(np.float64)
            assert np.array_equal(np.isnan(got), np.isnan(want)), (name, xs, ws)
            assert np.array_equal(np.isposinf(got), np.isposinf(want)), (name, xs, ws)
            assert np.array_equal(np.isneginf(got), np.isneginf(want)), (name, xs, ws)
            fin = np.isfinite(want)
            assert ref.within(got[fin], want[fin], bound[fin], RTOL[name]) <= 0, (name, xs)
