"""The tensor viewer driven as a user would: axis pickers, index spin boxes, montage, scaling,
export, copy, hover read-out and side-by-side compare; every check is against NumPy."""

import ml_dtypes
import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from app.viewer.tensor_viewer import TABLE_LIMIT, TensorViewer
from engine.view.stats import diff_stats, montage

Qt = QtCore.Qt
NHWC = ("N", "H", "W", "C")
FILTER = ("kh", "kw", "in", "out")


@pytest.fixture
def viewer(qtbot):
    v = TensorViewer()
    qtbot.addWidget(v)
    v.resize(1100, 420)
    v.show()
    qtbot.waitExposed(v)
    return v


def pick(qtbot, combo, text):
    """Choose ``text`` in a combo box as a user would: open its list, go to the item, Enter."""
    target = combo.findText(text)
    assert target >= 0, f"{text!r} not in {[combo.itemText(i) for i in range(combo.count())]}"
    qtbot.mouseClick(combo, Qt.LeftButton)
    view = combo.view()
    qtbot.waitUntil(view.isVisible)
    for _ in range(combo.count()):
        row = view.currentIndex().row()
        if row == target:
            break
        qtbot.keyClick(view, Qt.Key_Down if target > row else Qt.Key_Up)
    qtbot.keyClick(view, Qt.Key_Return)
    qtbot.waitUntil(lambda: not view.isVisible())
    assert combo.currentIndex() == target


def step(qtbot, spin, value):
    """Set a spin box with the arrow keys."""
    spin.setFocus()
    key = Qt.Key_Up if value > spin.value() else Qt.Key_Down
    for _ in range(abs(value - spin.value())):
        qtbot.keyClick(spin, key)
    assert spin.value() == value


def hover(qtbot, panel, x, y):
    """The mouse moves over image coordinates (x = column, y = row) of a panel: the scene's
    mouse-move signal, as pyqtgraph emits it (offscreen QTest moves reach the scene only once)."""
    panel.plot.scene().sigMouseMoved.emit(panel.plot.vb.mapViewToScene(QtCore.QPointF(x, y)))


def test_activation_slice_follows_axis_pickers_and_index_spin_boxes(qtbot, viewer):
    a = np.random.default_rng(0).standard_normal((2, 5, 6, 3)).astype(np.float32)
    viewer.show_tensor(a, NHWC, "x.output")
    assert viewer.row_combo.currentText() == "H (5)" and viewer.col_combo.currentText() == "W (6)"
    np.testing.assert_array_equal(viewer.current_image(), a[0, :, :, 0])
    spins = viewer.index_spins
    assert [spins[ax].isVisible() for ax in range(4)] == [True, False, False, True]
    step(qtbot, spins[3], 2)  # the user picks channel 2, then batch 1
    np.testing.assert_array_equal(viewer.current_image(), a[0, :, :, 2])
    with qtbot.waitSignal(viewer.view_changed):
        step(qtbot, spins[0], 1)
    np.testing.assert_array_equal(viewer.current_image(), a[1, :, :, 2])
    assert "N = 1, C = 2" in viewer.info_label.text()
    spins[0].setFocus()  # typing a number replaces the value (the " / 1" suffix stays)
    qtbot.keyClick(spins[0], Qt.Key_A, Qt.ControlModifier)
    qtbot.keyClicks(spins[0], "0")
    qtbot.keyClick(spins[0], Qt.Key_Return)
    assert spins[0].text() == "0 / 1"
    np.testing.assert_array_equal(viewer.current_image(), a[0, :, :, 2])
    step(qtbot, spins[0], 1)
    pick(qtbot, viewer.row_combo, "C (3)")  # rows = C, cols = W
    assert [spins[ax].isVisible() for ax in range(4)] == [True, True, False, False]
    step(qtbot, spins[1], 4)
    np.testing.assert_array_equal(viewer.current_image(), a[1, 4, :, :].T)
    assert viewer.panels[0].plot.getAxis("left").labelText == "C"
    assert viewer.panels[0].plot.getAxis("bottom").labelText == "W"


def test_picking_the_axis_the_other_picker_shows_swaps_them(qtbot, viewer):
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    viewer.show_tensor(a, NHWC)
    pick(qtbot, viewer.row_combo, "W (4)")  # W was the column axis: H moves to the columns
    assert viewer.col_combo.currentText() == "H (3)"
    np.testing.assert_array_equal(viewer.current_image(), a[0, :, :, 0].T)
    pick(qtbot, viewer.col_combo, "W (4)")  # and back
    assert viewer.row_combo.currentText() == "H (3)"
    np.testing.assert_array_equal(viewer.current_image(), a[0, :, :, 0])
    viewer.set_view_axes(3, 0)  # the same through the API
    np.testing.assert_array_equal(viewer.current_image(), a[:, 0, 0, :].T)
    assert viewer.row_combo.currentText() == "C (5)"
    with pytest.raises(ValueError, match="must differ"):
        viewer.set_view_axes(1, 1)


def test_nchw_defaults_to_h_by_w_and_unknown_axes_to_the_last_two(qtbot, viewer):
    a = np.random.default_rng(1).standard_normal((2, 3, 4, 5))
    viewer.show_tensor(a, ("N", "C", "H", "W"))
    np.testing.assert_array_equal(viewer.current_image(), a[0, 0])
    viewer.show_tensor(a)
    assert viewer.axes == ("d0", "d1", "d2", "d3")
    np.testing.assert_array_equal(viewer.current_image(), a[0, 0])
    assert not viewer.mode_combo.isVisible()  # unknown layout: no montage


def test_stats_line_shows_numpys_numbers(viewer):
    a = np.random.default_rng(2).standard_normal((4, 6, 5)).astype(ml_dtypes.bfloat16)
    a[0, 0, :3] = np.nan
    a[1, 2, 3] = -np.inf
    a[2, :, 0] = 0
    viewer.show_tensor(a, None, "t")
    f = a.astype(np.float64)
    good = f[np.isfinite(f)]
    text = viewer.stats_label.text()
    for part in ("shape [4, 6, 5]", "bfloat16", f"min {good.min():.6g}", f"max {good.max():.6g}",
                 f"mean {good.mean():.6g}", f"std {good.std():.6g}", "NaN 3", "Inf 1",
                 f"zeros {np.count_nonzero(f == 0) / f.size:.1%}"):
        assert part in text, (part, text)


def test_filter_opens_as_montage_and_scaling_toggles(qtbot, viewer):
    w = np.random.default_rng(3).standard_normal((3, 3, 4, 5))
    viewer.show_tensor(w, FILTER, "dw")
    assert viewer.mode_combo.currentText() == "montage" and viewer.scale_combo.isVisible()
    assert not viewer.row_combo.isVisible() and not any(
        s.isVisible() for s in viewer.index_spins.values())
    np.testing.assert_array_equal(viewer.current_image(), montage(w, "global"))
    assert viewer.panels[0].levels == (-1.0, 1.0) and viewer.panels[0].cmap_name == "CET-D1"
    left = viewer.panels[0].plot.getAxis("left")
    assert left.labelText == "in" and [t[1] for t in left._tickLevels[0]] == ["0", "1", "2", "3"]
    assert left._tickLevels[0][1][0] == 4 + 1  # tile 1 spans rows 4..6: tick at its centre
    pick(qtbot, viewer.scale_combo, "tile")
    np.testing.assert_array_equal(viewer.current_image(), montage(w, "tile"))
    assert "of its tile" in viewer.info_label.text()
    pick(qtbot, viewer.mode_combo, "slice")
    assert not viewer.scale_combo.isVisible()
    np.testing.assert_array_equal(viewer.current_image(), w[:, :, 0, 0])
    step(qtbot, viewer.index_spins[2], 2)
    step(qtbot, viewer.index_spins[3], 4)
    np.testing.assert_array_equal(viewer.current_image(), w[:, :, 2, 4])


def test_depthwise_filter_montage_has_multiplier_columns(viewer):
    w = np.random.default_rng(4).standard_normal((2, 3, 4, 2)).astype(np.float32)
    viewer.show_tensor(w, ("kh", "kw", "in", "multiplier"), "dw")
    np.testing.assert_array_equal(viewer.current_image(), montage(w, "global"))
    assert viewer.current_image().shape == (4 * 3 - 1, 2 * 4 - 1)
    assert viewer.panels[0].plot.getAxis("bottom").labelText == "multiplier"


def test_same_layout_keeps_the_users_view_a_new_layout_resets_it(qtbot, viewer):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 4, 4, 3)), rng.standard_normal((2, 4, 4, 3))
    viewer.show_tensor(a, NHWC)
    step(qtbot, viewer.index_spins[3], 2)
    viewer.show_tensor(b, NHWC)  # the same block after an edit: still channel 2
    np.testing.assert_array_equal(viewer.current_image(), b[0, :, :, 2])
    w = rng.standard_normal((3, 3, 2, 2))
    viewer.show_tensor(w, FILTER)
    pick(qtbot, viewer.mode_combo, "slice")
    viewer.show_tensor(w * 2, FILTER)  # same filter shape: the user's slice mode stays
    assert viewer.mode_combo.currentText() == "slice"
    viewer.show_tensor(rng.standard_normal((3, 3, 2, 5)), FILTER)  # a new filter: montage
    assert viewer.mode_combo.currentText() == "montage"


def test_montage_is_not_offered_for_activations(viewer):
    viewer.show_tensor(np.ones((1, 4, 4, 2)), NHWC)
    assert not viewer.mode_combo.model().item(1).isEnabled()
    assert not viewer.mode_combo.isVisible() and viewer.mode_combo.currentText() == "slice"


def test_signed_data_uses_a_diverging_map_centred_at_zero(viewer):
    a = np.array([[[[-1.0], [3.0]], [[0.5], [2.0]]]])
    viewer.show_tensor(a, NHWC)
    assert viewer.panels[0].cmap_name == "CET-D1" and viewer.panels[0].levels == (-3.0, 3.0)
    viewer.show_tensor(np.abs(a) + 1, NHWC)
    assert viewer.panels[0].cmap_name == "viridis" and viewer.panels[0].levels == (1.5, 4.0)


def test_export_npy_and_png_through_the_buttons(qtbot, viewer, tmp_path, monkeypatch):
    a = np.random.default_rng(6).standard_normal((1, 8, 9, 2)).astype(ml_dtypes.bfloat16)
    viewer.show_tensor(a, NHWC, "t")
    target = {}
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        lambda *args, **kw: (str(target["path"]), ""))
    target["path"] = tmp_path / "t.npy"
    qtbot.mouseClick(viewer.npy_button, Qt.LeftButton)
    back = np.load(tmp_path / "t.npy")
    assert back.dtype == np.float32  # .npy has no bfloat16; float32 holds it exactly
    np.testing.assert_array_equal(back, a.astype(np.float32))
    target["path"] = tmp_path / "t.png"
    qtbot.mouseClick(viewer.png_button, Qt.LeftButton)
    img = QtGui.QImage(str(tmp_path / "t.png"))
    assert not img.isNull() and img.width() > 300 and img.height() > 150
    colours = {img.pixel(x, y) for x in range(0, img.width(), 3) for y in range(0, img.height(), 3)}
    assert len(colours) > 20  # a picture, not a blank rectangle


def test_export_png_while_another_tab_is_shown_and_errors_are_reported(qtbot, viewer, tmp_path,
                                                                        monkeypatch):
    viewer.show_tensor(np.arange(12.0).reshape(3, 4))
    viewer.tabs.setCurrentIndex(2)
    assert viewer.export_png(str(tmp_path / "x.png"))
    assert QtGui.QImage(str(tmp_path / "x.png")).width() > 300
    warned = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning", lambda *a: warned.append(a[2]))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        lambda *a, **k: (str(tmp_path / "missing" / "t.npy"), ""))
    qtbot.mouseClick(viewer.npy_button, Qt.LeftButton)
    assert warned and "Could not write" in warned[0] and "missing" in warned[0]


def test_copy_values_puts_the_exact_slice_on_the_clipboard(qtbot, viewer):
    a = np.random.default_rng(7).standard_normal((2, 3, 4)).astype(np.float32)
    viewer.show_tensor(a, None)
    step(qtbot, viewer.index_spins[0], 1)
    qtbot.mouseClick(viewer.copy_button, Qt.LeftButton)
    text = QtWidgets.QApplication.clipboard().text()
    rows = [line.split("\t") for line in text.splitlines()]
    np.testing.assert_array_equal(np.array(rows, dtype=np.float32), a[1])
    viewer.show_tensor(np.arange(12, dtype=np.float64).reshape(3, 4))
    assert viewer.copy_values().splitlines()[1].split("\t") == ["4", "5", "6", "7"]


def test_copy_of_a_montage_gives_unscaled_values_and_empty_separators(viewer):
    w = np.arange(1, 17, dtype=np.float32).reshape(2, 2, 2, 2)
    viewer.show_tensor(w, FILTER)
    rows = [line.split("\t") for line in viewer.copy_values().splitlines()]
    assert rows[0] == [str(int(w[0, 0, 0, 0])), str(int(w[0, 1, 0, 0])), "",
                       str(int(w[0, 0, 0, 1])), str(int(w[0, 1, 0, 1]))]
    assert rows[2] == [""] * 5 and len(rows) == 5


def test_table_shows_the_slice_and_is_capped(qtbot, viewer):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    viewer.show_tensor(a, None)
    step(qtbot, viewer.index_spins[0], 1)
    model = viewer.table_model
    assert (model.rowCount(), model.columnCount()) == (3, 4)
    for r in range(3):
        for c in range(4):
            # the whole value (issue 24: no "1.71429" for 1.7142857), its index in the tooltip
            assert np.float32(model.data(model.index(r, c))) == a[1, r, c]
            tip = model.data(model.index(r, c), Qt.ToolTipRole)
            assert tip.startswith(f"[d0 1, d1 {r}, d2 {c}] = ")
            assert np.float32(tip.rpartition(" = ")[2]) == a[1, r, c]
    big = np.zeros((300, 260), np.float32)
    viewer.show_tensor(big)
    assert (model.rowCount(), model.columnCount()) == (TABLE_LIMIT, TABLE_LIMIT)
    assert "300 × 260" in viewer.table_info.text() and "first 256 × 256" in viewer.table_info.text()
    assert len(viewer.copy_values().splitlines()) == 300


def test_histogram_counts_the_finite_values(viewer):
    a = np.random.default_rng(8).standard_normal(500)
    a[:7] = np.nan
    a[7] = np.inf
    viewer.show_tensor(a)
    assert viewer.hist_counts.sum() == 492
    counts, edges = np.histogram(a[8:], bins=len(viewer.hist_counts))
    np.testing.assert_array_equal(viewer.hist_counts, counts)
    np.testing.assert_array_equal(viewer.hist_edges, edges)
    assert "8 NaN/Inf not shown" in viewer.histogram.getPlotItem().titleLabel.text


def test_hover_reads_out_the_tensor_element_under_the_mouse(qtbot, viewer):
    a = np.random.default_rng(9).standard_normal((2, 5, 6, 3)).astype(np.float32)
    viewer.show_tensor(a, NHWC)
    step(qtbot, viewer.index_spins[3], 1)
    panel = viewer.panels[0]
    hover(qtbot, panel, 3.9, 2.8)  # column 4, row 3
    assert viewer.hover_label.text() == f"[N 0, H 3, W 4, C 1] = {a[0, 3, 4, 1]:.7g}"
    hover(qtbot, panel, 9, 2)  # beside the image
    assert viewer.hover_label.text() == ""
    w = np.random.default_rng(10).standard_normal((3, 3, 2, 4))
    viewer.show_tensor(w, FILTER)
    assert viewer.describe_pixel(4 + 2, 3 * 4 + 1) == f"[kh 2, kw 1, in 1, out 3] = {w[2, 1, 1, 3]:.7g}"
    assert viewer.describe_pixel(3, 0) == ""  # separator line


def test_compare_side_by_side_with_difference_and_errors(qtbot, viewer):
    a = np.random.default_rng(11).standard_normal((1, 4, 5, 2))
    b = a.copy()
    b[0, 1, 2, 1] += 0.5
    viewer.compare(a, b, "before", "after", NHWC)
    assert all(p.isVisible() for p in viewer.panels)
    assert viewer.max_abs_error == pytest.approx(0.5)
    assert viewer.diff == diff_stats(a, b)
    step(qtbot, viewer.index_spins[3], 1)
    for panel, want in zip(viewer.panels, (a[0, :, :, 1], b[0, :, :, 1], (a - b)[0, :, :, 1]),
                           strict=True):
        np.testing.assert_array_equal(panel.data, want)
    assert viewer.panels[0].levels == viewer.panels[1].levels  # same colours for same values
    assert viewer.panels[2].levels == (-0.5, 0.5) and viewer.panels[2].cmap_name == "CET-D1"
    text = viewer.stats_label.text()
    assert "max abs error 0.5 at [0, 1, 2, 1]" in text
    assert f"max rel error {0.5 / abs(b[0, 1, 2, 1]):.6g}" in text
    assert f"before:  shape [1, 4, 5, 2]  float64  min {a.min():.6g}" in text
    assert "before − after" in viewer.panels[2].plot.titleLabel.text
    panel = viewer.panels[1]
    hover(qtbot, panel, 2, 1)
    assert viewer.hover_label.text() == (f"[N 0, H 1, W 2, C 1] = {a[0, 1, 2, 1]:.7g} vs "
                                         f"{b[0, 1, 2, 1]:.7g}  (a − b = -0.5)")
    viewer.grab().save("/tmp/viewer_compare.png")


def test_compare_filters_as_montages_on_a_common_scale(qtbot, viewer):
    a = np.random.default_rng(12).standard_normal((3, 3, 2, 3))
    viewer.compare(a, 2 * a, "w", "2w", FILTER)
    top = 2 * np.abs(a).max()
    np.testing.assert_allclose(viewer.panels[0].data, montage(a, "none") / top)
    np.testing.assert_allclose(viewer.panels[1].data, montage(a, "none") * 2 / top)
    np.testing.assert_allclose(viewer.panels[2].data, montage(-a, "none") / top)  # same scale
    assert viewer.max_rel_error == pytest.approx(0.5)
    pick(qtbot, viewer.scale_combo, "tile")
    np.testing.assert_array_equal(viewer.panels[0].data, viewer.panels[1].data)


def test_compare_of_different_shapes_says_so(viewer):
    viewer.compare(np.zeros((2, 3)), np.zeros((3, 2)), "p", "q")
    assert "p shape [2, 3] and q shape [3, 2] differ" in viewer.stats_label.text()
    assert viewer.other is None and not viewer.panels[1].isVisible()


def test_empty_scalar_vector_and_5d_tensors_and_clear(qtbot, viewer):
    viewer.show_tensor(np.zeros((0, 3), np.float32), None, "e")
    assert "e is empty" in viewer.placeholder.text() and viewer.placeholder.isVisible()
    assert "min -" in viewer.stats_label.text()
    viewer.show_tensor(np.float32(2.5))
    np.testing.assert_array_equal(viewer.current_image(), [[2.5]])
    assert not viewer.placeholder.isVisible() and viewer.panels[0].isVisible()
    viewer.show_tensor(1 + np.arange(5.0) * np.finfo(np.float64).eps)  # a range of 4 ulps
    assert viewer.hist_counts.sum() == 5
    viewer.show_tensor(np.arange(5.0))
    np.testing.assert_array_equal(viewer.current_image(), [[0, 1, 2, 3, 4]])
    assert viewer.describe_pixel(0, 3) == "[d0 3] = 3"
    x = np.random.default_rng(13).standard_normal((2, 2, 3, 4, 5))
    viewer.show_tensor(x)
    step(qtbot, viewer.index_spins[1], 1)
    np.testing.assert_array_equal(viewer.current_image(), x[0, 1, 0])
    viewer.clear()
    assert viewer.array is None and viewer.stats_label.text() == "No tensor selected."
    assert viewer.placeholder.isVisible() and not viewer.copy_button.isEnabled()
    assert viewer.hist_counts.size == 0 and viewer.table_model.rowCount() == 0


def test_screenshot_of_a_filter_gradient(qtbot, viewer):
    w = np.random.default_rng(14).standard_normal((3, 3, 8, 16)).astype(np.float32)
    viewer.show_tensor(w, FILTER, "grad.output")
    assert viewer.grab().save("/tmp/viewer.png")


def test_3x3_slice_has_integer_ticks_at_cell_centres_and_no_empty_border(qtbot, viewer):
    a = np.arange(9.0).reshape(3, 3) - 4
    viewer.show_tensor(a, None, "s")
    plot = viewer.panels[0].plot
    assert plot.vb.viewRange() == [[-0.5, 2.5], [-0.5, 2.5]]
    for side in ("left", "bottom"):
        assert plot.getAxis(side)._tickLevels == [[(0.0, "0"), (1.0, "1"), (2.0, "2")]]
    hover(qtbot, viewer.panels[0], 2.4, 0.45)  # inside cell (row 0, col 2), near its edge
    assert viewer.hover_label.text() == "[d0 0, d1 2] = -2"
    viewer.show_tensor(np.zeros((2, 7)))  # a new shape shows exactly the new image
    assert plot.vb.viewRange() == [[-0.5, 6.5], [-0.5, 1.5]]


def test_boolean_tensor_shows_two_colours_and_a_false_true_legend(qtbot, viewer):
    m = np.array([[True, False, True], [False, False, True]])
    viewer.show_tensor(m, None, "mask")
    panel = viewer.panels[0]
    assert panel.legend_text() == "False\nTrue" and not panel.bar.isVisible()
    rgba = panel.image.getPixmap().toImage()
    colours = {(rgba.pixelColor(c, r).red(), rgba.pixelColor(c, r).green()) for r in range(2)
               for c in range(3)}
    assert len(colours) == 2  # exactly two colours: False and True
    assert rgba.pixelColor(0, 0) == rgba.pixelColor(2, 1) != rgba.pixelColor(1, 0)
    assert viewer.copy_values().splitlines() == ["True\tFalse\tTrue", "False\tFalse\tTrue"]
    assert viewer.table_model.data(viewer.table_model.index(0, 1)) == "False"
    viewer.show_tensor(np.arange(6.0).reshape(2, 3))  # numbers again: the colour bar is back
    assert panel.legend_text() == "" and panel.bar.isVisible()
    assert viewer.grab().save("/tmp/viewer_bool.png")


def test_colour_bar_labels_fit_in_the_bar_axis(qtbot, viewer):
    viewer.show_tensor(np.linspace(-6.5e-5, 6.5e-5, 12).reshape(3, 4), None, "small")
    qtbot.wait(10)
    axis = viewer.panels[0].bar.axis
    lo, hi = viewer.panels[0].levels
    metrics = QtGui.QFontMetrics(axis.style.get("tickFont") or axis.font())
    widest = 0
    for spacing, values in axis.tickValues(lo, hi, axis.height() or 200):
        for text in axis.tickStrings(values, axis.scale, spacing):
            widest = max(widest, metrics.horizontalAdvance(text))
    assert widest > 0
    assert widest + axis.style["tickTextOffset"][0] + abs(axis.style["tickLength"]) <= \
        axis.width()
    assert viewer.grab().save("/tmp/viewer_small_values.png")


def test_compare_side_choice_drives_table_copy_save_and_histogram(qtbot, viewer, tmp_path,
                                                                    monkeypatch):
    rng = np.random.default_rng(15)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    viewer.compare(a, b, "pinned", "now", sources=("g.output", "g.output"))
    buttons = viewer.side_buttons
    assert viewer.side_choice.isVisible() and buttons["left"].isChecked()
    assert viewer.npy_button.text() == "Save left .npy"
    assert "pinned" in viewer.npy_button.toolTip()
    qtbot.mouseClick(buttons["right"], Qt.LeftButton)
    assert buttons["right"].isChecked() and not buttons["left"].isChecked()
    assert viewer.copy_button.text() == "Copy right values"
    qtbot.mouseClick(viewer.copy_button, Qt.LeftButton)
    rows = QtWidgets.QApplication.clipboard().text().splitlines()
    np.testing.assert_array_equal(np.array([r.split("\t") for r in rows], np.float32), b)
    assert np.float32(viewer.table_model.data(viewer.table_model.index(1, 2))) == b[1, 2]
    assert "of now" in viewer.table_info.text() and "right" in viewer.tabs.tabToolTip(2)
    np.testing.assert_array_equal(viewer.hist_counts,
                                  np.histogram(b.astype(np.float64), len(viewer.hist_counts))[0])
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        lambda *args, **kw: (str(tmp_path / "side.npy"), ""))
    qtbot.mouseClick(buttons["difference"], Qt.LeftButton)
    assert viewer.npy_button.text() == "Save difference .npy"
    qtbot.mouseClick(viewer.npy_button, Qt.LeftButton)
    np.testing.assert_array_equal(np.load(tmp_path / "side.npy"),
                                  a.astype(np.float64) - b.astype(np.float64))
    assert "g.output" in viewer.stats_label.toolTip()  # the ids, for who needs them
    viewer.show_tensor(a, None, "one")  # one tensor: no choice to make
    assert not viewer.side_choice.isVisible() and viewer.npy_button.text() == "Save .npy"


def test_a_new_layout_leaves_no_old_spin_box_on_screen(viewer):
    viewer.show_tensor(np.zeros((2, 4, 4, 3)), NHWC)
    old = [s for s in viewer.index_spins.values() if s.isVisible()]
    assert len(old) == 2  # N and C
    viewer.show_tensor(np.zeros((3, 3, 2, 2)), FILTER)  # a montage: no index to pick
    assert not any(s.isVisible() for s in old)
    spins = viewer.controls.findChildren(QtWidgets.QSpinBox)
    assert not any(s.isVisible() for s in spins)
