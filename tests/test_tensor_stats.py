"""engine.view.stats against NumPy: statistics, slices, the filter montage, differences."""

import warnings

import ml_dtypes
import numpy as np
import pytest

from engine.view.stats import (
    default_axes,
    default_view_axes,
    diff_stats,
    montage,
    montage_index,
    montage_separators,
    slice_2d,
    slice_index,
    tensor_stats,
)

DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
NAMES = {np.float16: "float16", ml_dtypes.bfloat16: "bfloat16", np.float32: "float32",
         np.float64: "float64"}


def _numpy_stats(a):
    f = a.astype(np.float64).ravel()
    good = f[np.isfinite(f)]
    return {"nan": int(np.isnan(f).sum()), "inf": int(np.isinf(f).sum()), "good": good,
            "zeros": (f == 0).sum() / f.size}


def _sample(dtype, shape, seed, nan=0, inf=0, zeros=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 3 + 0.5).astype(dtype)
    flat = a.reshape(-1)
    picks = rng.choice(flat.size, nan + inf + zeros, replace=False)
    flat[picks[:nan]] = np.nan
    flat[picks[nan:nan + inf]] = rng.choice([np.inf, -np.inf], inf)
    flat[picks[nan + inf:]] = 0
    return a


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, nan, inf, zeros", [
    ((3, 4, 5), 0, 0, 0), ((3, 4, 5), 2, 3, 7), ((2, 7, 6, 3), 1, 0, 0), ((17,), 0, 2, 1),
    ((), 0, 0, 0)])
def test_every_stat_matches_numpy(dtype, shape, nan, inf, zeros):
    a = _sample(dtype, shape, seed=len(shape) + nan, nan=nan, inf=inf, zeros=zeros)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st = tensor_stats(a)
    ref = _numpy_stats(a)
    good = ref["good"]
    assert st.shape == shape and st.size == a.size and st.dtype == NAMES[dtype]
    assert (st.nan_count, st.inf_count) == (ref["nan"], ref["inf"]) == (nan, inf)
    assert st.min == good.min() and st.max == good.max()
    assert st.mean == pytest.approx(good.mean(), rel=1e-12, abs=1e-15)
    assert st.std == pytest.approx(good.std(), rel=1e-12, abs=1e-15)
    assert st.zero_fraction == pytest.approx(ref["zeros"])
    assert f"NaN {nan}" in st.summary() and f"Inf {inf}" in st.summary()
    assert f"min {good.min():.6g}" in st.summary() and NAMES[dtype] in st.summary()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4, 1)])
def test_empty_tensor_has_no_values_and_no_warnings(dtype, shape):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st = tensor_stats(np.zeros(shape, dtype))
    assert st.size == 0 and st.shape == shape and st.dtype == NAMES[dtype]
    assert (st.min, st.max, st.mean, st.std, st.zero_fraction) == (None,) * 5
    assert (st.nan_count, st.inf_count) == (0, 0)
    assert "min -" in st.summary() and "zeros -" in st.summary()


def test_all_non_finite_tensor_counts_but_has_no_value_stats():
    a = np.array([np.nan, np.inf, -np.inf, np.nan], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st = tensor_stats(a)
    assert (st.nan_count, st.inf_count, st.zero_fraction) == (2, 2, 0.0)
    assert st.min is None and st.std is None


def test_integer_and_bool_tensors_are_summarised_in_float64():
    st = tensor_stats(np.array([[0, 3], [4, 0]], np.int32))
    assert (st.min, st.max, st.mean, st.zero_fraction, st.dtype) == (0, 4, 1.75, 0.5, "int32")
    assert tensor_stats(np.array([True, False, False, False])).mean == 0.25


def test_slice_picks_axes_and_indices():
    a = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    np.testing.assert_array_equal(slice_2d(a, 1, 2, {0: 1, 3: 4}), a[1, :, :, 4])
    np.testing.assert_array_equal(slice_2d(a, 2, 1, {0: 0, 3: 2}), a[0, :, :, 2].T)
    np.testing.assert_array_equal(slice_2d(a, 3, 0, {1: 2, 2: 3}), a[:, 2, 3, :].T)
    np.testing.assert_array_equal(slice_2d(a, 0, 3, {}), a[:, 0, 0, :])
    np.testing.assert_array_equal(slice_2d(np.arange(4), 0, 0, {}), [[0, 1, 2, 3]])
    np.testing.assert_array_equal(slice_2d(np.float32(7), 0, 0, {}), [[7]])
    with pytest.raises(ValueError, match="must differ"):
        slice_2d(a, 1, 1, {})
    # every pixel maps back to the tensor element it shows
    s = slice_2d(a, 3, 1, {0: 1, 2: 2})
    for r in range(s.shape[0]):
        for c in range(s.shape[1]):
            assert a[slice_index(4, 3, 1, {0: 1, 2: 2}, r, c)] == s[r, c]
    assert slice_index(1, 0, 0, {}, 0, 3) == (3,) and slice_index(0, 0, 0, {}, 0, 0) == ()


def test_bfloat16_slice_is_exact_in_float64():
    a = np.array([[0.1, -3.0], [1e-3, 250.0]], ml_dtypes.bfloat16)
    np.testing.assert_array_equal(slice_2d(a, 0, 1, {}), a.astype(np.float64))


def test_default_axes_and_view_axes():
    assert default_axes(3) == ("d0", "d1", "d2") and default_axes(0) == ()
    assert default_view_axes(("N", "H", "W", "C")) == (1, 2)
    assert default_view_axes(("N", "C", "H", "W")) == (2, 3)
    assert default_view_axes(("kh", "kw", "in", "out")) == (0, 1)
    assert default_view_axes(("kh", "kw", "in", "multiplier")) == (0, 1)
    assert default_view_axes(("d0", "d1", "d2")) == (1, 2)
    assert default_view_axes(("d0",)) == (0, 0)


def test_montage_layout_element_by_element():
    kh, kw, cin, cout = 2, 3, 2, 4
    w = np.arange(1, kh * kw * cin * cout + 1, dtype=np.float64).reshape(kh, kw, cin, cout)
    w[1, 2, 1, 3] *= -1
    raw, glob, tile = montage(w, "none"), montage(w, "global"), montage(w, "tile")
    assert raw.shape == glob.shape == tile.shape == (cin * (kh + 1) - 1, cout * (kw + 1) - 1)
    top = np.abs(w).max()
    sep = montage_separators(w.shape)
    for r in range(raw.shape[0]):
        for c in range(raw.shape[1]):
            idx = montage_index(w.shape, r, c)
            if idx is None:  # separator lines: every (kh+1)-th row, every (kw+1)-th column
                assert sep[r, c] and (r % (kh + 1) == kh or c % (kw + 1) == kw)
                assert np.isnan(raw[r, c]) and np.isnan(glob[r, c]) and np.isnan(tile[r, c])
                continue
            i, j, ci, co = idx
            assert (r, c) == (ci * (kh + 1) + i, co * (kw + 1) + j) and not sep[r, c]
            assert raw[r, c] == w[i, j, ci, co]
            assert glob[r, c] == w[i, j, ci, co] / top
            assert tile[r, c] == w[i, j, ci, co] / np.abs(w[:, :, ci, co]).max()
    assert np.isnan(raw).sum() == sep.sum() == raw.size - w.size
    assert montage_index(w.shape, 5, 0) is None and montage_index(w.shape, 0, 15) is None


def test_montage_of_depthwise_filter_and_common_scale():
    w = np.random.default_rng(3).standard_normal((3, 3, 4, 2))  # kh kw in multiplier
    m = montage(w, "global", vmax=10.0)
    assert m.shape == (4 * 4 - 1, 2 * 4 - 1)
    np.testing.assert_array_equal(m[4:7, 4:7], w[:, :, 1, 1] / 10.0)


def test_montage_keeps_nan_clips_inf_and_leaves_zero_tiles_zero():
    w = np.ones((2, 2, 2, 2))
    w[:, :, 0, 1] = 0.0
    w[0, 0, 1, 0] = np.nan
    w[1, 1, 1, 1] = -np.inf
    w[0, 1, 0, 0] = 4.0
    g = montage(w, "global")
    assert np.isnan(g[3, 0])  # the NaN element stays NaN; the rest of the filter is scaled
    np.testing.assert_array_equal(g[0:2, 0:2], [[0.25, 1.0], [0.25, 0.25]])
    np.testing.assert_array_equal(g[0:2, 3:5], 0.0)
    assert g[4, 4] == -1.0
    t = montage(w, "tile")
    np.testing.assert_array_equal(t[3:5, 3:5], [[1.0, 1.0], [1.0, -1.0]])
    np.testing.assert_array_equal(t[0:2, 3:5], 0.0)


def test_montage_rejects_bad_input():
    with pytest.raises(ValueError, match="4-D"):
        montage(np.ones((3, 3, 2)))
    with pytest.raises(ValueError, match="scale 'log'"):
        montage(np.ones((1, 1, 1, 1)), "log")


def test_diff_stats_against_numpy():
    rng = np.random.default_rng(5)
    b = rng.standard_normal((3, 4, 5))
    a = b + rng.standard_normal(b.shape) * 1e-3
    d = diff_stats(a.astype(np.float32), b)
    err = np.abs(a.astype(np.float32).astype(np.float64) - b)
    assert d.max_abs == err.max()
    assert d.argmax_abs == np.unravel_index(err.argmax(), b.shape)
    assert d.max_rel == (err / np.abs(b)).max() and d.nonfinite_mismatch == 0
    assert "max abs error" in d.summary() and str(list(d.argmax_abs)) in d.summary()


def test_diff_stats_with_zeros_nan_inf_and_empty():
    a = np.array([1.0, 0.5, np.nan, np.inf, np.nan, 2.0])
    b = np.array([1.0, 0.0, np.nan, np.inf, 3.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = diff_stats(a, b)
        e = diff_stats(np.zeros((0, 2)), np.zeros((0, 2)))
    assert (d.max_abs, d.argmax_abs, d.max_rel, d.nonfinite_mismatch) == (1.0, (5,), 1.0, 1)
    assert (e.max_abs, e.argmax_abs, e.max_rel, e.nonfinite_mismatch) == (0.0, None, 0.0, 0)
    with pytest.raises(ValueError, match="differ"):
        diff_stats(np.zeros(2), np.zeros(3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_chunked_stats_combine_to_numpys(monkeypatch, dtype):
    import engine.view.stats as ts

    monkeypatch.setattr(ts, "CHUNK", 7)  # many chunks, one of them all NaN/Inf
    a = _sample(dtype, (5, 11), seed=11, nan=4, inf=3, zeros=5)
    a.reshape(-1)[14:21] = np.nan
    st = ts.tensor_stats(a)
    ref = _numpy_stats(a)
    good = ref["good"]
    assert (st.nan_count, st.inf_count) == (ref["nan"], ref["inf"])
    assert st.min == good.min() and st.max == good.max()
    assert st.mean == pytest.approx(good.mean(), rel=1e-12)
    assert st.std == pytest.approx(good.std(), rel=1e-12)
    assert st.zero_fraction == pytest.approx(ref["zeros"])
