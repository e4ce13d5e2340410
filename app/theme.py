"""A dark Fusion theme matching the NodeGraphQt canvas."""

from __future__ import annotations

from PySide6 import QtGui, QtWidgets

COLORS = {
    "window": (45, 48, 53),
    "base": (33, 35, 39),
    "alternate": (40, 43, 48),
    "text": (214, 218, 224),
    "disabled": (120, 124, 130),
    "button": (52, 56, 62),
    "highlight": (47, 120, 160),
    "link": (110, 170, 230),
    "tooltip": (28, 30, 34),
}

STYLE_SHEET = """
QDockWidget::title { padding: 4px 6px; background: #2a2d32; }
QToolTip { color: #d6dae0; background: #1c1e22; border: 1px solid #4a5058; padding: 4px; }
QLineEdit, QPlainTextEdit, QComboBox { padding: 2px 4px; }
"""


def apply_dark_theme(qapp: QtWidgets.QApplication) -> None:
    """Fusion style with a dark palette for the whole application."""
    qapp.setStyle("Fusion")
    c = {k: QtGui.QColor(*v) for k, v in COLORS.items()}
    pal = QtGui.QPalette()
    P = QtGui.QPalette
    pal.setColor(P.Window, c["window"])
    pal.setColor(P.WindowText, c["text"])
    pal.setColor(P.Base, c["base"])
    pal.setColor(P.AlternateBase, c["alternate"])
    pal.setColor(P.ToolTipBase, c["tooltip"])
    pal.setColor(P.ToolTipText, c["text"])
    pal.setColor(P.PlaceholderText, c["disabled"])
    pal.setColor(P.Text, c["text"])
    pal.setColor(P.Button, c["button"])
    pal.setColor(P.ButtonText, c["text"])
    pal.setColor(P.BrightText, QtGui.QColor(255, 90, 90))
    pal.setColor(P.Highlight, c["highlight"])
    pal.setColor(P.HighlightedText, QtGui.QColor(255, 255, 255))
    pal.setColor(P.Link, c["link"])
    for role in (P.WindowText, P.Text, P.ButtonText):
        pal.setColor(P.Disabled, role, c["disabled"])
    qapp.setPalette(pal)
    qapp.setStyleSheet(STYLE_SHEET)
