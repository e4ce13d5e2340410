"""The 3-D family in the app, as a user meets it (issue 33 item 2): the example canvas opens
from File > Examples and runs with both checks passing; a Conv3D block's strides and dilations
are five cells labelled with its data_format's axes that follow a data_format switch; a 3-D
activation opens in the viewer as its depth slices and the node shows the same montage; a
GradCheck switched to op Conv3D gets the 3-D window attributes."""

from __future__ import annotations

import numpy as np
import pytest

QtCore = pytest.importorskip("PySide6.QtCore")

from app.node_previews import THUMB_SIZE, preview_of
from engine.view.thumbnail import thumbnail
from tests.app_support import close_window, make_window, no_dialogs, wait_run
from tests.test_app_defects_panels import choose, type_cells
from tests.test_app_input_size_hint import click_block


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path)
    example = next(a for a in w.examples_menu.actions() if "conv3d" in a.text().lower())
    example.trigger()  # File > Examples > conv3d gradients
    wait_run(qtbot, w)
    yield w
    close_window(w)


def test_the_example_runs_and_both_checks_pass(window):
    out = window.session.outputs
    assert bool(out[("check_dw", "ok")]) and bool(out[("adjoint", "ok")])
    assert window.adapter.node("check_dw").view.preview_badge.text == "PASS"


def test_strides_are_five_labelled_cells_that_follow_data_format(qtbot, window):
    w = window
    click_block(w, "y")
    rows = w.attributes.rows
    strides = rows["strides"].editor
    assert [h.text() for h in strides.headers] == list("NDHWC")
    assert [c.text() for c in strides.cells] == ["1", "1", "2", "2", "1"]
    type_cells(qtbot, strides, [1, 3, 2, 2, 1])
    assert w.doc.canvas.nodes["y"].attrs["strides"] == [1, 3, 2, 2, 1]
    choose(qtbot, rows["data_format"].editor.combo, "NCDHW")
    attrs = w.doc.canvas.nodes["y"].attrs
    assert attrs["data_format"] == "NCDHW" and attrs["strides"] == [1, 1, 3, 2, 2]
    assert [h.text() for h in rows["strides"].editor.headers] == list("NCDHW")


def test_a_3d_activation_shows_as_depth_slices_in_the_viewer_and_on_the_node(qtbot, window):
    w = window
    click_block(w, "dx")
    state = w.viewer_dock.viewer.state
    assert state.depth_montage
    assert state.caption().startswith("dX: the 6 depth slices (D = row + column), each H (8) down")
    dx = np.asarray(w.session.outputs[("dx", "output")])
    values, _ = state.values()
    np.testing.assert_array_equal(values[:8, :8], dx[0, 0, :, :, 0])  # the first slice
    np.testing.assert_array_equal(values[9:, 18:], dx[0, 5, :, :, 0])  # the last (2 x 3 grid)
    axes = w.session.plan.specs[("dx", "output")].axes
    np.testing.assert_array_equal(preview_of(w.adapter.node("dx").view),
                                  thumbnail(dx, axes, THUMB_SIZE))


def test_a_gradcheck_switched_to_conv3d_gets_the_3d_window_attributes(qtbot, tmp_path,
                                                                      monkeypatch):
    from tests.app_support import grad_canvas

    c = grad_canvas()
    c.add_node("GradCheck", pos=(700, 100), id="gc", attrs={"strides": [1, 2, 3, 1]})
    w = make_window(qtbot, tmp_path, c)
    try:
        click_block(w, "gc")
        rows = w.attributes.rows
        choose(qtbot, rows["op"].editor.combo, "Conv3D")
        attrs = w.doc.canvas.nodes["gc"].attrs
        assert (attrs["op"], attrs["data_format"], attrs["strides"]) == (
            "Conv3D", "NDHWC", [1, 1, 2, 3, 1])
        editor = rows["strides"].editor
        assert [c.text() for c in editor.active] == ["1", "1", "2", "3", "1"]
        assert [h.text() for h in editor.headers if h.isVisible()] == list("NDHWC")
        choose(qtbot, rows["op"].editor.combo, "Conv2D")
        attrs = w.doc.canvas.nodes["gc"].attrs
        assert (attrs["data_format"], attrs["strides"]) == ("NHWC", [1, 2, 3, 1])
        assert [c.text() for c in rows["strides"].editor.active] == ["1", "2", "3", "1"]
    finally:
        close_window(w)


def test_the_app_the_command_line_and_the_api_give_the_same_bits(qtbot, window, tmp_path):
    """Set dX's dilations in the panel, run (F5), and the viewer, `gradblocks run --out` and
    engine.api on the saved canvas hold the same bits for every block."""
    import subprocess
    import sys

    from engine import api, kernels
    from engine.graph.canvas_file import save_canvas
    from tests.app_support import focus_canvas
    from tests.export_support import REPO

    w = window
    click_block(w, "dx")
    type_cells(qtbot, w.attributes.rows["dilations"].editor, [1, 2, 1, 1, 1])
    focus_canvas(qtbot, w)
    qtbot.keyClick(w.adapter.viewer, QtCore.Qt.Key_F5)
    assert w.wait_for_run()
    click_block(w, "dx")
    shown = np.asarray(w.viewer_dock.viewer.state.array)
    app_out = {nid: np.asarray(w.session.outputs[(nid, "output")]) for nid in ("y", "dw", "dx")}
    np.testing.assert_array_equal(shown, app_out["dx"])
    x, wt, dy = (np.asarray(w.session.outputs[(n, "output")]) for n in ("x", "w", "dy"))
    np.testing.assert_array_equal(app_out["dx"], kernels.conv3d_backprop_input(
        x.shape, wt, dy, [1, 1, 2, 2, 1], "SAME", dilations=[1, 2, 1, 1, 1]))
    path, npz = tmp_path / "c3.gbc.json", tmp_path / "out.npz"
    save_canvas(w.doc.canvas, path)
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(path), "--out",
                           str(npz)], capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    results = api.load(path).run()
    with np.load(npz) as cli_out:
        for nid, title in (("y", "Conv3D"), ("dw", "dW"), ("dx", "dX")):
            np.testing.assert_array_equal(cli_out[title], app_out[nid])
            np.testing.assert_array_equal(np.asarray(results[nid]), app_out[nid])
