"""3-D tensors as montages of depth slices (issue 33 item 2): a 3-D activation (N, D, H, W, C
in either layout) shows its D slices side by side at a chosen batch index and channel, a 3-D
filter (kd, kh, kw, in, out) its in x out grid with each out channel's kd slices side by side;
every pixel of the picture is the tensor element the viewer says it is."""

from __future__ import annotations

import numpy as np
import pytest

from engine.view.tensor_view import ViewState
from engine.view.thumbnail import SEPARATOR, thumbnail

NDHWC, NCDHW = tuple("NDHWC"), tuple("NCDHW")
FILTER3D = ("kd", "kh", "kw", "in", "out")


def _every_pixel_is_its_element(st: ViewState, a: np.ndarray) -> int:
    values, blank = st.values()
    seen = 0
    for r in range(values.shape[0]):
        for c in range(values.shape[1]):
            idx = st.pixel_index(r, c)
            if blank is not None and blank[r, c]:
                assert idx is None
                continue
            assert values[r, c] == a[idx], (r, c, idx)
            seen += 1
    return seen


@pytest.mark.parametrize("axes", [NDHWC, NCDHW])
def test_an_activation_shows_its_depth_slices_at_a_batch_index_and_channel(axes):
    shape = {NDHWC: (2, 3, 4, 5, 3), NCDHW: (2, 3, 3, 4, 5)}[axes]
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    st = ViewState()
    st.show(a, axes, "x")
    assert st.montage_mode and st.depth_montage
    n, c = axes.index("N"), axes.index("C")
    assert st.fixed_axes() == [n, c]
    st.index = {n: 1, c: 2}
    (pic,) = st.pictures()
    assert pic.data.shape == (4 + 1 + 4, 2 * (5 + 1) - 1)  # 2 x 2 tiles of H x W, one empty
    assert _every_pixel_is_its_element(st, a) == 3 * 4 * 5  # every element of (n=1, c=2)
    d = axes.index("D")
    sl = [slice(None)] * 5
    sl[n], sl[c], sl[d] = 1, 2, 2
    np.testing.assert_array_equal(pic.data[5:, :5], a[tuple(sl)])  # the third slice
    assert np.isnan(pic.data[5:, 6:]).all()  # the empty fourth tile
    assert st.caption().startswith("x: the 3 depth slices (D = row + column), each H (4) down")
    rows, cols, row_ticks, col_ticks = st.axis_labels()
    assert (rows, cols) == ("D +", "D")
    assert [t for _, t in row_ticks] == ["0", "2"] and [t for _, t in col_ticks] == ["0", "1"]


def test_a_3d_filter_shows_each_out_channels_depth_slices_side_by_side():
    w = np.random.default_rng(0).standard_normal((2, 3, 2, 2, 3))
    st = ViewState()
    st.show(w, FILTER3D, "w")
    assert st.montage_mode and not st.depth_montage and st.fixed_axes() == []
    assert _every_pixel_is_its_element(st, w) == w.size
    (pic,) = st.pictures()
    assert pic.data.shape == (2 * 4 - 1, 3 * 2 * 3 - 1) and pic.levels == (-1.0, 1.0)
    # tile (in 1, out 2, depth 1): rows 4..6, columns (2*2 + 1) * 3 ..
    top = np.max(np.abs(w))
    np.testing.assert_allclose(pic.data[4:7, 15:17], w[1, :, :, 1, 2] / top)
    assert "in (2) down × out × kd (6) across, tiles of kh × kw (3×2)" in st.caption(top)


def test_slice_mode_is_still_there_for_a_3d_tensor():
    a = np.zeros((1, 2, 3, 4, 2))
    st = ViewState()
    st.show(a, NDHWC)
    st.set_mode("slice")
    assert not st.montage_mode and st.slice_shape() == (3, 4)


def test_the_depth_grid_is_the_closest_to_the_preview_box():
    from engine.view.depth_tiles import depth_grid

    assert depth_grid(6, 8, 8) == (2, 3)  # 26 x 17 cells
    assert depth_grid(1, 8, 8) == (1, 1) and depth_grid(0, 8, 8) == (0, 0)
    assert depth_grid(16, 56, 56) == (4, 5)  # 284 x 227 cells
    assert depth_grid(4, 1, 30) == (4, 1)  # wide slices stack


def test_the_node_thumbnail_of_a_3d_activation_is_its_depth_slices():
    a = np.zeros((1, 3, 4, 4, 2), np.float32)
    a[0, 1, :, :, 0] = 1.0  # the second slice of channel 0
    img = thumbnail(a, NDHWC, size=(200, 100))  # a 2 x 2 grid of 4 x 4 tiles: 9 x 9 cells
    scale = img.shape[0] // 9
    assert img.shape == (9 * scale, 9 * scale, 4)
    assert tuple(img[0, 4 * scale]) == SEPARATOR  # the line after the first slice
    first, second = img[0, 0], img[0, 5 * scale]
    assert tuple(first) != tuple(second)  # the slice of ones is another colour
    assert tuple(img[5 * scale, 0]) == tuple(first)  # the third slice is zeros again
    assert tuple(img[5 * scale, 5 * scale]) == SEPARATOR  # no fourth slice: transparent
