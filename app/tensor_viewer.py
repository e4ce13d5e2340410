"""The tensor viewer: statistics, a 2-D slice as a picture, filter montages, a histogram, the
slice's numbers, export, copy, and a side-by-side comparison of two tensors.

All numbers come from :mod:`engine.tensor_stats`; this module only lays them out.

Public API (for the window that docks it): ``show_tensor(array, axes=None, title="",
summary=None)`` (``summary``: :func:`summarize` of the array, computed off the GUI thread for
big tensors),
``compare(a, b, title_a, title_b, axes=None)``, ``clear()``; ``export_npy(path)``,
``export_png(path)``, ``copy_values()``; signal ``view_changed`` after every redraw. ``array``,
``other`` and ``axes`` hold what is shown.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app import dialog_folders
from app.message_label import MessageLabel
from engine.tensor_stats import (
    DiffStats,
    TensorStats,
    default_axes,
    default_view_axes,
    diff_stats,
    montage,
    montage_index,
    montage_separators,
    slice_2d,
    slice_index,
    tensor_stats,
)

pg.setConfigOptions(imageAxisOrder="row-major", antialias=False)

#: The numeric table shows at most this many rows and columns of a slice (copy takes all).
TABLE_LIMIT = 256
#: Montage axes label at most about this many tiles each way.
MAX_TICKS = 16
DIVERGING = "CET-D1"
SEQUENTIAL = "viridis"
BACKGROUND = "#1e2124"
TITLE_COLOR = "#d0d4d8"
MUTED = "color: #8c939b;"


def format_value(v: float, dtype: np.dtype) -> str:
    """The shortest text that reads back as the same ``dtype`` value (``4`` not ``4.0``)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "biu":
        return str(int(v))
    if dtype.kind != "f" and dtype.name != "bfloat16":
        dtype = np.dtype(np.float64)
    s = str(dtype.type(v))
    return s.removesuffix(".0")


def _finite_range(*arrays: np.ndarray) -> tuple[float, float] | None:
    """(min, max) over the finite values of all ``arrays``; None when there are none."""
    lo, hi = np.inf, -np.inf
    for a in arrays:
        if a.size == 0:
            continue
        with np.errstate(invalid="ignore"):
            amin, amax = float(np.min(a)), float(np.max(a))
        if not (np.isfinite(amin) and np.isfinite(amax)):  # NaN or Inf inside: mask them
            f = a[np.isfinite(a)]
            if not f.size:
                continue
            amin, amax = float(f.min()), float(f.max())
        lo, hi = min(lo, amin), max(hi, amax)
    return (lo, hi) if lo <= hi else None


class Summary:
    """The whole-tensor numbers the viewer shows (statistics and histogram); pure NumPy, so a
    window can compute it on a worker thread for big tensors (:func:`summarize`)."""

    def __init__(self, stats: TensorStats, counts: np.ndarray, edges: np.ndarray, bins: int,
                 n_finite: int, size: int):
        self.stats, self.counts, self.edges = stats, counts, edges
        self.bins, self.n_finite, self.size = bins, n_finite, size


def _histogram(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int] | None:
    """(counts, edges, bins, finite count) of ``a``'s finite values (at most 100 equal bins
    over their range); None when there are none."""
    v = np.asarray(a).reshape(-1)
    if v.dtype not in (np.float32, np.float64):
        v = v.astype(np.float64)
    rng = _finite_range(v)
    if rng is None:
        return None
    n_finite = int(np.count_nonzero(np.isfinite(v)))
    bins = int(np.clip(np.sqrt(n_finite), 1, 100))
    if rng[0] == rng[1]:
        rng = (rng[0] - 0.5, rng[1] + 0.5)  # NumPy's choice for a constant
    try:  # values outside the range (NaN, Inf) are not counted
        counts, edges = np.histogram(v, bins=bins, range=rng)
    except ValueError:  # a range of a few ulps cannot hold that many float64 bins
        bins = 1
        counts, edges = np.histogram(v, bins=bins, range=rng)
    return counts, edges, bins, n_finite


def summarize(array: np.ndarray) -> Summary:
    """Statistics and histogram of ``array`` as :meth:`TensorViewer.show_tensor` shows them."""
    a = np.asarray(array)
    hist = _histogram(a)
    if hist is None:
        return Summary(tensor_stats(a), np.zeros(0, np.int64), np.zeros(0), 0, 0, a.size)
    counts, edges, bins, n_finite = hist
    return Summary(tensor_stats(a), counts, edges, bins, n_finite, a.size)


def _levels(diverging: bool, *arrays: np.ndarray) -> tuple[float, float]:
    """Colour levels: symmetric around 0 for a diverging map, else the finite range."""
    rng = _finite_range(*arrays) or (0.0, 1.0)
    if diverging:
        m = max(abs(rng[0]), abs(rng[1])) or 1.0
        return -m, m
    lo, hi = rng
    return (lo, hi) if hi > lo else (lo - 0.5, lo + 0.5)


def _tile_ticks(n: int, k: int) -> list[list[tuple[float, str]]]:
    """Ticks at the centres of ``n`` tiles of ``k`` pixels (1-pixel gaps), at most ~MAX_TICKS."""
    step = 1
    while n > step * MAX_TICKS:
        step *= 2
    return [[(i * (k + 1) + (k - 1) / 2, str(i)) for i in range(0, n, step)]]


class SliceModel(QtCore.QAbstractTableModel):
    """A read-only table of a 2-D array (capped to TABLE_LIMIT x TABLE_LIMIT); ``blank`` cells
    (montage separators) show nothing; the tooltip carries the exact value."""

    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self._a = np.zeros((0, 0))
        self._blank: np.ndarray | None = None
        self._dtype = np.dtype(np.float64)
        self.full_shape: tuple[int, int] = (0, 0)

    def set_array(self, a: np.ndarray, dtype: np.dtype = np.float64,
                  blank: np.ndarray | None = None) -> None:
        self.beginResetModel()
        self.full_shape = (int(a.shape[0]), int(a.shape[1]))
        self._a = a[:TABLE_LIMIT, :TABLE_LIMIT]
        self._blank = None if blank is None else blank[:TABLE_LIMIT, :TABLE_LIMIT]
        self._dtype = np.dtype(dtype)
        self.endResetModel()

    def rowCount(self, parent=QtCore.QModelIndex()):  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else self._a.shape[0]

    def columnCount(self, parent=QtCore.QModelIndex()):  # noqa: B008
        return 0 if parent.isValid() else self._a.shape[1]

    def data(self, index, role=QtCore.Qt.DisplayRole):
        if not index.isValid():
            return None
        r, c = index.row(), index.column()
        if role in (QtCore.Qt.DisplayRole, QtCore.Qt.ToolTipRole):
            if self._blank is not None and self._blank[r, c]:
                return ""
            v = float(self._a[r, c])
            return f"{v:.6g}" if role == QtCore.Qt.DisplayRole else format_value(v, self._dtype)
        if role == QtCore.Qt.TextAlignmentRole:
            return int(QtCore.Qt.AlignRight | QtCore.Qt.AlignVCenter)
        return None

    def headerData(self, section, orientation, role=QtCore.Qt.DisplayRole):
        return str(section) if role == QtCore.Qt.DisplayRole else None


class ImagePanel(pg.GraphicsLayoutWidget):
    """One image with axis labels and a colour bar; NaN pixels are transparent."""

    #: (row, col) of the image pixel under the mouse, (-1, -1) when it leaves the image
    hovered = QtCore.Signal(int, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setBackground(BACKGROUND)
        self.plot = self.addPlot()
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.plot.hideButtons()
        self.image = pg.ImageItem()
        self.plot.addItem(self.image)
        self.cmap_name = DIVERGING
        self.bar = pg.ColorBarItem(colorMap=pg.colormap.get(DIVERGING), interactive=False,
                                   width=12)
        self.bar.setImageItem(self.image, insert_in=self.plot)
        self.data = np.zeros((0, 0))
        self.levels = (-1.0, 1.0)
        self._shape: tuple[int, ...] | None = None
        self.plot.scene().sigMouseMoved.connect(self._mouse_moved)

    def set_image(self, a: np.ndarray, levels: tuple[float, float], diverging: bool,
                  title: str = "") -> None:
        """Show ``a`` (pixel (r, c) centred at x=c, y=r) with the colour ``levels``."""
        self.data, self.levels = a, levels
        name = DIVERGING if diverging else SEQUENTIAL
        if name != self.cmap_name:
            self.bar.setColorMap(pg.colormap.get(name))
            self.cmap_name = name
        self.plot.setTitle(title or None, color=TITLE_COLOR, size="9pt")
        if a.size == 0:
            self.image.clear()
            self._shape = None
            return
        self.image.setImage(a, autoLevels=False, levels=levels)
        self.image.setRect(QtCore.QRectF(-0.5, -0.5, a.shape[1], a.shape[0]))
        self.bar.setLevels(levels)
        if a.shape != self._shape:  # keep the user's zoom while stepping through slices
            self._shape = a.shape
            self.plot.autoRange(padding=0.02)

    def set_axes(self, row_label: str, col_label: str,
                 row_ticks: list | None = None, col_ticks: list | None = None) -> None:
        """Axis titles, and fixed ticks (None: automatic)."""
        self.plot.setLabel("left", row_label)
        self.plot.setLabel("bottom", col_label)
        self.plot.getAxis("left").setTicks(row_ticks)
        self.plot.getAxis("bottom").setTicks(col_ticks)

    def clear_image(self) -> None:
        self.data = np.zeros((0, 0))
        self._shape = None
        self.image.clear()
        self.plot.setTitle(None)

    def pixel_at(self, scene_pos: QtCore.QPointF) -> tuple[int, int] | None:
        """The (row, col) of the pixel at a scene position, or None outside the image."""
        if self.data.size == 0 or not self.plot.vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.plot.vb.mapSceneToView(scene_pos)
        row, col = int(np.floor(p.y() + 0.5)), int(np.floor(p.x() + 0.5))
        h, w = self.data.shape
        return (row, col) if 0 <= row < h and 0 <= col < w else None

    def _mouse_moved(self, scene_pos: QtCore.QPointF) -> None:
        self.hovered.emit(*(self.pixel_at(scene_pos) or (-1, -1)))


class TensorViewer(QtWidgets.QWidget):
    """Shows one tensor (:meth:`show_tensor`) or compares two (:meth:`compare`)."""

    #: emitted after every redraw (new tensor, axis/index/mode/scale change)
    view_changed = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.array: np.ndarray | None = None
        self.other: np.ndarray | None = None
        self.axes: tuple[str, ...] = ()
        self.title = ""
        self.titles = ("a", "b")
        self.stats: TensorStats | None = None
        self.other_stats: TensorStats | None = None
        self.diff: DiffStats | None = None
        self.max_abs_error: float | None = None
        self.max_rel_error: float | None = None
        self.hist_counts = np.zeros(0, np.int64)
        self.hist_edges = np.zeros(0)
        self.index_spins: dict[int, QtWidgets.QSpinBox] = {}
        self._difference: np.ndarray | None = None
        self._diverging = False
        self._view_axes = (0, 0)
        self._layout: tuple = ()
        self._updating = False
        self._build()
        self.clear()

    # -- layout --------------------------------------------------------------------------------
    def _labelled(self, lay: QtWidgets.QHBoxLayout, text: str, w: QtWidgets.QWidget) -> None:
        lab = QtWidgets.QLabel(text, self)
        lay.addWidget(lab)
        lay.addWidget(w)
        w.setProperty("label_widget", lab)

    def _build(self) -> None:
        self.stats_label = MessageLabel("", self)
        self.stats_label.setObjectName("stats")
        self.stats_label.setTextInteractionFlags(QtCore.Qt.TextSelectableByMouse)

        self.mode_combo = QtWidgets.QComboBox(self)
        self.mode_combo.addItems(["slice", "montage"])
        self.mode_combo.setToolTip("slice: one 2-D slice; montage: a 4-D filter as an in x out "
                                   "grid of kh x kw tiles (filters only)")
        self.row_combo = QtWidgets.QComboBox(self)
        self.col_combo = QtWidgets.QComboBox(self)
        self.row_combo.setToolTip("Axis shown down the image")
        self.col_combo.setToolTip("Axis shown across the image")
        self.scale_combo = QtWidgets.QComboBox(self)
        self.scale_combo.addItems(["global", "tile"])
        self.scale_combo.setToolTip("Montage colours: global = value / max |w| of the whole "
                                    "filter; tile = value / max |w| of its own tile")
        self.index_box = QtWidgets.QHBoxLayout()
        self.index_box.setSpacing(4)
        self.npy_button = QtWidgets.QPushButton("Save .npy", self)
        self.npy_button.setToolTip("Save the whole tensor as a NumPy .npy file")
        self.png_button = QtWidgets.QPushButton("Save .png", self)
        self.png_button.setToolTip("Save the picture as a PNG image")
        self.copy_button = QtWidgets.QPushButton("Copy values", self)
        self.copy_button.setToolTip("Copy the numbers of the current slice (tab-separated)")

        controls = QtWidgets.QWidget(self)
        cl = QtWidgets.QHBoxLayout(controls)
        cl.setContentsMargins(8, 0, 0, 2)
        cl.setSpacing(4)
        self._labelled(cl, "view", self.mode_combo)
        self._labelled(cl, "rows", self.row_combo)
        self._labelled(cl, "cols", self.col_combo)
        self._labelled(cl, "scale", self.scale_combo)
        cl.addLayout(self.index_box)
        cl.addSpacing(12)
        for b in (self.npy_button, self.png_button, self.copy_button):
            cl.addWidget(b)

        # image page: a caption line (what is shown | value under the mouse) over 1 or 3 panels
        self.image_page = QtWidgets.QWidget(self)
        self.info_label = QtWidgets.QLabel(self.image_page)
        self.info_label.setStyleSheet(MUTED)
        self.hover_label = QtWidgets.QLabel(self.image_page)
        self.hover_label.setTextInteractionFlags(QtCore.Qt.TextSelectableByMouse)
        for lab in (self.info_label, self.hover_label):  # long text must not widen the viewer
            lab.setSizePolicy(QtWidgets.QSizePolicy.Ignored, QtWidgets.QSizePolicy.Preferred)
        self.hover_label.setAlignment(QtCore.Qt.AlignRight | QtCore.Qt.AlignVCenter)
        self.panels = [ImagePanel(self.image_page) for _ in range(3)]
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
        for p in self.panels:
            row.addWidget(p, 1)
            p.hovered.connect(self._on_hover)
        page_lay = QtWidgets.QVBoxLayout(self.image_page)
        page_lay.setContentsMargins(0, 2, 0, 0)
        page_lay.setSpacing(2)
        page_lay.addLayout(head)
        page_lay.addWidget(self.panel_row, 1)
        page_lay.addWidget(self.placeholder, 1)

        self.histogram = pg.PlotWidget(self)
        self.histogram.setBackground(BACKGROUND)
        self.histogram.setLabel("bottom", "value")
        self.histogram.setLabel("left", "count")

        self.table_page = QtWidgets.QWidget(self)
        self.table_info = QtWidgets.QLabel(self.table_page)
        self.table_info.setStyleSheet(MUTED)
        self.table = QtWidgets.QTableView(self.table_page)
        self.table_model = SliceModel(self)
        self.table.setModel(self.table_model)
        self.table.horizontalHeader().setDefaultSectionSize(72)
        self.table.verticalHeader().setDefaultSectionSize(22)
        tl = QtWidgets.QVBoxLayout(self.table_page)
        tl.setContentsMargins(0, 2, 0, 0)
        tl.setSpacing(2)
        tl.addWidget(self.table_info)
        tl.addWidget(self.table, 1)

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
        self.controls = controls
        bar = QtWidgets.QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.tabs)
        bar.addStretch(1)
        bar.addWidget(controls)

        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(4, 2, 4, 2)
        lay.setSpacing(2)
        lay.addWidget(self.stats_label)
        lay.addLayout(bar)
        lay.addWidget(self.pages, 1)

        self.mode_combo.currentIndexChanged.connect(self._on_controls)
        self.scale_combo.currentIndexChanged.connect(self._on_controls)
        self.row_combo.currentIndexChanged.connect(lambda _i: self._on_axis_picked("row"))
        self.col_combo.currentIndexChanged.connect(lambda _i: self._on_axis_picked("col"))
        self.npy_button.clicked.connect(self._ask_npy)
        self.png_button.clicked.connect(self._ask_png)
        self.copy_button.clicked.connect(self.copy_values)

    # -- public API ----------------------------------------------------------------------------
    def clear(self) -> None:
        """Show nothing."""
        self.array = self.other = self._difference = None
        self.stats = self.other_stats = self.diff = None
        self.max_abs_error = self.max_rel_error = None
        self.stats_label.setText("No tensor selected.")
        self.info_label.setText("")
        self.hover_label.setText("")
        self._set_enabled(False)
        for p in self.panels:
            p.clear_image()
        self.panels[1].hide()
        self.panels[2].hide()
        self._show_placeholder("No tensor selected.")
        self._draw_histogram(np.zeros(0), "")
        self.table_model.set_array(np.zeros((0, 0)))
        self.table_info.setText("")
        self._update_visibility()

    def show_tensor(self, array: np.ndarray, axes: tuple[str, ...] | None = None,
                    title: str = "", summary: Summary | None = None) -> None:
        """Show one tensor; ``axes`` names its axes (N, H, W, C / kh, kw, in, out ...);
        ``summary`` (of this array) saves computing its statistics and histogram here."""
        a = np.asarray(array)
        self.array, self.other, self._difference, self.title = a, None, None, title
        self.diff = self.other_stats = self.max_abs_error = self.max_rel_error = None
        summary = summary if summary is not None else summarize(a)
        self.stats = summary.stats
        self._diverging = self.stats.min is not None and self.stats.min < 0
        self._setup_axes(a, axes)
        self.stats_label.setText((f"{title}:  " if title else "") + self.stats.summary())
        self._draw_histogram(a, f"values of {title or 'the tensor'}", summary)
        self._redraw()

    def compare(self, a: np.ndarray, b: np.ndarray, title_a: str = "a", title_b: str = "b",
                axes: tuple[str, ...] | None = None) -> None:
        """Show ``a`` and ``b`` side by side with the same slice (same colour levels), their
        difference ``a - b``, and the max abs/rel error of ``a`` against ``b``."""
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            self.show_tensor(a, axes, title_a)
            self.stats_label.setText(f"{title_a} shape {list(a.shape)} and {title_b} shape "
                                     f"{list(b.shape)} differ: showing {title_a} only.  "
                                     + self.stats.summary())
            return
        self.array, self.other, self.titles = a, b, (title_a, title_b)
        self.title = f"{title_a} vs {title_b}"
        self.stats, self.other_stats = tensor_stats(a), tensor_stats(b)
        self.diff = diff_stats(a, b)
        self.max_abs_error, self.max_rel_error = self.diff.max_abs, self.diff.max_rel
        with np.errstate(invalid="ignore", over="ignore"):
            self._difference = a.astype(np.float64) - b.astype(np.float64)
        self._diverging = any(s.min is not None and s.min < 0
                              for s in (self.stats, self.other_stats))
        self._setup_axes(a, axes)
        self.stats_label.setText(f"{title_a}:  {self.stats.summary()}\n"
                                 f"{title_b}:  {self.other_stats.summary()}\n"
                                 f"{title_a} − {title_b}:  {self.diff.summary()}")
        self._draw_histogram(self._difference, f"values of {title_a} − {title_b}")
        self._redraw()

    def current_image(self) -> np.ndarray:
        """The 2-D array the (first) image shows now (a montage is scaled to [-1, 1])."""
        return self.panels[0].data

    def current_values(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The unscaled numbers of the current view (slice, or montage layout) and the mask of
        montage separator cells (None for a slice): what the table shows and copy copies."""
        a = self.array
        if a is None:
            return np.zeros((0, 0)), None
        if self._montage_mode():
            return montage(a, "none"), montage_separators(a.shape)
        r, c = self._view_axes
        return slice_2d(a, r, c, self._index()), None

    def set_mode(self, mode: str) -> None:
        """``"slice"`` or ``"montage"`` (montage only for filters)."""
        self.mode_combo.setCurrentText(mode)

    def set_view_axes(self, row_axis: int, col_axis: int) -> None:
        """Show ``row_axis`` down and ``col_axis`` across (as if picked in the combo boxes)."""
        if row_axis == col_axis:
            raise ValueError(f"the row and column axes must differ (both {row_axis})")
        self._updating = True
        self.row_combo.setCurrentIndex(row_axis)
        self.col_combo.setCurrentIndex(col_axis)
        self._updating = False
        self._view_axes = (row_axis, col_axis)
        self._on_controls()

    def set_index(self, axis: int, value: int) -> None:
        """Fix ``axis`` (one that is not shown) at ``value``."""
        self.index_spins[axis].setValue(value)

    def export_npy(self, path: str) -> None:
        """Save the whole (first) tensor; bfloat16 is saved exactly as float32 (.npy has no
        bfloat16). Raises OSError when the file cannot be written."""
        a = self.array
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
        """Copy the current view's numbers to the clipboard (tab-separated rows, exact values of
        the tensor's dtype, empty cells on montage separators); returns the text."""
        values, blank = self.current_values()
        dtype = self.array.dtype if self.array is not None else np.float64
        lines = []
        for r, row in enumerate(values):
            cells = ["" if blank is not None and blank[r, c] else format_value(v, dtype)
                     for c, v in enumerate(row.tolist())]
            lines.append("\t".join(cells))
        text = "\n".join(lines)
        QtWidgets.QApplication.clipboard().setText(text)
        return text

    def pixel_index(self, row: int, col: int) -> tuple[int, ...] | None:
        """The tensor index shown at image pixel ``(row, col)``; None off the tensor."""
        a = self.array
        view = self.current_image()
        if a is None or not (0 <= row < view.shape[0] and 0 <= col < view.shape[1]):
            return None
        if self._montage_mode():
            return montage_index(a.shape, row, col)
        r, c = self._view_axes
        return slice_index(a.ndim, r, c, self._index(), row, col)

    def describe_pixel(self, row: int, col: int) -> str:
        """``[H 3, W 5] = value`` (``= a vs b  (a - b = d)`` when comparing), 7 digits."""
        idx = self.pixel_index(row, col)
        if idx is None:
            return ""
        where = ", ".join(f"{n} {i}" for n, i in zip(self.axes, idx, strict=True))
        va = float(self.array[idx])
        if self.other is None:
            return f"[{where}] = {va:.7g}"
        return (f"[{where}] = {va:.7g} vs {float(self.other[idx]):.7g}  "
                f"(a − b = {float(self._difference[idx]):.7g})")

    # -- internals -----------------------------------------------------------------------------
    def _set_enabled(self, on: bool) -> None:
        for w in (self.mode_combo, self.scale_combo, self.row_combo, self.col_combo,
                  self.npy_button, self.png_button, self.copy_button):
            w.setEnabled(on)

    def _montage_mode(self) -> bool:
        return (self.mode_combo.currentText() == "montage" and self.array is not None
                and self.array.ndim == 4)

    def _index(self) -> dict[int, int]:
        return {ax: s.value() for ax, s in self.index_spins.items()}

    def _setup_axes(self, a: np.ndarray, axes: tuple[str, ...] | None) -> None:
        """Fill the axis pickers; the same layout and shape as before keeps the user's view."""
        self._updating = True
        self._set_enabled(True)
        names = tuple(axes) if axes and len(axes) == a.ndim else default_axes(a.ndim)
        layout = (names, a.shape)
        same = layout == self._layout
        self._layout = layout
        self.axes = names
        is_filter = a.ndim == 4 and names[:2] == ("kh", "kw")
        self.mode_combo.model().item(1).setEnabled(is_filter)
        if not is_filter:
            self.mode_combo.setCurrentIndex(0)
        elif not same:  # a new filter starts as a montage of all its tiles
            self.mode_combo.setCurrentIndex(1)
        if not same:
            labels = [f"{n} ({s})" for n, s in zip(names, a.shape, strict=True)]
            for combo in (self.row_combo, self.col_combo):
                combo.clear()
                combo.addItems(labels)
            r, c = default_view_axes(names)
            self.row_combo.setCurrentIndex(r)
            self.col_combo.setCurrentIndex(c)
            self._view_axes = (r, c)
            self._rebuild_spins(a)
        self._updating = False

    def _rebuild_spins(self, a: np.ndarray) -> None:
        while self.index_box.count():
            item = self.index_box.takeAt(0)
            if item.widget():
                item.widget().deleteLater()
        self.index_spins = {}
        for ax, (name, size) in enumerate(zip(self.axes, a.shape, strict=True)):
            lab = QtWidgets.QLabel(name, self)
            spin = QtWidgets.QSpinBox(self)
            top = max(0, size - 1)
            spin.setRange(0, top)
            spin.setSuffix(f" / {top}")
            spin.setToolTip(f"index along {name} (0..{top})")
            spin.valueChanged.connect(self._on_controls)
            spin.setProperty("label_widget", lab)
            self.index_box.addWidget(lab)
            self.index_box.addWidget(spin)
            self.index_spins[ax] = spin

    def _on_axis_picked(self, which: str) -> None:
        """A picked axis that the other picker shows swaps the two (rows and cols differ)."""
        if self._updating:
            return
        r, c = self.row_combo.currentIndex(), self.col_combo.currentIndex()
        if r == c and self.array is not None and self.array.ndim >= 2:
            old_r, old_c = self._view_axes
            self._updating = True
            if which == "row":
                c = old_r
                self.col_combo.setCurrentIndex(c)
            else:
                r = old_c
                self.row_combo.setCurrentIndex(r)
            self._updating = False
        self._view_axes = (r, c)
        self._on_controls()

    def _on_controls(self, *_args) -> None:
        if not self._updating and self.array is not None:
            self._redraw()

    def _update_visibility(self) -> None:
        a = self.array
        montage_mode = self._montage_mode()
        slicing = not montage_mode and a is not None and a.ndim >= 2
        is_filter = self.mode_combo.model().item(1).isEnabled() and a is not None
        for w, show in ((self.mode_combo, is_filter), (self.scale_combo, montage_mode),
                        (self.row_combo, slicing), (self.col_combo, slicing)):
            w.setVisible(show)
            w.property("label_widget").setVisible(show)
        r, c = self._view_axes
        for ax, spin in self.index_spins.items():
            show = slicing and ax not in (r, c)
            spin.setVisible(show)
            spin.property("label_widget").setVisible(show)

    def _slice(self, a: np.ndarray) -> np.ndarray:
        r, c = self._view_axes
        return slice_2d(a, r, c, self._index())

    def _redraw(self) -> None:
        self._update_visibility()
        a = self.array
        if a is None:
            return
        montage_mode = self._montage_mode()
        scale = self.scale_combo.currentText()
        if self.other is None:
            if montage_mode:
                view, levels, diverging = montage(a, scale), (-1.0, 1.0), True
            else:
                view = self._slice(a)
                diverging = self._diverging
                levels = _levels(diverging, view)
            self.panels[0].set_image(view, levels, diverging)
            self.panels[1].hide()
            self.panels[2].hide()
        else:
            b, d = self.other, self._difference
            ta, tb = self.titles
            if montage_mode:  # global: one scale for both, so equal colours mean equal values
                vmax = None
                if scale == "global":
                    rng = _finite_range(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
                    vmax = rng[1] if rng else None
                views = [montage(a, scale, vmax), montage(b, scale, vmax), montage(d, scale)]
                levels = diff_levels = (-1.0, 1.0)
                diverging = True
            else:
                views = [self._slice(a), self._slice(b), self._slice(d)]
                diverging = self._diverging
                levels = _levels(diverging, views[0], views[1])
                diff_levels = _levels(True, views[2])
            self.panels[0].set_image(views[0], levels, diverging, ta)
            self.panels[1].set_image(views[1], levels, diverging, tb)
            self.panels[2].set_image(views[2], diff_levels, True, f"{ta} − {tb}")
            self.panels[1].show()
            self.panels[2].show()
        self._label_axes()
        if a.size == 0:
            self._show_placeholder(f"{self.title or 'The tensor'} is empty (shape "
                                   f"{list(a.shape)}): nothing to draw.")
        else:
            self._show_placeholder(None)
        self._fill_table()
        self.hover_label.setText("")
        self.view_changed.emit()

    def _show_placeholder(self, text: str | None) -> None:
        """Show ``text`` instead of the image panels (None: show the panels)."""
        self.placeholder.setText(text or "")
        self.placeholder.setVisible(text is not None)
        self.panel_row.setVisible(text is None)

    def _label_axes(self) -> None:
        a, names = self.array, self.axes
        title = self.title or "tensor"
        if self._montage_mode():
            kh, kw, cin, cout = a.shape
            rows, cols = _tile_ticks(cin, kh), _tile_ticks(cout, kw)
            labels = (names[2], names[3], rows, cols)
            if self.scale_combo.currentText() == "tile":
                colour = "colour: value / max |value| of its tile"
            elif self.other is not None:
                colour = "colour: value / max |value| of both"
            else:
                st = self.stats
                top = 0.0 if st.min is None else max(abs(st.min), abs(st.max))
                colour = f"colour: value / max |value| ({top:.4g})"
            info = (f"{title}: {names[2]} ({cin}) down × {names[3]} ({cout}) across, "
                    f"tiles of {names[0]} × {names[1]} ({kh}×{kw});  {colour}")
        elif a.ndim >= 2:
            r, c = self._view_axes
            labels = (names[r], names[c], None, None)
            fixed = ", ".join(f"{names[ax]} = {s.value()}" for ax, s in self.index_spins.items()
                              if ax not in (r, c))
            info = f"{title}: {names[r]} down × {names[c]} across" + (f";  {fixed}" if fixed
                                                                       else "")
        else:
            labels = ("", names[0] if names else "", None, None)
            info = f"{title}: {a.ndim}-D tensor shown as one row"
        shown = self.panels if self.other is not None else self.panels[:1]
        for p in shown:
            p.set_axes(*labels)
        self.info_label.setText(info)

    def _fill_table(self) -> None:
        values, blank = self.current_values()
        self.table_model.set_array(values, self.array.dtype, blank)
        h, w = values.shape
        what = "montage of unscaled values" if blank is not None else "current slice"
        capped = ""
        if h > TABLE_LIMIT or w > TABLE_LIMIT:
            capped = (f"; showing the first {min(h, TABLE_LIMIT)} × {min(w, TABLE_LIMIT)} "
                      f"(Copy values copies all)")
        self.table_info.setText(f"{what}: {h} × {w}{capped}")

    def _draw_histogram(self, a: np.ndarray, what: str, summary: Summary | None = None) -> None:
        """Histogram of the finite values of ``a`` (at most 100 equal bins over their range;
        from ``summary`` when given)."""
        self.histogram.clear()
        self.hist_counts, self.hist_edges = np.zeros(0, np.int64), np.zeros(0)
        if summary is not None:
            hist = (summary.counts, summary.edges, summary.bins, summary.n_finite) \
                if summary.bins else None
            size = summary.size
        else:
            hist, size = _histogram(a), np.asarray(a).size
        if hist is None:
            self.histogram.setTitle(f"{what}: no finite values" if what else None,
                                    color=TITLE_COLOR, size="9pt")
            return
        self.hist_counts, self.hist_edges, bins, n_finite = hist
        self.histogram.addItem(pg.BarGraphItem(x0=self.hist_edges[:-1], x1=self.hist_edges[1:],
                                               height=self.hist_counts, brush="#5a9bd4",
                                               pen=None))
        left_out = size - n_finite
        note = f" ({left_out} NaN/Inf not shown)" if left_out else ""
        self.histogram.setTitle(f"{what}: {n_finite} finite values, {bins} bins{note}",
                                color=TITLE_COLOR, size="9pt")
        self.histogram.autoRange()

    def _on_hover(self, row: int, col: int) -> None:
        self.hover_label.setText(self.describe_pixel(row, col) if row >= 0 else "")

    def _ask_npy(self) -> None:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self, "Save tensor", dialog_folders.start("tensor", "tensor.npy"),
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
