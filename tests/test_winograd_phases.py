"""The stride-2 polyphase Winograd input gradient (engine.kernels._compiled.winograd_phases)
against the slow reference, the NumPy path and TensorFlow-level accuracy; its rule, its
fallbacks, cancellation and workspace."""

import threading
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from engine import kernels
from engine.base import cancel
from engine.base.dtypes import DTYPES
from engine.kernels import dispatch
from engine.kernels._compiled import winograd, winograd_phases
from engine.kernels.memory import conv_workspace
from engine.shapes.conv import conv2d_geometry
from tests import reference
from tests.test_kernels_properties import _check, _poisoned_empty, conv_attrs, valid_geometry
from tests.test_winograd import FLOAT32_RTOL, reference_rtol, tiny

pytestmark = pytest.mark.skipif(not winograd.enabled(), reason="numba is not installed")


@pytest.fixture(autouse=True, scope="module")
def _compiled_kernels():
    """Tests of the compiled path, small calls included (see tests/test_winograd.py)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRADBLOCKS_KERNELS", "numba")
        yield


@contextmanager
def everywhere():
    """The polyphase path for every geometry it computes, however small (the speed rule off)."""
    saved = [(mod, name, getattr(mod, name)) for mod, name in (
        (winograd, "MIN_CHANNELS"), (winograd, "MIN_CHANNEL_PRODUCT"), (winograd, "MIN_SIZE"),
        (winograd_phases, "MIN_TILES"), (winograd_phases, "MIN_SAVING"))]
    for mod, name, _ in saved:
        setattr(mod, name, 0)
    try:
        yield
    finally:
        for mod, name, value in saved:
            setattr(mod, name, value)


@st.composite
def phase_cases(draw):
    """A random 3x3 stride-2 dilation-1 ungrouped input gradient: any batch, odd and even
    sizes down to below one tile, any padding, either layout and dtype; input channels one or
    two CHANNEL_MULTIPLEs (the path's rule), output channels anything."""
    fmt = draw(st.sampled_from(["NHWC", "NCHW"]))
    n, h, w = draw(st.integers(0, 3)), draw(st.integers(1, 14)), draw(st.integers(1, 14))
    c, k = winograd_phases.CHANNEL_MULTIPLE * draw(st.integers(1, 2)), draw(st.integers(1, 5))
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
    pads = [draw(st.integers(0, 3)) for _ in range(4)]
    attrs = conv_attrs(fmt, (2, 2), (1, 1), padding, pads)
    in_shape = (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)
    g = valid_geometry(in_shape, (3, 3, c, k), False, attrs)
    return g, attrs, draw(st.sampled_from(sorted(DTYPES))), draw(st.integers(0, 2**32 - 1))


@settings(max_examples=60, deadline=None)
@given(phase_cases())
def test_the_phases_path_matches_the_reference_and_the_numpy_path(case):
    """Normwise within RTOL of the float64 definition (the Winograd contract), and within
    twice that of the exact NumPy path; every pixel written (the result is not zeroed)."""
    g, attrs, dtype, seed = case
    eg = conv2d_geometry(g.input_shape, g.filter_shape, **attrs)
    assume(eg.batch * eg.out_rows * eg.out_cols > 0)
    rng = np.random.default_rng(seed)
    w, dy = (rng.standard_normal(s).astype(DTYPES[dtype]) for s in (g.filter_shape, g.output_shape))
    with everywhere(), _poisoned_empty():  # its result is np.empty: every pixel is written
        assert winograd_phases.applies(eg)
        out = kernels.conv2d_backprop_input(g.input_shape, w, dy, **attrs)
    assert winograd_phases.used() == "winograd phases"
    exact, bound = reference.backprop_input(w, dy, g), reference.backprop_input(abs(w), abs(dy), g)
    _check(out, exact, np.full_like(bound, bound.max(initial=0)), dtype)
    assert np.all(out[bound == 0] == 0)  # an element without terms is exactly 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRADBLOCKS_KERNELS", "numpy")
        slow = kernels.conv2d_backprop_input(g.input_shape, w, dy, **attrs)
    assert winograd_phases.used() == "numpy"
    err = np.abs(out.astype(np.float64) - slow.astype(np.float64))
    assert np.all(err <= 2 * reference_rtol(dtype) * bound.max(initial=0) + tiny(dtype))


def _case(n=4, h=28, c=32, k=64, dtype=np.float32, seed=0):
    """A SAME stride-2 input gradient the default rule puts on the phases path."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((3, 3, c, k)).astype(dtype)
    dy = rng.standard_normal((n, -(-h // 2), -(-h // 2), k)).astype(dtype)
    return (n, h, h, c), w, dy, {"strides": [1, 2, 2, 1], "padding": "SAME"}


@pytest.mark.parametrize("h,fmt", [(28, "NHWC"), (27, "NHWC"), (28, "NCHW")])
def test_float32_error_is_within_the_documented_tolerance(h, fmt):
    """Chosen by the default rule; against the float64 definition of the same float32 values:
    normwise within FLOAT32_RTOL, elementwise within 2e-5 of each element's bound."""
    shape, w, dy, attrs = _case(h=h)
    attrs = dict(attrs, data_format=fmt)
    if fmt == "NCHW":
        shape, dy = (shape[0], shape[3], shape[1], shape[2]), dy.transpose(0, 3, 1, 2).copy()
        attrs["strides"] = [1, 1, 2, 2]
    out = kernels.conv2d_backprop_input(shape, w, dy, **attrs)
    assert winograd_phases.used() == "winograd phases" and out.dtype == np.float32
    assert kernels.last_path() == "winograd phases"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRADBLOCKS_KERNELS", "numpy")
        exact = kernels.conv2d_backprop_input(shape, w.astype(np.float64), dy.astype(np.float64),
                                              **attrs)
        bound = kernels.conv2d_backprop_input(shape, abs(w.astype(np.float64)),
                                              abs(dy.astype(np.float64)), **attrs)
    assert np.abs(out - exact).max() / np.abs(exact).max() <= FLOAT32_RTOL
    assert np.all(np.abs(out - exact) <= 2e-5 * bound)


@pytest.mark.parametrize("change,takes", [
    ({}, True),
    ({"h": 14}, False),  # 7x7 output gradients: 9 tiles of 36 pixels for 4 blocks of 9 taps
    ({"c": 16, "k": 16}, False),  # thin products
    ({"c": 40}, False),  # a partial vector of result channels (on AVX-512)
    ({"n": 1, "h": 12}, False),  # too few tiles
])
def test_the_rule_takes_the_path_where_it_saves_products(change, takes):
    shape, w, dy, attrs = _case(**change)
    g = conv2d_geometry(shape, w.shape, **attrs)
    assert winograd_phases.applies(g) is takes
    assert dispatch.route(g, "input", True)[0].name == ("winograd phases" if takes
                                                         else "numba tiles")
    assert dispatch.route(g, "input", False)[0].name != "winograd phases"
    assert dispatch.route(g, "input", True, exact=True)[0].name == "numba tiles"
    assert dispatch.route(g, "filter", True)[0].name == "numba tiles"
    kernels.conv2d_backprop_input(shape, w, dy, **attrs)
    assert kernels.last_path() == ("winograd phases" if takes else "numba tiles")


def test_saving_counts_the_products_of_the_tiles_past_the_edge():
    g = conv2d_geometry((8, 56, 56, 128), (3, 3, 128, 128), [1, 2, 2, 1], "SAME")
    # 28x28 output-gradient pixels of 9 taps against 10x10 tiles of 49 products
    assert winograd_phases.tiles(g) == 8 * 100
    assert winograd_phases.saving(g) == pytest.approx(9 * 28 * 28 / (49 * 100))
    g = conv2d_geometry((1, 11, 13, 16), (3, 3, 16, 16), [1, 2, 2, 1], "EXPLICIT",
                        explicit_paddings=[0, 0, 1, 0, 0, 0, 0, 0])
    assert winograd_phases.tiles(g) == 2 * 3  # rows from -1 (pad 1): 12 / 6; columns 13 / 6


@pytest.mark.parametrize("bad", [np.nan, np.inf, 3e38])
def test_nonfinite_or_huge_operands_take_the_exact_path(bad, monkeypatch):
    """NaN/Inf must not spread through the transforms, nor huge values overflow in them: the
    call computes exactly as the per-tap tiles the path stands in for."""
    shape, w, dy, attrs = _case()
    dy[1, 5, 6, 3] = bad
    out = kernels.conv2d_backprop_input(shape, w, dy, **attrs)
    assert winograd_phases.used() == "numpy" and kernels.last_path() == "numba tiles"
    monkeypatch.setattr(winograd_phases, "applies", lambda g: False)
    np.testing.assert_array_equal(out, kernels.conv2d_backprop_input(shape, w, dy, **attrs))
    if np.isnan(bad):  # NaN exactly in the 3x3 input pixels its output-gradient pixel reaches
        assert np.isnan(out[1, 10:13, 12:15]).all() and np.isnan(out).sum() == 9 * shape[3]


def test_the_path_is_cancelled_between_compiled_calls(monkeypatch):
    """A cancelled run stops at the next call (checkpoints run in the worker threads)."""
    shape, w, dy, attrs = _case(n=8)
    monkeypatch.setattr(winograd_phases, "MIN_CHUNK_TILES", 1)
    monkeypatch.setattr(winograd, "CHUNK_BYTES", 1)  # one tile per chunk
    monkeypatch.setattr(winograd, "CALL_CHUNKS", 1)  # one chunk per compiled call
    from engine.kernels._compiled import winograd_phases_jit as jit

    event, calls, real = threading.Event(), [], jit.input_chunks

    def counting(*args):
        calls.append(1)
        if len(calls) >= 3:
            event.set()
        real(*args)

    monkeypatch.setattr(jit, "input_chunks", counting)
    with cancel.scope(event), pytest.raises(cancel.Cancelled):
        kernels.conv2d_backprop_input(shape, w, dy, **attrs)
    assert winograd_phases.used() == "winograd phases"
    assert len(calls) < 8 * 25 // 2  # stopped long before the 200 tiles were done


def test_extra_memory_is_within_the_workspace_bound():
    """The least peak of three runs (tracemalloc counts every thread's allocations)."""
    from tests.test_winograd import _peak_extra

    shape, w, dy, attrs = _case(n=8, h=56, c=64, k=64)
    g = conv2d_geometry(shape, w.shape, **attrs)
    call = lambda: kernels.conv2d_backprop_input(shape, w, dy, **attrs)
    call()
    assert kernels.last_path() == "winograd phases"
    peak = min(_peak_extra(call) for _ in range(3))
    assert 0 < peak <= conv_workspace(g, "input", "float32", True)
