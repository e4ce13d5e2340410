"""A label for messages and captions that wraps inside its panel and never widens the window.

A plain ``QLabel`` asks its layout for the width of its longest unbreakable word, so a long
path in an error message made the panel, its dock and finally the main window grow (and the
window kept that size next start). ``MessageLabel`` takes whatever width the layout gives it
(horizontal policy Ignored), wraps at words and inside long paths (zero-width break points),
and keeps the exact text in its tooltip; :meth:`text` returns the text as set.
"""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.formatting import breakable


class MessageLabel(QtWidgets.QLabel):
    """Word-wrapped plain text whose width is the layout's choice, not the text's."""

    def __init__(self, text: str = "", parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setTextFormat(QtCore.Qt.PlainText)
        self.setWordWrap(True)
        self.setSizePolicy(QtWidgets.QSizePolicy.Ignored, QtWidgets.QSizePolicy.Preferred)
        self.setTextInteractionFlags(QtCore.Qt.TextSelectableByMouse)
        self._message = ""
        self.setText(text)

    def setText(self, text: str) -> None:
        self._message = text
        super().setText(breakable(text))
        self.setToolTip(text if len(text) > 60 else "")

    def text(self) -> str:
        """The text as set (without the break points)."""
        return self._message
