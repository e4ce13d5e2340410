"""The tensor viewer: a statistics line, then Image / Histogram / Table tabs beside the controls.

What is shown (tensors, axes, slice, mode, compare side, pictures, ticks) is an
:class:`engine.tensor_view.ViewState`; the numbers come from :mod:`engine.tensor_stats`; the
widgets are :mod:`app.viewer_image`, :mod:`app.viewer_controls`, :mod:`app.viewer_table` and
:mod:`app.viewer_histogram`. This module connects them.

Public API (for the window that docks it): ``show_tensor(array, axes=None, title="", source="")``,
``compare(a, b, title_a, title_b, axes=None, sources=("", ""))``, ``clear()``; ``set_side``,
``export_npy(path)``, ``export_png(path)``, ``copy_values()``; signal ``view_changed`` after every
redraw. Titles are what a person reads (block titles); ``source`` ids go into tooltips.
"""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from app import dialog_folders
from app.message_label import MessageLabel
from app.viewer_controls import SideChoice, ViewerControls
from app.viewer_histogram import HistogramPlot
from app.viewer_image import ImagePanel
from app.viewer_table import MUTED, TABLE_LIMIT, TablePage
from engine.tensor_stats import DiffStats, TensorStats, diff_stats, exact_text, tensor_stats
from engine.tensor_view import SIDES, ViewState

__all__ = ["TABLE_LIMIT", "TensorViewer"]


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
        self._updating = False
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
        self.stats_label = MessageLabel("", self)
        self.stats_label.setObjectName("stats")
        c = self.controls = ViewerControls(self)
        self.mode_combo, self.row_combo, self.col_combo = c.mode_combo, c.row_combo, c.col_combo
        self.scale_combo, self.npy_button = c.scale_combo, c.npy_button
        self.png_button, self.copy_button = c.png_button, c.copy_button
        self.side_choice = SideChoice(self)
        self.side_buttons = self.side_choice.buttons

        # image page: a caption line (what is shown | value under the mouse) over 1 or 3 panels
        self.image_page = QtWidgets.QWidget(self)
        self.info_label = QtWidgets.QLabel(self.image_page)
        self.info_label.setStyleSheet(MUTED)
        self.hover_label = QtWidgets.QLabel(self.image_page)
        self.hover_label.setTextInteractionFlags(QtCore.Qt.TextSelectableByMouse)
        for lab in (self.info_label, self.hover_label):  # long text must not widen the viewer
            lab.setSizePolicy(QtWidgets.QSizePolicy.Ignored, QtWidgets.QSizePolicy.Preferred)
        self.hover_label.setAlignment(QtCore.Qt.AlignRight | QtCore.Qt.AlignVCenter)
        head = QtWidgets.QHBoxLayout()
        head.setContentsMargins(4, 0, 4, 0)
        head.addWidget(self.info_label, 3)
        head.addWidget(self.hover_label, 2)
        self.placeholder = QtWidgets.QLabel(self.image_page)
        self.placeholder.setAlignment(QtCore.Qt.AlignCenter)
        self.placeholder.setStyleSheet(MUTED)
        self.panel_row = QtWidgets.QWidget(self.image_page)
        row = QtWidgets.QHBoxLayout(self.panel_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(2)
        self.panels = [ImagePanel(self.panel_row) for _ in range(3)]
        for p in self.panels:
            row.addWidget(p, 1)
            p.hovered.connect(self._on_hover)
        page_lay = QtWidgets.QVBoxLayout(self.image_page)
        page_lay.setContentsMargins(0, 2, 0, 0)
        page_lay.setSpacing(2)
        page_lay.addLayout(head)
        page_lay.addWidget(self.panel_row, 1)
        page_lay.addWidget(self.placeholder, 1)

        self.histogram = HistogramPlot(self)
        self.table_page = TablePage(self)
        self.table, self.table_model = self.table_page.table, self.table_page.model
        self.table_info = self.table_page.info

        # tabs and controls share one row (a QTabWidget corner widget does not follow the
        # controls' size when spin boxes appear)
        self.pages = QtWidgets.QStackedWidget(self)
        self.tabs = QtWidgets.QTabBar(self)
        self.tabs.setDrawBase(False)
        self.tabs.setExpanding(False)
        for page, name in ((self.image_page, "Image"), (self.histogram, "Histogram"),
                           (self.table_page, "Table")):
            self.pages.addWidget(page)
            self.tabs.addTab(name)
        self.tabs.currentChanged.connect(self.pages.setCurrentIndex)
        bar = QtWidgets.QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.tabs)
        bar.addStretch(1)
        bar.addWidget(c)

        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(4, 2, 4, 2)
        lay.setSpacing(2)
        top = QtWidgets.QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.stats_label, 1)
        top.addWidget(self.side_choice, 0, QtCore.Qt.AlignTop)
        lay.addLayout(top)
        lay.addLayout(bar)
        lay.addWidget(self.pages, 1)

        c.mode_combo.currentTextChanged.connect(self._on_mode)
        c.scale_combo.currentTextChanged.connect(self._on_scale)
        c.row_combo.currentIndexChanged.connect(lambda i: self._on_axis_picked("row", i))
        c.col_combo.currentIndexChanged.connect(lambda i: self._on_axis_picked("col", i))
        self.side_choice.side_picked.connect(self.set_side)
        c.npy_button.clicked.connect(self._ask_npy)
        c.png_button.clicked.connect(self._ask_png)
        c.copy_button.clicked.connect(self.copy_values)

    # -- public API ----------------------------------------------------------------------------
    def clear(self) -> None:
        """Show nothing."""
        self.state.clear()
        self.stats = self.other_stats = self.diff = None
        self.sources = ("", "")
        self.stats_label.setText("No tensor selected.")
        self.stats_label.setToolTip("")
        self.info_label.setText("")
        self.hover_label.setText("")
        self.controls.set_enabled(False)
        self.controls.show_side(None, "")
        self.side_choice.show_side(None, {})
        for p in self.panels:
            p.clear_image()
        self.panels[1].hide()
        self.panels[2].hide()
        self._show_placeholder("No tensor selected.")
        self.histogram.show_values(np.zeros(0), "")
        self.table_page.clear()
        self._update_visibility()

    def show_tensor(self, array: np.ndarray, axes: tuple[str, ...] | None = None,
                    title: str = "", source: str = "") -> None:
        """Show one tensor; ``axes`` names its axes (N, H, W, C / kh, kw, in, out ...);
        ``title`` is what a person reads, ``source`` (e.g. ``node_id.port``) goes in tooltips."""
        new = self.state.show(array, axes, title)
        self.sources = (source, "")
        self.diff = self.other_stats = None
        self.stats = tensor_stats(self.state.array)
        self._setup_controls(new)
        self._set_stats_text((f"{title}:  " if title else "") + self.stats.summary())
        self._redraw()

    def compare(self, a: np.ndarray, b: np.ndarray, title_a: str = "a", title_b: str = "b",
                axes: tuple[str, ...] | None = None, sources: tuple[str, str] = ("", "")) -> None:
        """Show ``a`` and ``b`` side by side with the same slice (same colour levels), their
        difference ``a - b``, and the max abs/rel error of ``a`` against ``b``."""
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            self.show_tensor(a, axes, title_a, sources[0])
            self._set_stats_text(f"{title_a} shape {list(a.shape)} and {title_b} shape "
                                 f"{list(b.shape)} differ: showing {title_a} only.  "
                                 + self.stats.summary())
            return
        new = self.state.compare(a, b, title_a, title_b, axes)
        self.sources = tuple(sources)
        self.stats, self.other_stats = tensor_stats(a), tensor_stats(b)
        self.diff = diff_stats(a, b)
        self._setup_controls(new)
        self._set_stats_text(f"{title_a}:  {self.stats.summary()}\n"
                             f"{title_b}:  {self.other_stats.summary()}\n"
                             f"{title_a} − {title_b}:  {self.diff.summary()}")
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

    def current_values(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The unscaled numbers of the current view of the side acted on, and the mask of
        montage separator cells (None for a slice): what the table shows and copy copies."""
        return self.state.values()

    def set_mode(self, mode: str) -> None:
        """``"slice"`` or ``"montage"`` (montage only for filters)."""
        self.mode_combo.setCurrentText(mode)

    def set_view_axes(self, row_axis: int, col_axis: int) -> None:
        """Show ``row_axis`` down and ``col_axis`` across (as if picked in the combo boxes)."""
        self.state.set_view_axes(row_axis, col_axis)
        self._updating = True
        self.row_combo.setCurrentIndex(row_axis)
        self.col_combo.setCurrentIndex(col_axis)
        self._updating = False
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
        if a.dtype.name == "bfloat16":
            a = a.astype(np.float32)
        np.save(path, a, allow_pickle=False)

    def export_png(self, path: str) -> bool:
        """Save the picture (image page: caption, image(s), colour bars) as a PNG."""
        page = self.image_page
        if not page.isVisible():  # another tab is current: lay the page out at the tab's size
            page.resize(self.pages.currentWidget().size())
            page.layout().activate()
        return page.grab().save(path, "PNG")

    def copy_values(self) -> str:
        """Copy the current view's numbers of the side acted on to the clipboard (tab-separated
        rows, exact values of the tensor's dtype, empty cells on montage separators)."""
        values, blank = self.current_values()
        t = self.state.side_tensor()
        dtype = t.dtype if t is not None else np.float64
        lines = []
        for r, row in enumerate(values):
            cells = ["" if blank is not None and blank[r, c] else exact_text(v, dtype)
                     for c, v in enumerate(row.tolist())]
            lines.append("\t".join(cells))
        text = "\n".join(lines)
        QtWidgets.QApplication.clipboard().setText(text)
        return text

    def pixel_index(self, row: int, col: int) -> tuple[int, ...] | None:
        """The tensor index shown at image pixel ``(row, col)``; None off the tensor."""
        return self.state.pixel_index(row, col)

    def describe_pixel(self, row: int, col: int) -> str:
        """``[H 3, W 5] = value`` (``= a vs b  (a − b = d)`` when comparing), 7 digits."""
        return self.state.describe_pixel(row, col)

    # -- internals -----------------------------------------------------------------------------
    def _set_stats_text(self, text: str) -> None:
        self.stats_label.setText(text)
        ids = [f"{t}: {s}" for t, s in zip(self.state.titles, self.sources, strict=True) if s]
        tip = "\n".join(ids)
        if len(text) > 60:
            tip = text + ("\n\n" + tip if tip else "")
        self.stats_label.setToolTip(tip)

    def _setup_controls(self, new_layout: bool) -> None:
        """Fill the pickers for a new layout (the same layout keeps the user's view)."""
        st = self.state
        self._updating = True
        self.controls.set_enabled(True)
        self.mode_combo.model().item(1).setEnabled(st.is_filter)
        self.mode_combo.setCurrentText(st.mode)
        self.scale_combo.setCurrentText(st.scale)
        if new_layout:
            self.controls.fill_axes(st.axes, st.array.shape, st.view_axes, self._on_index)
        self._updating = False

    def _on_mode(self, mode: str) -> None:
        if not self._updating and self.state.array is not None:
            self.state.set_mode(mode)
            self._redraw()

    def _on_scale(self, scale: str) -> None:
        self.state.scale = scale
        if not self._updating and self.state.array is not None:
            self._redraw()

    def _on_index(self, *_args) -> None:
        if not self._updating and self.state.array is not None:
            self.state.index = {ax: s.value() for ax, s in self.index_spins.items()}
            self._redraw()

    def _on_axis_picked(self, which: str, axis: int) -> None:
        """A picked axis that the other picker shows swaps the two (rows and cols differ)."""
        if self._updating or self.state.array is None or axis < 0:
            return
        r, c = self.state.pick_axis(which, axis)
        self._updating = True
        self.row_combo.setCurrentIndex(r)
        self.col_combo.setCurrentIndex(c)
        self._updating = False
        self._redraw()

    def _update_visibility(self) -> None:
        st, c = self.state, self.controls
        slicing = not st.montage_mode and st.array is not None and st.array.ndim >= 2
        c.set_shown(self.mode_combo, st.is_filter)
        c.set_shown(self.scale_combo, st.montage_mode)
        c.set_shown(self.row_combo, slicing)
        c.set_shown(self.col_combo, slicing)
        fixed = st.fixed_axes()
        for ax, spin in self.index_spins.items():
            c.set_shown(spin, ax in fixed)

    def _redraw(self) -> None:
        st = self.state
        self._update_visibility()
        if st.array is None:
            return
        pictures = st.pictures()
        for panel, pic in zip(self.panels, pictures, strict=False):
            panel.set_picture(pic)
        for i, panel in enumerate(self.panels[1:], start=1):
            panel.setVisible(i < len(pictures))
        labels = st.axis_labels()
        for panel in self.panels[:len(pictures)]:
            panel.set_axes(*labels)
        top = None
        if self.stats is not None and self.stats.min is not None:
            top = max(abs(self.stats.min), abs(self.stats.max))
        self.info_label.setText(st.caption(top))
        if st.array.size == 0:
            self._show_placeholder(f"{self.title or 'The tensor'} is empty (shape "
                                   f"{list(st.array.shape)}): nothing to draw.")
        else:
            self._show_placeholder(None)
        self._show_side()
        self.hover_label.setText("")
        self.view_changed.emit()

    def _show_side(self) -> None:
        """Table, histogram and button texts follow the side acted on."""
        st = self.state
        title = st.side_title()
        side = st.side if st.comparing else None
        self.controls.show_side(side, title)
        self.side_choice.show_side(side, {s: st.side_title(s) for s in SIDES})
        values, blank = st.values()
        t = st.side_tensor()
        self.table_page.show_values(values, t.dtype, blank, title if st.comparing else "")
        self.histogram.show_values(t, f"values of {title or 'the tensor'}")
        self.tabs.setTabToolTip(2, f"The numbers of the {st.side} tensor, {title}" if st.comparing
                                else "The numbers of the current slice")

    def _show_placeholder(self, text: str | None) -> None:
        """Show ``text`` instead of the image panels (None: show the panels)."""
        self.placeholder.setText(text or "")
        self.placeholder.setVisible(text is not None)
        self.panel_row.setVisible(text is None)

    def _on_hover(self, row: int, col: int) -> None:
        self.hover_label.setText(self.describe_pixel(row, col) if row >= 0 else "")

    def _ask_npy(self) -> None:
        which = f"{self.state.side} " if self.state.comparing else ""
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self, f"Save {which}tensor", dialog_folders.start("tensor", "tensor.npy"),
            "NumPy array (*.npy)")
        if path:
            dialog_folders.remember("tensor", path)
            try:
                self.export_npy(path)
            except (OSError, ValueError) as e:
                QtWidgets.QMessageBox.warning(self, "Save tensor", f"Could not write {path}: {e}")

    def _ask_png(self) -> None:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self, "Save picture", dialog_folders.start("image", "tensor.png"),
            "PNG image (*.png)")
        if path:
            dialog_folders.remember("image", path)
        if path and not self.export_png(path):
            QtWidgets.QMessageBox.warning(self, "Save picture", f"Could not write {path}.")
