"""People read titles: the log names blocks by title after a run; the id is only in the entry's
tooltip and data (clicking the entry selects the block); the progress bar names the block by
title; pasted Output blocks keep unique result names."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.app_support import wait_run

QtCore = pytest.importorskip("PySide6.QtCore")
QtTest = pytest.importorskip("PySide6.QtTest")

TITLES = {"x": "input image", "fs": "filter sizes", "dy": "upstream gradient", "grad": "dW"}


def _rename(qtbot, w, node_id: str, title: str) -> None:
    """Select the block and type its new title into the attribute panel, then Return."""
    w.adapter.select([node_id])
    edit = w.attributes.title_edit
    edit.setFocus()
    edit.selectAll()
    QtTest.QTest.keyClicks(edit, title)
    QtTest.QTest.keyClick(edit, QtCore.Qt.Key_Return)
    assert w.doc.canvas.nodes[node_id].title == title


def test_log_after_a_run_names_blocks_by_title_and_keeps_ids_in_tooltips(qtbot, grad_window,
                                                                         tmp_path, monkeypatch):
    w = grad_window
    good = np.ones((1, 5, 5, 2), np.int64)
    np.save(tmp_path / "image.npy", good)
    w.doc.edit("file", lambda c: (c.set_attr("x", "fill", "file"),
                                  c.set_attr("x", "path", str(tmp_path / "image.npy"))))
    for node_id, title in TITLES.items():
        _rename(qtbot, w, node_id, title)
    assert not w.session.plan.errors
    # the file cannot be read when the run reads it (check read it whole and found it good)
    from engine.base.errors import InvalidArgumentError
    from engine.io import npy

    def unreadable(path, dtype):
        raise InvalidArgumentError(f"path {path!r}: cannot read the file: I/O error")
    monkeypatch.setattr(npy, "read_array", unreadable)
    w.log.list.clear()
    wait_run(qtbot, w)

    items = [w.log.list.item(i) for i in range(w.log.list.count())]
    texts = [item.text() for item in items]
    by_node = {item.data(QtCore.Qt.UserRole): item for item in items
               if item.data(QtCore.Qt.UserRole)}
    assert set(by_node) == {"x", "grad"}
    assert re.search(r"\d\d:\d\d:\d\d  input image: ", by_node["x"].text())
    assert by_node["grad"].text().endswith(
        "  dW: skipped: input input (input image) failed")
    summary = "2 ok, 1 skipped (after a failed input: dW), 1 failed (input image)"
    assert any(summary in t for t in texts), texts
    assert w.progress.toolTip() == summary  # the bar shows as much as fits
    assert summary.startswith(w.progress.text().rstrip("…"))
    for text in texts:  # no internal id where a person reads
        assert not re.search(r"\b(x|fs|dy|grad)\b", text.partition("  ")[2]), text
    for node_id, item in by_node.items():  # the id is in the tooltip, and the click target
        assert f"block id: {node_id}" in item.toolTip()
        assert item.toolTip().startswith(item.text().partition("  ")[2])
    # clicking the entry selects its block
    w.adapter.select([])
    rect = w.log.list.visualItemRect(by_node["grad"])
    QtTest.QTest.mouseClick(w.log.list.viewport(), QtCore.Qt.LeftButton, pos=rect.center())
    assert w.adapter.selected_ids() == ["grad"]


def test_progress_bar_names_the_block_by_title_while_running(qtbot, grad_window):
    w = grad_window
    _rename(qtbot, w, "grad", "dW 100%m")
    seen = []
    w.session.runner.progress.connect(lambda *_: seen.append(w.progress.text()))
    wait_run(qtbot, w)
    # the block that just ran, by title (Qt's %m in a title is not replaced by the maximum)
    assert seen[-1].replace("\u2060", "") == "4/4  dW 100%m"
    assert seen[0] == "1/4  x"


def test_added_and_duplicated_output_blocks_keep_unique_result_names(window):
    w = window
    item = w.palette.items["Output"]
    for _ in range(2):
        w.palette.tree.itemActivated.emit(item, 0)
    outputs = list(w.doc.canvas.nodes)
    names = [w.doc.canvas.nodes[n].attrs.get("name", "result") for n in outputs]
    assert names == ["result", "result 2"]
    w.doc.edit("name", lambda c: c.set_attr(outputs[0], "name", "dW"))
    w.adapter.select([outputs[0]])
    (dup,) = w.edits.duplicate_selection()
    assert w.doc.canvas.nodes[dup].attrs["name"] == "dW 2"
    messages = [str(e) for errs in w.session.plan.errors.values() for e in errs]
    assert messages and not any("already used" in m for m in messages)  # only unwired inputs
    # a name typed twice is an error on the second block, naming the first by title
    w.doc.edit("name", lambda c: c.set_attr(dup, "name", "dW"))
    title = w.doc.canvas.nodes[outputs[0]].title
    assert any(f"name 'dW' is already used by {title}" in m
               for m in w.log.messages("error")), w.log.messages("error")
