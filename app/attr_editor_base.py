"""The attribute editors' contract (:class:`AttrEditor`): show a value, parse what was typed
(``parse``, raising InvalidArgumentError), show an invalid value back and mark it red, emit
``committed`` when the user finishes an edit; and :class:`LineEditor`, the one-line field the
typed editors build on."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

ERROR_STYLE = "border: 1px solid #e0503c; background: #3a1c1c;"


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
