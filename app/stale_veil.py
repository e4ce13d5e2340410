"""A translucent veil over a widget: how the tensor viewer greys a stale result.

A QGraphicsOpacityEffect on the viewer let the previous picture show through (its opaque
children leave the window's backing store unpainted beneath them, and the effect blends the new
picture over whatever was there). The veil paints over the current picture instead, so greyed
looks the same whatever was shown before. It ignores the mouse: the greyed tensor stays
inspectable.
"""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets


class StaleVeil(QtWidgets.QWidget):
    """Covers ``target`` (its parent) with its background colour at ``alpha`` when on."""

    def __init__(self, target: QtWidgets.QWidget, alpha: float = 0.55):
        super().__init__(target)
        self.setObjectName("stale_veil")
        self.setAttribute(QtCore.Qt.WA_TransparentForMouseEvents)
        self.setFocusPolicy(QtCore.Qt.NoFocus)
        colour = QtGui.QColor(target.palette().color(QtGui.QPalette.Window))
        colour.setAlphaF(alpha)
        self._colour = colour
        target.installEventFilter(self)
        self.hide()

    def set_on(self, on: bool) -> None:
        """Grey the target (on) or show it as it is."""
        if on:
            self.setGeometry(self.parentWidget().rect())
            self.raise_()
        self.setVisible(on)

    def is_on(self) -> bool:
        return not self.isHidden()

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if event.type() == QtCore.QEvent.Resize and watched is self.parentWidget():
            self.setGeometry(self.parentWidget().rect())
        elif event.type() == QtCore.QEvent.ChildAdded and self.is_on():
            self.raise_()  # a widget added later must not cover the veil
        return False

    def paintEvent(self, _event: QtGui.QPaintEvent) -> None:
        painter = QtGui.QPainter(self)
        painter.fillRect(self.rect(), self._colour)
