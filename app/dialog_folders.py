"""Where file dialogs start: the last folder the user chose for each kind of file.

Kinds: ``canvas`` (open/save canvases), ``tensor`` (.npy in and out), ``image`` (.png out,
PNG/JPEG in), ``model`` (File > Import Layer).
A dialog starts in the last folder of its kind (kept in the window's QSettings, so across
sessions), else in the open canvas's folder, else in the home folder, never in the process's
working directory. The main window binds its settings and canvas folder at start-up.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PySide6 import QtCore

KINDS = ("canvas", "tensor", "image", "model")

_settings: QtCore.QSettings | None = None
_canvas_dir: Callable[[], Path | None] = lambda: None


def bind(settings: QtCore.QSettings, canvas_dir: Callable[[], Path | None]) -> None:
    """Use ``settings`` to keep the folders and ``canvas_dir()`` as the fallback."""
    global _settings, _canvas_dir
    _settings, _canvas_dir = settings, canvas_dir


def folder(kind: str) -> Path:
    """The folder a dialog of ``kind`` starts in (see the module docstring)."""
    last = _settings.value(f"dialogs/{kind}") if _settings is not None else None
    if last and Path(str(last)).is_dir():
        return Path(str(last))
    canvas = _canvas_dir()
    if canvas is not None and Path(canvas).is_dir():
        return Path(canvas)
    return Path.home()


def start(kind: str, name: str = "") -> str:
    """The dialog's start path: the folder of ``kind``, with a suggested file ``name``."""
    where = folder(kind)
    return str(where / name) if name else str(where)


def remember(kind: str, chosen: str | os.PathLike) -> None:
    """Keep the folder of a file the user chose in a dialog of ``kind``."""
    if _settings is not None and chosen:
        _settings.setValue(f"dialogs/{kind}", str(Path(chosen).resolve().parent))
