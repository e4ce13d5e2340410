"""The Document: snapshot undo/redo of canvas edits and which results an edit invalidates."""

from __future__ import annotations

import pytest

from tests.app_support import grad_canvas

pytest.importorskip("PySide6")

from app.document import Document, dirty_nodes
from engine.errors import InvalidArgumentError


def test_dirty_nodes_follow_attrs_wiring_and_downstream():
    c = grad_canvas()
    c.add_node("Output", id="out")
    c.connect(("grad", "output"), ("out", "input"))
    before = c.to_json()
    moved = c.copy()
    moved.nodes["x"].pos = (99.0, 99.0)
    moved.nodes["grad"].title = "renamed"
    assert dirty_nodes(before, moved.to_json()) == set()
    edited = c.copy()
    edited.set_attr("dy", "seed", 5)
    assert dirty_nodes(before, edited.to_json()) == {"dy", "grad", "out"}
    rewired = c.copy()
    rewired.disconnect(("grad", "input"))
    assert dirty_nodes(before, rewired.to_json()) == {"grad", "out"}
    assert dirty_nodes(None, before) == {"x", "fs", "dy", "grad", "out"}


def test_edit_undo_redo_and_modified_state(qapp):
    doc = Document()
    doc.load(grad_canvas(), None)
    changes = []
    doc.changed.connect(changes.append)
    assert not doc.modified
    assert doc.edit("pad", lambda c: c.set_attr("grad", "padding", "VALID"))
    assert doc.modified and changes[-1].dirty_nodes() == {"grad"}
    assert not doc.edit("same", lambda c: c.set_attr("grad", "padding", "VALID"))  # no-op
    assert doc.undo_stack.count() == 1
    with pytest.raises(InvalidArgumentError):
        doc.edit("bad", lambda c: c.set_attr("grad", "padding", "FULL"))
    assert doc.canvas.nodes["grad"].attrs["padding"] == "VALID"
    doc.undo_stack.undo()
    assert "padding" not in doc.canvas.nodes["grad"].attrs and not doc.modified
    doc.undo_stack.redo()
    assert doc.canvas.nodes["grad"].attrs["padding"] == "VALID"
    assert doc.snapshot() == doc.canvas.to_json()
    doc.load(grad_canvas(), None, modified=True)  # a restored canvas counts as unsaved
    assert doc.modified and doc.undo_stack.count() == 0
