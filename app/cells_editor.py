"""The editor of a fixed-length int list (strides, dilations: 4 cells labelled with the
data_format's axes; explicit_paddings: 8 cells, a (before, after) pair per axis)."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.attr_editor_base import AttrEditor
from app.attr_text import parse_int

AXES_BY_FORMAT = {"NHWC": ("N", "H", "W", "C"), "NCHW": ("N", "C", "H", "W")}


class IntCellsEditor(AttrEditor):
    """A fixed-length int list (strides, dilations: 4; explicit_paddings: 8) as small cells.

    4 cells are labelled with the axes of the node's data_format; 8 cells form a grid of
    (before, after) pairs per axis. A cell takes any text, as every field does: what is no
    whole number is marked red on leaving it, the reason below the fields.
    """

    def __init__(self, spec, parent=None):
        super().__init__(spec, parent)
        self.length = cells_length(spec)
        self.cells: list[QtWidgets.QLineEdit] = []
        self.headers: list[QtWidgets.QLabel] = []
        grid = QtWidgets.QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(3)
        grid.setVerticalSpacing(1)
        pairs = self.length == 8
        ncols = 4 if pairs else self.length
        for c in range(ncols):
            h = QtWidgets.QLabel("", self)
            h.setAlignment(QtCore.Qt.AlignCenter)
            h.setStyleSheet("color: #8a8f98; font-size: 8pt;")
            grid.addWidget(h, 0, c + (1 if pairs else 0))
            self.headers.append(h)
        if pairs:
            for r, name in enumerate(("before", "after")):
                lab = QtWidgets.QLabel(name, self)
                lab.setStyleSheet("color: #8a8f98; font-size: 8pt;")
                grid.addWidget(lab, r + 1, 0)
        for i in range(self.length):  # any text goes in: an invalid one is marked, not refused
            cell = QtWidgets.QLineEdit(self)
            cell.setAlignment(QtCore.Qt.AlignCenter)
            cell.setMaximumWidth(44)
            cell.setToolTip(spec.doc or spec.name)
            cell.editingFinished.connect(self._finished)
            if pairs:
                grid.addWidget(cell, 1 + i % 2, 1 + i // 2)
            else:
                grid.addWidget(cell, 1, i)
            self.cells.append(cell)
        grid.setColumnStretch(ncols + (1 if pairs else 0), 1)
        self._shown: list[str] = [""] * self.length
        self.set_context({})

    def set_context(self, attrs: dict) -> None:
        axes = AXES_BY_FORMAT.get(str(attrs.get("data_format", "NHWC")), ("0", "1", "2", "3"))
        if self.length not in (4, 8):
            axes = tuple(str(i) for i in range(len(self.headers)))
        for h, a in zip(self.headers, axes):
            h.setText(a)

    def _finished(self) -> None:
        if [c.text() for c in self.cells] != self._shown:
            self._shown = [c.text() for c in self.cells]
            self.committed.emit()

    def set_value(self, value) -> None:
        values = list(value) if isinstance(value, (list, tuple)) else []
        texts = [str(v) for v in values[: self.length]]
        texts += [""] * (self.length - len(texts))
        self._show(texts)

    def _show(self, texts: list[str]) -> None:
        self._shown = list(texts)
        for cell, t in zip(self.cells, texts):
            if cell.text() != t:
                cell.setText(t)

    def parse(self):
        out = []
        for i, cell in enumerate(self.cells):
            out.append(parse_int(f"{self.spec.name}[{i}]", cell.text()))
        return out

    def raw_text(self) -> str:
        return ", ".join(c.text() for c in self.cells)

    def set_raw(self, raw: str) -> None:
        parts = [p.strip() for p in raw.split(",")]
        parts += [""] * (self.length - len(parts))
        self._show(parts[: self.length])


def cells_length(spec) -> int | None:
    """4 or 8 when the attribute is an int list of exactly that length, else None."""
    length = spec.length
    if isinstance(length, int):
        length = (length,)
    if spec.kind == "int_list" and length is not None and len(length) == 1 \
            and length[0] in (4, 8):
        return int(length[0])
    return None
