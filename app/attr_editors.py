"""The typed editors of block attributes, and :func:`make_editor`, which chooses one by
``AttrSpec.kind``.

Each editor keeps :class:`app.attr_editor_base.AttrEditor`'s contract: it shows a value, turns
what the user typed into a Python value (:mod:`app.attr_text`) and emits ``committed`` when the
user finishes an edit. Validation against the spec is the panel's job.
"""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from app.attr_editor_base import AttrEditor, LineEditor
from app.attr_text import (
    list_text,
    literal_text,
    parse_float,
    parse_int,
    parse_int_list,
    parse_literal,
)
from app.cells_editor import IntCellsEditor, cells_length
from app.path_editor import PathEditor
from engine.base.dtypes import DTYPES


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
