"""Icons from assets/icons (SVG), with Qt's standard icons as fallback."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from PySide6 import QtGui, QtWidgets

ICONS_DIR = Path(__file__).resolve().parent.parent / "assets" / "icons"

_FALLBACK = {
    "new": QtWidgets.QStyle.SP_FileIcon,
    "open": QtWidgets.QStyle.SP_DialogOpenButton,
    "save": QtWidgets.QStyle.SP_DialogSaveButton,
    "undo": QtWidgets.QStyle.SP_ArrowBack,
    "redo": QtWidgets.QStyle.SP_ArrowForward,
    "run": QtWidgets.QStyle.SP_MediaPlay,
    "cancel": QtWidgets.QStyle.SP_MediaStop,
    "fit": QtWidgets.QStyle.SP_TitleBarMaxButton,
    "gradblocks": QtWidgets.QStyle.SP_ComputerIcon,
}


@cache
def icon(name: str) -> QtGui.QIcon:
    """The icon ``assets/icons/<name>.svg`` (or a standard Qt icon when it is missing)."""
    path = ICONS_DIR / f"{name}.svg"
    if path.is_file():
        ic = QtGui.QIcon(str(path))
        if not ic.isNull():
            return ic
    app = QtWidgets.QApplication.instance()
    if app is not None and name in _FALLBACK:
        return app.style().standardIcon(_FALLBACK[name])
    return QtGui.QIcon()
