"""Copy, paste and duplicate of blocks (with their attributes and the wires between them).

The clipboard holds canvas-format JSON of the copied nodes and their internal edges under the
MIME type ``application/x-gradblocks-nodes`` (and as text, so it can be pasted elsewhere).
"""

from __future__ import annotations

import atexit
import copy
import functools
import json

from PySide6 import QtCore, QtGui

from blocks.registry import get_spec

MIME = "application/x-gradblocks-nodes"
PASTE_OFFSET = 40.0


def fragment(canvas, node_ids) -> dict:
    """The selected nodes and the edges between them, in the canvas file format."""
    ids = set(node_ids)
    data = canvas.to_json()
    return {
        "format": "gradblocks.fragment",
        "nodes": [n for n in data["nodes"] if n["id"] in ids],
        "edges": [e for e in data["edges"] if e["src"][0] in ids and e["dst"][0] in ids],
    }


def paste_fragment(canvas, frag: dict, offset: tuple[float, float]) -> list[str]:
    """Add a fragment's nodes with fresh ids (and its internal edges) to ``canvas``; new ids."""
    mapping: dict[str, str] = {}
    for n in frag.get("nodes", []):
        x, y = n.get("pos", (0.0, 0.0))
        old_id, title = n["id"], n.get("title") or n["id"]
        attrs = copy.deepcopy(n.get("attrs") or {})
        named = get_spec(n["type"]).result_name
        if named and isinstance(attrs.get(named), str):  # result names stay unique: "dy 2"
            attrs[named] = canvas.unused_result_name(attrs[named])
        node = canvas.add_node(n["type"], pos=(float(x) + offset[0], float(y) + offset[1]),
                               attrs=attrs)
        if title != old_id:
            _set_title(canvas, node.id, title)
        mapping[old_id] = node.id
    for e in frag.get("edges", []):
        src, dst = e["src"], e["dst"]
        if src[0] in mapping and dst[0] in mapping:
            canvas.connect((mapping[src[0]], src[1]), (mapping[dst[0]], dst[1]))
    return list(mapping.values())


def _set_title(canvas, node_id: str, title: str) -> None:
    from app.graph_adapter import set_node_field

    set_node_field(canvas, node_id, title=title)


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


def get() -> dict | None:
    """The fragment on the clipboard, or None when it holds no blocks."""
    mime = QtGui.QGuiApplication.clipboard().mimeData()
    if mime is None:
        return None
    if mime.hasFormat(MIME):
        raw = bytes(mime.data(MIME).data()).decode(errors="replace")
    elif mime.hasText():
        raw = mime.text()
    else:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != "gradblocks.fragment":
        return None
    return data
