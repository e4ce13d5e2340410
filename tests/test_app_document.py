"""The Document: snapshot undo/redo of canvas edits."""

from __future__ import annotations

import pytest

from tests.app_support import grad_canvas

pytest.importorskip("PySide6")

from app.document import Document
from engine.base.errors import InvalidArgumentError


def test_edit_undo_redo_and_modified_state(qapp):
    doc = Document()
    doc.load(grad_canvas(), None)
    changes = []
    doc.changed.connect(changes.append)
    assert not doc.modified
    assert doc.edit("pad", lambda c: c.set_attr("grad", "padding", "VALID"))
    assert doc.modified and changes[-1].after == doc.canvas.to_json()
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
