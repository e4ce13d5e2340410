"""Pasting through the canvas loader: what the clipboard holds is validated like a file, a bad
fragment or plain text is a message in the log and changes nothing (no undo step)."""

from __future__ import annotations

import json

import pytest

from tests.app_support import focus_canvas, grad_canvas

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtTest, QtWidgets

from app import clipboard
from engine.graph.canvas_file import dumps


def put_text(text: str, mime_type: str | None = clipboard.MIME) -> None:
    """Put ``text`` on the clipboard (as our MIME type too, unless ``mime_type`` is None)."""
    if not mime_type:  # plain text: Qt makes the QMimeData (see app.clipboard._release_at_exit)
        QtWidgets.QApplication.clipboard().setText(text)
        return
    mime = QtCore.QMimeData()
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
    assert window.statusBar().currentMessage().startswith("Paste failed: clipboard: 1 problem")


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


@pytest.mark.parametrize("text", ["hello world", "{}", "[1, 2]", '{"format": "other"}', ""])
def test_pasting_plain_text_says_so_and_changes_nothing(qtbot, grad_window, text):
    w = grad_window
    put_text(text, mime_type=None)
    before = dumps(w.doc.canvas)
    ctrl_v(qtbot, w)
    assert dumps(w.doc.canvas) == before and w.doc.undo_stack.count() == 0
    assert not w.log.messages("error")
    warning = w.log.messages("warning")[-1]
    assert "nothing to paste" in warning
    assert ("empty" if not text else "not GradBlocks blocks") in warning
    assert w.statusBar().currentMessage() == warning  # seen even while the log tab is hidden


@pytest.mark.parametrize(("payload", "words"), [
    (b'{"format": "gradblocks.fragment", "nodes": [], "nodes": []}', "$.nodes: duplicate key"),
    (b'{"format": "gradblocks.fragment", "nodes": [\xff]}', "byte 0xff at offset 44"),
    (b'{"format": "gradblocks.fragment", "nodes": [', "$: not JSON"),
])
def test_our_clipboard_type_with_broken_json_is_an_error_with_its_path(qtbot, window, payload,
                                                                      words):
    mime = QtCore.QMimeData()
    mime.setData(clipboard.MIME, QtCore.QByteArray(payload))
    QtWidgets.QApplication.clipboard().setMimeData(mime)
    clipboard._release_at_exit()
    ctrl_v(qtbot, window)
    assert window.doc.canvas.nodes == {} and window.doc.undo_stack.count() == 0
    assert words in window.log.messages("error")[-1]


@pytest.mark.parametrize(("node_fields", "path"), [
    ({"pos": [1e300, 0]}, "$.nodes[0].pos"),
    ({"type": "Conv9D"}, "$.nodes[0].type"),
    ({"attrs": {"shape": [-1]}}, "$.nodes[0].attrs.shape"),
])
def test_a_fragment_the_loader_refuses_is_an_error_naming_the_field(qtbot, window, node_fields,
                                                                     path):
    put_text(json.dumps(tensor_fragment(**node_fields)), mime_type=None)  # text, as if typed
    ctrl_v(qtbot, window)
    assert window.doc.canvas.nodes == {} and window.doc.undo_stack.count() == 0
    assert path in window.log.messages("error")[-1]


def test_the_text_of_a_fragment_pastes_with_fresh_ids_and_inner_wires(qtbot, grad_window):
    w = grad_window
    frag = w.doc.canvas.fragment(["x", "grad"])
    put_text(json.dumps(frag), mime_type=None)  # e.g. copied from a text editor
    ctrl_v(qtbot, w)
    assert w.doc.undo_stack.count() == 1
    new = sorted(set(w.doc.canvas.nodes) - {"x", "fs", "dy", "grad"})
    assert new == ["conv2dbackpropfilter_1", "tensor_1"]
    assert w.doc.canvas.inputs_of("conv2dbackpropfilter_1") == {"input": ("tensor_1", "output")}
    assert sorted(w.adapter.selected_ids()) == new


def test_a_title_the_canvas_refuses_in_the_panel_is_a_message_not_a_change(grad_window):
    w = grad_window
    w.adapter.select(["grad"])
    before = dumps(w.doc.canvas)
    w.attributes.title_edit.setText("bell\x07")
    w.attributes.title_edit.editingFinished.emit()
    assert dumps(w.doc.canvas) == before and w.doc.undo_stack.count() == 0
    assert "control character" in w.attributes.errors_label.text()
    assert w.attributes.title_edit.text() == "grad"
    w.attributes.title_edit.setText("t" * 300)  # the field takes at most 200 characters
    assert len(w.attributes.title_edit.text()) == 200


def test_deleted_blocks_leave_nothing_in_the_scene_index(qtbot, grad_window):
    """Regression (found by the undo property test): NodeGraphQt resizes block items without
    telling the scene, so a BSP scene index kept deleted blocks; they were painted after removal
    ('NoneType' has no attribute 'mapToGlobal') and freed under it later (a segfault)."""
    w = grad_window
    w.adapter.select(["x", "dy"])
    w.act_copy.trigger()
    w.act_paste.trigger()
    w.doc.load(grad_canvas(), None)  # the blocks kept from before change their size again
    for ids in (["dy"], ["x", "grad"]):
        w.adapter.select(ids)
        w.act_delete.trigger()
        QtWidgets.QApplication.processEvents()
    assert sorted(w.doc.canvas.nodes) == ["fs"]
    scene = w.adapter.viewer.scene()
    everywhere = QtCore.QRectF(-1e6, -1e6, 2e6, 2e6)
    assert [item for item in scene.items(everywhere) if item.scene() is not scene] == []
    w.adapter.viewer.viewport().repaint()  # painting the canvas paints no deleted block
