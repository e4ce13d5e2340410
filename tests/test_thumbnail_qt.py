"""engine.view.thumbnail against the viewer: the same colour tables as pyqtgraph, the same pixel
colours as a pyqtgraph ImageItem, and the same view, map and levels as the TensorViewer."""

import ml_dtypes
import numpy as np
import pyqtgraph as pg
import pyqtgraph.functions as fn
import pytest
from PySide6 import QtGui

from app.viewer.tensor_viewer import TensorViewer
from engine.view.colormaps import DIVERGING, LUTS, SEQUENTIAL
from engine.view.thumbnail import NONFINITE, SEPARATOR, colourise, thumbnail, thumbnail_view


@pytest.mark.parametrize("name", [DIVERGING, SEQUENTIAL])
def test_constant_tables_equal_pyqtgraphs_colour_maps(name):
    lut = pg.colormap.get(name).getLookupTable(nPts=256)
    assert LUTS[name].shape == (256, 3)
    assert (LUTS[name] == lut).all()


@pytest.mark.parametrize("name", [DIVERGING, SEQUENTIAL])
def test_colourise_gives_the_pixels_a_pyqtgraph_image_item_renders(qtbot, name):
    rng = np.random.default_rng(1)
    d = rng.standard_normal((40, 50)) * 3
    d[0, :5] = [-2.5, 2.5, 0.0, -100.0, 100.0]  # the levels, the middle, beyond both ends
    item = pg.ImageItem(axisOrder="row-major")
    item.setColorMap(pg.colormap.get(name))
    item.setImage(d, autoLevels=False, levels=(-2.5, 2.5))
    item.render()
    qimage = item.qimage.convertToFormat(QtGui.QImage.Format_RGBA8888)
    rendered = fn.ndarray_from_qimage(qimage)
    assert (colourise(d, (-2.5, 2.5), name) == rendered).all()


CASES = [
    ("NHWC with negatives", (2, 6, 7, 3), ("N", "H", "W", "C"), "float32", False),
    ("positive NHWC", (1, 9, 8, 2), ("N", "H", "W", "C"), "float64", True),
    ("filter", (3, 3, 4, 5), ("kh", "kw", "in", "out"), "float32", False),
    ("bfloat16 filter", (2, 3, 2, 2), ("kh", "kw", "in", "out"), "bfloat16", False),
    ("unnamed 3-D", (4, 8, 10), None, "float64", False),
    ("vector", (12,), ("C",), "float64", True),
]


@pytest.mark.parametrize(("what", "shape", "axes", "dtype", "positive"), CASES,
                         ids=[c[0] for c in CASES])
def test_thumbnail_shows_the_viewers_first_view_with_its_levels_and_map(
        qtbot, what, shape, axes, dtype, positive):
    a = np.random.default_rng(7).standard_normal(shape)
    a = (np.abs(a) if positive else a).astype(ml_dtypes.bfloat16 if dtype == "bfloat16"
                                             else dtype)
    viewer = TensorViewer()
    qtbot.addWidget(viewer)
    viewer.show_tensor(a, axes=axes, title=what)
    a[viewer.pixel_index(0, 1)] = np.nan  # a NaN where the view shows it
    viewer.show_tensor(a, axes=axes, title=what)
    panel = viewer.panels[0]
    view = thumbnail_view(a, axes)
    assert view.cmap == panel.cmap_name
    assert view.levels == pytest.approx(panel.levels, rel=0, abs=0)
    shown = viewer.current_image()
    assert view.cells == shown.shape
    img = thumbnail(a, axes)
    scale = img.shape[0] // shown.shape[0]
    assert img.shape[:2] == (shown.shape[0] * scale, shown.shape[1] * scale)
    cells = img[scale // 2::scale, scale // 2::scale]  # one pixel per cell
    want = colourise(shown, panel.levels, panel.cmap_name)
    separators = np.isnan(shown) & (cells == SEPARATOR).all(-1)
    nonfinite = (cells == NONFINITE).all(-1)
    assert nonfinite.sum() == 1 and nonfinite[0, 1]
    plain = ~separators & ~nonfinite
    assert (cells[plain] == want[plain]).all()
