"""One small picture of the explain panel: a tensor's slice (or filter montage) as the viewer
draws it, with marked cells (outlined squares) and one focus cell, and a click signal.

The slice shown is chosen to contain the focus element (:func:`engine.view.marks.show_element`);
a marked index in another slice has no cell, and :attr:`MarkedPicture.note` says how many of the
marks are in this slice.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app.viewer.image import ImagePanel
from engine.view.marks import show_element, shown_cells
from engine.view.tensor_view import ViewState

#: a marked cell: a white square inside a black one, visible on every colour map
MARK_PEN = pg.mkPen((255, 255, 255), width=2)
MARK_EDGE_PEN = pg.mkPen((0, 0, 0), width=2)
FOCUS_PEN = pg.mkPen((255, 64, 160), width=3)
#: More marked cells than this are drawn as one translucent mask image (outlining each of
#: tens of thousands of cells takes seconds and hides the picture anyway).
OUTLINE_LIMIT = 2_000
MASK_RGBA = (255, 255, 255, 120)


class MarkedPicture(ImagePanel):
    """An :class:`ImagePanel` over its own :class:`ViewState` with marked cells."""

    #: the tensor index of a left-clicked cell
    element_clicked = QtCore.Signal(tuple)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.state = ViewState()
        self.setMinimumSize(160, 130)
        self.bar.axis.setWidth(44)  # narrower than the viewer's: three pictures share a row
        self.marks = pg.ScatterPlotItem(symbol="s", size=0.85, pxMode=False, brush=None,
                                        pen=MARK_PEN)
        self.mark_edges = pg.ScatterPlotItem(symbol="s", size=0.97, pxMode=False, brush=None,
                                             pen=MARK_EDGE_PEN)
        self.focus = pg.ScatterPlotItem(symbol="s", size=1.0, pxMode=False, brush=None,
                                        pen=FOCUS_PEN)
        self.mask = pg.ImageItem()
        for item in (self.mask, self.mark_edges, self.marks, self.focus):
            item.setZValue(10)
            self.plot.addItem(item)
        #: (row, col) cells of the marks shown, and of the focus element (None when off view)
        self.mark_cells = np.zeros((0, 2), dtype=np.int64)
        self.focus_cell: tuple[int, int] | None = None
        self.plot.scene().sigMouseClicked.connect(self._clicked)

    def show_tensor(self, array: np.ndarray, axes: tuple[str, ...] | None, title: str,
                    focus: tuple[int, ...] | None) -> None:
        """Show ``array``'s slice containing ``focus`` (or its first slice)."""
        self.state.show(array, axes, title)
        if focus is not None:
            show_element(self.state, focus)
        self.set_picture(self.state.pictures()[0])
        self.set_axes(*self.state.axis_labels())
        self.plot.setTitle(None)

    def set_marks(self, indices: np.ndarray, focus: tuple[int, ...] | None) -> int:
        """Outline the cells of ``indices`` (``(k, ndim)``) in this slice and the ``focus``
        element; returns how many of ``indices`` this slice shows."""
        self.mark_cells = shown_cells(self.state, indices)
        cells = self.mark_cells
        outline = cells if len(cells) <= OUTLINE_LIMIT else np.zeros((0, 2), np.int64)
        for item in (self.mark_edges, self.marks):
            item.setData(x=outline[:, 1].astype(float), y=outline[:, 0].astype(float))
        self._set_mask(cells if len(cells) > OUTLINE_LIMIT else None)
        f = shown_cells(self.state, np.array([focus])) if focus is not None else np.zeros((0, 2))
        self.focus_cell = (int(f[0, 0]), int(f[0, 1])) if len(f) else None
        self.focus.setData(x=f[:, 1].astype(float), y=f[:, 0].astype(float))
        return len(cells)

    def _set_mask(self, cells: np.ndarray | None) -> None:
        """A translucent white over ``cells`` (None: no mask)."""
        h, w = self.data.shape if self.data.ndim == 2 else (0, 0)
        if cells is None or h == 0 or w == 0:
            self.mask.clear()
            self.mask.setVisible(False)
            return
        rgba = np.zeros((h, w, 4), dtype=np.uint8)
        rgba[cells[:, 0], cells[:, 1]] = MASK_RGBA
        self.mask.setImage(rgba, autoLevels=False)
        self.mask.setRect(QtCore.QRectF(-0.5, -0.5, w, h))
        self.mask.setVisible(True)

    def caption(self) -> str:
        """What the picture shows (axes down and across, fixed indices)."""
        return self.state.caption()

    def _clicked(self, ev) -> None:
        if ev.button() != QtCore.Qt.LeftButton or ev.double():
            return
        pixel = self.pixel_at(ev.scenePos())
        index = self.state.pixel_index(*pixel) if pixel is not None else None
        if index is not None:
            self.element_clicked.emit(tuple(int(v) for v in index))
