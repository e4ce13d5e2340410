"""The pinned PySide6 keeps None's reference count: 6.12.0 on Python 3.11 dropped one reference
per call of a method returning nothing, and Python aborted ("none_dealloc") after a few
thousand calls, one repaint of a node graph (pyproject.toml pins PySide6 below 6.12)."""

import sys

import pytest

pytest.importorskip("PySide6")

from PySide6 import QtGui, QtWidgets

CALLS = 300  # far from None's ~5,000 references: a leaking build loses 900 here, not all


def test_methods_returning_nothing_keep_none_alive(qapp):
    widget = QtWidgets.QWidget()
    item = QtWidgets.QGraphicsRectItem(0, 0, 10, 10)
    image = QtGui.QImage(20, 20, QtGui.QImage.Format_ARGB32)
    path = QtGui.QPainterPath()
    path.addRect(0, 0, 5, 5)
    painter = QtGui.QPainter(image)
    before = sys.getrefcount(None)
    for _ in range(CALLS):
        widget.update()
        item.setPos(1, 2)
        painter.drawPath(path)
    after = sys.getrefcount(None)
    painter.end()
    assert before - after < CALLS // 10
