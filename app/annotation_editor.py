"""A small dialog editing a frame's title (one line) or a note's plain text (several lines).

It is opened with ``open()`` (window-modal, not a nested event loop). OK hands the text to
``commit``; when ``commit`` refuses it (returns a message), the dialog stays open with the
message and the text, so nothing typed is lost.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore, QtWidgets


class TextEditDialog(QtWidgets.QDialog):
    """Edit ``text``; ``commit(text)`` returns None when accepted, else the reason."""

    def __init__(self, parent: QtWidgets.QWidget, title: str, text: str, multiline: bool,
                 commit: Callable[[str], str | None]):
        super().__init__(parent)
        self.setObjectName("text_edit_dialog")
        self.setWindowTitle(title)
        self._commit = commit
        if multiline:
            self.editor = QtWidgets.QPlainTextEdit(self)
            self.editor.setPlainText(text)
            self.editor.setTabChangesFocus(False)
            self.resize(420, 260)
        else:
            self.editor = QtWidgets.QLineEdit(text, self)
            self.editor.selectAll()
            self.resize(360, 90)
        self.editor.setObjectName("text_edit_field")
        self.error = QtWidgets.QLabel(self)
        self.error.setObjectName("text_edit_error")
        self.error.setTextFormat(QtCore.Qt.PlainText)
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #d04040")
        self.error.hide()
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.Ok
                                             | QtWidgets.QDialogButtonBox.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.ok_button = buttons.button(QtWidgets.QDialogButtonBox.Ok)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(self.editor)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self.setAttribute(QtCore.Qt.WA_DeleteOnClose)

    def text(self) -> str:
        if isinstance(self.editor, QtWidgets.QPlainTextEdit):
            return self.editor.toPlainText()
        return self.editor.text()

    def accept(self) -> None:
        problem = self._commit(self.text())
        if problem:
            self.error.setText(problem)
            self.error.show()
            return
        super().accept()
