"""The viewer's Table tab: the numbers of the current slice (or of the filter montage) of the side
acted on, each cell the whole value (every digit its dtype needs) under headers that name the
tensor's axes and indices (``H 3``; a montage's ``in 0, kh 2`` down and ``out 1, kw 0`` across)."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from engine.view.stats import exact_text
from engine.view.tensor_view import ViewState

#: The numeric table shows at most this many rows and columns of a slice (copy takes all).
TABLE_LIMIT = 256
MUTED = "color: #8c939b;"
#: Room around a cell's text (the view's padding and grid line), in pixels.
CELL_PADDING = 12


class TableView:
    """What the table shows: 2-D ``values``, each row's and column's label, and the tensor
    index of cell (r, c) (:meth:`index`)."""

    def __init__(self, st: ViewState, tensor: np.ndarray):
        names = st.axes
        if st.montage_mode:  # tiles as in the picture, without the separators
            tiles = st.tiles(tensor)
            kh, kw, cin, cout = tiles.shape
            tr, tc, gr, gc = st.tile_names()
            self.values = tiles.transpose(2, 0, 3, 1).reshape(cin * kh, cout * kw)
            self.rows = [f"{gr} {i}, {tr} {a}" if gr else f"{tr} {a}"
                         for i in range(cin) for a in range(kh)]
            self.cols = [f"{gc} {o}, {tc} {b}" for o in range(cout) for b in range(kw)]
            down = f"{gr} ({cin}) × {tr} ({kh})" if gr else f"{tr} ({kh})"
            self.what = f"{down} down, {gc} ({cout}) × {tc} ({kw}) across"
            self._index = lambda r, c: st.tile_index((r % kh, c % kw, r // kh, c // kw))
            return
        self.values = st.slice(tensor)
        h, w = self.values.shape
        if tensor.ndim >= 2:
            ra, ca = st.view_axes
            self.rows = [f"{names[ra]} {i}" for i in range(h)]
            self.cols = [f"{names[ca]} {j}" for j in range(w)]
            self.what = f"current slice, {names[ra]} down × {names[ca]} across"
            self._index = lambda r, c: st.pixel_index(r, c)
        else:
            self.rows = [""] * h
            self.cols = [f"{names[0]} {j}" if names else str(j) for j in range(w)]
            self.what = "current slice"
            self._index = lambda _r, c: (c,) if tensor.ndim == 1 else ()
        self.names = names

    def index(self, r: int, c: int) -> tuple[int, ...] | None:
        """The tensor index of cell (r, c); None for an empty tile of a depth montage."""
        at = self._index(r, c)
        return None if at is None else tuple(int(i) for i in at)


def cell_texts(a: np.ndarray, dtype: np.dtype) -> list[list[str]]:
    """:func:`engine.view.stats.exact_text` of every element of 2-D ``a`` (of ``dtype``)."""
    if dtype in (np.float16, np.float32, np.float64) and a.dtype.kind == "f":
        # NumPy's str of a scalar is exact_text's own rule, without a call per element (the
        # values came from ``dtype``: converting back is exact)
        return [[t.removesuffix(".0") for t in map(str, row)] for row in a.astype(dtype)]
    return [[exact_text(v, dtype) for v in row] for row in a.tolist()]


_DIGITS = str.maketrans("0123456789", "##########")


def widest(metrics: QtGui.QFontMetrics, texts) -> int:
    """The width of the widest of ``texts``: each digit counted as the font's widest digit, so
    only one text per pattern of digits, signs and letters is measured."""
    digit = max(metrics.horizontalAdvance(d) for d in "0123456789")
    patterns = {t.translate(_DIGITS) for t in texts}
    return max((metrics.horizontalAdvance(p.replace("#", "")) + digit * p.count("#")
                for p in patterns), default=0)


class SliceModel(QtCore.QAbstractTableModel):
    """A read-only table (capped to TABLE_LIMIT x TABLE_LIMIT) of whole values; the tooltip
    gives the element's tensor index."""

    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self._texts: list[list[str]] | None = []
        self._shown = np.zeros((0, 0))
        self._dtype = np.dtype(np.float64)
        self._rows: list[str] = []
        self._cols: list[str] = []
        self._view: TableView | None = None
        self._axes: tuple[str, ...] = ()
        self.full_shape: tuple[int, int] = (0, 0)

    def set_view(self, view: TableView | None, dtype: np.dtype = np.float64,
                 axes: tuple[str, ...] = ()) -> None:
        self.beginResetModel()
        a = view.values if view is not None else np.zeros((0, 0))
        self.full_shape = (int(a.shape[0]), int(a.shape[1]))
        self._shown, self._dtype = a[:TABLE_LIMIT, :TABLE_LIMIT], np.dtype(dtype)
        self._texts = None  # made when asked for (the Table tab seen), not on every redraw
        self._rows = view.rows[:TABLE_LIMIT] if view is not None else []
        self._cols = view.cols[:TABLE_LIMIT] if view is not None else []
        self._view, self._axes = view, axes
        self.endResetModel()

    def texts(self) -> list[list[str]]:
        """The text of every cell shown."""
        if self._texts is None:
            self._texts = cell_texts(self._shown, self._dtype)
        return self._texts

    def text(self, r: int, c: int) -> str:
        if self._view is not None and self._view.index(r, c) is None:
            return ""  # an empty tile of a depth montage
        if self._texts is not None:
            return self._texts[r][c]
        return exact_text(self._shown[r, c], self._dtype)

    def rowCount(self, parent=QtCore.QModelIndex()):  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else self._shown.shape[0]

    def columnCount(self, parent=QtCore.QModelIndex()):  # noqa: B008
        return 0 if parent.isValid() else self._shown.shape[1]

    def data(self, index, role=QtCore.Qt.DisplayRole):
        if not index.isValid():
            return None
        r, c = index.row(), index.column()
        if role == QtCore.Qt.DisplayRole:
            return self.text(r, c)
        if role == QtCore.Qt.ToolTipRole:
            idx = self._view.index(r, c) if self._view is not None else ()
            if idx is None:
                return "an empty tile (after the last depth slice)"
            where = ", ".join(f"{n} {i}" for n, i in zip(self._axes, idx, strict=False))
            return f"[{where}] = {self.text(r, c)}"
        if role == QtCore.Qt.TextAlignmentRole:
            return int(QtCore.Qt.AlignRight | QtCore.Qt.AlignVCenter)
        return None

    def headerData(self, section, orientation, role=QtCore.Qt.DisplayRole):
        if role != QtCore.Qt.DisplayRole:
            return None
        labels = self._rows if orientation == QtCore.Qt.Vertical else self._cols
        return labels[section] if 0 <= section < len(labels) else str(section)


class TablePage(QtWidgets.QWidget):
    """A caption (what the table holds, of which tensor) over the table."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.info = QtWidgets.QLabel(self)
        self.info.setStyleSheet(MUTED)
        self.info.setSizePolicy(QtWidgets.QSizePolicy.Ignored, QtWidgets.QSizePolicy.Preferred)
        self.table = QtWidgets.QTableView(self)
        self.model = SliceModel(self)
        self.table.setModel(self.model)
        self.table.horizontalHeader().setDefaultSectionSize(72)
        self.table.verticalHeader().setDefaultSectionSize(22)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 2, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.info)
        lay.addWidget(self.table, 1)
        self._fitted = True

    def show_view(self, st: ViewState, tensor: np.ndarray, title: str) -> None:
        """Show the current view of ``tensor`` (of tensor ``title``); the caption says what and
        how much; every column is as wide as its widest text (no cell is cut)."""
        view = TableView(st, tensor)
        self.model.set_view(view, tensor.dtype, st.axes)
        self._fitted = False
        if self.isVisible():
            self._fit_columns()
        h, w = view.values.shape
        capped = ""
        if h > TABLE_LIMIT or w > TABLE_LIMIT:
            capped = (f"; showing the first {min(h, TABLE_LIMIT)} × {min(w, TABLE_LIMIT)} "
                      f"(Copy values copies all)")
        of = f" of {title}" if title else ""
        self.info.setText(f"{view.what}{of}: {h} × {w}{capped}")

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._fitted:
            self._fit_columns()

    def _fit_columns(self) -> None:
        """Every column as wide as its widest text or header (done when the page is seen)."""
        self._fitted = True
        metrics = QtGui.QFontMetrics(self.table.font())
        head = QtGui.QFontMetrics(self.table.horizontalHeader().font())
        texts = self.model.texts()
        for c in range(self.model.columnCount()):
            label = str(self.model.headerData(c, QtCore.Qt.Horizontal))
            width = max(widest(metrics, (row[c] for row in texts)), head.horizontalAdvance(label))
            self.table.setColumnWidth(c, width + CELL_PADDING)

    def clear(self) -> None:
        self.model.set_view(None)
        self.info.setText("")
