"""Property: any sequence of edits, undone completely, gives back the original canvas JSON byte for
byte, and redone gives the final one.

Two levels: the Document alone (edits through Canvas methods, as the app's edit functions make
them) and a real window, where every edit goes through the entry point a user's gesture or menu
reaches (GraphAdapter gesture handlers and NodeGraphQt ports, the attribute panel, EditActions,
the clipboard) and undo/redo are the window's actions. Invalid edits (a cycle, a bad title, a
bad attribute text, a broken clipboard fragment) are part of the mix: they must change nothing.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.app_support import grad_canvas

pytest.importorskip("PySide6")

from PySide6 import QtCore, QtWidgets

from app.document import Document
from blocks.registry import get_spec
from engine.base.errors import InvalidArgumentError
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import dumps

OPS = ["add", "delete", "move", "connect", "disconnect", "attribute", "rename", "paste",
       "duplicate"]
ADDABLE = ["Tensor", "IntVector", "Transpose", "ShapeOf", "Output", "Conv2DBackpropFilter"]
TITLES = st.one_of(st.sampled_from(["dW", "x", "grad", "same title", "\u00e9t\u00e9 \u2192",
                                    "a\tb", "line\nbreak", "t" * 201, " padded "]),
                   st.text(max_size=8))
#: Attribute texts as typed into the panel (valid and not) for the attributes drawn below.
ATTR_TEXTS = {
    "seed": ["0", "7", "-3", "x", "1e3", ""],
    "values": ["[3, 3, 2, 2]", "1, 2", "[]", "[a]"],
    "perm": ["[0]", "[1, 0]", "[0, 0]", "nope"],
    "strides": ["[1, 1, 1, 1]", "[1, 2, 2, 1]", "[0, 1, 1, 1]", "1"],
    "name": ["y", "grad out", "", "\x07"],
}
BAD_FRAGMENTS = [
    {"format": "gradblocks.fragment", "nodes": [{"id": "t", "type": "Tensor", "title": 5}],
     "edges": []},
    {"format": "gradblocks.fragment", "nodes": [{"id": "t", "type": "Conv9D"}], "edges": []},
    {"format": "gradblocks.fragment", "nodes": [{"id": "t", "type": "Tensor",
                                                 "pos": [1e300, 0]}], "edges": []},
    {"format": "gradblocks.fragment", "nodes": [{"id": "t", "type": "Tensor"}],
     "edges": [{"src": ["gone", "output"], "dst": ["t", "input"]}]},
]


def start_canvas() -> Canvas:
    c = grad_canvas()
    c.add_node("Transpose", pos=(360, 300), id="tr", attrs={"perm": [0, 1, 2, 3]})
    c.add_node("Output", pos=(700, 100), id="out", title="filter gradient")
    c.connect(("grad", "output"), ("out", "input"))
    return c


def pick(data, items, label: str):
    return data.draw(st.sampled_from(sorted(items)), label=label)


# -- the Document alone ---------------------------------------------------------------------------
def doc_edit(doc: Document, data) -> None:
    """One random edit made the way the app's edit functions make it (doc.edit + Canvas)."""
    canvas = doc.canvas
    ids = sorted(canvas.nodes)
    op = data.draw(st.sampled_from(OPS), label="op")
    if op == "add" or not ids:
        type_id = data.draw(st.sampled_from(ADDABLE), label="type")
        pos = data.draw(st.tuples(st.integers(-500, 500), st.integers(-500, 500)), label="pos")
        doc.edit("add", lambda c: c.add_node(type_id, pos=pos))
    elif op == "delete":
        nid = pick(data, ids, "node")
        doc.edit("delete", lambda c: c.remove_node(nid))
    elif op == "move":
        nid = pick(data, ids, "node")
        pos = data.draw(st.tuples(st.floats(-1e4, 1e4), st.floats(-1e4, 1e4)), label="pos")
        doc.edit("move", lambda c: c.move(nid, pos))
    elif op == "connect":
        src, dst = pick(data, ids, "src"), pick(data, ids, "dst")
        outs = get_spec(canvas.nodes[src].type).output_names()
        ins = get_spec(canvas.nodes[dst].type).input_names()
        if outs and ins:
            ports = pick(data, outs, "out"), pick(data, ins, "in")
            doc.edit("connect", lambda c: c.connect((src, ports[0]), (dst, ports[1])))
    elif op == "disconnect" and canvas.edges:
        edge = data.draw(st.sampled_from(canvas.edges), label="edge")
        doc.edit("disconnect", lambda c: c.disconnect(edge.dst))
    elif op == "attribute":
        nid = pick(data, ids, "node")
        attrs = [a.name for a in get_spec(canvas.nodes[nid].type).attrs if a.name in ATTR_TEXTS]
        if attrs:
            name = pick(data, attrs, "attr")
            value = data.draw(st.sampled_from([0, 7, [1, 0], [3, 3, 2, 2], [1, 2, 2, 1], "y",
                                               "x"]), label="value")
            doc.edit("attribute", lambda c: c.set_attr(nid, name, value))
    elif op == "rename":
        nid, title = pick(data, ids, "node"), data.draw(TITLES, label="title")
        doc.edit("rename", lambda c: c.set_title(nid, title))
    elif op in ("paste", "duplicate"):
        chosen = data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True), label="ids")
        frag = (canvas.fragment(chosen) if op == "duplicate"
                or data.draw(st.booleans(), label="good") else
                data.draw(st.sampled_from(BAD_FRAGMENTS), label="bad fragment"))
        frag = json.loads(json.dumps(frag))  # what the clipboard gives back
        doc.edit(op, lambda c: c.paste(frag, (40.0, 40.0)))


@given(data=st.data())
def test_undo_all_restores_and_redo_all_replays_the_document(qapp, data):
    doc = Document()
    doc.load(start_canvas(), None)
    original = dumps(doc.canvas)
    for _ in range(data.draw(st.integers(1, 12), label="edits")):
        count, text = doc.undo_stack.count(), dumps(doc.canvas)
        try:
            doc_edit(doc, data)
        except InvalidArgumentError:  # refused (a CanvasError too): nothing may have changed
            assert (doc.undo_stack.count(), dumps(doc.canvas)) == (count, text)
        event("applied" if doc.undo_stack.count() > count else "no change")
    final, steps = dumps(doc.canvas), doc.undo_stack.index()
    assert steps == doc.undo_stack.count()
    for _ in range(steps):
        doc.undo_stack.undo()
    assert dumps(doc.canvas) == original
    for _ in range(steps):
        doc.undo_stack.redo()
    assert dumps(doc.canvas) == final


# -- a real window --------------------------------------------------------------------------------
def settle() -> None:
    """Let queued work run (the adapter reconciles wiring gestures on the next event loop turn)."""
    QtWidgets.QApplication.processEvents()
    QtWidgets.QApplication.processEvents()


def put_clipboard_text(text: str) -> None:
    """Plain text on the clipboard (Qt makes its own QMimeData: one made in Python and owned by
    the clipboard would be deleted after the interpreter at exit, a segfault)."""
    QtWidgets.QApplication.clipboard().setText(text)


def window_edit(w, data) -> str:
    """One random edit through the entry point the user's gesture or menu command reaches."""
    canvas, adapter = w.doc.canvas, w.adapter
    ids = sorted(canvas.nodes)
    op = data.draw(st.sampled_from(OPS), label="op")
    if op == "add" or not ids:  # what a palette drop or the Tab menu calls
        type_id = data.draw(st.sampled_from(ADDABLE), label="type")
        pos = data.draw(st.tuples(st.integers(-800, 800), st.integers(-800, 800)), label="pos")
        adapter.add_blocks([type_id], (float(pos[0]), float(pos[1])))
    elif op == "delete":  # select, then Edit > Delete
        adapter.select(data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3,
                                          unique=True), label="ids"))
        w.act_delete.trigger()
    elif op == "move":  # what the view reports when a drag of blocks ends
        moved = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True),
                          label="ids")
        delta = data.draw(st.tuples(st.integers(-300, 300), st.integers(-300, 300)),
                          label="delta")
        views = {}
        for nid in moved:
            view = adapter.node(nid).view
            x, y = view.xy_pos
            views[view] = [x, y]
            view.xy_pos = [x + delta[0], y + delta[1]]
        adapter.viewer.moved_nodes.emit(views)
    elif op == "connect":  # a wire drawn between two ports
        src, dst = pick(data, ids, "src"), pick(data, ids, "dst")
        outs, ins = adapter.node(src).outputs(), adapter.node(dst).inputs()
        if outs and ins:
            out_port = outs[pick(data, outs, "out")]
            out_port.connect_to(ins[pick(data, ins, "in")])
    elif op == "disconnect" and canvas.edges:  # a wire dragged off its input port
        edge = data.draw(st.sampled_from(canvas.edges), label="edge")
        in_port = adapter.node(edge.dst[0]).inputs()[edge.dst[1]]
        in_port.disconnect_from(adapter.node(edge.src[0]).outputs()[edge.src[1]])
    elif op == "attribute":  # select, type into the attribute panel, press Enter
        nid = pick(data, ids, "node")
        adapter.select([nid])
        rows = [n for n in w.attributes.rows if n in ATTR_TEXTS]
        if rows:
            name = pick(data, rows, "attr")
            w.attributes.rows[name].editor.set_raw(
                data.draw(st.sampled_from(ATTR_TEXTS[name]), label="text"))
            w.attributes.rows[name].editor.committed.emit()
    elif op == "rename":  # the title edited on the block or in the attribute panel
        nid, title = pick(data, ids, "node"), data.draw(TITLES, label="title")
        if data.draw(st.booleans(), label="on block"):
            adapter.viewer.node_name_changed.emit(adapter.node(nid).id, title)
        else:
            adapter.select([nid])
            w.attributes.title_edit.setText(title)
            w.attributes.title_edit.editingFinished.emit()
    elif op == "paste":  # Edit > Copy of a selection, or whatever else is on the clipboard
        source = data.draw(st.sampled_from(["copy", "bad", "text"]), label="clipboard")
        if source == "copy":
            adapter.select(data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3,
                                              unique=True), label="ids"))
            w.act_copy.trigger()
        elif source == "bad":
            put_clipboard_text(json.dumps(data.draw(st.sampled_from(BAD_FRAGMENTS))))
        else:
            put_clipboard_text(data.draw(st.sampled_from(["hello", "{}", "[1, 2]", ""])))
        w.act_paste.trigger()
    elif op == "duplicate":
        adapter.select(data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3,
                                          unique=True), label="ids"))
        w.act_duplicate.trigger()
    settle()
    return op


def assert_view_matches(w) -> None:
    """The graph view shows exactly the canvas: blocks, titles, positions and wires."""
    canvas, adapter = w.doc.canvas, w.adapter
    assert sorted(adapter.node_ids()) == sorted(canvas.nodes)
    for nid, n in canvas.nodes.items():
        view = adapter.node(nid).view
        assert view.name == n.title
        assert list(view.xy_pos) == list(n.pos)
    assert adapter.view_edges() == {(e.src, e.dst) for e in canvas.edges}
    scene = adapter.viewer.scene()  # and holds no deleted block
    everywhere = QtCore.QRectF(-1e7, -1e7, 2e7, 2e7)
    assert [i for i in scene.items(everywhere) if i.scene() is not scene] == []


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_undo_all_restores_and_redo_all_replays_in_the_window(qtbot, window, data):
    with qtbot.capture_exceptions() as raised:  # a Qt slot's exception fails this example
        check_undo_redo_in_window(window, data)
    assert not raised, raised[0][1]


def check_undo_redo_in_window(w, data) -> None:
    w.doc.load(start_canvas(), None)
    original = dumps(w.doc.canvas)
    for _ in range(data.draw(st.integers(1, 10), label="edits")):
        count, text = w.doc.undo_stack.count(), dumps(w.doc.canvas)
        op = window_edit(w, data)
        applied = w.doc.undo_stack.count() > count
        assert applied or dumps(w.doc.canvas) == text  # a refused edit changes nothing
        event(f"{op}: {'applied' if applied else 'no change'}")
    final, steps = dumps(w.doc.canvas), w.doc.undo_stack.index()
    assert_view_matches(w)
    # an invalid value left in a field is no undo step: the first Undo drops it (issue 24)
    pending = bool(w.session.pending)
    for _ in range(steps + pending):
        assert w.act_undo.isEnabled()
        w.act_undo.trigger()
    assert not w.act_undo.isEnabled()
    assert dumps(w.doc.canvas) == original
    assert_view_matches(w)
    for _ in range(steps):
        w.act_redo.trigger()
    assert not w.act_redo.isEnabled()
    assert dumps(w.doc.canvas) == final
    assert_view_matches(w)

