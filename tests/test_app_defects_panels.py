"""Issue 24's defects of the panels, driven as the user met them: the Explain panel after Open (2),
the viewer after fixing a never-run block (3), switching data_format (5), an invalid edit
(8, point 4), GradCheck's sampled comparison (10), and the smaller ones of 13; GradCheck's cost
warning and progress in the app."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6 import QtCore, QtWidgets

from app.explain.panel import HINT
from engine.graph.canvas import Canvas
from tests.app_support import focus_canvas, wait_run
from tests.test_app_explain import click_viewer_element
from tests.test_app_gradcheck_view import run_and_select, wrong_gradient_canvas
from tests.test_app_input_size_hint import click_block

Qt = QtCore.Qt
EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"


def open_file(qtbot, w, monkeypatch, path: Path) -> None:
    """File > Open… answered with ``path`` (the file dialog replaced by its answer)."""
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                        staticmethod(lambda *_a, **_k: (str(path), "")))
    w.act_open.trigger()
    qtbot.waitUntil(lambda: w.doc.path == path)


def type_cell(qtbot, cell: QtWidgets.QLineEdit, text: str) -> None:
    """Click a cell, select its text, type ``text`` and leave it with Tab."""
    qtbot.mouseClick(cell, Qt.LeftButton)
    cell.selectAll()
    qtbot.keyClicks(cell, text)
    qtbot.keyClick(cell, Qt.Key_Tab)


def type_cells(qtbot, editor, values) -> None:
    for cell, v in zip(editor.cells, values, strict=True):
        type_cell(qtbot, cell, str(v))


def choose(qtbot, combo: QtWidgets.QComboBox, text: str) -> None:
    """Pick ``text`` in a combo box with the keyboard, as a user does."""
    combo.setFocus()
    index = combo.findText(text)
    assert index >= 0
    while combo.currentIndex() != index:
        qtbot.keyClick(combo, Qt.Key_Down if combo.currentIndex() < index else Qt.Key_Up)


# -- 2: Open clears the Explain panel ----------------------------------------------------------

def test_open_clears_the_explain_panel(qtbot, window, monkeypatch):
    w = window
    open_file(qtbot, w, monkeypatch, EXAMPLES / "conv2d_backprop_filter.gbc.json")
    wait_run(qtbot, w)
    click_block(w, "grad_filter")
    click_viewer_element(qtbot, w, (0, 0, 0, 0))
    assert w.explain_panel.request is not None  # explained
    open_file(qtbot, w, monkeypatch, EXAMPLES / "conv2d_backprop_input.gbc.json")
    wait_run(qtbot, w)  # a run refreshes what the panel shows
    panel = w.explain_panel
    assert panel.request is None
    assert panel.title.text() == HINT
    assert "not a conv block" not in panel.title.text()


# -- 3: fixing a never-run block updates the viewer --------------------------------------------

def test_fixing_a_never_run_block_updates_the_viewer(qtbot, window, monkeypatch):
    w = window
    open_file(qtbot, w, monkeypatch, EXAMPLES / "training_step.gbc.json")
    click_block(w, "dx")  # Conv2DBackpropInput fed by ShapeOf
    editor = w.attributes.rows["strides"].editor
    type_cells(qtbot, editor, [2, 1, 1, 1])
    wait_run(qtbot, w)  # everything else runs; dx does not
    assert ("dx", "output") not in w.session.outputs
    assert "strides" in w.viewer_dock.caption.text()
    type_cells(qtbot, editor, [1, 1, 1, 1])
    assert w.doc.canvas.nodes["dx"].attrs["strides"] == [1, 1, 1, 1]
    caption = w.viewer_dock.caption.text()
    assert "strides" not in caption and "press F5" in caption, caption


# -- 8 and point 4: an invalid edit ----------------------------------------------------------

def _field_tops(w) -> dict[str, int]:
    return {name: row.editor.mapTo(w.attributes, QtCore.QPoint(0, 0)).y()
            for name, row in w.attributes.rows.items() if row.editor.isVisible()}


def test_an_invalid_edit_moves_no_field_says_it_runs_with_the_last_valid_value_and_undoes(
        qtbot, grad_window):
    w = grad_window
    focus_canvas(qtbot, w)
    click_block(w, "grad")
    row = w.attributes.rows["strides"]
    type_cells(qtbot, row.editor, [1, 1, 1, 1])  # nothing changes: no undo step
    tops, steps = _field_tops(w), w.doc.undo_stack.count()
    type_cell(qtbot, row.editor.cells[1], "0")
    message = row.error.text()
    assert message.startswith("grad.strides: ") and ">= 1" in message
    assert row.error.isVisible()
    assert _field_tops(w) == tops  # no field moved: the next click lands where aimed
    assert [c.text() for c in row.editor.cells] == ["1", "0", "1", "1"]  # the text is kept
    assert w.doc.undo_stack.count() == steps  # not an undo step
    assert w.act_undo.isEnabled() and w.act_undo.text() == "&Undo Invalid Edit"
    assert w.doc.canvas.nodes["grad"].attrs.get("strides", [1, 1, 1, 1]) == [1, 1, 1, 1]
    tip = w.adapter.node("grad").view.toolTip()
    assert "runs with the last valid value [1, 1, 1, 1]" in tip
    w.grab().save("/tmp/h24/invalid_edit.png")
    # F5 says so where it is seen, and runs with [1, 1, 1, 1]
    focus_canvas(qtbot, w)
    with qtbot.waitSignal(w.session.results_changed, timeout=60_000):
        qtbot.keyClick(w.adapter.viewer, Qt.Key_F5)
    assert w.wait_for_run()
    assert "running with the last valid value [1, 1, 1, 1]" in w.statusBar().currentMessage()
    assert w.session.outputs[("grad", "output")].shape == (3, 3, 2, 2)
    # Undo drops the invalid text: the field shows the last valid value again, nothing else
    # is undone
    canvas_before = w.doc.canvas.to_json()
    w.act_undo.trigger()
    assert [c.text() for c in row.editor.cells] == ["1", "1", "1", "1"]
    assert row.error.text() == "" and not row.error.isVisible()
    assert not w.session.pending
    assert w.doc.canvas.to_json() == canvas_before and w.doc.undo_stack.count() == steps
    assert "runs with the last valid value" not in w.adapter.node("grad").view.toolTip()


# -- 10: GradCheck counts only what it sampled ------------------------------------------------

def test_a_sampled_gradcheck_counts_no_mismatch_in_unsampled_elements(qtbot, window):
    canvas = wrong_gradient_canvas(samples=30)
    # a correct gradient: only sampling leaves elements without a number
    grad = np.array(canvas.nodes["dx"].attrs["values"])
    grad[0, 2, 4, 0] -= 3.0
    canvas.nodes["dx"].attrs["values"] = grad.tolist()
    run_and_select(qtbot, window, canvas)
    dock = window.viewer_dock
    assert window.session.outputs[("check", "ok")] == np.True_
    assert dock.viewer.diff.nonfinite_mismatch == 0
    text = dock.viewer.stats_label.text()
    assert "NaN/Inf mismatches 0" in text
    assert "30 of 36 elements sampled" in dock.caption.text()


def test_a_gradcheck_of_a_nan_gradient_still_counts_its_mismatches(qtbot, window):
    canvas = wrong_gradient_canvas(samples=0)
    grad = np.array(canvas.nodes["dx"].attrs["values"])
    grad[0, 1, 1, 0] = np.nan
    canvas.nodes["dx"].attrs["values"] = grad.tolist()
    run_and_select(qtbot, window, canvas)
    assert window.viewer_dock.viewer.diff.nonfinite_mismatch == 1


# -- 5: switching data_format moves strides, dilations and explicit_paddings ------------------

def test_switching_data_format_permutes_the_window_attributes_in_one_undo_step(qtbot,
                                                                              grad_window):
    w = grad_window
    focus_canvas(qtbot, w)
    click_block(w, "grad")
    rows = w.attributes.rows
    type_cells(qtbot, rows["strides"].editor, [1, 2, 3, 1])
    type_cells(qtbot, rows["dilations"].editor, [1, 1, 2, 1])
    choose(qtbot, rows["padding"].editor.combo, "EXPLICIT")
    type_cells(qtbot, rows["explicit_paddings"].editor, [0, 0, 1, 2, 3, 4, 0, 0])
    steps, before = w.doc.undo_stack.count(), dict(w.doc.canvas.nodes["grad"].attrs)
    choose(qtbot, rows["data_format"].editor.combo, "NCHW")
    attrs = w.doc.canvas.nodes["grad"].attrs
    assert attrs["data_format"] == "NCHW"
    assert attrs["strides"] == [1, 1, 2, 3]  # N, C, H, W: the same window
    assert attrs["dilations"] == [1, 1, 1, 2]
    assert attrs["explicit_paddings"] == [0, 0, 0, 0, 1, 2, 3, 4]
    assert [c.text() for c in rows["strides"].editor.cells] == ["1", "1", "2", "3"]
    assert [h.text() for h in rows["strides"].editor.headers] == ["N", "C", "H", "W"]
    assert w.doc.undo_stack.count() == steps + 1  # one step
    # the NHWC tensors no longer fit: the message says they may still be NHWC
    errors = [str(e) for e in w.session.plan.errors["grad"]]
    assert not any("batch and depth" in e for e in errors), errors
    expected = ("grad.input: input depth 5 must be a positive multiple of filter_sizes "
                "in_channels 2. Read as NHWC, input has depth 2, which fits the filter: is "
                "input still in NHWC? (Transpose it, or set data_format back to NHWC)")
    assert errors == [expected]
    w.act_undo.trigger()
    assert w.doc.canvas.nodes["grad"].attrs == before


def test_strides_written_in_the_other_order_say_so(qtbot, grad_window):
    w = grad_window
    click_block(w, "grad")
    w.doc.edit("NCHW", lambda c: (c.set_attr("grad", "data_format", "NCHW")))
    type_cells(qtbot, w.attributes.rows["strides"].editor, [1, 2, 2, 1])
    message = w.attributes.rows["strides"].error.text()
    assert message == ("grad.strides: strides [1, 2, 2, 1]: strides in the batch and depth "
                       "dimensions must be 1 (NCHW). [1, 2, 2, 1] reads as NHWC order; in NCHW "
                       "order, strides is [1, 1, 2, 2]"), message


# -- 13: the smaller ones ------------------------------------------------------------------

def test_open_resets_the_progress_bar(qtbot, window, monkeypatch):
    w = window
    open_file(qtbot, w, monkeypatch, EXAMPLES / "training_step.gbc.json")
    wait_run(qtbot, w)
    assert "ok" in w.progress.format()
    open_file(qtbot, w, monkeypatch, EXAMPLES / "conv2d_backprop_input.gbc.json")
    assert w.progress.format() == "idle" and w.progress.value() == 0


def test_save_npy_suggests_the_block_title(qtbot, window, monkeypatch):
    w = window
    open_file(qtbot, w, monkeypatch, EXAMPLES / "training_step.gbc.json")
    wait_run(qtbot, w)
    click_block(w, "dw")
    asked = []
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        staticmethod(lambda _p, _c, start, _f: asked.append(start) or ("", "")))
    qtbot.mouseClick(w.viewer_dock.viewer.npy_button, Qt.LeftButton)
    qtbot.mouseClick(w.viewer_dock.viewer.png_button, Qt.LeftButton)
    assert [Path(a).name for a in asked] == ["dW (NHWC).npy", "dW (NHWC).png"]


def test_the_run_summary_counts_failing_checks(qtbot, window):
    run_and_select(qtbot, window, wrong_gradient_canvas())  # its GradCheck says FAIL
    assert window.session.outputs[("check", "ok")] == np.False_
    summary = window.progress.toolTip()
    assert summary.endswith("0 failed; 1 check(s) FAIL (check dX)"), summary


# -- GradCheck's cost warning and progress -----------------------------------------------------

def slow_gradcheck_canvas() -> Canvas:
    """A GradCheck of every element of a [1, 128, 128, 32] input gradient: minutes, estimated
    (blocks.gradcheck.estimated_seconds)."""
    c = Canvas()
    for nid, shape, y in (("x", [1, 128, 128, 32], 0), ("w", [3, 3, 32, 32], 160),
                          ("dy", [1, 128, 128, 32], 320), ("dx", [1, 128, 128, 32], 480)):
        c.add_node("Tensor", (0, y), {"shape": shape, "fill": "random_normal"}, id=nid)
    c.add_node("GradCheck", (350, 200), {"op": "Conv2D", "wrt": "input", "samples": 0,
                                         "padding": "SAME"}, id="check", title="check dX")
    for src, port in (("x", "input"), ("w", "filter"), ("dy", "out_backprop"),
                      ("dx", "gradient")):
        c.connect((src, "output"), ("check", port))
    return c


def test_a_slow_gradcheck_is_announced_in_the_log_and_the_status_bar(qtbot, window):
    w = window
    w.doc.load(slow_gradcheck_canvas(), None)
    (warning,) = w.session.plan.warnings["check"]
    assert str(warning) in w.log.messages("warning")
    assert w.statusBar().currentMessage() == str(warning).partition("\n")[0]
    assert str(warning).startswith("check dX")


def test_gradcheck_progress_shows_on_the_progress_bar(qtbot, window):
    w = window
    seen = []
    w.session.runner.step_progress.connect(
        lambda nid, f: seen.append((nid, f, w.progress.format())))
    run_and_select(qtbot, w, wrong_gradient_canvas())
    fractions = [f for nid, f, _ in seen if nid == "check"]
    assert fractions and fractions[-1] == 1.0 and fractions == sorted(fractions)
    assert any(fmt.endswith("check dX 100%") for _, _, fmt in seen), seen


def test_cancel_stops_a_slow_gradcheck_inside_its_loop(qtbot, window):
    """Run > Cancel once the slow GradCheck (minutes) has reported its first progress: the run
    ends within seconds, cancelled, and the check has no result (issue 31 point 8)."""
    import time

    w = window
    w.doc.load(slow_gradcheck_canvas(), None)
    started = []

    def cancel_once(nid: str, fraction: float) -> None:
        if nid == "check" and not started:
            started.append(time.monotonic())
            w.act_cancel.trigger()  # the user presses Cancel while the check is evaluating

    w.session.runner.step_progress.connect(cancel_once)
    assert w.run()
    qtbot.waitUntil(lambda: bool(started), timeout=60_000)
    qtbot.waitUntil(lambda: not w.session.runner.running, timeout=20_000)
    assert time.monotonic() - started[0] < 20
    assert ("check", "ok") not in w.session.outputs
    assert w.progress.text() == "cancelled"
