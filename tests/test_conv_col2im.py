"""The compiled im2col forward and filter gradient and col2im input gradient for few channels
(engine.kernels.im2col_nd / conv_tiles_input.backprop_input_col2im,
engine.kernels._compiled.conv3d_jit.im2col_rows_3d / filter_rows_3d, conv_tiles_jit.col2im_rows,
engine.kernels._compiled.simd_runs: the ``numba im2col`` and ``numba col2im`` paths).

The routing and the agreement with the NumPy path on random geometries are in
tests/test_conv_tiles.py (every few-channel forward and input gradient there runs them, the
input gradient when its result is written in place); here: the run copy and add against NumPy,
each loop against a float64 evaluation of its formula, the same bits whatever the split of
rows and calls, NaN/Inf positions, cancellation between calls and extra memory as the batch
grows."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

numba = pytest.importorskip("numba")

from engine import kernels
from engine.base import cancel
from engine.kernels import accel, compute, im2col_nd, parallel
from engine.kernels._compiled import conv3d_jit, conv_tiles, conv_tiles_input, conv_tiles_jit
from engine.kernels._compiled.simd_runs import add_into, copy_into
from engine.kernels.buffers import readonly
from engine.kernels.memory import conv_workspace
from engine.shapes.conv import conv2d_geometry
from tests.test_conv_tiles import _peak
from tests.test_kernels_properties import conv_attrs

INPUT = kernels.conv2d_backprop_input
FORWARD = kernels.conv2d
COL2IM = "numba col2im"
IM2COL = "numba im2col"


@numba.njit
def _add(out, src, o0, s0, n):
    add_into(out, src, o0, s0, n)


@numba.njit
def _copy(out, src, o0, s0, n):
    copy_into(out, src, o0, s0, n)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 70), o0=st.integers(0, 9), s0=st.integers(0, 9),
       dtype=st.sampled_from(["float32", "float64"]), add=st.booleans(),
       seed=st.integers(0, 2**16))
def test_a_run_is_added_or_copied_and_nothing_else_changes(n, o0, s0, dtype, add, seed):
    rng = np.random.default_rng(seed)
    out = rng.standard_normal(o0 + n + 5).astype(dtype)
    src = rng.standard_normal(s0 + n + 3).astype(dtype)
    want = out.copy()
    if add:
        want[o0:o0 + n] += src[s0:s0 + n]
        _add(out, src, o0, s0, n)
    else:
        want[o0:o0 + n] = src[s0:s0 + n]
        _copy(out, src, o0, s0, n)
    assert np.array_equal(out, want)


#: Filter sizes, few channels, strides, dilations, paddings (some reading only padding),
#: dtypes and seeds of the two loops' formula tests.
GEOMETRY = {"kh": st.integers(1, 5), "kw": st.integers(1, 5), "ci": st.integers(1, 6),
            "sr": st.integers(1, 3), "sc": st.integers(1, 3), "dr": st.integers(1, 2),
            "dc": st.integers(1, 2), "pt": st.integers(0, 4), "pl": st.integers(0, 4),
            "dtype": st.sampled_from(["float32", "float64"]), "seed": st.integers(0, 2**16)}


def _terms(kh, kw, size, out_size, pt, pl, sr, sc, dr, dc):
    """``(r, c, i, j, a, b)`` for every output ``(r, c)`` and tap ``(i, j)`` reading the input
    pixel ``(a, b) = (r*sr + i*dr - pt, c*sc + j*dc - pl)`` inside ``size``."""
    for r in range(out_size[0]):
        for c in range(out_size[1]):
            for i in range(kh):
                for j in range(kw):
                    a, b = r * sr + i * dr - pt, c * sc + j * dc - pl
                    if 0 <= a < size[0] and 0 <= b < size[1]:
                        yield r, c, i, j, a, b


def _forward_reference(x, w, oh, ow, *attrs):
    """float64 ``y[n, r, c] = sum_{i,j} x[n, r*sr + i*dr - pt, c*sc + j*dc - pl] @ w[i, j]``."""
    y = np.zeros((x.shape[0], oh, ow, w.shape[3]))
    for r, c, i, j, a, b in _terms(*w.shape[:2], x.shape[1:3], (oh, ow), *attrs):
        y[:, r, c] += x[:, a, b].astype(np.float64) @ w[i, j].astype(float)
    return y


def _volume_params(x, oh, ow, co, kh, kw, pt, pl, sr, sc, dr, dc):
    """The loops' int64 parameters of a 2-D call as a volume of depth 1 (out, dims, pads,
    steps, dils, taps)."""
    def ints(*v):
        return np.array(v, np.int64)

    return (ints(1, oh, ow, co), ints(1, *x.shape[1:]), ints(0, pt, pl), ints(1, sr, sc),
            ints(1, dr, dc), ints(1, kh, kw))


@settings(max_examples=40, deadline=None)
@given(co=st.integers(1, 40), **GEOMETRY)
def test_im2col_rows_is_its_formula_on_any_row_range(kh, kw, ci, co, sr, sc, dr, dc, pt, pl,
                                                     dtype, seed):
    """The few-channel forward loop (conv3d_jit.im2col_rows_3d on a volume of depth 1):
    output rows in two calls, groups of 1-3 rows and 1 to kh filter rows per product
    (patches reading padding on every side), the rest of ``y`` untouched."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 7, 6, ci)).astype(dtype)
    w = rng.standard_normal((kh, kw, ci, co)).astype(dtype)
    oh, ow = 4, 5
    y = np.full((2, oh, ow, co), 7.0, dtype)
    rows, taps = int(rng.integers(1, 4)), int(rng.integers(1, kh + 1))
    patch = np.full(rows * ow * kh * kw * ci, np.nan, dtype)  # every element read is written
    tables = np.zeros(rows * ow, np.int64), np.zeros(rows * ow, np.int64)
    params = _volume_params(x, oh, ow, co, kh, kw, pt, pl, sr, sc, dr, dc)
    split = int(rng.integers(1, 2 * oh))
    for t0, t1 in ((0, split), (split, 2 * oh - 1)):
        conv3d_jit.im2col_rows_3d(y.reshape(-1), readonly(x.reshape(-1)),
                                  readonly(w.reshape(-1)), patch, *tables, t0, t1, rows, taps,
                                  *params)
    want = _forward_reference(x, w, oh, ow, pt, pl, sr, sc, dr, dc)
    bound = _forward_reference(abs(x), abs(w), oh, ow, pt, pl, sr, sc, dr, dc)
    done = y.reshape(-1, ow, co)[:2 * oh - 1]
    assert np.all(np.abs(done - want.reshape(-1, ow, co)[:2 * oh - 1])
                  <= 8 * np.finfo(dtype).eps * bound.reshape(-1, ow, co)[:2 * oh - 1])
    assert np.all(y[1, oh - 1] == 7.0)


def _filter_reference(x, dy, kh, kw, *attrs):
    """float64 ``dw[i, j] = sum_{n,r,c} x[n, r*sr + i*dr - pt, c*sc + j*dc - pl].T @
    dy[n, r, c]`` over the output rows of ``dy``."""
    dw = np.zeros((kh, kw, x.shape[3], dy.shape[3]))
    for r, c, i, j, a, b in _terms(kh, kw, x.shape[1:3], dy.shape[1:3], *attrs):
        dw[i, j] += x[:, a, b].astype(np.float64).T @ dy[:, r, c].astype(float)
    return dw


@settings(max_examples=40, deadline=None)
@given(co=st.integers(1, 40), **GEOMETRY)
def test_the_filter_rows_loop_is_its_formula(kh, kw, ci, co, sr, sc, dr, dc, pt, pl, dtype,
                                             seed):
    """The few-channel filter gradient loop (conv3d_jit.filter_rows_3d on a volume of depth
    1): the output rows in two calls into one sum, groups of 1-3 rows, a gathered block of
    any size (flushed when full), patches reading padding on every side."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 7, 6, ci)).astype(dtype)
    oh, ow = 4, 5
    dy = rng.standard_normal((2, oh, ow, co)).astype(dtype)
    j_all = kh * kw * ci
    acc = np.zeros(j_all * co, dtype)
    positions = int(rng.integers(ow, 3 * ow))
    patch = np.full(positions * j_all, np.nan, dtype)  # every element read is written
    rows_dy = np.full(positions * co, np.nan, dtype)
    tables = np.zeros(j_all, np.int64), np.zeros(j_all, np.int64)
    params = _volume_params(x, oh, ow, co, kh, kw, pt, pl, sr, sc, dr, dc)
    split = int(rng.integers(1, 2 * oh))
    for t0, t1 in ((0, split), (split, 2 * oh)):
        conv3d_jit.filter_rows_3d(acc, readonly(x.reshape(-1)), readonly(dy.reshape(-1)),
                                  patch, rows_dy, *tables, t0, t1, int(rng.integers(1, 4)),
                                  *params)
    want = _filter_reference(x, dy, kh, kw, pt, pl, sr, sc, dr, dc)
    bound = _filter_reference(abs(x), abs(dy), kh, kw, pt, pl, sr, sc, dr, dc)
    assert np.all(np.abs(acc.reshape(want.shape) - want)
                  <= 8 * 2 * oh * ow * np.finfo(dtype).eps * bound)


def _reference(dy, w, shape, *attrs):
    """float64 col2im: ``dx[n, r*sr + i*dr - pt, c*sc + j*dc - pl, q] +=
    dy[n, r, c] . w[i, j, q]``."""
    dx = np.zeros(shape)
    for r, c, i, j, a, b in _terms(*w.shape[:2], shape[1:3], dy.shape[1:3], *attrs):
        dx[:, a, b] += dy[:, r, c].astype(np.float64) @ w[i, j].T.astype(float)
    return dx


@settings(max_examples=40, deadline=None)
@given(co=st.integers(1, 20), **GEOMETRY)
def test_col2im_rows_is_its_formula_on_any_row_range(kh, kw, ci, co, sr, sc, dr, dc, pt, pl,
                                                     dtype, seed):
    """Output-gradient rows in two calls, input rows in two owners: together the formula."""
    rng = np.random.default_rng(seed)
    shape = (2, 9, 8, ci)
    oh, ow = 5, 4
    dy = rng.standard_normal((2, oh, ow, co)).astype(dtype)
    w = rng.standard_normal((kh, kw, ci, co)).astype(dtype)
    j = kh * kw * ci
    wm = np.zeros((co, j + 3), dtype)
    wm[:, :j] = w.reshape(j, co).T
    out = np.full(shape, 7.0, dtype)
    flat = out.reshape(-1)
    cols = np.empty((ow, wm.shape[1]), dtype)
    split = int(rng.integers(0, shape[1] + 1))
    for n in range(2):
        for h0, h1 in ((0, split), (split, shape[1])):
            out[n, h0:h1] = 0
            for r0, r1 in ((0, 2), (2, oh)):
                conv_tiles_jit.col2im_rows(flat, 9 * 8 * ci, 8 * ci, ci, 8, dy, wm, cols, n, r0,
                                           r1, h0, h1, pt, pl, sr, sc, dr, dc, kh, kw, ci)
    want = _reference(dy, w, shape, pt, pl, sr, sc, dr, dc)
    bound = _reference(abs(dy), abs(w), shape, pt, pl, sr, sc, dr, dc)
    assert np.all(np.abs(out - want) <= 8 * np.finfo(dtype).eps * bound)


CASE = ((3, 23, 19, 3), (7, 5, 3, 24), conv_attrs("NHWC", (2, 2), (1, 1), "SAME", []))


def _case(batch=3, dtype="float32"):
    shape, wshape, attrs = CASE
    shape = (batch, *shape[1:])
    g = conv2d_geometry(shape, wshape, **attrs)
    rng = np.random.default_rng(batch)
    w = rng.uniform(-1, 1, wshape).astype(dtype)
    dy = rng.uniform(-1, 1, g.output_shape).astype(dtype)
    return shape, w, dy, attrs


def test_the_same_bits_whatever_the_split_of_rows_and_calls(monkeypatch):
    """Every input element sums its terms in one order: one core and whole images give the
    bits of many owners and one output-gradient row per call."""
    monkeypatch.setenv(accel.ENV, "numba")
    shape, w, dy, attrs = _case()
    whole = INPUT(shape, w, dy, **attrs)
    assert kernels.last_path() == COL2IM
    monkeypatch.setattr(conv_tiles, "CALL_POSITIONS", 1)
    monkeypatch.setattr(conv_tiles_input, "COL2IM_MIN_ROWS", 0)  # ranges of one input row
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    split = INPUT(shape, w, dy, **attrs)
    monkeypatch.setattr(parallel, "workers", lambda: 7)  # ranges starting inside images
    assert np.array_equal(split, INPUT(shape, w, dy, **attrs))
    monkeypatch.setattr(parallel, "workers", lambda: 1)
    one = INPUT(shape, w, dy, **attrs)
    assert np.array_equal(whole, split) and np.array_equal(whole, one)
    monkeypatch.setenv(accel.ENV, "numpy")
    exact = INPUT(shape, w.astype(np.float64), dy.astype(np.float64), **attrs)
    bound = INPUT(shape, abs(w).astype(np.float64), abs(dy).astype(np.float64), **attrs)
    assert np.all(np.abs(whole - exact) <= 2e-5 * bound)


def test_nan_and_inf_reach_exactly_the_elements_they_are_terms_of(monkeypatch):
    """An Inf times a zero weight is NaN, an Inf otherwise: as the float64 NumPy path; padding
    is never multiplied (no term, no NaN)."""
    shape, w, dy, attrs = _case()
    w[3, 2, 1] = 0.0
    dy[0, 4, 5, 7] = np.inf
    dy[2, 0, 0, 2] = np.nan
    monkeypatch.setenv(accel.ENV, "numba")
    got = INPUT(shape, w, dy, **attrs)
    assert kernels.last_path() == COL2IM
    monkeypatch.setenv(accel.ENV, "numpy")
    want = INPUT(shape, w.astype(np.float64), dy.astype(np.float64), **attrs)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    assert np.isnan(got).sum() > 0 and np.isinf(got).sum() > 0


def test_forward_nan_inf_and_huge_values_follow_the_float64_definition(monkeypatch):
    """The im2col forward and the NumPy path, each against the float64 definition: a NaN and an
    Inf in the input, an Inf weight on a tap that reads padding at the border (``Inf * padding``
    must not become NaN there: the exact rule counts only real terms) and values whose products
    overflow float32.

    Where the float64 sum is NaN or +-Inf, each path has exactly that. Where the float64 sum of
    the terms' magnitudes stays below float32's maximum, no partial sum can overflow, so each
    path is finite and within tolerance of the definition. Elsewhere (the products of the 3e38
    pixel) a partial sum may overflow at a place that depends on summation order, i.e. on the
    BLAS kernel that runs: there a path may give +-Inf or NaN, and a finite value must be within
    tolerance; one path's rounding is never compared with the other's."""
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, (2, 23, 19, 3)).astype(np.float32)
    w = rng.uniform(-1, 1, (7, 5, 3, 24)).astype(np.float32)
    x[0, 4, 5, 1], x[1, 10, 0, 2] = np.nan, np.inf
    w[0, 0, 0, 3] = np.inf  # top-left tap: reads padding for the first output row and column
    x[1, 20, 17] = 3e38  # its products overflow float32
    attrs = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    monkeypatch.setenv(accel.ENV, "numpy")
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    want = FORWARD(x64, w64, **attrs)
    bound = FORWARD(np.nan_to_num(abs(x64), posinf=0.0), np.nan_to_num(abs(w64), posinf=0.0),
                    **attrs)
    order_free = bound < np.finfo(np.float32).max
    assert np.isnan(want).any() and np.isinf(want).any() and np.isfinite(want[:, 0, 0, 3]).all()
    assert 0 < np.count_nonzero(~order_free) < 0.05 * want.size
    for path in ("numba", "numpy"):
        monkeypatch.setenv(accel.ENV, path)
        got = FORWARD(x, w, **attrs)
        if path == "numba":
            assert kernels.last_path() == IM2COL
        for test in (np.isnan, np.isposinf, np.isneginf):
            assert np.array_equal(test(got)[order_free], test(want)[order_free]), (path, test)
        both = np.isfinite(got) & np.isfinite(want)
        assert np.array_equal(both[order_free], np.isfinite(want)[order_free]), path
        assert np.all(np.isnan(got) | np.isinf(got) | both), path
        assert np.all(np.abs(got[both] - want[both]) <= 4e-5 * bound[both] + 1e-30), path


def _cancelled_at_the_third_call(monkeypatch, run, path: str, module=conv_tiles,
                                 per_call: str = "CALL_POSITIONS") -> None:
    """``run()`` with one row per compiled call (``module.per_call`` set to 1), cancelled from
    the third checkpoint on: it stops there (each core at most one call later), having taken
    ``path``."""
    monkeypatch.setenv(accel.ENV, "numba")
    monkeypatch.setattr(module, per_call, 1)  # one row per call
    calls = []
    real = module.checkpoint
    event = threading.Event()

    def counting():
        calls.append(1)
        if len(calls) == 3:
            event.set()
        real()

    monkeypatch.setattr(module, "checkpoint", counting)
    with cancel.scope(event), pytest.raises(cancel.Cancelled):
        run()
    assert kernels.last_path() == path
    assert len(calls) <= 3 + parallel.workers()  # 4 images of 12 rows: far fewer than 48


def test_a_cancelled_input_gradient_stops_between_calls(monkeypatch):
    shape, w, dy, attrs = _case(batch=4)
    _cancelled_at_the_third_call(monkeypatch, lambda: INPUT(shape, w, dy, **attrs), COL2IM)


def test_a_cancelled_forward_stops_between_calls(monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4, 23, 19, 3)).astype(np.float32)
    w = rng.uniform(-1, 1, (7, 5, 3, 24)).astype(np.float32)
    _cancelled_at_the_third_call(monkeypatch, lambda: FORWARD(x, w, [1, 2, 2, 1], "SAME"),
                                 IM2COL, im2col_nd, "CALL_ROWS")


@pytest.mark.parametrize("kind", ["forward", "input"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_extra_memory_is_bounded_as_the_batch_grows_and_within_the_estimate(monkeypatch,
                                                                            layout, kind):
    """The forward: one row of patches per core, NCHW inputs copied to NHWC per batch chunk
    (the NHWC result is then transposed into the NCHW one, on every path: that copy grows with
    the batch). The input gradient: NHWC ``dy`` read in place, one row of columns per core;
    NCHW (3 channels, not adjacent) the NumPy col2im per batch chunk."""
    monkeypatch.setenv(accel.ENV, "numba")
    monkeypatch.setattr(compute, "CHUNK_BYTES", 2**18)
    attrs = conv_attrs(layout, (2, 2), (1, 1), "SAME", [])
    path = IM2COL if kind == "forward" else COL2IM if layout == "NHWC" else "numpy col2im"
    extras = []
    for batch in (4, 32):
        shape = (batch, 32, 32, 3) if layout == "NHWC" else (batch, 3, 32, 32)
        g = conv2d_geometry(shape, (7, 7, 3, 32), **attrs)
        rng = np.random.default_rng(batch)
        w = rng.uniform(-1, 1, g.filter_shape).astype(np.float32)
        if kind == "forward":
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            run = lambda: FORWARD(x, w, **attrs)  # noqa: B023 - called at once
        else:
            dy = rng.uniform(-1, 1, g.output_shape).astype(np.float32)
            run = lambda: INPUT(shape, w, dy, **attrs)  # noqa: B023 - called at once
        run()
        peak, out = _peak(run)
        assert kernels.last_path() == path
        extra = peak - out.nbytes
        assert extra <= conv_workspace(g, kind, "float32", True)
        transposed = out.nbytes if kind == "forward" and layout == "NCHW" else 0
        extras.append(extra - transposed)
    assert extras[1] <= extras[0] + 2**16, extras
