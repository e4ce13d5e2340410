"""Pasting through the canvas loader: what the clipboard holds is validated like a file, a bad
fragment or plain text is a message in the log and changes nothing (no undo step)."""

from __future__ import annotations

import json

import pytest

from tests.app_support import focus_canvas

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtTest, QtWidgets

from app import clipboard
from engine.canvas import dumps


def put_text(text: str, mime_type: str | None = clipboard.MIME) -> None:
    """Put ``text`` on the clipboard (as our MIME type too, unless ``mime_type`` is None)."""
    mime = QtCore.QMimeData()
    if mime_type:
        mime.setData(mime_type, QtCore.QByteArray(text.encode()))
    mime.setText(text)
    QtWidgets.QApplication.clipboard().setMimeData(mime)
    clipboard._release_at_exit()


def ctrl_v(qtbot, window) -> None:
    focus_canvas(qtbot, window)
    QtTest.QTest.keyClick(window.adapter.viewer, QtCore.Qt.Key_V, QtCore.Qt.ControlModifier)
    QtWidgets.QApplication.processEvents()


def tensor_fragment(**node_fields) -> dict:
    node = {"id": "t", "type": "Tensor", "title": "t", "pos": [0, 0],
            "attrs": {"shape": [2, 2]}, **node_fields}
    return {"format": "gradblocks.fragment", "nodes": [node], "edges": []}


def test_paste_with_a_non_string_title_is_refused_with_its_path(qtbot, window):
    """Regression: a title of 5 used to be written unchecked; the undo stack said 'Paste' was
    applied and redo after undo silently failed, leaving the canvas empty."""
    put_text(json.dumps(tensor_fragment(title=5)))
    before = dumps(window.doc.canvas)
    ctrl_v(qtbot, window)
    assert dumps(window.doc.canvas) == before
    assert window.doc.undo_stack.count() == 0
    errors = window.log.messages("error")
    assert errors and "$.nodes[0].title" in errors[-1] and "Paste" in errors[-1]


def test_undo_redo_of_a_paste_gives_back_the_pasted_blocks(qtbot, window):
    put_text(json.dumps(tensor_fragment(title="my tensor")))
    ctrl_v(qtbot, window)
    (nid,) = window.doc.canvas.nodes
    after = dumps(window.doc.canvas)
    assert window.doc.canvas.nodes[nid].title == "my tensor"
    assert window.adapter.node(nid).view.name == "my tensor"
    window.act_undo.trigger()
    assert window.doc.canvas.nodes == {} and window.adapter.node_ids() == []
    window.act_redo.trigger()
    assert dumps(window.doc.canvas) == after
    assert window.adapter.node_ids() == [nid]
