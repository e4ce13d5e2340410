"""The editor of a fixed-length int list (strides, dilations: 4 or 5 cells labelled with the
data_format's axes; explicit_paddings: 8 cells, a (before, after) pair per axis)."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.attr_editor_base import AttrEditor
from app.attr_text import parse_int

#: The data formats whose letters label the cells of strides and dilations.
CELL_FORMATS = ("NHWC", "NCHW", "NDHWC", "NCDHW")


class IntCellsEditor(AttrEditor):
    """A fixed-length int list (strides, dilations: 4, or 5 for the 3-D ops; explicit_paddings:
    8) as small cells; an attribute that takes 4 or 5 entries (a check block's, whose op sets
    the rank) shows as many cells as its value has.

    4 or 5 cells are labelled with the axes of the node's data_format; 8 cells form a grid of
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
        self.shown_cells = self.length
        self._shown: list[str] = [""] * self.length
        self.set_context({})

    @property
    def active(self) -> list[QtWidgets.QLineEdit]:
        """The cells in use (all but a 5th when the value has 4 entries)."""
        return self.cells[:self.shown_cells]

    def _use(self, count: int) -> None:
        """Show ``count`` cells (one of the attribute's lengths), hiding the rest."""
        if self.length == 8 or count not in (self.spec.length or ()):
            return
        self.shown_cells = count
        for i, (cell, header) in enumerate(zip(self.cells, self.headers)):
            cell.setVisible(i < count)
            header.setVisible(i < count)

    def set_context(self, attrs: dict) -> None:
        fmt = str(attrs.get("data_format", ""))
        headers = self.headers[:min(len(self.headers), self.shown_cells)]
        axes = tuple(fmt) if fmt in CELL_FORMATS and len(fmt) == len(headers) \
            else tuple(str(i) for i in range(len(headers)))
        for h, a in zip(headers, axes):
            h.setText(a)

    def _finished(self) -> None:
        if [c.text() for c in self.active] != self._shown:
            self._shown = [c.text() for c in self.active]
            self.committed.emit()

    def set_value(self, value) -> None:
        values = list(value) if isinstance(value, (list, tuple)) else []
        self._use(len(values))
        texts = [str(v) for v in values[: self.shown_cells]]
        texts += [""] * (self.shown_cells - len(texts))
        self._show(texts)

    def _show(self, texts: list[str]) -> None:
        self._shown = list(texts)
        for cell, t in zip(self.active, texts):
            if cell.text() != t:
                cell.setText(t)

    def parse(self):
        out = []
        for i, cell in enumerate(self.active):
            out.append(parse_int(f"{self.spec.name}[{i}]", cell.text()))
        return out

    def raw_text(self) -> str:
        return ", ".join(c.text() for c in self.active)

    def set_raw(self, raw: str) -> None:
        parts = [p.strip() for p in raw.split(",")]
        self._use(len(parts))
        parts += [""] * (self.shown_cells - len(parts))
        self._show(parts[: self.shown_cells])


def cells_length(spec) -> int | None:
    """The cells of an int list of 4, 5 (or 4 or 5) or 8 entries: its longest length; None
    for any other int list (typed as text)."""
    length = spec.length
    if isinstance(length, int):
        length = (length,)
    if spec.kind != "int_list" or not length:
        return None
    if set(length) <= {4, 5} or tuple(length) == (8,):
        return int(max(length))
    return None
