"""Winograd F(2x2, 3x3) (engine.kernels._compiled.winograd) against the NumPy path and the slow
reference."""

import functools
import json
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from engine import kernels
from engine.base import cancel
from engine.base.dtypes import DTYPES, to_dtype
from engine.kernels._compiled import winograd
from engine.kernels.memory import conv_workspace
from engine.shapes.conv import conv2d_geometry
from tests import reference
from tests.test_kernels_properties import _check, conv_attrs, valid_geometry

pytestmark = pytest.mark.skipif(not winograd.enabled(), reason="numba is not installed")

OPS = (kernels.conv2d, kernels.conv2d_backprop_filter, kernels.conv2d_backprop_input)


@pytest.fixture(autouse=True, scope="module")
def _compiled_kernels():
    """These are tests of the compiled Winograd path, small calls included: under ``auto``
    calls below the size rule run NumPy (a test may set another value for itself)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRADBLOCKS_KERNELS", "numba")
        yield


@contextmanager
def everywhere():
    """Winograd for every 3x3 stride-1 geometry, however small (the speed rule off)."""
    names = ("MIN_CHANNELS", "MIN_CHANNEL_PRODUCT", "MIN_TILES", "MIN_SIZE")
    saved = [getattr(winograd, name) for name in names]
    for name in names:
        setattr(winograd, name, 0)
    try:
        yield
    finally:
        for name, value in zip(names, saved, strict=True):
            setattr(winograd, name, value)


def run_three(x, w, dy, attrs, g):
    """Forward, filter and input gradient, each with the path it took."""
    out = []
    for op, args in ((OPS[0], (x, w)), (OPS[1], (x, g.filter_shape, dy)),
                     (OPS[2], (g.input_shape, w, dy))):
        winograd._last.path = ""
        out.append((op(*args, **attrs), winograd.used()))
    return out


@st.composite
def winograd_cases(draw):
    """A random 3x3 stride-1 dilation-1 ungrouped conv: any batch, odd/even sizes down to
    below one tile, channels, padding, layout and dtype."""
    fmt = draw(st.sampled_from(["NHWC", "NCHW"]))
    n, h, w = draw(st.integers(0, 3)), draw(st.integers(0, 11)), draw(st.integers(0, 11))
    c, k = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
    pads = [draw(st.integers(0, 2)) for _ in range(4)]
    attrs = conv_attrs(fmt, (1, 1), (1, 1), padding, pads)
    in_shape = (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)
    g = valid_geometry(in_shape, (3, 3, c, k), False, attrs)
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    return g, attrs, dtype, draw(st.integers(0, 2**32 - 1))


def _engine_geometry(g, attrs):
    return conv2d_geometry(g.input_shape, g.filter_shape, **attrs)


@given(winograd_cases())
def test_winograd_matches_reference_and_numpy_path(case):
    g, attrs, dtype, seed = case
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    x, w, dy = (rng.standard_normal(s).astype(dt)
                for s in (g.input_shape, g.filter_shape, g.output_shape))
    eg = _engine_geometry(g, attrs)
    assume(eg.out_rows * eg.out_cols * eg.batch > 0)
    with everywhere():
        fast = run_three(x, w, dy, attrs, g)
    assert [path for _, path in fast] == ["winograd"] * 3
    exact = (reference.conv2d(x, w, g), reference.backprop_filter(x, dy, g),
             reference.backprop_input(w, dy, g))
    bounds = (reference.conv2d(abs(x), abs(w), g), reference.backprop_filter(abs(x), abs(dy), g),
              reference.backprop_input(abs(w), abs(dy), g))
    for (out, _), ex, bound in zip(fast, exact, bounds, strict=True):
        # the Winograd contract is normwise (engine.kernels._compiled.winograd docstring): a corner
        # element with one small term next to full ones can miss the NumPy path's elementwise bound
        _check(out, ex, np.full_like(bound, bound.max(initial=0)), dtype)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRADBLOCKS_KERNELS", "numpy")
        slow = run_three(x, w, dy, attrs, g)
    assert [path for _, path in slow] == ["numpy"] * 3
    for (a, _), (b, _), bound in zip(fast, slow, bounds, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        err = np.abs(a.astype(np.float64) - b.astype(np.float64))
        assert np.all(err <= 2 * reference_rtol(dtype) * bound.max(initial=0) + tiny(dtype))


def reference_rtol(dtype: str) -> float:
    from engine.base.dtypes import RTOL

    return RTOL[dtype]


def tiny(dtype: str) -> float:
    import ml_dtypes

    return float(ml_dtypes.finfo(DTYPES[dtype]).smallest_subnormal)


#: Documented float32 accuracy of the Winograd path: max |out - exact| <= this * max |exact|
#: (the issue measured 3.7e-7 to 8.6e-7, as TensorFlow's own kernels; README: about 4e-7).
FLOAT32_RTOL = 1e-6


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_float32_error_is_within_the_documented_tolerance(fmt):
    """A case of the default rule's size: Winograd chosen without forcing, error vs float64."""
    rng = np.random.default_rng(3)
    attrs = conv_attrs(fmt, (1, 1), (1, 1), "SAME", [])
    x64 = rng.standard_normal((3, 17, 14, 32))
    w64 = rng.standard_normal((3, 3, 32, 40))
    if fmt == "NCHW":
        x64 = x64.transpose(0, 3, 1, 2).copy()
    y64 = kernels.conv2d(x64, w64, **attrs)
    dy64 = rng.standard_normal(y64.shape)
    x, w, dy = (a.astype(np.float32) for a in (x64, w64, dy64))
    xr, wr, dyr = (a.astype(np.float64) for a in (x, w, dy))  # exactly the float32 values
    for op, args, exact_args, abs_args in (
            (OPS[0], (x, w), (xr, wr), (abs(xr), abs(wr))),
            (OPS[1], (x, w.shape, dy), (xr, w.shape, dyr), (abs(xr), w.shape, abs(dyr))),
            (OPS[2], (x.shape, w, dy), (x.shape, wr, dyr), (x.shape, abs(wr), abs(dyr)))):
        winograd._last.path = ""
        out = op(*args, **attrs)
        assert winograd.used() == "winograd" and out.dtype == np.float32
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GRADBLOCKS_KERNELS", "numpy")
            exact, bound = op(*exact_args, **attrs), op(*abs_args, **attrs)
        rel = np.abs(out - exact).max() / np.abs(exact).max()
        assert rel <= FLOAT32_RTOL, rel
        assert np.all(np.abs(out - exact) <= 2e-5 * bound)  # and elementwise on this case


def _case(dtype=np.float32, batch=4):
    """A case the default rule puts on Winograd (32x32 channels, 144 tiles)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 12, 12, 32)).astype(dtype)
    w = rng.standard_normal((3, 3, 32, 32)).astype(dtype)
    dy = rng.standard_normal((batch, 12, 12, 32)).astype(dtype)
    return x, w, dy, {"strides": [1, 1, 1, 1], "padding": "SAME"}


def test_numpy_switch_forces_the_numpy_path(monkeypatch):
    x, w, dy, attrs = _case()
    kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs)
    assert winograd.used() == "winograd"
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numpy")
    from engine.kernels import accel

    assert not accel.use_compiled(np.dtype(np.float32), numpy_seconds=1e9)
    kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs)
    assert winograd.used() == "numpy"
    kernels.conv2d_backprop_input(x.shape, w, dy, **attrs)
    assert winograd.used() == "numpy"


def test_small_channels_stay_on_the_numpy_path():
    """The speed rule: thin products (few channels) lose to the NumPy path."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 12, 12, 3)).astype(np.float32)
    dy = rng.standard_normal((4, 12, 12, 64)).astype(np.float32)
    kernels.conv2d_backprop_filter(x, (3, 3, 3, 64), dy, [1, 1, 1, 1], "SAME")
    assert winograd.used() == "numpy"


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 3e38])
@pytest.mark.parametrize("which", ["input", "out_backprop"])
def test_nonfinite_or_huge_operands_take_the_exact_path(bad, which, monkeypatch):
    """NaN/Inf must not spread through the transforms (NaN * padding zero), and huge finite
    values must not overflow in them: those calls compute exactly as the path Winograd
    stands in for (the compiled per-tap tiles here)."""
    x, w, dy, attrs = _case()
    (x if which == "input" else dy)[0, 5, 6, 3] = bad
    out = kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs)
    assert winograd.used() == "numpy"
    monkeypatch.setattr(winograd, "applies", lambda g: False)
    expected = kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs)
    np.testing.assert_array_equal(out, expected)
    if np.isnan(bad):  # the contract: NaN exactly where a term reads the NaN element
        axis = 2 if which == "input" else 3  # input channel 3, or output channel 3
        assert np.isnan(np.take(out, 3, axis)).all()
        assert not np.isnan(np.delete(out, 3, axis)).any()


def test_nonfinite_input_gradient_keeps_nan_local():
    x, w, dy, attrs = _case()
    dy[1, 0, 0, :] = np.nan
    dx = kernels.conv2d_backprop_input(x.shape, w, dy, **attrs)
    assert winograd.used() == "numpy"
    nan = np.isnan(dx)
    assert nan[1, :2, :2].all() and nan.sum() == 4 * 32  # only the 2x2 the 3x3 window reaches


def test_winograd_is_cancelled_between_chunks(monkeypatch):
    """A cancelled run stops at the next chunk (checkpoints run in the worker threads)."""
    x, w, dy, attrs = _case(batch=6)
    monkeypatch.setattr(winograd, "CHUNK_BYTES", 1)  # one tile per chunk
    monkeypatch.setattr(winograd, "MIN_CHUNK_TILES", 1)
    monkeypatch.setattr(winograd, "CALL_CHUNKS", 1)  # one chunk per compiled call
    event = threading.Event()
    calls = []
    jit = winograd._jit()
    real = jit.filter_chunks

    def counting(*args):
        calls.append(1)
        if len(calls) == 5:
            event.set()
        real(*args)

    monkeypatch.setattr(jit, "filter_chunks", counting)
    with cancel.scope(event), pytest.raises(cancel.Cancelled):
        kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs)
    assert winograd.used() == "winograd"
    assert len(calls) < 6 * 36 // 2  # stopped long before the 216 tiles were done


def _peak_extra(fn) -> int:
    import tracemalloc

    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    out = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - base - out.nbytes


@pytest.mark.parametrize("small_chunks", [False, True])
@pytest.mark.parametrize("kind", ["filter", "input"])
def test_extra_memory_is_bounded_and_estimated(kind, small_chunks, monkeypatch):
    """Extra memory stays within the workspace estimate and does not grow with the batch
    beyond the operand copies (chunks of at most CHUNK_BYTES per core)."""
    if small_chunks:
        monkeypatch.setattr(winograd, "CHUNK_BYTES", 2**16)
        monkeypatch.setattr(winograd, "MIN_CHUNK_TILES", 1)
    extras = []
    for batch in (4, 32):
        x, w, dy, attrs = _case(batch=batch)
        g = conv2d_geometry(x.shape, w.shape, **attrs)
        call = (functools.partial(kernels.conv2d_backprop_filter, x, w.shape, dy, **attrs)
                if kind == "filter" else
                functools.partial(kernels.conv2d_backprop_input, x.shape, w, dy, **attrs))
        call()  # numba's import and cache loading are not the kernel's workspace
        extra = _peak_extra(call)
        assert winograd.used() == "winograd"
        assert extra <= conv_workspace(g, kind, "float32", True)
        extras.append(extra)
    assert extras[1] < 4 * 2**20  # 32 images of 12x12x32: the operands alone are 1.2 MiB


GOLDEN = Path(__file__).parent / "golden"
WINOGRAD_CASES = json.loads((GOLDEN / "winograd_cases.json").read_text())["cases"]
WINOGRAD_ARRAYS = np.load(GOLDEN / "winograd_arrays.npz")


def test_golden_winograd_set_covers_every_op_padding_and_dtype():
    seen = {(c["op"], c["attrs"]["padding"], c["dtype"]) for c in WINOGRAD_CASES}
    assert len(seen) == 27 and len(WINOGRAD_CASES) == 72


@pytest.mark.parametrize("case", WINOGRAD_CASES, ids=[c["id"] for c in WINOGRAD_CASES])
def test_golden_tensorflow_cases_on_the_winograd_path(case):
    """TensorFlow's 3x3 stride-1 results (tests/golden/make_winograd_cases.py), on Winograd."""
    dtype = to_dtype(case["dtype"])
    args = {name: value if isinstance(value, list)
            else WINOGRAD_ARRAYS[value].astype(dtype) for name, value in case["inputs"].items()}
    op = dict(zip(("Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput"), OPS,
                  strict=True))[case["op"]]
    with everywhere():
        winograd._last.path = ""
        out = op(**args, **case["attrs"])
    assert winograd.used() == "winograd"
    exact = WINOGRAD_ARRAYS[case["id"] + ".exact"]
    bound = WINOGRAD_ARRAYS[case["id"] + ".bound"]
    assert out.shape == exact.shape and out.dtype == dtype
    err = np.abs(out.astype(np.float64) - exact)
    assert np.all(err <= case["rtol"] * bound + 1e-30)


def test_warm_compiles_without_computing_anything_and_import_stays_light():
    """warm() readies the transforms; importing the kernels never imports numba (start-up)."""
    import subprocess
    import sys

    code = ("import sys, engine.kernels, engine.kernels.memory; "
            "assert 'numba' not in sys.modules; "
            "from engine.kernels._compiled import winograd; winograd.warm(); "
            "assert 'numba' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_a_call_while_the_app_still_compiles_takes_the_path_of_the_call(monkeypatch):
    """The app compiles in the background at start-up; a call over the size rule runs
    Winograd in either compute dtype whatever that load has done (it waits for its code), and
    one under the rule runs NumPy: the path is a function of the call."""
    from engine.kernels import accel

    release = threading.Event()
    busy = threading.Thread(target=release.wait)
    busy.start()
    try:
        monkeypatch.setenv("GRADBLOCKS_KERNELS", "auto")
        monkeypatch.setattr(accel, "_warm_thread", busy)
        monkeypatch.setattr(accel, "_ready", {"float64"})
        for dtype in (np.float32, np.float64):
            x, w, dy, attrs = _case(dtype, batch=16)
            kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs)
            assert winograd.used() == "winograd", dtype
            x, w, dy, attrs = _case(dtype, batch=1)
            kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs)
            assert winograd.used() == "numpy", dtype
    finally:
        release.set()
        busy.join()


def test_the_background_warm_up_compiles_the_winograd_loops(monkeypatch):
    """accel.warm_up runs Winograd's transforms and products too, so they are compiled (or
    loaded from the cache) before a dtype is marked ready."""
    from engine.kernels import accel
    from engine.kernels._compiled import winograd_jit

    monkeypatch.setattr(accel, "_ready", set())
    accel.warm_up(("float32",))
    assert accel._ready == {"float32"}
    f32 = [sig for sig in winograd_jit.point_products.signatures if sig[0].dtype.name == "float32"]
    assert f32 and winograd_jit.point_products_t.signatures


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("parts, columns, lo, hi", [
    (1, 7, 0, 7), (2, 600, 0, 600), (3, 530, 17, 301), (2, 256, 0, 256)], ids=str)
def test_the_filter_gradients_inverse_is_g_transposed_m_g_of_the_summed_parts(
        dtype, parts, columns, lo, hi):
    """The filter gradient's last step (winograd_jit.filter_inverse): the cores' partial sums
    added in order, then ``G^T M G`` per column, for columns in and across its blocks (a range
    that starts and ends inside them); the columns outside ``[lo, hi)`` untouched (NaN here).
    Against float64 NumPy: within two roundings per term of the magnitudes' transform."""
    jit = winograd._jit()
    rng = np.random.default_rng(columns)
    acc = rng.standard_normal((parts, 16, columns)).astype(dtype)
    out = np.full((9, columns), np.nan, dtype)
    jit.filter_inverse(acc, out, lo, hi)
    g = winograd.winograd_filters.G
    m = acc.astype(np.float64).sum(axis=0).reshape(4, 4, columns)
    want = np.einsum("iu,ijr,jv->uvr", g, m, g).reshape(9, columns)
    bound = np.einsum("iu,ijr,jv->uvr", abs(g), abs(acc.astype(np.float64)).sum(axis=0)
                      .reshape(4, 4, columns), abs(g)).reshape(9, columns)
    eps = np.finfo(dtype).eps
    err = np.abs(out[:, lo:hi] - want[:, lo:hi])
    assert np.all(err <= (parts + 4) * eps * bound[:, lo:hi])
    assert np.isnan(out[:, :lo]).all() and np.isnan(out[:, hi:]).all()
