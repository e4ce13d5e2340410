"""The explain panel's table: the terms of a sum (factor indices, values, product) or the output
elements one input element feeds. Shows at most :data:`ROW_LIMIT` rows; Copy takes them all."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from PySide6 import QtCore

from engine.explain.terms import Explanation
from engine.view.stats import exact_text

#: The table shows at most this many rows (Copy copies every row).
ROW_LIMIT = 10_000


def _index_text(row: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(v)) for v in row) + "]"


class RowsModel(QtCore.QAbstractTableModel):
    """A read-only table of ``count`` rows whose texts ``row(t)`` gives, capped to ``limit``."""

    def __init__(self, parent: QtCore.QObject | None = None, limit: int = ROW_LIMIT):
        super().__init__(parent)
        self.limit = limit
        self.headers: tuple[str, ...] = ()
        self.count = 0
        self._row: Callable[[int], tuple[str, ...]] = lambda t: ()
        self._cache: dict[int, tuple[str, ...]] = {}

    def set_rows(self, headers: Sequence[str], count: int,
                 row: Callable[[int], tuple[str, ...]]) -> None:
        self.beginResetModel()
        self.headers, self.count, self._row = tuple(headers), int(count), row
        self._cache = {}
        self.endResetModel()

    def clear(self) -> None:
        self.set_rows((), 0, lambda t: ())

    @property
    def shown(self) -> int:
        return min(self.count, self.limit)

    def row(self, t: int) -> tuple[str, ...]:
        """The texts of row ``t`` (the last few are kept: a view asks cell by cell)."""
        texts = self._cache.get(t)
        if texts is None:
            if len(self._cache) > 256:
                self._cache.clear()
            texts = self._cache[t] = self._row(t)
        return texts

    def all_text(self) -> str:
        """Every row (not only the shown ones), tab-separated, under the header line."""
        lines = ["\t".join(self.headers)]
        lines.extend("\t".join(self._row(t)) for t in range(self.count))
        return "\n".join(lines)

    def rowCount(self, parent=QtCore.QModelIndex()):  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else self.shown

    def columnCount(self, parent=QtCore.QModelIndex()):  # noqa: B008
        return 0 if parent.isValid() else len(self.headers)

    def data(self, index, role=QtCore.Qt.DisplayRole):
        if not index.isValid():
            return None
        if role in (QtCore.Qt.DisplayRole, QtCore.Qt.ToolTipRole):
            return self.row(index.row())[index.column()]
        if role == QtCore.Qt.TextAlignmentRole and index.column() > 0:
            return int(QtCore.Qt.AlignRight | QtCore.Qt.AlignVCenter)
        return None

    def headerData(self, section, orientation, role=QtCore.Qt.DisplayRole):
        if role != QtCore.Qt.DisplayRole:
            return None
        if orientation == QtCore.Qt.Horizontal:
            return self.headers[section] if section < len(self.headers) else None
        return None


def term_rows(e: Explanation) -> tuple[tuple[str, ...], Callable[[int], tuple[str, ...]]]:
    """Headers and row texts of the terms of ``e``: #, each factor's index and value, product."""
    a, b = e.factors
    products = e.products
    dtype = a.values.dtype

    def row(t: int) -> tuple[str, ...]:
        return (str(t), _index_text(a.index[t].tolist()),
                exact_text(float(a.values[t]), dtype), _index_text(b.index[t].tolist()),
                exact_text(float(b.values[t]), dtype), f"{float(products[t]):.10g}")

    return ("#", f"{a.port} index", f"{a.port}", f"{b.port} index", f"{b.port}",
            "product"), row


def feed_rows(out_name: str, indices: np.ndarray, output: np.ndarray
              ) -> tuple[tuple[str, ...], Callable[[int], tuple[str, ...]]]:
    """Headers and row texts of the output elements an input element feeds: #, index, value."""
    def row(t: int) -> tuple[str, ...]:
        idx = tuple(int(v) for v in indices[t])
        return str(t), _index_text(idx), exact_text(float(output[idx]), output.dtype)

    return ("#", f"{out_name} index", f"{out_name} value"), row
