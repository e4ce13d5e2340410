"""The tensor viewer: a statistics line, then Image / Histogram / Table tabs beside the controls.

What is shown (tensors, axes, slice, mode, compare side, pictures, ticks) is an
:class:`engine.view.tensor_view.ViewState`; the numbers come from :mod:`engine.view.stats`; the
widgets are in ``app.viewer_*`` (stats line, controls, pictures, histogram, table, export).
This module connects them.

Public API (for the window that docks it): ``show_tensor(array, axes=None, title="", source="")``,
``compare(a, b, title_a, title_b, axes=None, sources=("", ""))``, ``clear()``; ``set_side``,
``show_tensor(..., summary=)`` takes a :func:`summarize` computed off the GUI thread for big
tensors;
``export_npy(path)``, ``export_png(path)``, ``copy_values()``; signal ``view_changed`` after every
redraw. Titles are what a person reads (block titles); ``source`` ids go into tooltips.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6 import QtCore, QtWidgets

from app.viewer.controls import SideChoice, ViewerControls
from app.viewer.export import ask_save_npy, ask_save_png, save_npy, save_png
from app.viewer.histogram import HistogramPlot
from app.viewer.pictures import ImagePage
from app.viewer.stats_line import StatsLine
from app.viewer.table import TABLE_LIMIT, TablePage
from engine.view.stats import (
    DiffStats,
    Histogram,
    TensorStats,
    diff_stats,
    histogram,
    tensor_stats,
)
from engine.view.tensor_view import SIDES, ViewState

__all__ = ["TABLE_LIMIT", "PairSummary", "Summary", "TensorViewer", "summarize",
           "summarize_pair"]


@dataclass(frozen=True)
class Summary:
    """The whole-tensor numbers the viewer shows (statistics and histogram); pure NumPy, so a
    window can compute them on a worker thread for big tensors."""

    stats: TensorStats
    hist: Histogram


@dataclass(frozen=True)
class PairSummary:
    """The numbers a comparison shows (both tensors' statistics, their differences); pure
    NumPy, for a worker thread."""

    stats: TensorStats
    other_stats: TensorStats
    diff: DiffStats


def summarize_pair(a: np.ndarray, b: np.ndarray) -> PairSummary:
    """Statistics of ``a`` and ``b`` (same shape) and of ``a - b``, as :meth:`TensorViewer.compare`
    shows them."""
    a, b = np.asarray(a), np.asarray(b)
    return PairSummary(tensor_stats(a), tensor_stats(b), diff_stats(a, b))


def summarize(array: np.ndarray) -> Summary:
    """Statistics and histogram of ``array`` exactly as :meth:`TensorViewer.show_tensor` shows
    them."""
    a = np.asarray(array)
    return Summary(tensor_stats(a), histogram(a))


class TensorViewer(QtWidgets.QWidget):
    """Shows one tensor (:meth:`show_tensor`) or compares two (:meth:`compare`)."""

    #: emitted after every redraw (new tensor, axis/index/mode/scale/side change)
    view_changed = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.state = ViewState()
        self.stats: TensorStats | None = None
        self.other_stats: TensorStats | None = None
        self.diff: DiffStats | None = None
        self.sources: tuple[str, str] = ("", "")
        #: (tensor, its histogram): the histogram is computed once per tensor shown
        self._hist_of: tuple[np.ndarray | None, Histogram | None] = (None, None)
        self._build()
        self.clear()

    # -- what is shown (read by the dock and tests) --------------------------------------------
    array = property(lambda self: self.state.array)
    other = property(lambda self: self.state.other)
    axes = property(lambda self: self.state.axes)
    titles = property(lambda self: self.state.titles)
    side = property(lambda self: self.state.side)
    index_spins = property(lambda self: self.controls.index_spins)
    hist_counts = property(lambda self: self.histogram.hist.counts)
    hist_edges = property(lambda self: self.histogram.hist.edges)
    max_abs_error = property(lambda self: self.diff.max_abs if self.diff else None)
    max_rel_error = property(lambda self: self.diff.max_rel if self.diff else None)

    @property
    def title(self) -> str:
        ta, tb = self.state.titles
        return f"{ta} vs {tb}" if self.state.comparing else ta

    # -- layout --------------------------------------------------------------------------------
    def _build(self) -> None:
        self.stats_label = StatsLine(self)
        # tabs and controls share the bar: one row, or more when the viewer is narrow (beside
        # the Explain panel); a QTabWidget corner widget does not follow the controls' size
        self.tabs = QtWidgets.QTabBar(self)
        self.tabs.setDrawBase(False)
        self.tabs.setExpanding(False)
        c = self.controls = ViewerControls(self, leading=self.tabs)
        self.bar = c
        self.mode_combo, self.row_combo, self.col_combo = c.mode_combo, c.row_combo, c.col_combo
        self.scale_combo, self.npy_button = c.scale_combo, c.npy_button
        self.png_button, self.copy_button = c.png_button, c.copy_button
        self.side_choice = SideChoice(self)
        self.side_buttons = self.side_choice.buttons

        page = self.image_page = ImagePage(self)
        self.info_label, self.hover_label = page.info_label, page.hover_label
        self.placeholder, self.panels = page.placeholder, page.panels
        for p in self.panels:
            p.hovered.connect(self._on_hover)

        self.histogram = HistogramPlot(self)
        self.table_page = TablePage(self)
        self.table, self.table_model = self.table_page.table, self.table_page.model
        self.table_info = self.table_page.info

        self.pages = QtWidgets.QStackedWidget(self)
        for page, name in ((self.image_page, "Image"), (self.histogram, "Histogram"),
                           (self.table_page, "Table")):
            self.pages.addWidget(page)
            self.tabs.addTab(name)
        self.tabs.currentChanged.connect(self.pages.setCurrentIndex)

        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(4, 2, 4, 2)
        lay.setSpacing(2)
        top = QtWidgets.QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.stats_label, 1)
        top.addWidget(self.side_choice, 0, QtCore.Qt.AlignTop)
        lay.addLayout(top)
        lay.addWidget(self.bar)
        lay.addWidget(self.pages, 1)

        c.bind(self.state, self._redraw)
        self.side_choice.side_picked.connect(self.set_side)
        c.npy_button.clicked.connect(self._ask_npy)
        c.png_button.clicked.connect(self._ask_png)
        c.copy_button.clicked.connect(self.copy_values)

    # -- public API ----------------------------------------------------------------------------
    def clear(self, text: str = "No tensor selected.") -> None:
        """Show nothing; ``text`` says why."""
        self.state.clear()
        self.stats = self.other_stats = self.diff = None
        self.sources = ("", "")
        self.stats_label.show_nothing(text)
        self.controls.set_enabled(False)
        self.controls.show_side(None, "")
        self.side_choice.show_side(None, {})
        self.image_page.clear(text)
        self.histogram.show_values(np.zeros(0), "")
        self.table_page.clear()
        self.controls.show_for(self.state)

    def show_tensor(self, array: np.ndarray, axes: tuple[str, ...] | None = None,
                    title: str = "", source: str = "", summary: Summary | None = None) -> None:
        """Show one tensor; ``axes`` names its axes (N, H, W, C / kh, kw, in, out ...);
        ``title`` is what a person reads, ``source`` (e.g. ``node_id.port``) goes in tooltips;
        ``summary`` (:func:`summarize` of ``array``) saves computing its numbers here."""
        new = self.state.show(array, axes, title)
        self.sources = (source, "")
        self.diff = self.other_stats = None
        if summary is None:
            summary = summarize(self.state.array)
        self.stats = summary.stats
        self._hist_of = (self.state.array, summary.hist)
        self.controls.setup(new)
        self.stats_label.show_one(title, self.stats, source)
        self._redraw()

    def compare(self, a: np.ndarray, b: np.ndarray, title_a: str = "a", title_b: str = "b",
                axes: tuple[str, ...] | None = None, sources: tuple[str, str] = ("", ""),
                summary: PairSummary | None = None) -> None:
        """Show ``a`` and ``b`` side by side with the same slice (same colour levels), their
        difference ``a - b``, and the max abs/rel error of ``a`` against ``b``; ``summary``
        (:func:`summarize_pair` of ``a``, ``b``) saves computing those numbers here."""
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            self.show_tensor(a, axes, title_a, sources[0])
            self.stats_label.show_mismatch((title_a, title_b), (a.shape, b.shape), self.stats,
                                           sources)
            return
        new = self.state.compare(a, b, title_a, title_b, axes)
        self.sources = tuple(sources)
        if summary is None:
            summary = summarize_pair(a, b)
        self.stats, self.other_stats, self.diff = (summary.stats, summary.other_stats,
                                                   summary.diff)
        self.controls.setup(new)
        self.stats_label.show_pair((title_a, title_b), (self.stats, self.other_stats), self.diff,
                                   self.sources)
        self._redraw()

    def set_side(self, side: str) -> None:
        """What Table, Save .npy, Copy and the histogram act on while comparing: ``"left"``,
        ``"right"`` or ``"difference"`` (as if the user clicked that button)."""
        self.state.set_side(side)
        if self.state.array is not None:
            self._redraw()

    def current_image(self) -> np.ndarray:
        """The 2-D array the (first) image shows now (a montage is scaled to [-1, 1])."""
        return self.panels[0].data

    def set_mode(self, mode: str) -> None:
        """``"slice"`` or ``"montage"`` (montage only for filters)."""
        self.mode_combo.setCurrentText(mode)

    def set_view_axes(self, row_axis: int, col_axis: int) -> None:
        """Show ``row_axis`` down and ``col_axis`` across (as if picked in the combo boxes)."""
        self.state.set_view_axes(row_axis, col_axis)
        self.controls.show_view_axes()
        self._redraw()

    def set_index(self, axis: int, value: int) -> None:
        """Fix ``axis`` (one that is not shown) at ``value``."""
        self.index_spins[axis].setValue(value)

    def export_npy(self, path: str) -> None:
        """Save the whole tensor of the side acted on; bfloat16 is saved exactly as float32 (.npy
        has no bfloat16). Raises OSError when the file cannot be written."""
        a = self.state.side_tensor()
        if a is None:
            raise ValueError("no tensor to save")
        save_npy(path, a)

    def export_png(self, path: str) -> bool:
        """Save the picture (image page: caption, image(s), colour bars) as a PNG, atomically;
        False when it cannot be written (the file there, if any, is then unchanged)."""
        page = self.image_page
        if not page.isVisible():  # another tab is current: lay the page out at the tab's size
            page.resize(self.pages.currentWidget().size())
            page.layout().activate()
        return save_png(path, page.grab())

    def copy_values(self) -> str:
        """Copy the current view's numbers of the side acted on to the clipboard (tab-separated
        rows, exact values of the tensor's dtype, empty cells on montage separators)."""
        text = self.state.values_text()
        QtWidgets.QApplication.clipboard().setText(text)
        return text

    def pixel_index(self, row: int, col: int) -> tuple[int, ...] | None:
        """The tensor index shown at image pixel ``(row, col)``; None off the tensor."""
        return self.state.pixel_index(row, col)

    def describe_pixel(self, row: int, col: int) -> str:
        """``[H 3, W 5] = value`` (``= a vs b  (a − b = d)`` when comparing), 7 digits."""
        return self.state.describe_pixel(row, col)

    # -- internals -----------------------------------------------------------------------------
    def _redraw(self) -> None:
        st = self.state
        self.controls.show_for(self.state)
        if st.array is None:
            return
        top = None
        if self.stats is not None and self.stats.min is not None:
            top = max(abs(self.stats.min), abs(self.stats.max))
        self.image_page.show_pictures(st.pictures(), st.axis_labels(), st.caption(top))
        empty = None
        if st.array.size == 0:
            empty = (f"{self.title or 'The tensor'} is empty (shape {list(st.array.shape)}): "
                     "nothing to draw.")
        self.image_page.show_placeholder(empty)
        self._show_side()
        self.view_changed.emit()

    def _show_side(self) -> None:
        """Table, histogram and button texts follow the side acted on."""
        st = self.state
        title = st.side_title()
        side = st.side if st.comparing else None
        self.controls.show_side(side, title)
        self.side_choice.show_side(side, {s: st.side_title(s) for s in SIDES})
        t = st.side_tensor()
        self.table_page.show_view(st, t, title if st.comparing else "")
        self.histogram.show_values(t, f"values of {title or 'the tensor'}", self._histogram(t))
        self.tabs.setTabToolTip(2, f"The numbers of the {st.side} tensor, {title}" if st.comparing
                                else "The numbers of the current slice")

    def _histogram(self, t: np.ndarray) -> Histogram:
        """The histogram of ``t``, computed once per tensor shown (not on every slice change)."""
        known, hist = self._hist_of
        if known is not t:
            hist = histogram(t)
            self._hist_of = (t, hist)
        return hist

    def _on_hover(self, row: int, col: int) -> None:
        self.hover_label.setText(self.describe_pixel(row, col) if row >= 0 else "")

    def _ask_npy(self) -> None:
        ask_save_npy(self, f"{self.state.side} tensor" if self.state.comparing else "tensor",
                     self.state.side_title())

    def _ask_png(self) -> None:
        ask_save_png(self, self.title)
