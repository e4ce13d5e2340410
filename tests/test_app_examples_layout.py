"""The examples stay tidy once run: previews make blocks taller, and in training_step they then
overlapped (shape of w / shape of x, x to NCHW / dy to NCHW), stuck out of their frames and hid
the Compare block's badge under the note."""

from __future__ import annotations

import pytest

QtCore = pytest.importorskip("PySide6.QtCore")

from tests.app_support import wait_run


def drawn_rect(view):
    """A block as drawn: its item with the badge and preview under it (scene units)."""
    return view.sceneBoundingRect().united(view.mapRectToScene(view.childrenBoundingRect()))


def test_every_example_run_has_no_overlaps_and_its_blocks_inside_their_frames(qtbot, window):
    examples = [a for a in window.examples_menu.actions() if a.text()]
    assert examples
    for act in examples:
        act.trigger()  # File > Examples > ...
        wait_run(qtbot, window)  # F5: previews and badges drawn
        QtCore.QCoreApplication.processEvents()
        canvas, adapter = window.doc.canvas, window.adapter
        blocks = {cid: drawn_rect(adapter.node(cid).view) for cid in canvas.nodes}
        ids = sorted(blocks)
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                assert not blocks[a].intersects(blocks[b]), (act.text(), a, b)
        for nid in canvas.notes:
            note = adapter._items[nid].view.sceneBoundingRect()
            for cid, rect in blocks.items():
                assert not note.intersects(rect), (act.text(), nid, cid)
        for fid in canvas.frames:
            frame = adapter._items[fid].view.sceneBoundingRect()
            for cid, rect in blocks.items():  # a block is in a frame or clear of it
                assert frame.contains(rect) or not frame.intersects(rect), (act.text(), fid, cid)
