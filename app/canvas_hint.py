"""The text an empty canvas shows (how to add the first blocks), centred in the view."""

from __future__ import annotations

from PySide6 import QtGui, QtWidgets


class EmptyCanvasHint(QtWidgets.QGraphicsSimpleTextItem):
    """The hint item; :meth:`place` shows it centred in the view while the canvas is empty."""

    def __init__(self) -> None:
        super().__init__("Drag blocks here from the palette on the left (or press Tab),\n"
                         "or open an example: File > Examples.")
        self.setBrush(QtGui.QColor(150, 156, 164))
        font = self.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)  # the canvas opens at 100 %
        self.setFont(font)
        self.setZValue(-10)

    def place(self, viewer: QtWidgets.QGraphicsView, empty: bool) -> None:
        """Shown, in the middle of ``viewer``'s visible part, when ``empty``; hidden otherwise."""
        self.setVisible(empty)
        if empty:
            center = viewer.mapToScene(viewer.viewport().rect().center())
            r = self.boundingRect()
            self.setPos(center.x() - r.width() / 2, center.y() - r.height() / 2)
