"""engine.view.thumbnail without Qt: pixel colours, montage layout, NaN marks, downsampling."""

import ml_dtypes
import numpy as np
import pytest

from engine.view.colormaps import DIVERGING, LUTS, SEQUENTIAL
from engine.view.stats import montage
from engine.view.thumbnail import (
    MIN_SIDE,
    NONFINITE,
    SEPARATOR,
    colourise,
    finite_range,
    picture_size,
    thumbnail,
    thumbnail_view,
)

FILTER = ("kh", "kw", "in", "out")
NHWC = ("N", "H", "W", "C")


def rgba(cmap: str, index: int) -> tuple[int, ...]:
    return (*(int(v) for v in LUTS[cmap][index]), 255)


def cell(img: np.ndarray, row: int, col: int, scale: int) -> tuple[int, ...]:
    """The colour of cell (row, col) of a picture drawn at ``scale`` pixels per cell; every
    pixel of the cell has it."""
    block = img[row * scale:(row + 1) * scale, col * scale:(col + 1) * scale].reshape(-1, 4)
    assert (block == block[0]).all(), f"cell ({row}, {col}) is not one colour"
    return tuple(int(v) for v in block[0])


def test_2x2_positive_tensor_is_viridis_from_its_min_to_its_max():
    img = thumbnail(np.array([[0.0, 1.0], [2.0, 3.0]]), size=(96, 72))
    assert img.shape == (72, 72, 4) and img.dtype == np.uint8  # 36 px square cells
    assert cell(img, 0, 0, 36) == rgba(SEQUENTIAL, 0)
    assert cell(img, 1, 1, 36) == rgba(SEQUENTIAL, 255)
    assert cell(img, 0, 1, 36) == rgba(SEQUENTIAL, int(1 / 3 * 256))
    assert cell(img, 1, 0, 36) == rgba(SEQUENTIAL, int(2 / 3 * 256))


def test_2x2_tensor_with_negatives_is_diverging_and_symmetric_around_zero():
    img = thumbnail(np.array([[-4.0, 0.0], [2.0, 4.0]]), size=(20, 20))
    assert img.shape == (20, 20, 4)
    assert cell(img, 0, 0, 10) == rgba(DIVERGING, 0)
    assert cell(img, 1, 1, 10) == rgba(DIVERGING, 255)
    assert cell(img, 0, 1, 10) == rgba(DIVERGING, 128)  # 0 sits in the middle of the map
    assert cell(img, 1, 0, 10) == rgba(DIVERGING, 192)


def test_a_negative_value_outside_the_shown_slice_makes_the_map_diverging_like_the_viewer():
    a = np.ones((2, 3, 3, 1))
    a[1, 0, 0, 0] = -5.0  # N = 1 is not the default slice (N = 0)
    view = thumbnail_view(a, NHWC)
    assert view.cmap == DIVERGING and view.levels == (-1.0, 1.0)
    assert thumbnail_view(np.abs(a), NHWC).cmap == SEQUENTIAL


def test_3x3x2x2_filter_is_a_montage_of_in_x_out_tiles_with_transparent_separators():
    w = np.arange(36, dtype=np.float64).reshape(3, 3, 2, 2) - 10.0
    view = thumbnail_view(w, FILTER)
    assert (view.kind, view.cells, view.cmap, view.levels) == ("montage", (7, 7), DIVERGING,
                                                               (-1.0, 1.0))
    img = thumbnail(w, FILTER, size=(96, 72))
    assert img.shape == (70, 70, 4)  # 7 x 7 cells of 10 px
    top = np.abs(w).max()
    for i in range(2):
        for o in range(2):
            for r in range(3):
                for c in range(3):
                    want = int(np.floor((w[r, c, i, o] / top + 1) * 128))
                    got = cell(img, i * 4 + r, o * 4 + c, 10)
                    assert got == rgba(DIVERGING, min(want, 255)), (r, c, i, o)
    for k in range(7):
        assert cell(img, 3, k, 10) == SEPARATOR and cell(img, k, 3, 10) == SEPARATOR


def test_nan_and_infinite_cells_get_the_nonfinite_colour():
    a = np.array([[1.0, np.nan, 3.0], [np.inf, 2.0, -np.inf]])
    img = thumbnail(a, size=(30, 20))
    assert cell(img, 0, 1, 10) == NONFINITE
    assert cell(img, 1, 0, 10) == NONFINITE and cell(img, 1, 2, 10) == NONFINITE
    assert cell(img, 0, 0, 10) != NONFINITE
    w = np.ones((2, 2, 1, 1))
    w[1, 1, 0, 0] = np.inf
    w[0, 1, 0, 0] = np.nan
    img = thumbnail(w, FILTER, size=(20, 20))
    assert cell(img, 1, 1, 10) == NONFINITE and cell(img, 0, 1, 10) == NONFINITE
    assert cell(img, 0, 0, 10) == rgba(DIVERGING, 255)  # 1 / max finite |w| = 1


def test_bool_tensor_has_two_colours_even_when_constant():
    img = thumbnail(np.array([[True, False]]), size=(20, 10))
    assert cell(img, 0, 0, 10) == rgba(SEQUENTIAL, 255)
    assert cell(img, 0, 1, 10) == rgba(SEQUENTIAL, 0)
    assert cell(thumbnail(np.array([[True, True]]), size=(20, 10)), 0, 0, 10) == \
        rgba(SEQUENTIAL, 255)


def test_scalars_and_vectors_are_one_row_at_least_min_side_pixels_thick():
    assert thumbnail(np.float32(2.5)).shape == (72, 72, 4)
    strip = thumbnail(np.linspace(-1, 1, 500), size=(96, 72))
    assert strip.shape == (MIN_SIDE, 96, 4)
    assert tuple(strip[0, 0]) == rgba(DIVERGING, 0) and tuple(strip[-1, -1]) == \
        rgba(DIVERGING, 255)
    assert thumbnail(np.zeros((0, 3))).shape == (0, 0, 4)


def test_downsampled_1000x1000_checker_keeps_its_blocks_and_its_single_extremes():
    blocks = (np.arange(1000) // 250)[:, None] + (np.arange(1000) // 250)[None, :]
    a = np.where(blocks % 2 == 0, 1.0, 2.0)  # 4 x 4 checker of 250-cell squares in [1, 2]
    a[123, 877] = 10.0  # one spike (max) in the top-right square
    a[900, 40] = -10.0  # one dip (min) in the bottom-left square
    img = thumbnail(a, size=(96, 72))
    assert img.shape == (72, 72, 4)
    lut = LUTS[DIVERGING]  # the dip makes the map diverging over [-10, 10]
    assert (img[123 * 72 // 1000, 877 * 72 // 1000, :3] == lut[255]).all()
    assert (img[900 * 72 // 1000, 40 * 72 // 1000, :3] == lut[0]).all()
    one, two = lut[int(11 / 20 * 256)], lut[int(12 / 20 * 256)]
    for br in range(4):
        for bc in range(4):
            y, x = br * 18 + 9, bc * 18 + 9  # the middle of each square
            assert (img[y, x, :3] == (one if (br + bc) % 2 == 0 else two)).all(), (br, bc)
    assert int((img[..., :3] == lut[255]).all(-1).sum()) == 1  # the spike is one pixel
    nan = a.copy()
    nan[500, 500] = np.nan
    assert int((thumbnail(nan)[..., :] == NONFINITE).all(-1).sum()) == 1


def test_large_filter_is_sampled_without_separators_and_scaled_by_its_max():
    w = np.full((5, 5, 40, 60), 0.5, np.float32)
    w[2, 2, 0, 0] = -2.0
    view = thumbnail_view(w, FILTER)
    assert view.cells == (40 * 6 - 1, 60 * 6 - 1)
    img = thumbnail(w, FILTER, size=(96, 72))
    assert img.shape == picture_size(view.cells, (96, 72)) + (4,) == (64, 96, 4)
    assert (img[..., 3] == 255).all()  # no separators when reduced
    colours = {tuple(p) for p in img.reshape(-1, 4)[:, :3]}
    assert tuple(LUTS[DIVERGING][int((0.25 + 1) * 128)]) in colours


def test_colourise_matches_a_montage_of_the_viewer_and_half_precision_dtypes():
    w = np.random.default_rng(3).standard_normal((3, 3, 2, 4)).astype(ml_dtypes.bfloat16)
    want = colourise(montage(w, "global"), (-1.0, 1.0), DIVERGING)
    img = thumbnail(w, FILTER, size=(15, 7))  # fits at one pixel per cell
    sep = img[..., 3] == 0
    assert img.shape == want.shape
    assert (img[~sep] == want[~sep]).all()
    assert finite_range(np.array([np.nan, -np.inf, 3.0, -1.0])) == (-1.0, 3.0)
    assert finite_range(np.array([np.nan])) is None


@pytest.mark.parametrize("shape", [(1, 1), (3, 1), (1, 300), (300, 1), (90, 97), (2000, 3)])
def test_picture_size_fits_the_box_and_keeps_square_cells_when_it_can(shape):
    h, w = picture_size(shape, (96, 72))
    assert MIN_SIDE <= h <= 72 and MIN_SIDE <= w <= 96
    img = thumbnail(np.arange(np.prod(shape), dtype=float).reshape(shape))
    assert img.shape == (h, w, 4)


@pytest.mark.parametrize(("shape", "axes"), [((2, 30, 40, 3), NHWC), ((5, 5, 40, 60), FILTER),
                                             ((3, 3, 2, 2), FILTER), ((700,), None)])
@pytest.mark.parametrize("sign", [1.0, -1.0, 0.0])
def test_a_callers_value_range_scan_gives_the_same_picture(shape, axes, sign):
    from engine.view.thumbnail import value_range

    a = np.abs(np.random.default_rng(5).standard_normal(shape)) * sign
    a.reshape(-1)[-1] = -np.inf  # the only negative when sign >= 0: not finite, not diverging
    a.reshape(-1)[0] = np.nan
    scan = value_range(a)
    assert scan[1] is True
    assert (thumbnail(a, axes, scan=scan) == thumbnail(a, axes)).all()
    assert thumbnail_view(a, axes, scan) == thumbnail_view(a, axes)


def test_extreme_and_degenerate_levels_give_valid_colours():
    big = np.finfo(np.float64).max
    img = thumbnail(np.array([[big, -big, 0.0]]), size=(30, 10))
    assert cell(img, 0, 0, 10) == rgba(DIVERGING, 255)
    assert cell(img, 0, 1, 10) == rgba(DIVERGING, 0)
    assert cell(img, 0, 2, 10) == rgba(DIVERGING, 128)
    const = thumbnail(np.full((2, 2), 1e20), size=(20, 20))  # 1e20 +- 0.5 is 1e20: no span
    assert (const[..., 3] == 255).all() and (const == const[0, 0]).all()
    assert (thumbnail(np.full((3, 3), np.nan)) == NONFINITE).all()
    for dtype in (np.int32, np.int64, np.uint8, np.bool_):
        a = (np.random.default_rng(1).standard_normal((1, 300, 200, 2)) * 100).astype(dtype)
        assert thumbnail(a, NHWC).shape == (72, 48, 4)
