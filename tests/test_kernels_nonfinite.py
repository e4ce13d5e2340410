"""The NaN/Inf contract: an output element is NaN/Inf exactly when a term of its defining sum
that involves real (unpadded) elements is; finite elements equal the math."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import kernels
from engine.base.dtypes import DTYPES, RTOL
from engine.kernels.nonfinite import all_finite
from tests.test_kernels_properties import CONV, DEPTHWISE, conv_cases

SPECIALS = (np.nan, np.inf, -np.inf, 0.0)


def test_nan_in_the_input_stays_where_real_terms_read_it():
    """The issue's case: x = ones (1,2,3,1) with NaN at x[0,0,2], filter 1x2, dy = ones
    (1,2,2,1), VALID: tap (0,0) reads columns 0..1 only, so dw = [4, nan]."""
    x = np.ones((1, 2, 3, 1), np.float32)
    x[0, 0, 2, 0] = np.nan
    dw = kernels.conv2d_backprop_filter(x, [1, 2, 1, 1], np.ones((1, 2, 2, 1), np.float32),
                                        [1, 1, 1, 1], "VALID")
    assert dw[0, 0, 0, 0] == 4.0 and np.isnan(dw[0, 1, 0, 0])


def test_one_nan_filter_tap_of_a_strided_depthwise_input_gradient():
    """Stride 2, 3x3 filter, 5x5 input, SAME: tap (2,2) reads rows/cols 2r+1 of dx, so a NaN
    there reaches only the 2x2 = 4 elements at odd rows and columns; the other 21 are finite."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3, 1, 1)).astype(np.float32)
    w[2, 2, 0, 0] = np.nan
    dy = rng.standard_normal((1, 3, 3, 1)).astype(np.float32)
    dx = kernels.depthwise_conv2d_native_backprop_input([1, 5, 5, 1], w, dy, [1, 2, 2, 1],
                                                         "SAME")
    nan = np.isnan(dx[0, :, :, 0])
    assert nan.sum() == 4 and nan[1::2, 1::2].all()
    wf = np.where(np.isnan(w), 0, w)
    finite = kernels.depthwise_conv2d_native_backprop_input([1, 5, 5, 1], wf, dy,
                                                            [1, 2, 2, 1], "SAME")
    np.testing.assert_allclose(dx[~np.isnan(dx)], finite[~np.isnan(dx)], rtol=1e-6)


def test_inf_times_a_real_zero_is_nan_but_inf_next_to_padding_is_not():
    x = np.zeros((1, 1, 3, 1), np.float64)
    x[0, 0, 0, 0] = np.inf
    w = np.ones((1, 3, 1, 1))
    y = kernels.conv2d(x, w, [1, 1, 1, 1], "SAME")  # y[c] = x[c-1] + x[c] + x[c+1]
    np.testing.assert_array_equal(y[0, 0, :, 0], [np.inf, np.inf, 0.0])
    w[0, 1, 0, 0] = 0.0  # the centre tap is a real zero: inf * 0 = nan at column 0
    y = kernels.conv2d(x, w, [1, 1, 1, 1], "SAME")
    assert np.isnan(y[0, 0, 0, 0]) and y[0, 0, 1, 0] == np.inf and y[0, 0, 2, 0] == 0.0


def test_opposite_infinities_in_one_sum_give_nan():
    x = np.array([np.inf, -np.inf, 1.0], np.float32).reshape(1, 1, 3, 1)
    y = kernels.conv2d(x, np.ones((1, 2, 1, 1), np.float32), [1, 1, 1, 1], "VALID")
    assert np.isnan(y[0, 0, 0, 0]) and y[0, 0, 1, 0] == -np.inf


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_all_finite_sees_every_special_value_in_every_dtype(dtype):
    dt = DTYPES[dtype]
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4).astype(dt)
    assert all_finite(a) and all_finite(a[:, ::2, 1:]) and all_finite(a[:0])
    big = float(ml_dtypes.finfo(dt).max)
    assert all_finite(np.array([big, -big], dt))
    for special in (np.nan, np.inf, -np.inf):
        b = a.copy()
        b[1, 2, 3] = special
        assert not all_finite(b) and not all_finite(b.transpose(2, 0, 1)[:, :, 1:])


def _terms(g):
    """(n, r, c, i, j, row, col) of every output position and tap reading a real element."""
    for n in range(g.batch):
        for r in range(g.out_rows):
            for c in range(g.out_cols):
                for i in range(g.filter_rows):
                    row = r * g.stride_rows + i * g.dilation_rows - g.pad_top
                    for j in range(g.filter_cols):
                        col = c * g.stride_cols + j * g.dilation_cols - g.pad_left
                        if 0 <= row < g.in_rows and 0 <= col < g.in_cols:
                            yield n, r, c, i, j, row, col


def _channel_pairs(g):
    """(input channel, output channel) pairs multiplied together, per the op's definition."""
    if g.depthwise:
        m = g.filter_out
        return [(k, k * m + t, t) for k in range(g.in_depth) for t in range(m)]
    q, per = g.filter_in_depth, g.filter_out // g.groups
    return [(grp * q + a, o, a) for o in range(g.filter_out) for grp in [o // per]
            for a in range(q)]


def _reference(g, kind, a, b):
    """The op as the sum of its real terms, each product and sum done elementwise in float64
    (no BLAS, which may skip multiplications by zero)."""
    nhwc = lambda t: np.asarray(t, np.float64) if g.data_format == "NHWC" else \
        np.asarray(t, np.float64).transpose(0, 2, 3, 1)
    back = lambda t: t if g.data_format == "NHWC" else t.transpose(0, 3, 1, 2)
    terms = {}  # output index -> list of products
    pairs = _channel_pairs(g)
    if kind == "forward":
        x, w = nhwc(a), np.asarray(b, np.float64)
        shape = (g.batch, g.out_rows, g.out_cols, g.out_depth)
        for n, r, c, i, j, row, col in _terms(g):
            for ci, co, fi in pairs:
                wi = (i, j, ci, fi) if g.depthwise else (i, j, fi, co)
                terms.setdefault((n, r, c, co), []).append(x[n, row, col, ci] * w[wi])
    elif kind == "filter":
        x, dy = nhwc(a), nhwc(b)
        shape = g.filter_shape
        for n, r, c, i, j, row, col in _terms(g):
            for ci, co, fi in pairs:
                idx = (i, j, ci, fi) if g.depthwise else (i, j, fi, co)
                terms.setdefault(idx, []).append(x[n, row, col, ci] * dy[n, r, c, co])
    else:
        w, dy = np.asarray(a, np.float64), nhwc(b)
        shape = (g.batch, g.in_rows, g.in_cols, g.in_depth)
        for n, r, c, i, j, row, col in _terms(g):
            for ci, co, fi in pairs:
                wi = (i, j, ci, fi) if g.depthwise else (i, j, fi, co)
                terms.setdefault((n, row, col, ci), []).append(w[wi] * dy[n, r, c, co])
    out = np.zeros(shape)
    for idx, products in terms.items():
        out[idx] = np.sum(np.array(products))
    return out if kind == "filter" else back(out)


def _sprinkle(rng, a, count):
    """``a`` with ``count`` random elements set to NaN, +Inf, -Inf or 0."""
    a = a.copy()
    flat = a.reshape(-1)
    for _ in range(count if flat.size else 0):
        flat[rng.integers(flat.size)] = SPECIALS[rng.integers(len(SPECIALS))]
    return a


def _same_nonfinite(out, exact, dtype):
    """NaN, +Inf and -Inf at exactly the reference's positions; finite values within rtol."""
    out64 = out.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(out64), np.isnan(exact))
    np.testing.assert_array_equal(np.isposinf(out64), np.isposinf(exact))
    np.testing.assert_array_equal(np.isneginf(out64), np.isneginf(exact))
    ok = np.isfinite(exact)
    scale = 1.0 + np.abs(exact[ok])
    assert np.all(np.abs(out64[ok] - exact[ok]) <= 2 * RTOL[dtype] * 8 * scale)


def _check_family_nonfinite(forward, bfilter, binput, case, specials):
    g, attrs, dtype, seed = case
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    x, w, dy = (_sprinkle(rng, rng.uniform(-1, 1, s).astype(dt), specials)
                for s in (g.input_shape, g.filter_shape, g.output_shape))
    with np.errstate(invalid="ignore"):
        _same_nonfinite(forward(x, w, **attrs), _reference(g, "forward", x, w), dtype)
        _same_nonfinite(bfilter(x, g.filter_shape, dy, **attrs),
                        _reference(g, "filter", x, dy), dtype)
        _same_nonfinite(binput(g.input_shape, w, dy, **attrs),
                        _reference(g, "input", w, dy), dtype)


@given(conv_cases(), st.integers(1, 3))
def test_conv2d_family_nonfinite_matches_the_sum_over_real_terms(case, specials):
    _check_family_nonfinite(*CONV, case, specials)


@given(conv_cases(depthwise=True), st.integers(1, 3))
def test_depthwise_family_nonfinite_matches_the_sum_over_real_terms(case, specials):
    _check_family_nonfinite(*DEPTHWISE, case, specials)


@pytest.mark.parametrize("channels", [4, 32])  # the per-tap/im2col paths, and Winograd's
def test_nan_and_huge_operands_give_results_not_numpy_warnings(channels):
    """A call on NaN or overflowing operands runs before they are found (the result vouches
    when finite): NumPy's "invalid value" and "overflow" warnings, also from the worker
    threads, would only be noise on the command line; the result carries the answer."""
    import warnings

    from engine import kernels
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 12, 12, channels)).astype(np.float32)
    dy = rng.standard_normal((4, 12, 12, channels)).astype(np.float32)
    x[1, 4, 4, 0] = np.nan
    dy[2, 5, 5, 1] = 3e38
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dw = kernels.conv2d_backprop_filter(x, (3, 3, channels, channels), dy, [1, 1, 1, 1],
                                            "SAME")
        dx = kernels.conv2d_backprop_input(x.shape, np.ones((3, 3, channels, channels),
                                                            np.float32), dy, [1, 1, 1, 1],
                                           "SAME")
    assert np.isnan(dw[:, :, 0]).all()  # every tap reads the NaN for input channel 0
    assert np.isfinite(dx[0]).all()  # image 0 has no huge element
