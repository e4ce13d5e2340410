"""What the canvas shows as text: no stale modifier hint after a dialog, node titles that stay
visible (elided when long) on narrow blocks and when zoomed out."""

from __future__ import annotations

import pytest

from tests.app_support import focus_canvas

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtGui, QtTest, QtWidgets


def press_ctrl(viewer) -> None:
    """The user presses (and holds) Ctrl over the canvas."""
    QtTest.QTest.keyPress(viewer, QtCore.Qt.Key_Control)


def hint(viewer):
    return viewer._cursor_text  # NodeGraphQt's modifier hint item


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
