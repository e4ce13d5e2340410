"""Opening another canvas (or New) while a run goes: the run is cancelled and its results never
reach the new canvas. Seen: the old run finished after the open and its outputs were filed under
the new canvas's blocks of the same ids (greyed "stale", but shown as those blocks' results)."""

from __future__ import annotations

import threading

import pytest

from tests.app_support import close_window, make_window, no_dialogs

QtCore = pytest.importorskip("PySide6.QtCore")

from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas
from tests.test_app_close_run import CHUNKS, slow_chunks
from tests.test_executor_cache import big_grad_canvas


def small_same_ids() -> Canvas:
    """Blocks with the ids of big_grad_canvas, other shapes and values."""
    c = Canvas()
    c.add_node("Tensor", pos=(0, 0), id="x", attrs={"shape": [1, 4, 4, 1], "fill": "ones"})
    c.add_node("IntVector", pos=(0, 150), id="fs", attrs={"values": [2, 2, 1, 1]})
    c.add_node("Tensor", pos=(0, 300), id="dy", attrs={"shape": [1, 4, 4, 1], "fill": "ones"})
    c.add_node("Conv2DBackpropFilter", pos=(350, 100), id="grad", attrs={"padding": "SAME"})
    c.connect(("x", "output"), ("grad", "input"))
    c.connect(("fs", "output"), ("grad", "filter_sizes"))
    c.connect(("dy", "output"), ("grad", "out_backprop"))
    return c


@pytest.mark.parametrize("how", ["open", "new"])
def test_opening_another_canvas_during_a_run_cancels_it_and_drops_its_results(
        qtbot, tmp_path, monkeypatch, how):
    no_dialogs(monkeypatch)
    started, seen = threading.Event(), []
    slow_chunks(monkeypatch, started, seen)
    other = tmp_path / "other.gbc.json"
    save_canvas(small_same_ids(), other)
    w = make_window(qtbot, tmp_path, big_grad_canvas(batch=CHUNKS))
    try:
        w.doc.undo_stack.setClean()
        w.doc._unsaved_origin = False
        assert w.run()
        qtbot.waitUntil(started.is_set, timeout=60_000)  # the conv kernel is running
        if how == "open":
            monkeypatch.setattr("PySide6.QtWidgets.QFileDialog.getOpenFileName",
                                staticmethod(lambda *a, **k: (str(other), "")))
            w.act_open.trigger()  # File > Open
            assert w.doc.canvas.nodes["x"].attrs["shape"] == [1, 4, 4, 1]
        else:
            w.act_new.trigger()
            assert w.doc.canvas.nodes == {}
        qtbot.waitUntil(lambda: not w.session.runner.running, timeout=60_000)
        assert len(seen) < CHUNKS // 2  # cancelled inside the kernel, not run to its end
        assert w.session.outputs == {} and w.session.result_keys == {}
        assert w.session.run_info == {}
        assert w.progress.text() == "cancelled"
        if how == "open":
            w.adapter.select(["x"])
            assert "no output yet" in w.viewer_dock.caption.text()
    finally:
        close_window(w)
