"""The compiled depthwise trio on NCHW planes (engine.kernels._compiled.depthwise_planes):
NCHW operands in the compute dtype are read and written in their own layout, never transposed.

Tolerance as in tests/test_kernels_numba.py: each path is within ``RTOL[dtype] * bound`` of
the exact sum (``bound`` the op on the magnitudes), so the planes path is within that of the
float64 definition (the NumPy path in float64), plus the smallest subnormal.
"""

import threading

import numpy as np
import pytest
from hypothesis import given, settings

from engine import kernels
from engine.base import cancel
from engine.base.dtypes import DTYPES, RTOL
from engine.kernels import accel
from tests.test_kernels_nonfinite import SPECIALS
from tests.test_kernels_properties import conv_cases

pytest.importorskip("numba")
from engine.kernels._compiled import depthwise_planes

FORWARD = kernels.depthwise_conv2d_native
FILTER = kernels.depthwise_conv2d_native_backprop_filter
INPUT = kernels.depthwise_conv2d_native_backprop_input
CALLS = {"forward": FORWARD, "filter": FILTER, "input": INPUT}


def spy_planes(monkeypatch) -> dict[str, int]:
    """Counts the planes path's calls per kind; the compiled path forced."""
    monkeypatch.setenv(accel.ENV, "numba")
    counts = {"forward": 0, "filter": 0, "input": 0}
    for kind, name in (("forward", "forward"), ("filter", "backprop_filter"),
                       ("input", "backprop_input")):
        real = getattr(depthwise_planes, name)

        def spy(*a, _real=real, _kind=kind, **k):
            counts[_kind] += 1
            return _real(*a, **k)
        monkeypatch.setattr(depthwise_planes, name, spy)
    return counts


@pytest.fixture
def spied(monkeypatch):
    return spy_planes(monkeypatch)


def _args(kind, g, x, w, dy):
    return {"forward": (x, w), "filter": (x, g.filter_shape, dy),
            "input": (g.input_shape, w, dy)}[kind]


def _definition(kind, g, attrs, x, w, dy):
    """The op in float64 on the NumPy path: the value and the bound (the op on |terms|)."""
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv(accel.ENV, "numpy")
        f64 = [a.astype(np.float64) for a in (x, w, dy)]
        value = CALLS[kind](*_args(kind, g, *f64), **attrs)
        bound = CALLS[kind](*_args(kind, g, *(abs(a) for a in f64)), **attrs)
    finally:
        mp.undo()
    return value, bound


@settings(max_examples=60, deadline=None)
@given(conv_cases(depthwise=True))
def test_nchw_operands_take_the_planes_path_and_match_the_definition(case):
    g, attrs, dtype, seed = case
    if attrs["data_format"] != "NCHW" or dtype not in ("float32", "float64"):
        return
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    x, w, dy = (rng.uniform(-1, 1, s).astype(dt)
                for s in (g.input_shape, g.filter_shape, g.output_shape))
    mp = pytest.MonkeyPatch()
    try:
        counts = spy_planes(mp)
        for kind in ("forward", "filter", "input"):
            out = CALLS[kind](*_args(kind, g, x, w, dy), **attrs)
            ran = kernels.last_path()
            value, bound = _definition(kind, g, attrs, x, w, dy)
            assert out.dtype == dt and out.shape == value.shape
            tiny = float(np.finfo(dt).smallest_subnormal)
            err = np.abs(out.astype(np.float64) - value)
            assert np.all(err <= RTOL[dtype] * bound + tiny), float(err.max())
            if ran == "numba" and x.size and dy.size:  # an empty operand has no planes
                assert counts[kind] == 1, (kind, counts)
            counts[kind] = 0
    finally:
        mp.undo()


@pytest.mark.parametrize("stride", [1, 2])
def test_a_multiplier_dilation_and_padding_case_runs_on_planes(spied, stride):
    rng = np.random.default_rng(stride)
    x = rng.standard_normal((3, 4, 11, 9)).astype(np.float32)
    w = rng.standard_normal((3, 2, 4, 3)).astype(np.float32)
    attrs = {"strides": [1, 1, stride, stride], "padding": "EXPLICIT",
             "explicit_paddings": [0, 0, 0, 0, 2, 1, 0, 3], "data_format": "NCHW",
             "dilations": [1, 1, 2, 1]}
    y = FORWARD(x, w, **attrs)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dw = FILTER(x, w.shape, dy, **attrs)
    dx = INPUT(x.shape, w, dy, **attrs)
    assert spied == {"forward": 1, "filter": 1, "input": 1}
    # the same ops in NHWC on the NumPy path, float64
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv(accel.ENV, "numpy")
        nhwc = dict(attrs, strides=[1, stride, stride, 1], data_format="NHWC",
                    explicit_paddings=[0, 0, 2, 1, 0, 3, 0, 0], dilations=[1, 2, 1, 1])
        xt, dyt, w64 = (x.transpose(0, 2, 3, 1).astype(np.float64),
                        dy.transpose(0, 2, 3, 1).astype(np.float64), w.astype(np.float64))
        y64 = FORWARD(xt, w64, **nhwc).transpose(0, 3, 1, 2)
        dw64 = FILTER(xt, w.shape, dyt, **nhwc)
        dx64 = INPUT(xt.shape, w64, dyt, **nhwc).transpose(0, 3, 1, 2)
    finally:
        mp.undo()
    for ours, ref in ((y, y64), (dw, dw64), (dx, dx64)):
        scale = float(np.abs(ref).max())
        assert np.max(np.abs(ours - ref)) <= 64 * RTOL["float32"] * scale


def test_nan_and_inf_land_where_the_numpy_path_puts_them(spied):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 2)).astype(np.float32)
    attrs = {"strides": [1, 1, 2, 2], "padding": "SAME", "data_format": "NCHW"}
    dy = rng.standard_normal((2, 6, 4, 4)).astype(np.float32)
    for a in (x, dy):
        flat = a.reshape(-1)
        for v in SPECIALS:
            flat[rng.integers(flat.size)] = v
    with np.errstate(invalid="ignore", over="ignore"):
        compiled = [FORWARD(x, w, **attrs), FILTER(x, w.shape, dy, **attrs),
                    INPUT(x.shape, w, dy, **attrs)]
        mp = pytest.MonkeyPatch()
        try:
            mp.setenv(accel.ENV, "numpy")
            numpy_out = [FORWARD(x, w, **attrs), FILTER(x, w.shape, dy, **attrs),
                         INPUT(x.shape, w, dy, **attrs)]
        finally:
            mp.undo()
    assert spied["forward"] >= 1 and spied["filter"] >= 1 and spied["input"] >= 1
    for a, b in zip(compiled, numpy_out):
        for test in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(test(a), test(b))


def test_half_types_and_strided_views_keep_the_nhwc_loops(spied):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 3, 4, 1)).astype(np.float32)
    wide = rng.standard_normal((2, 8, 9, 9)).astype(np.float32)
    view = wide[:, ::2]  # every other channel: not C-contiguous planes
    y = FORWARD(view, w, strides=[1, 1, 1, 1], padding="SAME", data_format="NCHW")
    half = FORWARD(view.astype(np.float16), w.astype(np.float16), strides=[1, 1, 1, 1],
                   padding="SAME", data_format="NCHW")
    assert spied["forward"] == 0
    ref = FORWARD(np.ascontiguousarray(view), w, strides=[1, 1, 1, 1], padding="SAME",
                  data_format="NCHW")
    assert spied["forward"] == 1
    scale = float(np.abs(ref).max())
    assert np.max(np.abs(y - ref)) <= 16 * RTOL["float32"] * scale
    assert np.max(np.abs(half.astype(np.float32) - ref)) <= 16 * RTOL["float16"] * scale


def test_a_cancelled_planes_run_stops_between_calls(monkeypatch, spied):
    monkeypatch.setattr(depthwise_planes, "CALL_PLANES", 1)
    x = np.ones((4, 8, 16, 16), np.float32)
    calls = []
    real = depthwise_planes.checkpoint
    event = threading.Event()

    def counting():
        calls.append(1)
        if len(calls) == 5:
            event.set()
        real()

    monkeypatch.setattr(depthwise_planes, "checkpoint", counting)
    with cancel.scope(event), pytest.raises(cancel.Cancelled):
        FORWARD(x, np.ones((3, 3, 8, 1), np.float32), strides=[1, 1, 1, 1], padding="SAME",
                data_format="NCHW")
    assert spied["forward"] == 1
    assert 5 <= len(calls) < 32  # 32 planes: it stopped soon after the event, not at the end
