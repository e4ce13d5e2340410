"""The Geometry dock, driven as a user drives it: select a conv block on the canvas, play, drag
the slider, toggle the overlap map, change an attribute, export PNG and GIF."""

import numpy as np
from PIL import Image
from PySide6 import QtCore, QtGui, QtWidgets

from engine.explain.geometry_render import TAP_ON
from tests.app_support import mouse, view_point


def click_node(qtbot, window, node_id: str) -> None:
    """A click on the node's body in the canvas (what a user does to select it)."""
    pos = view_point(window, window.adapter.node(node_id).view)
    mouse(window, QtCore.QEvent.MouseButtonPress, pos)
    mouse(window, QtCore.QEvent.MouseButtonRelease, pos)
    qtbot.waitUntil(lambda: window.adapter.selected_ids() == [node_id])


def shown(view) -> np.ndarray:
    """The picture on screen, as RGB pixels."""
    img = view.picture.pixmap().toImage().convertToFormat(QtGui.QImage.Format_RGB888)
    rows = np.frombuffer(img.constBits(), np.uint8).reshape(img.height(), img.bytesPerLine())
    return rows[:, : 3 * img.width()].reshape(img.height(), img.width(), 3).copy()


def drag_slider(slider, end: QtCore.QPoint) -> None:
    """Press on the slider's handle, move with the button held to ``end``, release."""
    opt = QtWidgets.QStyleOptionSlider()
    slider.initStyleOption(opt)
    start = slider.style().subControlRect(QtWidgets.QStyle.CC_Slider, opt,
                                          QtWidgets.QStyle.SC_SliderHandle, slider).center()
    left = QtCore.Qt.LeftButton
    for kind, pos, buttons in ((QtCore.QEvent.MouseButtonPress, start, left),
                               (QtCore.QEvent.MouseMove, (start + end) / 2, left),
                               (QtCore.QEvent.MouseMove, end, left),
                               (QtCore.QEvent.MouseButtonRelease, end, QtCore.Qt.NoButton)):
        button = QtCore.Qt.NoButton if kind == QtCore.QEvent.MouseMove else left
        ev = QtGui.QMouseEvent(kind, QtCore.QPointF(pos), QtCore.QPointF(slider.mapToGlobal(pos)),
                               button, buttons, QtCore.Qt.NoModifier)
        QtWidgets.QApplication.sendEvent(slider, ev)


def open_dock(qtbot, window):
    window.geometry_dock.show()
    window.geometry_dock.raise_()
    view = window.geometry_view
    qtbot.waitUntil(view.isVisible)
    return view


def test_selecting_a_conv_block_shows_frame_0_and_play_steps(qtbot, grad_window):
    w = grad_window
    view = open_dock(qtbot, w)
    assert view.model is None and "conv block" in view.message.text()
    click_node(qtbot, w, "grad")
    assert view.node_id == "grad" and view.model.kind == "filter"
    assert view.model.frame_count == 9  # 3x3 filter taps
    assert view.frame == 0 and view.frame_label.text() == "tap 1 / 9"
    first = shown(view)
    assert first.shape[:2] == (view.image.height, view.image.width)
    np.testing.assert_array_equal(first, np.asarray(view.image.convert("RGB")))
    qtbot.mouseClick(view.play_button, QtCore.Qt.LeftButton)
    assert view.play_button.text() == "Pause"
    qtbot.waitUntil(lambda: view.frame >= 2, timeout=10_000)
    qtbot.mouseClick(view.play_button, QtCore.Qt.LeftButton)
    assert view.play_button.text() == "Play" and not view.timer.isActive()
    assert not np.array_equal(shown(view), first)


def test_slider_drag_and_keys_change_the_frame_and_the_picture(qtbot, grad_window):
    w = grad_window
    view = open_dock(qtbot, w)
    click_node(qtbot, w, "grad")
    first = shown(view)
    slider = view.slider
    slider.setFocus()
    qtbot.keyClick(slider, QtCore.Qt.Key_End)
    assert view.frame == 8 and view.frame_label.text() == "tap 9 / 9"
    last = shown(view)
    assert not np.array_equal(last, first)
    # the tap (2, 2) is the last green square of the filter footprint: it moved
    ys0, xs0 = np.nonzero(np.all(first[:-40] == TAP_ON, axis=-1))
    ys1, xs1 = np.nonzero(np.all(last[:-40] == TAP_ON, axis=-1))
    assert ys1.min() > ys0.max() and xs1.min() > xs0.max()
    qtbot.keyClick(slider, QtCore.Qt.Key_Left)
    assert view.frame == 7
    # a mouse drag of the handle to the far left
    drag_slider(slider, QtCore.QPoint(1, slider.height() // 2))
    assert view.frame == 0 and view.frame_label.text() == "tap 1 / 9"
    np.testing.assert_array_equal(shown(view), first)


def test_overlap_toggle_and_attribute_change(qtbot, grad_window):
    w = grad_window
    view = open_dock(qtbot, w)
    click_node(qtbot, w, "grad")
    frame = shown(view)
    qtbot.mouseClick(view.overlap_button, QtCore.Qt.LeftButton)
    assert view.frame_label.text() == "overlap map"
    overlap = shown(view)
    assert not np.array_equal(frame, overlap)
    # SAME, stride 1, 3x3 on 5x5: corners are touched 4 times, the centre 9 times
    np.testing.assert_array_equal(view.model.overlap()[[0, 2], [0, 2]], [4, 9])
    # an attribute change (through the canvas, as the panel does) redraws the geometry
    qtbot.mouseClick(view.overlap_button, QtCore.Qt.LeftButton)
    w.doc.edit("dy", lambda c: c.set_attr("dy", "shape", [1, 3, 3, 2]))
    assert view.model is None and "not valid" in view.message.text()
    w.doc.edit("grad", lambda c: c.set_attr("grad", "strides", [1, 2, 2, 1]))
    assert view.model is not None and view.model.rows.stride == 2
    assert view.model.rows.out == 3 and view.image is not None


def test_export_png_and_gif_write_the_files(qtbot, grad_window, monkeypatch, tmp_path):
    w = grad_window
    view = open_dock(qtbot, w)
    click_node(qtbot, w, "grad")
    qtbot.keyClick(view.slider, QtCore.Qt.Key_Right)
    answers = iter([str(tmp_path / "still"), str(tmp_path / "anim.gif")])
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (next(answers), "")))
    qtbot.mouseClick(view.png_button, QtCore.Qt.LeftButton)
    with Image.open(tmp_path / "still.png") as im:
        assert im.format == "PNG"
        np.testing.assert_array_equal(np.asarray(im.convert("RGB")), shown(view))
    qtbot.mouseClick(view.gif_button, QtCore.Qt.LeftButton)
    with Image.open(tmp_path / "anim.gif") as im:
        assert im.n_frames == 9 and im.info["loop"] == 0


def test_a_non_conv_block_gets_a_message(qtbot, grad_window):
    w = grad_window
    view = open_dock(qtbot, w)
    click_node(qtbot, w, "x")
    assert view.model is None and view.image is None
    assert "Tensor block" in view.message.text()
    assert not view.play_button.isEnabled() and not view.png_button.isEnabled()


def test_a_failed_export_says_so_and_writes_nothing(qtbot, grad_window, monkeypatch, tmp_path):
    w = grad_window
    view = open_dock(qtbot, w)
    click_node(qtbot, w, "grad")
    target = tmp_path / "missing" / "anim.gif"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(target), "")))
    warnings = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning",
                        staticmethod(lambda _parent, title, text: warnings.append(text)))
    qtbot.mouseClick(view.gif_button, QtCore.Qt.LeftButton)
    assert len(warnings) == 1 and str(target) in warnings[0]
    assert warnings[0].startswith("Could not write")
    assert not target.parent.exists()
    assert QtWidgets.QApplication.overrideCursor() is None
