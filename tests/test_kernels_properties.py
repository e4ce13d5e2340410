"""The fast kernels against the slow reference on random cases, and the adjoint identities."""

import os
import types
from contextlib import contextmanager

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from engine import kernels
from engine.base.dtypes import DTYPES, RTOL
from engine.base.errors import InvalidArgumentError
from engine.kernels import compute, parallel
from engine.shapes.conv import conv2d_geometry
from tests import reference


def conv_attrs(fmt: str, strides: tuple, dilations: tuple, padding: str, pads: list) -> dict:
    """tf.raw_ops attrs in ``fmt`` from (rows, cols) strides and dilations and the 4 spatial
    paddings (top, bottom, left, right; used only with EXPLICIT)."""
    spatial = lambda a, b: [1, a, b, 1] if fmt == "NHWC" else [1, 1, a, b]
    attrs = {"strides": spatial(*strides), "padding": padding, "data_format": fmt,
             "dilations": spatial(*dilations)}
    if padding == "EXPLICIT":
        attrs["explicit_paddings"] = ([0, 0, *pads, 0, 0] if fmt == "NHWC" else [0, 0, 0, 0, *pads])
    return attrs


def valid_geometry(in_shape, filter_shape, depthwise: bool, attrs: dict):
    """The reference's geometry of a call the engine accepts (hypothesis rejects the others):
    the engine's conv2d_geometry only decides validity, the shapes the tests use come from the
    reference's own formula."""
    try:
        conv2d_geometry(in_shape, filter_shape, depthwise=depthwise, **attrs)
    except InvalidArgumentError:
        assume(False)
    return reference.geometry(in_shape, filter_shape, depthwise=depthwise, **attrs)


@st.composite
def conv_cases(draw, depthwise=False, max_in=3, max_out=3, sizes=(0, 7), batch=(0, 2)):
    """A random valid conv geometry with its attrs (any layout, padding, stride, dilation): the
    engine's conv2d_geometry only decides validity; the geometry returned is the reference's.
    Up to ``max_in`` input and ``max_out`` output channels per group (not depthwise), image
    sides and batch in the ranges ``sizes`` and ``batch``."""
    fmt = draw(st.sampled_from(["NHWC", "NCHW"]))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    n, h, w = draw(st.integers(*batch)), draw(st.integers(*sizes)), draw(st.integers(*sizes))
    if depthwise:
        c, fin, fout = draw(st.integers(1, 3)), None, draw(st.integers(1, 2))
        fin = c
    else:
        groups, fin = draw(st.integers(1, 2)), draw(st.integers(1, max_in))
        c, fout = groups * fin, groups * draw(st.integers(1, max_out))
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
    pads = [draw(st.integers(0, 2)) for _ in range(4)]
    attrs = conv_attrs(fmt, (sh, sw), (dh, dw), padding, pads)
    in_shape = (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)
    g = valid_geometry(in_shape, (kh, kw, fin, fout), depthwise, attrs)
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    return g, attrs, dtype, draw(st.integers(0, 2**32 - 1))


def _arrays(g, dtype, seed):
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    rand = lambda shape: rng.standard_normal(shape).astype(dt)
    return rand(g.input_shape), rand(g.filter_shape), rand(g.output_shape)


def _check(out, exact, bound, dtype):
    """|out - exact| <= rtol * bound, plus the output dtype's smallest subnormal: a result
    below the normal range (float16: 6e-5) is only as exact as that spacing."""
    assert out.shape == exact.shape and out.dtype == DTYPES[dtype]
    err = np.abs(out.astype(np.float64) - exact)
    tiny = float(ml_dtypes.finfo(DTYPES[dtype]).smallest_subnormal)
    assert np.all(err <= RTOL[dtype] * bound + tiny)


def _check_family(forward, bfilter, binput, case):
    """All three ops of one family against the reference, each within rtol * bound."""
    g, attrs, dtype, seed = case
    x, w, dy = _arrays(g, dtype, seed)
    ax, aw, ady = abs(x), abs(w), abs(dy)
    _check(forward(x, w, **attrs), reference.conv2d(x, w, g), reference.conv2d(ax, aw, g), dtype)
    _check(bfilter(x, g.filter_shape, dy, **attrs), reference.backprop_filter(x, dy, g),
           reference.backprop_filter(ax, ady, g), dtype)
    _check(binput(g.input_shape, w, dy, **attrs), reference.backprop_input(w, dy, g),
           reference.backprop_input(aw, ady, g), dtype)


CONV = (kernels.conv2d, kernels.conv2d_backprop_filter, kernels.conv2d_backprop_input)
DEPTHWISE = (kernels.depthwise_conv2d_native, kernels.depthwise_conv2d_native_backprop_filter,
             kernels.depthwise_conv2d_native_backprop_input)


@given(conv_cases())
def test_conv2d_family_matches_reference(case):
    _check_family(*CONV, case)


@given(conv_cases(depthwise=True))
def test_depthwise_family_matches_reference(case):
    _check_family(*DEPTHWISE, case)


def _adjoint(forward, bfilter, binput, case):
    g, attrs, _, seed = case
    x, w, dy = _arrays(g, "float64", seed)
    y = forward(x, w, **attrs)
    dx = binput(np.array(g.input_shape, np.int32), w, dy, **attrs)
    dw = bfilter(x, np.array(g.filter_shape, np.int64), dy, **attrs)
    lhs, mid, rhs = np.vdot(y, dy), np.vdot(x, dx), np.vdot(w, dw)
    scale = 1e-10 * (1 + np.vdot(abs(y), abs(dy)))
    assert abs(lhs - mid) <= scale and abs(lhs - rhs) <= scale


@given(conv_cases())
def test_conv2d_adjoint_identity(case):
    _adjoint(*CONV, case)


@given(conv_cases(depthwise=True))
def test_depthwise_adjoint_identity(case):
    _adjoint(*DEPTHWISE, case)


def test_adjoint_identity_on_a_larger_strided_dilated_case():
    """One bigger case where a wrong tap offset could not cancel out."""
    rng = np.random.default_rng(7)
    attrs = {"strides": [1, 2, 3, 1], "padding": "EXPLICIT", "dilations": [1, 2, 1, 1],
             "explicit_paddings": [0, 0, 1, 2, 0, 3, 0, 0]}
    x, w = rng.standard_normal((3, 17, 19, 6)), rng.standard_normal((3, 4, 3, 8))
    y = kernels.conv2d(x, w, **attrs)
    dy = rng.standard_normal(y.shape)
    dx = kernels.conv2d_backprop_input(x.shape, w, dy, **attrs)
    dw = kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs)
    assert np.isclose(np.vdot(y, dy), np.vdot(x, dx), rtol=1e-12)
    assert np.isclose(np.vdot(y, dy), np.vdot(w, dw), rtol=1e-12)


@contextmanager
def _per_tap_products():
    """Force the per-tap product paths (normally only for >= 16 channels) on small cases."""
    old = compute.IM2COL_MAX_CHANNELS
    compute.IM2COL_MAX_CHANNELS = 1
    try:
        yield
    finally:
        compute.IM2COL_MAX_CHANNELS = old


@contextmanager
def _kernels(path: str):
    """``GRADBLOCKS_KERNELS=path`` inside (``auto`` takes the compiled tiles when numba is
    installed, as in CI; ``numpy`` the NumPy per-tap and gathered products)."""
    old = os.environ.get("GRADBLOCKS_KERNELS")
    os.environ["GRADBLOCKS_KERNELS"] = path
    try:
        yield
    finally:
        if old is None:
            del os.environ["GRADBLOCKS_KERNELS"]
        else:
            os.environ["GRADBLOCKS_KERNELS"] = old


class _PoisonedNumpy(types.ModuleType):
    """NumPy whose ``empty`` float arrays start as 1234.5 (see :func:`_poisoned_empty`)."""

    def __init__(self):
        super().__init__("numpy")

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def empty(shape, dtype=float, *args, **kwargs):
        out = np.empty(shape, dtype, *args, **kwargs)
        if out.dtype.kind == "f" or out.dtype == ml_dtypes.bfloat16:
            out.fill(1234.5)
        return out


#: The Python modules of the kernels whose ``np.empty`` buffers are poisoned (the compiled
#: modules keep NumPy itself: numba reads ``np.empty`` when it compiles).
_KERNEL_MODULES = ("engine.kernels", "engine.kernels.compute", "engine.kernels.layout",
                   "engine.kernels.buffers", "engine.kernels._compiled.conv_tiles",
                   "engine.kernels._compiled.winograd", "engine.kernels._compiled.winograd_phases")


@contextmanager
def _poisoned_empty():
    """Every ``np.empty`` float array the kernels' Python code allocates starts as 1234.5: a
    buffer or result allocated without zeroing and then read before writing (or left partly
    unwritten) shows. Finite on purpose: a NaN result would send the call to the NaN/Inf path
    and hide the read."""
    import importlib

    modules = [importlib.import_module(name) for name in _KERNEL_MODULES]
    poisoned = _PoisonedNumpy()
    for m in modules:
        m.np = poisoned
    try:
        yield
    finally:
        for m in modules:
            m.np = np


@pytest.mark.parametrize("path", ["numpy", "auto"])
@given(case=conv_cases())
def test_per_tap_product_paths_match_reference(path, case):
    with _per_tap_products(), _kernels(path):
        _check_family(*CONV, case)


@pytest.mark.parametrize("path", ["numpy", "auto"])
@given(case=conv_cases())
def test_per_tap_product_paths_in_parallel_match_reference(path, case):
    with _per_tap_products(), _threads_on_tiny_cases(), _kernels(path):
        _check_family(*CONV, case)


@pytest.mark.parametrize("path", ["numpy", "auto"])
@given(case=conv_cases())
def test_no_path_reads_a_buffer_it_did_not_write(path, case):
    """Results and work buffers allocated with ``np.empty`` (the input gradient's result is
    zeroed only where its path does not write every element) are written before they are
    read: with every such buffer starting as garbage, the results still match the reference."""
    with _per_tap_products(), _kernels(path), _poisoned_empty():
        _check_family(*CONV, case)


def test_many_channels_use_the_per_tap_paths_and_match_reference():
    """A real 24-channel case (per-tap products, direct input-gradient accumulation)."""
    rng = np.random.default_rng(3)
    for padding, strides in (("VALID", [1, 1, 1, 1]), ("SAME", [1, 2, 1, 1])):
        attrs = {"strides": strides, "padding": padding}
        x = rng.standard_normal((2, 7, 6, 24))
        w = rng.standard_normal((3, 2, 24, 20))
        g = conv2d_geometry(x.shape, w.shape, **attrs)
        dy = rng.standard_normal(g.output_shape)
        np.testing.assert_allclose(kernels.conv2d(x, w, **attrs), reference.conv2d(x, w, g),
                                   rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs),
                                   reference.backprop_filter(x, dy, g), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(kernels.conv2d_backprop_input(x.shape, w, dy, **attrs),
                                   reference.backprop_input(w, dy, g), rtol=1e-10, atol=1e-10)


@contextmanager
def _threads_on_tiny_cases():
    """Force the thread split on tiny cases, so ranges, halos and partial sums are exercised."""
    old = parallel.MIN_POSITIONS_PER_RANGE, parallel.MIN_COPY_BYTES
    parallel.MIN_POSITIONS_PER_RANGE = parallel.MIN_COPY_BYTES = 1
    try:
        yield
    finally:
        parallel.MIN_POSITIONS_PER_RANGE, parallel.MIN_COPY_BYTES = old


@given(conv_cases())
def test_parallel_ranges_match_reference(case):
    with _threads_on_tiny_cases():
        _check_family(*CONV, case)


@contextmanager
def _one_row_depthwise_tiles():
    """Cut every image into one-output-row tiles, so tiles start inside the padding and the
    image (tiny cases otherwise fit one tile per image)."""
    old = compute.DEPTHWISE_TILE_POSITIONS
    compute.DEPTHWISE_TILE_POSITIONS = 1
    try:
        yield
    finally:
        compute.DEPTHWISE_TILE_POSITIONS = old


@given(conv_cases(depthwise=True))
def test_parallel_depthwise_tiles_match_reference(case):
    with _threads_on_tiny_cases(), _one_row_depthwise_tiles():
        _check_family(*DEPTHWISE, case)
