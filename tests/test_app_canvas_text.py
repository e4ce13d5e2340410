"""What the canvas shows as text: no stale modifier hint after a dialog, node titles that stay
visible (elided when long) on narrow blocks and when zoomed out."""

from __future__ import annotations

import pytest

from tests.app_support import focus_canvas

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtGui, QtTest, QtWidgets

from app.ngqt_private import modifier_hint


def press_ctrl(viewer) -> None:
    """The user presses (and holds) Ctrl over the canvas."""
    QtTest.QTest.keyPress(viewer, QtCore.Qt.Key_Control)


def hint(viewer):
    return modifier_hint(viewer)


def test_ctrl_hint_is_cleared_when_a_shortcut_opens_a_dialog(qtbot, grad_window,
                                                             monkeypatch):
    w = grad_window
    v = w.adapter.viewer
    focus_canvas(qtbot, w)
    press_ctrl(v)
    assert v.CTRL_state and hint(v).isVisible()
    assert "Deselect" in hint(v).toPlainText()
    seen = {}

    def open_dialog(parent, *_args, **_kw):
        """A real modal dialog, closed as soon as it is shown (as if cancelled)."""
        dialog = QtWidgets.QDialog(parent)

        def look_then_cancel():
            qtbot.waitUntil(lambda: QtWidgets.QApplication.activeWindow() is dialog)
            seen.update(focus=QtWidgets.QApplication.focusWidget(), ctrl=v.CTRL_state,
                        hint=hint(v).isVisible())
            dialog.reject()

        QtCore.QTimer.singleShot(0, look_then_cancel)
        dialog.exec()
        return "", ""

    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", staticmethod(open_dialog))
    QtTest.QTest.keyClick(v, QtCore.Qt.Key_O, QtCore.Qt.ControlModifier)  # Ctrl+O: Open…
    assert seen, "the Open dialog did not open"
    assert seen["focus"] is not v
    assert not seen["ctrl"] and not seen["hint"]  # cleared while the dialog is up
    assert not v.CTRL_state and not hint(v).isVisible()  # and after it closed


@pytest.mark.parametrize("event_type", [QtCore.QEvent.FocusOut,
                                        QtCore.QEvent.WindowDeactivate])
def test_ctrl_hint_is_cleared_on_focus_out_and_deactivation(qtbot, grad_window, event_type):
    v = grad_window.adapter.viewer
    focus_canvas(qtbot, grad_window)
    press_ctrl(v)
    assert hint(v).isVisible()
    event = (QtGui.QFocusEvent(event_type, QtCore.Qt.ActiveWindowFocusReason)
             if event_type == QtCore.QEvent.FocusOut else QtCore.QEvent(event_type))
    QtWidgets.QApplication.sendEvent(v, event)
    assert not v.CTRL_state and not hint(v).isVisible()


def narrow_canvas(long_title: str = "s"):
    from engine.graph.canvas import Canvas

    c = Canvas()
    c.add_node("Tensor", pos=(0, 0), id="x", attrs={"shape": [1, 5, 5, 2]})
    c.add_node("ShapeOf", pos=(400, 0), id="s", title=long_title)
    c.add_node("Output", pos=(400, 200), id="o")  # unconnected: short port labels
    c.connect(("x", "output"), ("s", "input"))
    return c


def paint(w) -> None:
    """Draw the canvas the way the screen would (NodeGraphQt decides what text to hide while
    painting)."""
    w.adapter.viewer.viewport().grab()


def test_narrow_blocks_keep_their_title_when_zoomed_out(qtbot, window):
    from app import view_zoom
    from app.node_item import HIDE_TEXT_PX, MIN_WIDTH

    window.doc.load(narrow_canvas(), None)
    views = {cid: window.adapter.node(cid).view for cid in ("x", "s", "o")}
    for view in views.values():
        assert view.boundingRect().width() >= MIN_WIDTH
    focus_canvas(qtbot, window)
    for _ in range(4):  # 1 / 1.25^4 = 41 %: titles ~5 px, the narrowest blocks ~65 px wide
        QtTest.QTest.keyClick(window.adapter.viewer, QtCore.Qt.Key_Minus,
                              QtCore.Qt.ControlModifier)
    paint(window)
    assert view_zoom.view_scale(window.adapter.viewer) < 0.42
    assert min(v.sceneBoundingRect().width() for v in views.values()) * 0.42 < 70
    assert all(view.text_item.isVisible() for view in views.values())
    assert all(view.text_item.toPlainText() for view in views.values())
    # far out, where no title is legible, every block hides its text at the same zoom
    for _ in range(12):
        QtTest.QTest.keyClick(window.adapter.viewer, QtCore.Qt.Key_Minus,
                              QtCore.Qt.ControlModifier)
    paint(window)
    px = view_zoom.font_px(views["s"].text_item.font()) * view_zoom.view_scale(
        window.adapter.viewer)
    assert px < HIDE_TEXT_PX
    assert not any(view.text_item.isVisible() for view in views.values())


def test_long_titles_are_elided_and_edited_in_full(qtbot, window):
    from app.node_item import MAX_TITLE_WIDTH

    long_title = "filter gradient of the second layer, float64 reference " * 3
    window.doc.load(narrow_canvas(long_title.strip()), None)
    view = window.adapter.node("s").view
    shown = view.text_item.toPlainText()
    assert shown.endswith("…") and long_title.startswith(shown[:-1])
    assert view.text_item.boundingRect().width() <= MAX_TITLE_WIDTH + 12  # document margins
    assert view.boundingRect().width() < MAX_TITLE_WIDTH + 60
    assert long_title.strip() in view.text_item.toolTip()  # the full title on hover
    # double-click the title: the editor starts from the full title
    viewer = window.adapter.viewer
    pos = viewer.mapFromScene(view.text_item.sceneBoundingRect().center())
    QtTest.QTest.mouseDClick(viewer.viewport(), QtCore.Qt.LeftButton, pos=pos)
    assert view.text_item.toPlainText() == long_title.strip()
    # leaving the editor unchanged keeps the title (not its elided form) and elides again
    view.text_item.clearFocus()
    view.text_item.set_editable(False)
    assert window.doc.canvas.nodes["s"].title == long_title.strip()
    assert view.text_item.toPlainText() == shown
