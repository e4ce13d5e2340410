"""Selecting a GradCheck shows its gradient beside the float64 numbers, the difference panel
being the error map: a wrong element is the brightest cell of it (BlockSpec.view_pair)."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt

from blocks.registry import REGISTRY
from engine import kernels
from engine.graph.canvas import Canvas
from tests.app_support import focus_canvas
from tests.test_app_input_size_hint import click_block

WRONG = (0, 2, 4, 0)  # the element of the input gradient made wrong


def wrong_gradient_canvas(samples: int = 0) -> Canvas:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 6, 6, 1))
    w = rng.standard_normal((3, 3, 1, 2))
    dy = rng.standard_normal((1, 6, 6, 2))
    dx = kernels.conv2d_backprop_input([1, 6, 6, 1], w, dy, strides=[1, 1, 1, 1],
                                       padding="SAME")
    dx = np.array(dx, np.float64)
    dx[WRONG] += 3.0
    c = Canvas()
    for nid, value, y in (("x", x, 0), ("w", w, 160), ("dy", dy, 320), ("dx", dx, 480)):
        c.add_node("Tensor", (0, y), {"fill": "values", "dtype": "float64",
                                      "values": value.tolist()}, id=nid)
    c.add_node("GradCheck", (350, 200), {"op": "Conv2D", "wrt": "input", "samples": samples},
               id="check", title="check dX")
    for src, port in (("x", "input"), ("w", "filter"), ("dy", "out_backprop"),
                      ("dx", "gradient")):
        c.connect((src, "output"), ("check", port))
    return c


def test_every_view_pair_names_an_input_and_an_output():
    pairs = {t: s.view_pair for t, s in REGISTRY.items() if s.view_pair}
    assert pairs == {"GradCheck": ("gradient", "numeric")}
    for t, (inp, out) in pairs.items():
        assert inp in REGISTRY[t].input_names() and out in REGISTRY[t].output_names()


def run_and_select(qtbot, window, canvas: Canvas) -> None:
    window.doc.load(canvas, None)
    focus_canvas(qtbot, window)
    qtbot.keyClick(window.adapter.viewer, Qt.Key_F5)
    assert window.wait_for_run()
    click_block(window, "check")
    qtbot.waitUntil(lambda: window.viewer_dock.selection == ["check"])


def test_selected_gradcheck_shows_the_wrong_element_as_the_error_maximum(qtbot, window):
    run_and_select(qtbot, window, wrong_gradient_canvas())
    dock = window.viewer_dock
    assert window.session.outputs[("check", "ok")] == np.False_
    assert dock.port_combo.isVisible() and dock.port_combo.currentText() == "gradient vs numeric"
    assert dock.shown == ("dx.output", "check.numeric")
    assert "gradient (left) vs numeric (right)" in dock.caption.text()
    left, right, diff = (p.data for p in dock.viewer.panels[:3])
    grad = window.session.outputs[("dx", "output")]
    numeric = window.session.outputs[("check", "numeric")]
    assert np.array_equal(left, grad[0, :, :, 0]) and np.array_equal(right, numeric[0, :, :, 0])
    # the difference panel (gradient - numeric) is the error map: its largest |cell| is the
    # wrong element, at 3 (the error added); every other cell is float64 rounding
    cell = np.unravel_index(np.nanargmax(np.abs(diff)), diff.shape)
    assert cell == WRONG[1:3]
    assert np.isclose(abs(diff[cell]), 3.0)
    others = np.delete(np.abs(diff).ravel(), np.ravel_multi_index(cell, diff.shape))
    assert np.nanmax(others) < 1e-6
    assert dock.viewer.diff.argmax_abs == WRONG  # the statistics line names it too
    assert str(list(WRONG)) in dock.viewer.stats_label.text()


def test_the_port_picker_still_shows_one_output(qtbot, window):
    run_and_select(qtbot, window, wrong_gradient_canvas(samples=10))
    dock = window.viewer_dock
    dock.port_combo.setCurrentText("error")
    dock.port_combo.activated.emit(dock.port_combo.currentIndex())
    assert dock.shown == ("check.error",)
    assert not dock.viewer.state.comparing
    # sampled: NaN (blank) where not sampled, in the pair view as well
    dock.port_combo.setCurrentIndex(0)
    dock.port_combo.activated.emit(0)
    assert dock.viewer.state.comparing
    diff = dock.viewer.panels[2].data
    assert np.count_nonzero(np.isfinite(diff)) == 10
