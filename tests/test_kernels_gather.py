"""The stride-1 input gradient's gathered products (engine.kernels.compute, strategy "gather"):
against the reference on random cases (tiny blocks, threads), the per-tap path it replaces,
its recorded path, and its workspace (bounded, and bounded as the batch grows)."""

import functools
import tracemalloc
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given

from engine import kernels
from engine.base.cancel import Cancelled, scope
from engine.kernels import compute, parallel
from engine.kernels.memory import conv_workspace
from engine.shapes.conv import backprop_input_geometry
from tests import reference
from tests.test_kernels_properties import CONV, _check_family, conv_cases


@contextmanager
def _patched(module, **values):
    old = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(module, k, v)


@pytest.fixture(autouse=True)
def numpy_kernels(monkeypatch):
    """These tests are about the NumPy path's strategies: with numba installed, their 3x3
    stride-1 cases would take Winograd (tested in tests/test_winograd.py)."""
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numpy")


def _many_channels():
    """Per-tap / gather paths (normally only for >= 16 channels) on small cases."""
    return _patched(compute, IM2COL_MAX_CHANNELS=1)


@given(conv_cases())
def test_gather_in_one_position_blocks_on_threads_matches_reference(case):
    with _many_channels(), _patched(compute, GATHER_BLOCK_BYTES=1, GATHER_MIN_BLOCK=1), \
            _patched(parallel, MIN_POSITIONS_PER_RANGE=1, MIN_COPY_BYTES=1):
        _check_family(*CONV, case)


@given(conv_cases())
def test_per_tap_input_gradient_without_gather_matches_reference(case):
    with _many_channels(), _patched(compute, GATHER_INPUT_GRADIENT=False):
        _check_family(*CONV, case)


def _input_case(n=2, h=9, w=8, c=24, o=20, kh=3, kw=2, seed=0, **attrs):
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME", **attrs}
    rng = np.random.default_rng(seed)
    g = backprop_input_geometry([n, h, w, c], [kh, kw, c, o],
                                (n, h, w, o) if attrs["padding"] == "SAME" else
                                (n, h - kh + 1, w - kw + 1, o), attrs["strides"],
                                attrs["padding"], (), "NHWC", (1, 1, 1, 1))
    return g, attrs, rng.standard_normal((kh, kw, c, o)), rng.standard_normal(g.output_shape)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_many_channel_stride_1_input_gradient_gathers_and_matches_reference(padding):
    g, attrs, w, dy = _input_case(padding=padding)
    dx = kernels.conv2d_backprop_input(g.input_shape, w, dy, **attrs)
    assert kernels.last_path() == "numpy gather"
    np.testing.assert_allclose(dx, reference.backprop_input(w, dy, g), rtol=1e-10, atol=1e-10)
    with _patched(compute, GATHER_INPUT_GRADIENT=False):
        per_tap = kernels.conv2d_backprop_input(g.input_shape, w, dy, **attrs)
        assert kernels.last_path() == "numpy per-tap"
    np.testing.assert_allclose(dx, per_tap, rtol=1e-12, atol=1e-12)


def test_float32_gather_error_is_at_tensorflows_level():
    """Error relative to the sum of |terms| (the documented rtol is 2e-5; TF's own is
    4e-7 to 7e-6 relative): one long float32 dot per element, as a BLAS gemm sums it."""
    for seed in range(3):
        g, attrs, w, dy = _input_case(n=3, h=20, w=19, c=32, o=48, kh=3, kw=3, seed=seed)
        w32, dy32 = w.astype(np.float32), dy.astype(np.float32)
        exact = reference.backprop_input(w32.astype(float), dy32.astype(float), g)
        bound = reference.backprop_input(abs(w32.astype(float)), abs(dy32.astype(float)), g)
        gathered = kernels.conv2d_backprop_input(g.input_shape, w32, dy32, **attrs)
        assert kernels.last_path() == "numpy gather" and gathered.dtype == np.float32
        assert (abs(gathered - exact) / bound).max() < 1e-6


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        out = fn()
        return tracemalloc.get_traced_memory()[1] - out.nbytes
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("batch", [1, 6])
def test_gather_workspace_is_within_the_estimate(monkeypatch, batch):
    monkeypatch.setattr(compute, "CHUNK_BYTES", 2**16)
    g, attrs, w, dy = _input_case(n=batch, h=30, w=28, c=32, o=40, kh=3, kw=3)
    w, dy = w.astype(np.float32), dy.astype(np.float32)
    peak = _peak(lambda: kernels.conv2d_backprop_input(g.input_shape, w, dy, **attrs))
    assert kernels.last_path() == "numpy gather"
    assert 0 < peak <= conv_workspace(g, "input", "float32", True)


@pytest.mark.parametrize("path", ["gather", "per-tap"])
def test_doubling_the_batch_does_not_double_the_workspace(monkeypatch, path):
    """Batch chunks bound the extra memory: 8 then 16 images of about 0.1 MiB of chunk each."""
    monkeypatch.setattr(compute, "CHUNK_BYTES", 2**18)
    monkeypatch.setattr(compute, "GATHER_INPUT_GRADIENT", path == "gather")
    peaks = []
    for batch in (8, 16):
        g, attrs, w, dy = _input_case(n=batch, h=40, w=40, c=32, o=32, kh=3, kw=3)
        w, dy = w.astype(np.float32), dy.astype(np.float32)
        call = functools.partial(kernels.conv2d_backprop_input, g.input_shape, w, dy, **attrs)
        peaks.append(_peak(call))
        assert kernels.last_path() == f"numpy {path}"
    dy_bytes = dy.nbytes  # the 16-image out_backprop: 3.3 MiB
    assert peaks[1] < 1.25 * peaks[0] and peaks[1] < dy_bytes


def test_a_cancelled_gather_stops_at_its_first_block():
    import threading

    g, attrs, w, dy = _input_case(n=4, h=30, w=28, c=32, o=40, kh=3, kw=3)
    event = threading.Event()
    event.set()
    with scope(event), pytest.raises(Cancelled):
        kernels.conv2d_backprop_input(g.input_shape, w, dy, **attrs)
