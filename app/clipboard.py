"""The clipboard side of copy, paste and duplicate of blocks (with the wires between them).

The clipboard holds a fragment (canvas-format JSON of the copied nodes and their inner edges,
:meth:`engine.graph.canvas.Canvas.fragment`) under the MIME type ``application/x-gradblocks-nodes``
and as text, so it can be pasted elsewhere and back. Reading it is strict: what the clipboard
holds is checked by :func:`engine.graph.canvas.parse_fragment` when pasted, like a file.
"""

from __future__ import annotations

import atexit
import functools
import json
from typing import Any

from PySide6 import QtCore, QtGui

from engine.graph.canvas import CanvasError
from engine.graph.canvas_document import FORMAT, FRAGMENT_FORMAT
from engine.graph.canvas_file import MAX_FILE_BYTES
from engine.io import strict_json

MIME = "application/x-gradblocks-nodes"
PASTE_OFFSET = 40.0
#: How the clipboard is named in paste errors (``clipboard: 1 problem ...``).
SOURCE = "clipboard"


class NoBlocks(Exception):
    """The clipboard holds no blocks; the message says what it holds instead."""


def put(frag: dict) -> None:
    """Put a fragment on the clipboard (as our MIME type and as plain JSON text)."""
    text = json.dumps(frag, indent=2, sort_keys=True)
    mime = QtCore.QMimeData()
    mime.setData(MIME, QtCore.QByteArray(text.encode()))
    mime.setText(text)
    QtGui.QGuiApplication.clipboard().setMimeData(mime)
    _release_at_exit()


@functools.cache
def _release_at_exit() -> None:
    """Give the clipboard's QMimeData back before Python shuts down.

    The clipboard owns the QMimeData we set; Qt deletes it from a C++ exit handler that runs
    after the Python interpreter is gone, and the PySide6 wrapper's destructor then calls into
    the dead interpreter (a segfault at exit). Clearing it from an ``atexit`` handler, which runs
    while Python is still alive, avoids that.
    """
    def release() -> None:
        app = QtGui.QGuiApplication.instance()
        if app is not None:
            cb = app.clipboard()
            if cb.mimeData() is not None and cb.mimeData().hasFormat(MIME):
                cb.clear()

    atexit.register(release)


def get() -> Any:
    """The fragment on the clipboard as parsed JSON (checked by the canvas loader on paste).

    Raises :class:`NoBlocks` when the clipboard is empty or holds text that is not a GradBlocks
    fragment or canvas, and a :class:`CanvasError` (with JSON paths) when it holds our MIME type
    or such a document that is not valid JSON (duplicate keys, overflowing numbers, too deep).
    """
    mime = QtGui.QGuiApplication.clipboard().mimeData()
    ours = mime is not None and mime.hasFormat(MIME)
    if ours:
        data = bytes(mime.data(MIME).data())
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError as err:
            where = f"not UTF-8 text: byte 0x{data[err.start]:02x} at offset {err.start}"
            raise CanvasError([("$", where)], SOURCE) from None
    elif mime is not None and mime.hasText():
        raw = mime.text()
    else:
        raw = ""
    if not raw.strip():
        raise NoBlocks("the clipboard is empty")
    if len(raw) > MAX_FILE_BYTES:
        if ours:
            raise CanvasError([("$", f"more than {MAX_FILE_BYTES} characters")], SOURCE)
        raise NoBlocks(f"the clipboard holds {len(raw)} characters of text, not blocks")
    data, problems = strict_json.loads(raw)
    if not ours and not (isinstance(data, dict) and data.get("format") in (FRAGMENT_FORMAT,
                                                                             FORMAT)):
        raise NoBlocks("the clipboard holds text that is not GradBlocks blocks (copy blocks "
                       "first, or text of a fragment or canvas file)")
    if problems:
        raise CanvasError(problems, SOURCE)
    return data
