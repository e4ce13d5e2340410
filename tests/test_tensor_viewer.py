"""The tensor viewer driven as a user would: axis pickers, montage, export, copy, compare."""

import numpy as np
import pytest
from PySide6 import QtWidgets

from app.tensor_viewer import TensorViewer
from engine.tensor_stats import montage


@pytest.fixture
def viewer(qtbot):
    v = TensorViewer()
    qtbot.addWidget(v)
    v.resize(900, 500)
    v.show()
    return v


def test_activation_shows_h_by_w_slice_and_stats(viewer):
    a = np.random.default_rng(0).standard_normal((2, 5, 6, 3)).astype(np.float32)
    viewer.show_tensor(a, ("N", "H", "W", "C"), "x")
    np.testing.assert_array_equal(viewer.current_image(), a[0, :, :, 0])
    text = viewer.stats_label.text()
    assert f"min {a.min():.6g}" in text and f"max {a.max():.6g}" in text
    viewer.index_spins[3].setValue(2)  # the user picks channel 2
    viewer.index_spins[0].setValue(1)
    np.testing.assert_array_equal(viewer.current_image(), a[1, :, :, 2])
    viewer.row_combo.setCurrentIndex(3)  # rows = C, cols = W
    viewer.index_spins[1].setValue(4)
    np.testing.assert_array_equal(viewer.current_image(), a[1, 4, :, :].T)
    assert not viewer.index_spins[3].isVisible() and viewer.index_spins[1].isVisible()


def test_filter_opens_as_montage_and_scaling_toggles(viewer):
    w = np.random.default_rng(1).standard_normal((3, 3, 4, 5))
    viewer.show_tensor(w, ("kh", "kw", "in", "out"), "dw")
    assert viewer.mode_combo.currentText() == "montage"
    np.testing.assert_array_equal(viewer.current_image(), montage(w, "global"))
    viewer.scale_combo.setCurrentText("tile")
    np.testing.assert_array_equal(viewer.current_image(), montage(w, "tile"))
    viewer.mode_combo.setCurrentText("slice")
    np.testing.assert_array_equal(viewer.current_image(), w[:, :, 0, 0])


def test_montage_is_not_offered_for_activations(viewer):
    viewer.show_tensor(np.ones((1, 4, 4, 2)), ("N", "H", "W", "C"))
    assert not viewer.mode_combo.model().item(1).isEnabled()


def test_export_npy_png_and_copy(viewer, tmp_path):
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    viewer.show_tensor(a, None, "t")
    viewer.export_npy(str(tmp_path / "t.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "t.npy"), a)
    assert viewer.export_png(str(tmp_path / "t.png"))
    assert (tmp_path / "t.png").stat().st_size > 1000
    text = viewer.copy_values()
    assert QtWidgets.QApplication.clipboard().text() == text
    assert text.splitlines()[1].split("\t") == ["4", "5", "6", "7"]


def test_table_and_histogram_follow_the_slice(viewer):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    viewer.show_tensor(a, None)
    model = viewer.table_model
    assert (model.rowCount(), model.columnCount()) == (3, 4)
    assert model.data(model.index(2, 3)) == "11"
    assert viewer.hist_counts.sum() == 24


def test_compare_side_by_side_with_difference(viewer):
    a = np.random.default_rng(2).standard_normal((1, 4, 4, 2))
    b = a.copy()
    b[0, 1, 2, 1] += 0.5
    viewer.compare(a, b, "before", "after", ("N", "H", "W", "C"))
    assert viewer.panels[1].isVisible() and viewer.panels[2].isVisible()
    assert viewer.max_abs_error == pytest.approx(0.5)
    viewer.index_spins[3].setValue(1)
    np.testing.assert_allclose(viewer.panels[2].data, (a - b)[0, :, :, 1])
    assert "max abs error 0.5" in viewer.stats_label.text()
    viewer.grab().save("/tmp/viewer_compare.png")
