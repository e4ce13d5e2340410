"""Results in the app go stale by the plan's cache keys (one rule with the executor): undo is
served from the cache, an inactive attribute changes nothing, a rewritten .npy file does, and a
block that became invalid shows its last result greyed and labelled stale (defect 6)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.app_support import close_window, make_window, no_dialogs

QtCore = pytest.importorskip("PySide6.QtCore")

from app.node_item import GREYED_TEXT
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas
from tests.test_app_attributes import type_cells


def press_run(qtbot, w) -> object:
    """Run > Run (F5) and wait for the result; the RunResult the session received."""
    with qtbot.waitSignal(w.session.runner.finished, timeout=60_000) as blocker:
        w.act_run.trigger()
    qtbot.waitUntil(lambda: not w.session.runner.running, timeout=60_000)
    return blocker.args[0]


def choose(w, attr: str, text: str) -> None:
    combo = w.attributes.rows[attr].editor.combo
    combo.setCurrentText(text)
    combo.activated.emit(combo.currentIndex())


def test_undo_then_run_reuses_the_cache_and_shows_the_same_values(qtbot, grad_window):
    w = grad_window
    press_run(qtbot, w)
    first = w.session.outputs[("grad", "output")].copy()
    w.adapter.select(["dy"])
    edit = w.attributes.rows["seed"].editor.edit  # the user types a new seed and Enter
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, "9")
    qtbot.keyClick(edit, QtCore.Qt.Key_Return)
    assert w.doc.canvas.nodes["dy"].attrs["seed"] == 9
    edited = press_run(qtbot, w)
    assert edited.computed == {"dy", "grad"}
    assert not np.array_equal(w.session.outputs[("grad", "output")], first)
    w.act_undo.trigger()
    assert w.doc.canvas.nodes["dy"].attrs["seed"] == 2
    assert set(w.session.stale_nodes()) == {"dy", "grad"}  # shown results are the seed-9 ones
    undone = press_run(qtbot, w)
    assert undone.computed == set()  # nothing recomputed: all from the cache
    np.testing.assert_array_equal(w.session.outputs[("grad", "output")], first)
    assert w.session.stale_nodes() == {}
    assert "cached" in w.session.decorator._badges["grad"].text()


def test_an_inactive_attribute_does_not_make_the_result_stale(qtbot, grad_window):
    """SAME -> EXPLICIT (stale) -> paddings typed (stale) -> SAME again: explicit_paddings is
    inactive now, so the result of the SAME run is current again and Run computes nothing."""
    w = grad_window
    press_run(qtbot, w)
    w.adapter.select(["grad"])
    choose(w, "padding", "EXPLICIT")
    assert set(w.session.stale_nodes()) == {"grad"}
    type_cells(w.attributes.rows["explicit_paddings"].editor, [0, 0, 1, 1, 1, 1, 0, 0])
    assert w.doc.canvas.nodes["grad"].attrs["explicit_paddings"] == [0, 0, 1, 1, 1, 1, 0, 0]
    assert set(w.session.stale_nodes()) == {"grad"}
    choose(w, "padding", "SAME")
    assert w.doc.canvas.nodes["grad"].attrs["explicit_paddings"] == [0, 0, 1, 1, 1, 1, 0, 0]
    assert w.session.stale_nodes() == {}
    assert not w.viewer_dock.stale and w.viewer_dock.shown == ("grad.output",)
    assert w.session.decorator._badges["grad"].text().startswith("✓")
    assert press_run(qtbot, w).computed == set()


def test_rewriting_a_read_npy_file_makes_its_reader_and_dependents_stale(qtbot, tmp_path,
                                                                         monkeypatch):
    no_dialogs(monkeypatch)
    data = tmp_path / "x.npy"
    np.save(data, np.ones((1, 5, 5, 2), np.float32))
    c = Canvas()
    c.add_node("Tensor", id="x", attrs={"fill": "file", "path": "x.npy"})
    c.add_node("IntVector", id="fs", attrs={"values": [3, 3, 2, 2]})
    c.add_node("Tensor", id="dy", attrs={"shape": [1, 5, 5, 2], "seed": 2})
    c.add_node("Conv2DBackpropFilter", id="grad")
    c.connect(("x", "output"), ("grad", "input"))
    c.connect(("fs", "output"), ("grad", "filter_sizes"))
    c.connect(("dy", "output"), ("grad", "out_backprop"))
    save_canvas(c, tmp_path / "c.gbc.json")
    w = make_window(qtbot, tmp_path)
    try:
        assert w.files.open_path(tmp_path / "c.gbc.json", ask=False)
        press_run(qtbot, w)
        w.adapter.select(["grad"])
        assert w.session.stale_nodes() == {} and not w.viewer_dock.stale
        np.save(data, np.full((1, 5, 5, 2), 2, np.float32))  # rewritten (new size or mtime)
        qtbot.waitUntil(lambda: set(w.session.stale_nodes()) == {"x", "grad"}, timeout=10_000)
        assert w.viewer_dock.caption.text().startswith("stale: changed since it ran")
        result = press_run(qtbot, w)
        assert result.computed == {"x", "grad"}
        np.testing.assert_array_equal(w.session.outputs[("x", "output")], 2)
        assert w.session.stale_nodes() == {} and not w.viewer_dock.stale
    finally:
        close_window(w)


def test_a_block_that_became_invalid_shows_its_last_result_as_stale(qtbot, grad_window):
    """Defect 6: the old result stays visible, greyed and labelled, never as current."""
    w = grad_window
    press_run(qtbot, w)
    w.adapter.select(["grad"])
    shown = w.viewer_dock.viewer.array.copy()
    assert not w.viewer_dock._grey.is_on()
    type_cells(w.attributes.rows["strides"].editor, [2, 1, 1, 1])  # TF refuses a batch stride
    assert w.session.plan.errors.get("grad")
    reason = w.session.stale_reason("grad")
    assert reason.startswith("invalid: ") and "strides" in reason
    caption = w.viewer_dock.caption.text()
    assert caption.startswith(f"stale: {reason}") and "port output" in caption
    assert w.viewer_dock.stale == reason and w.viewer_dock._grey.is_on()
    np.testing.assert_array_equal(w.viewer_dock.viewer.array, shown)  # still visible
    badge = w.session.decorator._badges["grad"].text()
    assert badge.startswith("stale: invalid") and "✓" not in badge
    node = w.adapter.node("grad")
    label = node.view.get_output_text_item(node.outputs()["output"].view)
    assert label.defaultTextColor() == GREYED_TEXT  # greyed, the block's size kept
    assert f"last result is stale: {reason}" in node.outputs()["output"].view.toolTip()
    type_cells(w.attributes.rows["strides"].editor, [1, 1, 1, 1])  # fixed: current again
    assert w.session.stale_reason("grad") is None and not w.viewer_dock._grey.is_on()
    assert label.defaultTextColor() != GREYED_TEXT
    assert w.viewer_dock.caption.text() == "grad · Conv2D backprop filter · port output"


def _viewer_pixels(qtbot, w):
    """What the screen shows of the tensor viewer (the window's backing store, not a re-render:
    a ghost of a previous picture lives there)."""
    viewer = w.viewer_dock.viewer
    qtbot.wait(50)
    QtCore.QCoreApplication.processEvents()
    top_left = viewer.mapTo(w, QtCore.QPoint(0, 0))
    screen = w.screen()
    return screen.grabWindow(w.winId(), top_left.x(), top_left.y(), viewer.width(),
                             viewer.height()).toImage()


def test_a_greyed_stale_result_shows_no_ghost_of_the_previous_picture(qtbot, grad_window):
    """Seen under X11: the greyed viewer let the picture shown before it show through (axes and
    cells of the previous block over the stale one). Greyed, it looks the same whatever was
    shown before."""
    w = grad_window
    press_run(qtbot, w)
    w.adapter.select(["grad"])
    type_cells(w.attributes.rows["strides"].editor, [2, 1, 1, 1])  # invalid: greyed
    assert w.viewer_dock.stale
    looks = []
    for before in ("x", "dy"):  # two heat maps of one layout, other values, shown before
        w.adapter.select([before])
        _viewer_pixels(qtbot, w)
        w.adapter.select(["grad"])
        assert w.viewer_dock.stale
        looks.append(_viewer_pixels(qtbot, w))
    assert looks[0] == looks[1]


def test_a_stale_result_keeps_the_layout_it_was_shown_with(qtbot, grad_window):
    """Seen in a screenshot: once grad became invalid the plan had no axes for it, so its
    greyed filter was shown as a plain slice over axes d0..d3 instead of its kh x kw montage,
    in the viewer and in the block's preview."""
    w = grad_window
    press_run(qtbot, w)
    w.adapter.select(["grad"])
    state = w.viewer_dock.viewer.state
    assert state.montage_mode and state.axes == ("kh", "kw", "in", "out")
    from app.node_previews import preview_of

    view = w.adapter.node("grad").view
    preview = preview_of(view).copy()
    type_cells(w.attributes.rows["strides"].editor, [2, 1, 1, 1])  # invalid: stale
    assert w.viewer_dock.stale
    assert state.montage_mode and state.axes == ("kh", "kw", "in", "out")
    np.testing.assert_array_equal(preview_of(view), preview)  # the same picture, greyed
