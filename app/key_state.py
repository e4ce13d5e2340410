"""Forget held modifier keys when the canvas loses focus.

NodeGraphQt's viewer remembers Ctrl / Shift / Alt from key presses and shows a hint beside the
cursor ("CTRL: Deselect Nodes") until the key release. A shortcut that opens a dialog (Ctrl+O)
takes the release away, so the hint stayed on the canvas and the next drag still deselected.
:class:`ModifierReset` clears both when the viewer loses focus or its window is deactivated.
"""

from __future__ import annotations

from PySide6 import QtCore

from app.ngqt_private import modifier_hint

_RESET_ON = (QtCore.QEvent.FocusOut, QtCore.QEvent.WindowDeactivate, QtCore.QEvent.Hide)


def clear_modifiers(viewer) -> None:
    """Forget held modifiers and hide the modifier hint of a NodeGraphQt viewer."""
    viewer.clear_key_state()
    hint = modifier_hint(viewer)
    if hint is not None:  # hidden the way the viewer's keyReleaseEvent does
        hint.setPlainText("")
        hint.setVisible(False)


class ModifierReset(QtCore.QObject):
    """Event filter on a NodeGraphQt viewer: focus out / deactivate -> :func:`clear_modifiers`."""

    def __init__(self, viewer):
        super().__init__(viewer)
        self.viewer = viewer
        viewer.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() in _RESET_ON:
            clear_modifiers(self.viewer)
        return False
