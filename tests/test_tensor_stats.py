"""engine.tensor_stats against NumPy: statistics, slices and the filter montage."""

import ml_dtypes
import numpy as np
import pytest

from engine.tensor_stats import default_view_axes, montage, slice_2d, tensor_stats


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_stats_match_numpy_with_nan_and_inf(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4, 5)).astype(dtype)
    a[0, 0, :2] = np.nan
    a[1, 1, 1] = np.inf
    a[2, 2, 2] = 0
    st = tensor_stats(a)
    f = a.astype(np.float64)
    good = f[np.isfinite(f)]
    assert (st.nan_count, st.inf_count, st.size) == (2, 1, 60)
    assert st.min == good.min() and st.max == good.max()
    assert st.mean == pytest.approx(good.mean()) and st.std == pytest.approx(good.std())
    assert st.zero_fraction == pytest.approx(np.count_nonzero(f == 0) / 60)
    assert st.shape == (3, 4, 5)
    assert "NaN 2" in st.summary() and "Inf 1" in st.summary()


def test_empty_tensor_has_no_values_and_no_warnings():
    with np.errstate(all="raise"):
        st = tensor_stats(np.zeros((0, 3), np.float32))
    assert st.size == 0 and st.min is None and st.zero_fraction is None


def test_slice_picks_axes_and_indices():
    a = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    np.testing.assert_array_equal(slice_2d(a, 1, 2, {0: 1, 3: 4}), a[1, :, :, 4])
    np.testing.assert_array_equal(slice_2d(a, 2, 1, {0: 0, 3: 2}), a[0, :, :, 2].T)
    assert default_view_axes(("N", "C", "H", "W")) == (2, 3)
    assert default_view_axes(("kh", "kw", "in", "out")) == (0, 1)


def test_montage_layout_element_by_element():
    w = np.arange(1, 2 * 3 * 2 * 4 + 1, dtype=np.float64).reshape(2, 3, 2, 4)  # kh kw in out
    m = montage(w, "global")
    assert m.shape == (2 * 3 - 1, 4 * 4 - 1)
    top = np.abs(w).max()
    for i in range(2):
        for o in range(4):
            tile = m[i * 3 : i * 3 + 2, o * 4 : o * 4 + 3]
            np.testing.assert_allclose(tile, w[:, :, i, o] / top)
    assert np.isnan(m[2, :]).all() and np.isnan(m[:, 3]).all()
    t = montage(w, "tile")
    np.testing.assert_allclose(t[3:5, 4:7], w[:, :, 1, 1] / np.abs(w[:, :, 1, 1]).max())
