"""The viewer's Histogram tab: bars of :func:`engine.view.stats.histogram`."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets

from app.viewer.image import BACKGROUND, TITLE_COLOR
from engine.view.stats import Histogram, histogram


class HistogramPlot(pg.PlotWidget):
    """Histogram of the finite values of one tensor; ``counts``/``edges`` hold what is drawn."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setBackground(BACKGROUND)
        self.setLabel("bottom", "value")
        self.setLabel("left", "count")
        self.hist = Histogram(np.zeros(0, np.int64), np.zeros(0), 0, 0)

    def show_values(self, a: np.ndarray, what: str, hist: Histogram | None = None) -> None:
        """Draw the histogram of ``a`` (``hist`` when already computed) titled ``what`` ("" and
        an empty ``a``: nothing)."""
        self.clear()
        h = self.hist = histogram(a) if hist is None else hist
        if not h.counts.size:
            self.setTitle(f"{what}: no finite values" if what else None, color=TITLE_COLOR,
                          size="9pt")
            return
        self.addItem(pg.BarGraphItem(x0=h.edges[:-1], x1=h.edges[1:], height=h.counts,
                                     brush="#5a9bd4", pen=None))
        note = f" ({h.left_out} NaN/Inf not shown)" if h.left_out else ""
        self.setTitle(f"{what}: {h.finite} finite values, {h.counts.size} bins{note}",
                      color=TITLE_COLOR, size="9pt")
        self.autoRange()
