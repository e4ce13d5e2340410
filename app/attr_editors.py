"""Typed editors for block attributes, chosen by ``AttrSpec.kind``.

Each editor shows a value, turns what the user typed into a Python value (``parse``, raising
InvalidArgumentError naming the attribute and what was expected) and emits ``committed`` when
the user finishes an edit. Validation against the spec is the panel's job.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from app import dialog_folders
from engine.base.dtypes import DTYPES
from engine.base.errors import InvalidArgumentError

ERROR_STYLE = "border: 1px solid #e0503c; background: #3a1c1c;"
#: The data formats whose letters label the cells of strides and dilations.
CELL_FORMATS = ("NHWC", "NCHW", "NDHWC", "NCDHW")


def parse_int(attr: str, text: str) -> int:
    text = text.strip()
    try:
        return int(text, 10)
    except ValueError:
        raise InvalidArgumentError(
            f"{attr} must be an integer, got {text!r}" if text
            else f"{attr} must be an integer, got an empty field") from None


def parse_float(attr: str, text: str) -> float:
    """'1e-3', '0.001', '2' -> a float; anything else (an empty field included) is a message
    naming the attribute. Range and finiteness are the spec's to check."""
    text = text.strip()
    if not text:
        raise InvalidArgumentError(f"{attr} must be a number (e.g. 0.001 or 1e-3), got an "
                                   "empty field")
    try:
        return float(text)
    except ValueError:
        raise InvalidArgumentError(
            f"{attr} must be a number (e.g. 0.001 or 1e-3), got {text[:40]!r}") from None


def parse_int_list(attr: str, text: str) -> list[int]:
    """'1, 2, 3' or '[1, 2, 3]' -> [1, 2, 3]."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    if not body.strip():
        return []
    parts = [p for p in body.replace(";", ",").replace(",", " ").split()]
    out = []
    for i, part in enumerate(parts):
        try:
            out.append(int(part, 10))
        except ValueError:
            raise InvalidArgumentError(
                f"{attr}[{i}] must be an integer, got {part!r}") from None
    return out


def parse_literal(attr: str, text: str):
    """A JSON or Python literal (numbers, nested lists); never evaluates code."""
    body = text.strip()
    if not body:
        raise InvalidArgumentError(f"{attr} must be a list of numbers (e.g. [[1, 2], [3, 4]]), "
                                   "got an empty field")
    try:
        return json.loads(body)
    except ValueError:
        pass
    try:
        return ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError) as exc:
        raise InvalidArgumentError(
            f"{attr} must be a literal list of numbers, got {body[:40]!r} "
            f"({type(exc).__name__}: {exc})") from None


def list_text(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def literal_text(value) -> str:
    if value is None:
        return ""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text


class AttrEditor(QtWidgets.QWidget):
    """Base class: ``committed`` fires when the user finished an edit of this attribute."""

    committed = QtCore.Signal()

    def __init__(self, spec, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.spec = spec
        self.setToolTip(spec.doc or spec.name)

    def set_value(self, value) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def parse(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def raw_text(self) -> str:
        """What the user typed, for showing an invalid value back."""
        return ""

    def set_raw(self, raw: str) -> None:
        """Show an invalid value the user typed earlier."""

    def set_error(self, message: str | None) -> None:
        """Mark the fields red with ``message`` (None: unmark them). A field keeps the height
        it has unmarked: the red border is no other box, so no field below it moves."""
        for w in self.findChildren(QtWidgets.QWidget) or [self]:
            if isinstance(w, (QtWidgets.QLineEdit, QtWidgets.QComboBox,
                              QtWidgets.QPlainTextEdit, QtWidgets.QCheckBox)):
                if w.minimumHeight() != w.maximumHeight() and not w.styleSheet():
                    w.setFixedHeight(w.sizeHint().height())
                w.setStyleSheet(ERROR_STYLE if message else "")
                w.setToolTip(message or self.spec.doc or self.spec.name)

    def set_context(self, attrs: dict) -> None:
        """Other attributes of the node changed (e.g. data_format names the axes)."""


class ComboEditor(AttrEditor):
    def __init__(self, spec, parent=None):
        super().__init__(spec, parent)
        choices = tuple(spec.choices) or (tuple(DTYPES) if spec.kind == "dtype" else ())
        self.combo = QtWidgets.QComboBox(self)
        self.combo.addItems([str(c) for c in choices])
        self._choices = choices
        self.combo.setToolTip(spec.doc or spec.name)
        self.combo.activated.connect(lambda _i: self.committed.emit())
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.combo)

    def set_value(self, value) -> None:
        idx = self.combo.findText(str(value))
        if idx < 0:
            self.combo.addItem(str(value))
            idx = self.combo.count() - 1
        self.combo.blockSignals(True)
        self.combo.setCurrentIndex(idx)
        self.combo.blockSignals(False)

    def parse(self):
        text = self.combo.currentText()
        for c in self._choices:
            if str(c) == text:
                return c
        return text

    def raw_text(self) -> str:
        return self.combo.currentText()

    def set_raw(self, raw: str) -> None:
        self.set_value(raw)


class CheckEditor(AttrEditor):
    def __init__(self, spec, parent=None):
        super().__init__(spec, parent)
        self.check = QtWidgets.QCheckBox(self)
        self.check.setToolTip(spec.doc or spec.name)
        self.check.toggled.connect(lambda _b: self.committed.emit())
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.check)

    def set_value(self, value) -> None:
        self.check.blockSignals(True)
        self.check.setChecked(bool(value))
        self.check.blockSignals(False)

    def parse(self):
        return self.check.isChecked()

    def raw_text(self) -> str:
        return str(self.check.isChecked())


class LineEditor(AttrEditor):
    """One QLineEdit; subclasses define how its text parses."""

    def __init__(self, spec, parent=None, placeholder: str = ""):
        super().__init__(spec, parent)
        self.edit = QtWidgets.QLineEdit(self)
        self.edit.setPlaceholderText(placeholder)
        self.edit.setToolTip(spec.doc or spec.name)
        self.edit.editingFinished.connect(self._finished)
        self._shown = ""
        self.lay = QtWidgets.QHBoxLayout(self)
        self.lay.setContentsMargins(0, 0, 0, 0)
        self.lay.setSpacing(2)
        self.lay.addWidget(self.edit)

    def _finished(self) -> None:
        if self.edit.isModified() or self.edit.text() != self._shown:
            self.edit.setModified(False)
            self.committed.emit()

    def _show(self, text: str) -> None:
        self._shown = text
        if self.edit.text() != text:
            self.edit.setText(text)
        self.edit.setModified(False)

    def set_value(self, value) -> None:
        self._show(self.format(value))

    def format(self, value) -> str:
        return "" if value is None else str(value)

    def raw_text(self) -> str:
        return self.edit.text()

    def set_raw(self, raw: str) -> None:
        self._show(raw)

    def parse(self):
        return self.edit.text()


class IntEditor(LineEditor):
    def __init__(self, spec, parent=None):
        super().__init__(spec, parent, "integer")
        self.edit.setMaximumWidth(120)
        self.lay.addStretch(1)  # a narrow field starts where the others start, not centred

    def parse(self):
        return parse_int(self.spec.name, self.edit.text())


class FloatEditor(LineEditor):
    """A float typed as text ('0.001', '1e-3'); shown as Python writes it (round-trips)."""

    def __init__(self, spec, parent=None):
        super().__init__(spec, parent, "number, e.g. 1e-3")
        self.edit.setMaximumWidth(160)
        self.lay.addStretch(1)  # a narrow field starts where the others start, not centred

    def format(self, value) -> str:
        return "" if value is None else repr(float(value))

    def parse(self):
        return parse_float(self.spec.name, self.edit.text())


class IntListLineEditor(LineEditor):
    """A list of ints of any length, typed as '1, 5, 5, 2'."""

    def __init__(self, spec, parent=None):
        super().__init__(spec, parent, "e.g. 1, 5, 5, 2")

    def format(self, value) -> str:
        return list_text(value)

    def parse(self):
        return parse_int_list(self.spec.name, self.edit.text())


class LiteralEditor(AttrEditor):
    """Literal values (nested lists of numbers), edited as text; Apply or Ctrl+Enter commits."""

    def __init__(self, spec, parent=None):
        super().__init__(spec, parent)
        self.text = QtWidgets.QPlainTextEdit(self)
        self.text.setToolTip((spec.doc or spec.name) + "\n(Ctrl+Enter applies)")
        self.text.setTabChangesFocus(True)
        self.text.setFixedHeight(64)
        font = QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.FixedFont)
        self.text.setFont(font)
        self.apply = QtWidgets.QPushButton("Apply", self)
        self.apply.setToolTip("Apply the typed values (Ctrl+Enter)")
        self.apply.clicked.connect(self.committed.emit)
        QtGui.QShortcut(QtGui.QKeySequence("Ctrl+Return"), self.text,
                        activated=self.committed.emit,
                        context=QtCore.Qt.WidgetShortcut)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.text)
        lay.addWidget(self.apply, 0, QtCore.Qt.AlignRight)

    def set_value(self, value) -> None:
        text = literal_text(value)
        if self.text.toPlainText() != text:
            self.text.setPlainText(text)

    def parse(self):
        return parse_literal(self.spec.name, self.text.toPlainText())

    def raw_text(self) -> str:
        return self.text.toPlainText()

    def set_raw(self, raw: str) -> None:
        if self.text.toPlainText() != raw:
            self.text.setPlainText(raw)


#: A path editor's file dialog for a Tensor fill: (dialog_folders kind, what to choose, the
#: dialog's file filter); .npy files for any other fill.
PATH_CHOICES = {"image": ("image", "a PNG or JPEG image",
                          "Images (*.png *.jpg *.jpeg);;All files (*)")}
NPY_CHOICE = ("tensor", "a .npy file", "NumPy arrays (*.npy);;All files (*)")


class PathEditor(LineEditor):
    """A file path (relative to the canvas file) with a browse button: .npy files, or PNG/JPEG
    images while the block's fill is ``image``."""

    def __init__(self, spec, parent=None, base_dir=None):
        super().__init__(spec, parent, "file.npy (relative to the canvas)")
        self.base_dir = base_dir
        self.kind, what, self.filter = NPY_CHOICE
        self.browse_button = browse = QtWidgets.QToolButton(self)
        browse.setText("…")
        browse.setToolTip(f"Choose {what}")
        browse.clicked.connect(self.browse)
        self.lay.addWidget(browse)

    def set_context(self, attrs: dict) -> None:
        self.kind, what, self.filter = PATH_CHOICES.get(str(attrs.get("fill")), NPY_CHOICE)
        self.browse_button.setToolTip(f"Choose {what}")
        self.edit.setPlaceholderText(
            "image.png (relative to the canvas)" if self.kind == "image"
            else "file.npy (relative to the canvas)")

    def browse(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self, f"Choose {self.spec.name}", dialog_folders.start(self.kind), self.filter)
        if path:
            dialog_folders.remember(self.kind, path)
            self._show(self.relative(path))
            self.committed.emit()

    def relative(self, path: str) -> str:
        base = self.base_dir() if callable(self.base_dir) else None
        if base is None:
            return path
        try:
            rel = os.path.relpath(path, base)
        except ValueError:
            return path
        return path if rel.startswith("..") else Path(rel).as_posix()


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


def make_editor(spec, parent=None, base_dir=None) -> AttrEditor:
    """The editor widget for an AttrSpec, by kind."""
    kind = spec.kind
    if kind in ("enum", "dtype"):
        return ComboEditor(spec, parent)
    if kind == "bool":
        return CheckEditor(spec, parent)
    if kind == "int":
        return IntEditor(spec, parent)
    if kind == "float":
        return FloatEditor(spec, parent)
    if cells_length(spec) is not None:
        return IntCellsEditor(spec, parent)
    if kind in ("int_list", "shape"):
        return IntListLineEditor(spec, parent)
    if kind == "values":
        return LiteralEditor(spec, parent)
    if kind == "path":
        return PathEditor(spec, parent, base_dir=base_dir)
    return LineEditor(spec, parent)
