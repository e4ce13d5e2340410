"""The Conv3D family's planes path (engine/kernels/conv3d_planes.py: sums over depth taps of the
2-D kernels) against the float64 definition (tests/conv3d_reference.py), and the rule that
chooses it (engine.kernels.conv3d.route), pinned by ``GRADBLOCKS_KERNELS``: ``numba`` makes the
2-D kernels run compiled for any size, so every non-empty call takes the planes path, and
``numpy`` keeps the N-d NumPy core. Nothing here depends on timing, the CPU or BLAS."""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest

from engine import kernels
from engine.base.dtypes import DTYPES, RTOL
from engine.kernels import conv3d_planes, im2col_nd
from engine.shapes.conv import conv2d_geometry, conv3d_geometry
from tests import conv3d_reference as ref
from tests.test_conv3d_sweep import _case, _reference, _run, _values, _vec

OPS = ("forward", "filter", "input")
#: The module (``engine.kernels.conv3d`` is also the op, re-exported by the package).
conv3d = importlib.import_module("engine.kernels.conv3d")


@pytest.fixture
def compiled(monkeypatch):
    """Every non-empty call compiled, and on the planes path (the few-channel im2col path,
    tests/test_im2col_nd.py, turned off)."""
    pytest.importorskip("numba")
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numba")
    monkeypatch.setattr(im2col_nd, "applies", lambda g, kind: False)


def _attrs(strides, dil, padding, fmt) -> dict:
    return {"strides": _vec(strides, fmt), "padding": padding, "data_format": fmt,
            "dilations": _vec(dil, fmt)}


def test_plane_range_is_the_planes_whose_tap_reads_the_input():
    """Brute force over depths, taps, strides, dilations and both paddings."""
    for d, k, s, dil, padding in itertools.product(range(1, 7), range(1, 4), range(1, 4),
                                                   range(1, 3), ("SAME", "VALID")):
        if padding == "VALID" and d < (k - 1) * dil + 1:
            continue
        g = conv3d_geometry((1, d, 2, 2, 1), (k, 1, 1, 1, 1), [1, s, 1, 1, 1], padding,
                            dilations=[1, dil, 1, 1, 1])
        front = g.pads[0][0]
        for a in range(k):
            want = [p for p in range(g.out_spatial[0]) if 0 <= p * s + a * dil - front < d]
            p0, p1, i0 = conv3d_planes.plane_range(g, a)
            assert list(range(p0, p1)) == want, (d, k, s, dil, padding, a)
            if want:
                assert i0 == p0 * s + a * dil - front


def test_the_2d_calls_have_the_3d_height_and_width_pads():
    """Odd and even padding totals, dilations: the 2-D geometry's pads are the 3-D op's, which
    TensorFlow's 2-D rule on the stacked planes gives too."""
    for h, k, s, dil in itertools.product(range(4, 9), range(1, 4), range(1, 4), range(1, 3)):
        for padding in ("SAME", "VALID"):
            if padding == "VALID" and h < (k - 1) * dil + 1:
                continue
            g = conv3d_geometry((2, 3, h, h + 1, 4), (2, k, k, 2, 6), [1, 1, s, s, 1], padding,
                                dilations=[1, 1, dil, dil, 1])
            two = conv3d_planes.geometry_2d(g, 6)
            flat = conv2d_geometry((6, h, h + 1, 4), (k, k, 2, 6), [1, s, s, 1], padding,
                                   dilations=[1, dil, dil, 1])
            assert ((two.pad_top, two.pad_bottom), (two.pad_left, two.pad_right)) == g.pads[1:]
            assert two == flat


@pytest.mark.parametrize("op", OPS)
def test_the_planes_path_agrees_with_the_float64_definition(compiled, op):
    """Random small cases (strides, dilations, SAME/VALID, groups, NDHWC/NCDHW), every dtype,
    each recorded as the planes path."""
    rng = np.random.default_rng({"forward": 51, "filter": 52, "input": 53}[op])
    failures = []
    for i in range(120):
        xs, ws, strides, dil, padding, fmt, g = _case(rng)
        x, w, dy = _values(rng, xs), _values(rng, ws), _values(rng, g.output_shape)
        want, bound = _reference(op, x, w, dy, g)
        empty = min(xs[0], *g.out) == 0
        for name, dt in DTYPES.items():
            got = _run(op, x.astype(dt), w.astype(dt), dy.astype(dt), xs, ws,
                       _attrs(strides, dil, padding, fmt), fmt)
            assert kernels.last_path() == (conv3d.EMPTY if empty else conv3d.PLANES)
            if got.dtype != dt or ref.within(got, want, bound, RTOL[name]) > 0:
                failures.append((i, name, xs, ws, strides, dil, padding, fmt))
    assert not failures, failures[:5]


def _bordered(rng: np.random.Generator, shape, fraction: float = 0.5) -> np.ndarray:
    """Values with NaN/±Inf on the first and last plane, row and column (next to padding)."""
    a = _values(rng, shape)
    for axis in range(1, len(shape) - 1):
        for end in (0, -1) if a.size else ():
            face = np.moveaxis(a, axis, 0)[end]
            hit = rng.random(face.shape) < fraction
            face[hit] = rng.choice([np.nan, np.inf, -np.inf], int(hit.sum()))
    return a


def nonfinite_cases(op: str, seed: int, dtypes, paths) -> None:
    """Non-finite values on every border of each operand (and filters with Inf taps), 40
    random cases of ``op`` in each of ``dtypes``: NaN/Inf exactly where a real term is, padding
    contributing nothing, each call recorded as one of ``paths``."""
    rng = np.random.default_rng(seed)
    for _ in range(40):
        xs, ws, strides, dil, padding, fmt, g = _case(rng)
        x, dy = _bordered(rng, xs), _bordered(rng, g.output_shape)
        w = _values(rng, ws)
        w.reshape(-1)[rng.random(w.size) < 0.2] = np.inf
        want, bound = _reference(op, x, w, dy, g)
        for name in dtypes:
            dt = DTYPES[name]
            got = _run(op, x.astype(dt), w.astype(dt), dy.astype(dt), xs, ws,
                       _attrs(strides, dil, padding, fmt), fmt).astype(np.float64)
            assert kernels.last_path() in paths
            assert np.array_equal(np.isnan(got), np.isnan(want)), (name, xs, ws)
            assert np.array_equal(np.isposinf(got), np.isposinf(want)), (name, xs, ws)
            assert np.array_equal(np.isneginf(got), np.isneginf(want)), (name, xs, ws)
            fin = np.isfinite(want)
            assert ref.within(got[fin], want[fin], bound[fin], RTOL[name]) <= 0, (name, xs)


@pytest.mark.parametrize("op", OPS)
def test_nan_and_inf_next_to_padding_follow_the_contract(compiled, op):
    """On the planes path, every dtype."""
    nonfinite_cases(op, {"forward": 61, "filter": 62, "input": 63}[op], DTYPES,
                    (conv3d.PLANES, conv3d.EMPTY))


def _three(x, w, dy, xs, ws, attrs):
    return (kernels.conv3d(x, w, **attrs), kernels.conv3d_backprop_filter(x, ws, dy, **attrs),
            kernels.conv3d_backprop_input(xs, w, dy, **attrs))


@pytest.mark.parametrize("shape", [
    ((2, 5, 12, 12, 32), (3, 3, 3, 32, 32), (1, 1, 1), (1, 1, 1), "SAME", "NDHWC"),
    ((1, 6, 14, 14, 3), (3, 5, 5, 3, 16), (2, 2, 2), (1, 1, 1), "SAME", "NCDHW"),
    ((2, 7, 9, 9, 8), (2, 3, 3, 4, 8), (1, 2, 1), (2, 1, 2), "VALID", "NDHWC"),
])
def test_the_planes_path_and_the_nd_core_agree_on_larger_cases(monkeypatch, shape):
    """Cases whose 2-D calls take other 2-D paths (Winograd on many channels, im2col on few,
    groups): both 3-D paths within float32's RTOL of the float64 core's sum of |products|."""
    pytest.importorskip("numba")
    monkeypatch.setattr(im2col_nd, "applies", lambda g, kind: False)
    xs, ws, strides, dil, padding, fmt = shape
    rng = np.random.default_rng(5)
    g = conv3d_geometry(xs, ws, _vec(strides, "NDHWC"), padding, dilations=_vec(dil, "NDHWC"))
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    dy = rng.standard_normal(g.output_shape)
    attrs = _attrs(strides, dil, padding, fmt)
    first = (lambda a: np.ascontiguousarray(np.moveaxis(a, -1, 1))) if fmt == "NCDHW" else (
        lambda a: a)
    sizes = list(first(np.empty(xs, np.int8)).shape)
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numpy")
    want = _three(first(x), w, first(dy), sizes, ws, attrs)
    bound = _three(first(abs(x)), abs(w), first(abs(dy)), sizes, ws, attrs)
    assert kernels.last_path() == conv3d.PATH
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numba")
    got = _three(first(x).astype(np.float32), w.astype(np.float32),
                 first(dy).astype(np.float32), sizes, ws, attrs)
    assert kernels.last_path() == conv3d.PLANES
    for a, b, c in zip(got, want, bound):
        assert a.dtype == np.float32 and a.shape == b.shape
        assert ref.within(a, b, c, RTOL["float32"]) <= 0


def test_route_is_the_one_rule(monkeypatch):
    """Empty calls are ``empty``; otherwise a compiled path exactly when the 2-D kernels would
    run compiled (GRADBLOCKS_KERNELS=numba: always; numpy: never): the im2col path for the
    forward and filter gradient of one group of few channels, else the planes path."""
    pytest.importorskip("numba")
    ct = np.dtype(np.float32)
    few = conv3d_geometry((1, 4, 4, 4, 2), (2, 2, 2, 2, 3), [1, 1, 1, 1, 1], "SAME")
    grouped = conv3d_geometry((1, 4, 4, 4, 4), (2, 2, 2, 2, 4), [1, 1, 1, 1, 1], "SAME")
    many = conv3d_geometry((1, 4, 4, 4, 16), (2, 2, 2, 16, 3), [1, 1, 1, 1, 1], "SAME")
    empty = conv3d_geometry((0, 4, 4, 4, 2), (2, 2, 2, 2, 3), [1, 1, 1, 1, 1], "SAME")
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numba")
    for kind in OPS:
        assert conv3d.route(few, ct, kind) == (conv3d.PLANES if kind == "input"
                                               else conv3d.IM2COL)
        assert conv3d.route(grouped, ct, kind) == conv3d.PLANES
        assert conv3d.route(many, ct, kind) == conv3d.PLANES
        assert conv3d.route(empty, ct, kind) == conv3d.EMPTY
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numpy")
    for g, kind in itertools.product((few, grouped, many), OPS):
        assert conv3d.route(g, ct, kind) == conv3d.PATH
    for mode, path in (("numba", conv3d.IM2COL), ("numpy", conv3d.PATH)):
        monkeypatch.setenv("GRADBLOCKS_KERNELS", mode)
        kernels.conv3d(np.ones((1, 4, 4, 4, 2), np.float32), np.ones((2, 2, 2, 2, 3), np.float32),
                       [1, 1, 1, 1, 1], "SAME")
        assert kernels.last_path() == path


def test_empty_calls_on_the_planes_rule_are_zeros(compiled):
    x = np.ones((2, 0, 4, 4, 2), np.float32)
    w = np.ones((2, 2, 2, 2, 3), np.float32)
    y = kernels.conv3d(x, w, [1, 1, 1, 1, 1], "SAME")
    assert y.shape == (2, 0, 4, 4, 3) and kernels.last_path() == conv3d.EMPTY
    dw = kernels.conv3d_backprop_filter(x, [2, 2, 2, 2, 3], y, [1, 1, 1, 1, 1], "SAME")
    assert dw.shape == (2, 2, 2, 2, 3) and not dw.any()
