"""The explain panel: why one element of a conv block's output has its value, and the reverse.

Explaining ``out[index]`` (:meth:`ExplainPanel.show_explanation`) shows the formula with the
actual indices, the number of terms and of padding terms, the float64 sum of the terms against
the block's value and their difference, one picture per array input (its slice holding the first
term's factor, the contributing elements outlined, "N of M terms in this slice") and one of the
output (the element explained), and the term table (at most :data:`ROW_LIMIT` rows; Copy copies
every term). The element can also be typed in the index entry (one entry per axis of the
tensor: four for the 2-D blocks, five for Conv3D and its gradients): it is explained in the
block the viewer shows, or shown as an input element's reverse.

Clicking a cell of an input picture asks for the reverse (signal ``element_clicked(port,
index)``); :meth:`ExplainPanel.show_feeds` then outlines every output element that input element
feeds and lists them. Clicking an output cell explains that element.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from app.explain.picture import MarkedPicture
from app.explain.terms import ROW_LIMIT, RowsModel, feed_rows, term_rows
from app.viewer.table import MUTED
from engine.explain.terms import Explanation
from engine.view.stats import exact_text

HINT = ("Click an element of a conv block's output in the tensor viewer (or right-click it > "
        "Explain element) to see the sum that defines it; click an input element here to see "
        "every output element it feeds.")
OUTPUT = "output"
INDEX_HINT = "element index, e.g. 0,1,2,3 or for a 3-D block 0,0,1,2,3"
#: Rows measured to size the table's columns.
SIZED_ROWS = 64


@dataclass(frozen=True)
class Operand:
    """An array shown in the panel: a block input port (or the output) and its tensor."""

    port: str
    array: np.ndarray
    axes: tuple[str, ...] | None
    source: str  # the title of the block it comes from


@dataclass(frozen=True)
class ExplainRequest:
    """What the panel shows: the block (label), its two operands and output, and either an
    explanation of ``index`` or (``feeds`` given) the output elements operand ``port``'s
    element ``index`` feeds."""

    label: str
    operands: tuple[Operand, Operand]
    output: Operand
    index: tuple[int, ...]
    explanation: Explanation | None = None
    port: str = OUTPUT
    feeds: np.ndarray | None = None


def parse_index(text: str) -> tuple[int, ...] | str:
    """An index typed as integers separated by commas or spaces (brackets allowed), or what is
    wrong with it."""
    words = [w for w in re.split(r"[\s,]+", text.strip().strip("[]()")) if w]
    if not words:
        return "Type an element index, e.g. 0,1,2,3 (a 3-D block: five entries, 0,0,1,2,3)."
    if not all(re.fullmatch(r"\d{1,18}", w) for w in words):
        return (f"Element index {text.strip()[:60]!r}: the entries must be integers >= 0, "
                "separated by commas.")
    return tuple(int(w) for w in words)


def _idx(index) -> str:
    return "[" + ", ".join(str(int(v)) for v in index) + "]"


class ExplainPanel(QtWidgets.QWidget):
    """Formula, counts, sum vs value, pictures with marks, and the term table."""

    #: (port, index): a cell clicked on an input picture (port) or the output picture ("output")
    element_clicked = QtCore.Signal(str, tuple)
    #: an element index typed in the entry (Return or Explain): its entries
    index_entered = QtCore.Signal(tuple)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.request: ExplainRequest | None = None
        self.title = self._label(bold=True)
        self.formula = self._label(mono=True)
        self.domain = self._label(muted=True)
        self.counts = self._label()
        self.sum_label = self._label(mono=True)
        self.sum_label.setObjectName("explain_sum")
        self.legend = self._label(muted=True)
        entry = self._build_entry()
        self.pictures: dict[str, MarkedPicture] = {}
        self.notes: dict[str, QtWidgets.QLabel] = {}
        row = self._build_pictures()
        bottom = self._build_table()
        self.splitter = QtWidgets.QSplitter(QtCore.Qt.Vertical, self)
        self.splitter.addWidget(row)
        self.splitter.addWidget(bottom)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setSizes([220, 120])
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.setSpacing(3)
        lay.addLayout(entry)
        for w in (self.title, self.formula, self.domain, self.counts, self.sum_label,
                  self.legend):
            lay.addWidget(w)
        lay.addWidget(self.splitter, 1)
        self.show_message(HINT)

    def _build_entry(self) -> QtWidgets.QHBoxLayout:
        """The element index entry and its Explain button."""
        self.index_edit = QtWidgets.QLineEdit(self)
        self.index_edit.setObjectName("explain_index")
        self.index_edit.setPlaceholderText(INDEX_HINT)
        self.index_edit.setToolTip("The element of the block the viewer shows, one entry per "
                                   "axis in the tensor's own layout: 4 for the 2-D conv blocks, "
                                   "5 (N,D,H,W,C or N,C,D,H,W) for the 3-D ones")
        self.index_edit.returnPressed.connect(self._index_typed)
        self.index_button = QtWidgets.QPushButton("Explain", self)
        self.index_button.setObjectName("explain_index_button")
        self.index_button.clicked.connect(self._index_typed)
        entry = QtWidgets.QHBoxLayout()
        entry.addWidget(QtWidgets.QLabel("Element:", self))
        entry.addWidget(self.index_edit, 1)
        entry.addWidget(self.index_button)
        return entry

    def _build_pictures(self) -> QtWidgets.QWidget:
        """The row of three pictures, each with its note above it."""
        row = QtWidgets.QWidget(self)
        pics = QtWidgets.QHBoxLayout(row)
        pics.setContentsMargins(0, 0, 0, 0)
        self._slots = []
        for slot in range(3):
            box = QtWidgets.QVBoxLayout()
            note = self._label(muted=True)
            pic = MarkedPicture(row)
            pic.element_clicked.connect(lambda idx, s=slot: self._picture_clicked(s, idx))
            box.addWidget(note)
            box.addWidget(pic, 1)
            pics.addLayout(box, 1)
            self._slots.append((note, pic))
        return row

    def _build_table(self) -> QtWidgets.QWidget:
        """The term table, its note and its Copy all rows button."""
        self.model = RowsModel(self)
        self.table = QtWidgets.QTableView(self)
        self.table.setObjectName("explain_terms")
        self.table.setModel(self.model)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectRows)
        self.table.horizontalHeader().setStretchLastSection(True)
        # column widths from the first rows only (all 10,000 would take a second)
        self.table.horizontalHeader().setResizeContentsPrecision(SIZED_ROWS)
        self.table_note = self._label(muted=True)
        self.copy_button = QtWidgets.QPushButton("Copy all rows", self)
        self.copy_button.setToolTip("Copy every row of the table (not only the shown ones) as "
                                    "tab-separated text")
        self.copy_button.clicked.connect(self.copy_rows)
        foot = QtWidgets.QHBoxLayout()
        foot.addWidget(self.table_note, 1)
        foot.addWidget(self.copy_button)
        bottom = QtWidgets.QWidget(self)
        bl = QtWidgets.QVBoxLayout(bottom)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(self.table, 1)
        bl.addLayout(foot)
        return bottom

    def _label(self, bold: bool = False, mono: bool = False, muted: bool = False
               ) -> QtWidgets.QLabel:
        lab = QtWidgets.QLabel(self)
        lab.setWordWrap(True)
        lab.setTextInteractionFlags(QtCore.Qt.TextSelectableByMouse)
        lab.setSizePolicy(QtWidgets.QSizePolicy.Ignored, QtWidgets.QSizePolicy.Preferred)
        style = []
        if bold:
            style.append("font-weight: bold;")
        if mono:
            style.append("font-family: monospace;")
        if muted:
            style.append(MUTED)
        lab.setStyleSheet(" ".join(style))
        return lab

    # -- what is shown -------------------------------------------------------------------------
    def show_message(self, text: str) -> None:
        """Nothing explained: ``text`` (a hint, or why the element cannot be explained)."""
        self.request = None
        self.title.setText(text)
        for lab in (self.formula, self.domain, self.counts, self.sum_label, self.legend,
                    self.table_note):
            lab.setText("")
            lab.setVisible(lab is self.table_note)
        self.pictures, self.notes = {}, {}
        for note, pic in self._slots:
            note.setText("")
            pic.clear_image()
            pic.set_marks(np.zeros((0, 4), np.int64), None)
        self.model.clear()

    def show_explanation(self, req: ExplainRequest) -> None:
        """The defining sum of ``req.output`` at ``req.index`` (``req.explanation``)."""
        e = req.explanation
        assert e is not None
        self.request = req
        self.index_edit.setText(",".join(str(int(v)) for v in req.index))
        value = req.output.array[req.index]
        self.title.setText(f"{req.label} · {req.output.port}{_idx(req.index)}")
        self.formula.setText(e.formula)
        self.domain.setText(f"over {e.domain}")
        self.counts.setText(
            f"{e.terms:,} term(s); {e.padding_terms:,} padding term(s) (they would read "
            "padding: they contribute nothing and are not listed)")
        self.counts.setToolTip("A term reads one element of each input; the pictures below "
                               "outline the elements of the terms")
        s = e.sum
        diff = abs(s - float(value))
        self.sum_label.setText(
            f"sum of the terms (float64) = {s!r}  ·  block value ({e.dtype}) = "
            f"{exact_text(float(value), req.output.array.dtype)}  ·  |difference| = {diff:.3g}")
        self.legend.setText("Outlined in white: the elements of the terms; in pink: the elements "
                            "of term 0 and the element explained. Click an input element to "
                            "see every output element it feeds.")
        for lab in (self.formula, self.domain, self.counts, self.sum_label, self.legend):
            lab.setVisible(True)
        for f, operand, slot in zip(e.factors, req.operands, range(2), strict=True):
            focus = tuple(int(v) for v in f.index[0]) if e.terms else None
            marked = self._show(slot, operand, focus, f.index, focus)
            self._note(slot, f"{operand.port}: {marked:,} of {e.terms:,} terms in this slice")
        self._show(2, req.output, req.index, np.zeros((0, 4), np.int64), req.index)
        self._note(2, f"{req.output.port}: the element explained")
        headers, row = term_rows(e)
        self._table(headers, e.terms, row, "terms")

    def show_feeds(self, req: ExplainRequest) -> None:
        """Every output element that ``req.port``'s element ``req.index`` feeds
        (``req.feeds``)."""
        fed = req.feeds
        assert fed is not None
        self.request = req
        slot = next(i for i, op in enumerate(req.operands) if op.port == req.port)
        operand = req.operands[slot]
        value = operand.array[req.index]
        self.title.setText(f"{req.label} · {req.port}{_idx(req.index)} = "
                           f"{exact_text(float(value), operand.array.dtype)}")
        self.formula.setText(f"{req.port}{_idx(req.index)} is a factor in the sums of "
                             f"{len(fed):,} element(s) of {req.output.port}")
        self.legend.setText("Outlined in white: the output elements it feeds; in pink: the "
                            "element clicked. Click an output element to explain it.")
        for lab in (self.formula, self.legend):
            lab.setVisible(True)
        for lab in (self.domain, self.counts, self.sum_label):
            lab.setVisible(False)
        self._show(slot, operand, req.index, np.zeros((0, 4), np.int64), req.index)
        self._note(slot, f"{operand.port}: the element clicked")
        other = 1 - slot
        self._show(other, req.operands[other], None, np.zeros((0, 4), np.int64), None)
        self._note(other, f"{req.operands[other].port}")
        first = tuple(int(v) for v in fed[0]) if len(fed) else None
        marked = self._show(2, req.output, first, fed, None)
        self._note(2, f"{req.output.port}: {marked:,} of {len(fed):,} fed elements in this "
                      "slice")
        headers, row = feed_rows(req.output.port, fed, req.output.array)
        self._table(headers, len(fed), row, "output elements")

    def _show(self, slot: int, operand: Operand, focus, marks: np.ndarray, focus_mark) -> int:
        note, pic = self._slots[slot]
        pic.show_tensor(operand.array, operand.axes, operand.port, focus)
        key = operand.port
        self.pictures[key], self.notes[key] = pic, note
        pic.setToolTip(f"{operand.port} from {operand.source}: {pic.caption()}")
        return pic.set_marks(marks, focus_mark)

    def _note(self, slot: int, text: str) -> None:
        """``text`` over the picture, then which slice it shows (the fixed indices)."""
        note, pic = self._slots[slot]
        st = pic.state
        fixed = st.fixed_text()
        where = ("every element (filter montage)" if st.montage_mode and not st.depth_montage
                 else f"slice {fixed}")
        note.setText(f"{text}\n{where}")
        note.setToolTip(pic.toolTip())

    def _table(self, headers, count: int, row, what: str) -> None:
        self.model.set_rows(headers, count, row)
        self.table.resizeColumnsToContents()
        self.table_note.setVisible(True)
        if count > self.model.limit:
            self.table_note.setText(f"showing the first {self.model.limit:,} of {count:,} {what}; "
                                    "Copy all rows copies every one")
        else:
            self.table_note.setText(f"{count:,} {what}")

    def copy_rows(self) -> str:
        """Copy every row of the table to the clipboard (tab-separated, header first)."""
        QtWidgets.QApplication.setOverrideCursor(QtCore.Qt.WaitCursor)  # a million rows: ~10 s
        try:
            text = self.model.all_text()
            QtGui.QGuiApplication.clipboard().setText(text)
        finally:
            QtWidgets.QApplication.restoreOverrideCursor()
        return text

    def _index_typed(self) -> None:
        """The entry's text as an index (``index_entered``), or a message saying what is
        wrong."""
        index = parse_index(self.index_edit.text())
        if isinstance(index, str):
            self.show_message(index)
        else:
            self.index_entered.emit(index)

    def _picture_clicked(self, slot: int, index: tuple) -> None:
        req = self.request
        if req is None:
            return
        ports = [op.port for op in req.operands] + [OUTPUT]
        self.element_clicked.emit(ports[slot], index)


__all__ = ["HINT", "OUTPUT", "ROW_LIMIT", "ExplainPanel", "ExplainRequest", "Operand"]
