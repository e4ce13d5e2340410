"""engine.view.tensor_view without Qt: what the viewer shows, checked against hand-built arrays."""

import numpy as np
import pytest

from engine.view.stats import colour_levels, exact_text, finite_range, histogram, montage
from engine.view.tensor_view import ViewState, cell_ticks, image_range, tile_ticks

FILTER = ("kh", "kw", "in", "out")
NHWC = ("N", "H", "W", "C")


def test_montage_of_a_3x3x2x2_filter_is_the_hand_built_grid():
    w = np.arange(36, dtype=np.float32).reshape(3, 3, 2, 2)
    st = ViewState()
    assert st.show(w, FILTER, "grad")
    assert st.montage_mode
    values, blank = st.values()
    n = np.nan
    want = np.array([[w[r, c, i, o] if r < 3 and c < 3 else n
                      for o in range(2) for c in range(4)][:7]
                     for i in range(2) for r in range(4)][:7])
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(blank, np.isnan(want))
    (pic,) = st.pictures()
    np.testing.assert_allclose(pic.data, want / 35.0)  # global scale: max |w| is 35
    assert pic.levels == (-1.0, 1.0) and pic.diverging and not pic.boolean
    rows, cols, rt, ct = st.axis_labels()
    assert (rows, cols) == ("in", "out")
    assert rt == ct == [(1.0, "0"), (5.0, "1")]  # tile centres: rows 0..2 and 4..6
    assert st.pixel_index(5, 2) == (1, 2, 1, 0) and st.pixel_index(3, 0) is None


def test_ticks_of_a_3x3_slice_are_integers_at_cell_centres_and_the_range_is_the_image():
    st = ViewState()
    st.show(np.arange(9.0).reshape(3, 3))
    *_labels, rt, ct = st.axis_labels()
    assert rt == ct == [(0.0, "0"), (1.0, "1"), (2.0, "2")]
    assert image_range(st.pictures()[0].data.shape) == ((-0.5, 2.5), (-0.5, 2.5))
    assert image_range((3, 5)) == ((-0.5, 4.5), (-0.5, 2.5))


def test_long_axes_are_labelled_every_2nd_5th_10th_cell():
    assert [v for v, _ in cell_ticks(16)] == list(range(16))
    assert [v for v, _ in cell_ticks(17)] == list(range(0, 17, 2))
    assert [v for v, _ in cell_ticks(60)] == list(range(0, 60, 5))
    assert [label for _, label in cell_ticks(1000)][:3] == ["0", "100", "200"]
    assert len(tile_ticks(64, 3)) == 13 and tile_ticks(64, 3)[1] == (5 * 4 + 1, "5")


def test_compare_sides_left_right_and_difference():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 4, 5, 2)).astype(np.float32)
    b = rng.standard_normal((1, 4, 5, 2)).astype(np.float32)
    st = ViewState()
    st.compare(a, b, "before", "after", NHWC)
    st.index = {3: 1}
    assert st.side == "left" and st.side_tensor() is a
    np.testing.assert_array_equal(st.values()[0], a[0, :, :, 1])
    st.set_side("right")
    assert st.side_tensor() is b and st.side_title() == "after"
    np.testing.assert_array_equal(st.values()[0], b[0, :, :, 1])
    st.set_side("difference")
    np.testing.assert_array_equal(st.side_tensor(), a.astype(np.float64) - b)
    assert st.side_title() == "before − after"
    left, right, diff = st.pictures()
    assert left.levels == right.levels == colour_levels(True, a[0, :, :, 1], b[0, :, :, 1])
    np.testing.assert_array_equal(diff.data, (a.astype(np.float64) - b)[0, :, :, 1])
    assert diff.levels[0] == -diff.levels[1] and diff.title == "before − after"
    with pytest.raises(ValueError, match="side 'top'"):
        st.set_side("top")
    st.show(a, NHWC)  # one tensor again: the side chosen stays, but there is one tensor
    assert st.side_tensor() is a and st.side == "difference"


def test_booleans_are_two_values_without_a_colour_range():
    m = np.array([[True, False, True], [False, False, True]])
    st = ViewState()
    st.show(m, None, "mask")
    (pic,) = st.pictures()
    assert pic.boolean and pic.levels == (0.0, 1.0) and not pic.diverging
    np.testing.assert_array_equal(pic.data, m.astype(np.float64))
    assert st.describe_pixel(1, 2) == "[d0 1, d1 2] = True"
    assert exact_text(0.0, np.dtype(bool)) == "False"
    st.compare(m, ~m, "m", "not m")
    left, right, diff = st.pictures()
    assert left.boolean and right.boolean and not diff.boolean
    np.testing.assert_array_equal(diff.data, np.where(m, 1.0, -1.0))


def test_same_layout_keeps_axes_index_and_mode_a_new_layout_resets_them():
    st = ViewState()
    a = np.zeros((2, 3, 4, 5))
    assert st.show(a, NHWC)
    assert st.view_axes == (1, 2) and st.fixed_axes() == [0, 3]
    st.pick_axis("row", 3)
    st.index = {0: 1}
    assert not st.show(a + 1, NHWC)
    assert st.view_axes == (3, 2) and st.index == {0: 1}
    assert st.pick_axis("col", 3) == (2, 3)  # the axis the rows show: the two swap
    assert st.show(np.zeros((3, 3, 2, 2)), FILTER) and st.mode == "montage"
    st.set_mode("slice")
    assert not st.show(np.ones((3, 3, 2, 2)), FILTER) and st.mode == "slice"
    st.show(a, NHWC)
    st.set_mode("montage")  # not a filter: stays a slice
    assert not st.montage_mode


def test_caption_and_read_out_name_the_title_axes_and_fixed_indices():
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    st = ViewState()
    st.show(a, NHWC, "dy")
    st.index = {0: 1, 3: 2}
    assert st.caption() == "dy: H down × W across;  N = 1, C = 2"
    assert st.describe_pixel(2, 3) == f"[N 1, H 2, W 3, C 2] = {a[1, 2, 3, 2]:.7g}"
    assert st.describe_pixel(3, 0) == ""


def test_numbers_finite_range_levels_and_histogram():
    a = np.array([1.0, np.nan, -3.0, np.inf, 2.0])
    assert finite_range(a) == (-3.0, 2.0)
    assert finite_range(np.array([np.nan])) is None
    assert finite_range(np.array([True, False])) == (0.0, 1.0)
    assert colour_levels(True, a) == (-3.0, 3.0)
    assert colour_levels(False, np.array([2.0, 2.0])) == (1.5, 2.5)
    assert colour_levels(False, np.array([np.nan])) == (0.0, 1.0)
    v = np.random.default_rng(1).standard_normal(400)
    v[:4] = np.nan
    h = histogram(v)
    counts, edges = np.histogram(v[4:], bins=19)  # sqrt(396) -> 19 bins
    np.testing.assert_array_equal(h.counts, counts)
    np.testing.assert_array_equal(h.edges, edges)
    assert (h.finite, h.left_out) == (396, 4)
    assert histogram(np.full(3, np.nan)).counts.size == 0


def test_a_compared_montage_colours_the_difference_on_the_scale_of_both():
    """Seen comparing dW with its GradCheck (max abs error 2e-6 on values up to 19): the
    difference montage was divided by its own max, so it was as strongly coloured as the
    filters, under a caption saying "value / max |value| of both". Now an agreeing pair shows
    a blank difference and the caption is true of all three pictures."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 3, 2, 2)) * 10
    b = a + rng.normal(size=a.shape) * 1e-6
    st = ViewState()
    st.compare(a, b, "dW", "numeric", FILTER)
    assert st.montage_mode and st.scale == "global"
    diff = st.pictures()[2]
    top = np.abs(np.concatenate([a.ravel(), b.ravel()])).max()
    np.testing.assert_allclose(diff.data, montage(a - b, "global", top), equal_nan=True)
    assert np.nanmax(np.abs(diff.data)) < 1e-5
    assert "of both" in st.caption()
    st.scale = "tile"  # each tile by its own max: the difference's pattern shows
    assert np.nanmax(np.abs(st.pictures()[2].data)) == 1.0
