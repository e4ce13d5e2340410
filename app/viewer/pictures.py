"""The viewer's Image tab: a caption line (what is shown | value under the mouse) over one picture,
or three side by side when comparing (left, right, difference), or a placeholder text."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.viewer.image import ImagePanel
from app.viewer.table import MUTED
from engine.view.tensor_view import Picture, Ticks


class ImagePage(QtWidgets.QWidget):
    """Caption, hover read-out and up to three :class:`ImagePanel` pictures."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.info_label = QtWidgets.QLabel(self)
        self.info_label.setStyleSheet(MUTED)
        self.hover_label = QtWidgets.QLabel(self)
        self.hover_label.setTextInteractionFlags(QtCore.Qt.TextSelectableByMouse)
        for lab in (self.info_label, self.hover_label):  # long text must not widen the viewer
            lab.setSizePolicy(QtWidgets.QSizePolicy.Ignored, QtWidgets.QSizePolicy.Preferred)
        self.hover_label.setAlignment(QtCore.Qt.AlignRight | QtCore.Qt.AlignVCenter)
        head = QtWidgets.QHBoxLayout()
        head.setContentsMargins(4, 0, 4, 0)
        head.addWidget(self.info_label, 3)
        head.addWidget(self.hover_label, 2)
        self.placeholder = QtWidgets.QLabel(self)
        self.placeholder.setAlignment(QtCore.Qt.AlignCenter)
        self.placeholder.setStyleSheet(MUTED)
        self.panel_row = QtWidgets.QWidget(self)
        row = QtWidgets.QHBoxLayout(self.panel_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(2)
        self.panels = [ImagePanel(self.panel_row) for _ in range(3)]
        for p in self.panels:
            row.addWidget(p, 1)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 2, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(head)
        lay.addWidget(self.panel_row, 1)
        lay.addWidget(self.placeholder, 1)

    def show_pictures(self, pictures: list[Picture], labels: tuple[str, str, Ticks, Ticks],
                      caption: str) -> None:
        """Draw ``pictures`` (1 or 3) with axis ``labels`` under ``caption``."""
        for panel, pic in zip(self.panels, pictures, strict=False):
            panel.set_picture(pic)
            panel.set_axes(*labels)
        for i, panel in enumerate(self.panels[1:], start=1):
            panel.setVisible(i < len(pictures))
        self.info_label.setText(caption)
        self.hover_label.setText("")

    def show_placeholder(self, text: str | None) -> None:
        """Show ``text`` instead of the pictures (None: show the pictures)."""
        self.placeholder.setText(text or "")
        self.placeholder.setVisible(text is not None)
        self.panel_row.setVisible(text is None)

    def clear(self, text: str) -> None:
        """No picture; ``text`` in their place."""
        self.info_label.setText("")
        self.hover_label.setText("")
        for p in self.panels:
            p.clear_image()
        self.panels[1].hide()
        self.panels[2].hide()
        self.show_placeholder(text)
