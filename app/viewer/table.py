"""The viewer's Table tab: the numbers of the current slice (or montage) of the side acted on."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from engine.view.stats import exact_text

#: The numeric table shows at most this many rows and columns of a slice (copy takes all).
TABLE_LIMIT = 256
MUTED = "color: #8c939b;"


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
            if role == QtCore.Qt.ToolTipRole or self._dtype.kind == "b":
                return exact_text(v, self._dtype)
            return f"{v:.6g}"
        if role == QtCore.Qt.TextAlignmentRole:
            return int(QtCore.Qt.AlignRight | QtCore.Qt.AlignVCenter)
        return None

    def headerData(self, section, orientation, role=QtCore.Qt.DisplayRole):
        return str(section) if role == QtCore.Qt.DisplayRole else None


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

    def show_values(self, values: np.ndarray, dtype: np.dtype, blank: np.ndarray | None,
                    title: str) -> None:
        """Show ``values`` (of tensor ``title``); the caption says what and how much."""
        self.model.set_array(values, dtype, blank)
        h, w = values.shape
        what = "montage of unscaled values" if blank is not None else "current slice"
        capped = ""
        if h > TABLE_LIMIT or w > TABLE_LIMIT:
            capped = (f"; showing the first {min(h, TABLE_LIMIT)} × {min(w, TABLE_LIMIT)} "
                      f"(Copy values copies all)")
        of = f" of {title}" if title else ""
        self.info.setText(f"{what}{of}: {h} × {w}{capped}")

    def clear(self) -> None:
        self.model.set_array(np.zeros((0, 0)))
        self.info.setText("")
