"""The explain panel and the Geometry dock on the Conv3D family, driven as a user: select a 3-D
block, type a five-entry element index in the panel and read its terms; show the geometry of a
depth slice with the slice box."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6 import QtCore

from engine.explain.terms import explain_element
from engine.graph.canvas import Canvas
from tests.app_support import close_window, make_window, no_dialogs, wait_run
from tests.test_app_geometry import click_node, open_dock, shown

ATTRS = {"strides": [1, 2, 1, 1, 1], "dilations": [1, 2, 1, 1, 1], "padding": "SAME",
         "data_format": "NDHWC"}


def conv3d_canvas() -> Canvas:
    """x [1,7,4,4,2] -> Conv3D y (a grouped filter [3,2,2,1,4]); Conv3DBackpropInputV2 dx of y."""
    c = Canvas()
    c.add_node("Tensor", pos=(0, 0), id="x",
               attrs={"shape": [1, 7, 4, 4, 2], "fill": "random_normal", "seed": 1})
    c.add_node("Tensor", pos=(0, 160), id="w",
               attrs={"shape": [3, 2, 2, 1, 4], "fill": "random_normal", "seed": 2})
    c.add_node("Conv3D", pos=(360, 60), id="y", attrs=dict(ATTRS))
    c.connect(("x", "output"), ("y", "input"))
    c.connect(("w", "output"), ("y", "filter"))
    c.add_node("ShapeOf", pos=(360, 260), id="xs")
    c.connect(("x", "output"), ("xs", "input"))
    c.add_node("Conv3DBackpropInputV2", pos=(700, 160), id="dx", attrs=dict(ATTRS))
    c.connect(("xs", "output"), ("dx", "input_sizes"))
    c.connect(("w", "output"), ("dx", "filter"))
    c.connect(("y", "output"), ("dx", "out_backprop"))
    return c


@pytest.fixture
def window3d(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, conv3d_canvas())
    wait_run(qtbot, w)
    yield w
    close_window(w)


def type_index(qtbot, panel, text: str) -> None:
    panel.index_edit.clear()
    qtbot.keyClicks(panel.index_edit, text)
    qtbot.mouseClick(panel.index_button, QtCore.Qt.LeftButton)


def _inputs(w, node_id):
    step = next(s for s in w.session.plan.steps if s.node_id == node_id)
    return step, {p: w.session.outputs[src] for p, src in step.inputs.items()}


@pytest.mark.parametrize("node_id, type_id, index", [
    ("y", "Conv3D", (0, 0, 1, 1, 3)),
    ("dx", "Conv3DBackpropInputV2", (0, 6, 2, 1, 1)),
])
def test_a_typed_five_entry_index_explains_the_element(qtbot, window3d, node_id, type_id,
                                                       index):
    w = window3d
    click_node(qtbot, w, node_id)
    panel = w.explain_panel
    type_index(qtbot, panel, ", ".join(map(str, index)))
    qtbot.waitUntil(lambda: panel.request is not None)
    assert w.explain_dock.isVisible()
    step, inputs = _inputs(w, node_id)
    e = explain_element(type_id, step.attrs, inputs, index)
    assert panel.formula.text() == e.formula and e.terms > 0
    assert panel.counts.text().startswith(f"{e.terms} term(s); {e.padding_terms} padding term")
    assert panel.model.count == e.terms
    a, b = e.factors
    for t in range(e.terms):
        row = panel.model.row(t)
        assert row[1] == str(a.index[t].tolist()) and row[3] == str(b.index[t].tolist())
        assert len(a.index[t]) == 5
    value = float(w.session.outputs[(node_id, "output")][index])
    assert abs(e.sum - value) <= 1e-5 * float(np.abs(e.products).sum())
    assert panel.index_edit.text() == ",".join(map(str, index))
    # the pictures show the slices holding the first term's factors, outlined
    for f, pic in zip(e.factors, (panel.pictures[a.port], panel.pictures[b.port]), strict=True):
        assert len(pic.mark_cells) >= 1
        assert pic.state.pixel_index(*pic.mark_cells[0]) is not None


def test_a_four_entry_index_for_a_3d_block_says_why(qtbot, window3d):
    w = window3d
    click_node(qtbot, w, "y")
    panel = w.explain_panel
    type_index(qtbot, panel, "0,0,1,1")
    assert panel.request is None
    assert "has 4 entries, the output has 5 dimensions" in panel.title.text()
    type_index(qtbot, panel, "0,x,1")
    assert "must be integers" in panel.title.text()


def test_the_geometry_dock_shows_a_depth_slice(qtbot, window3d):
    w = window3d
    view = open_dock(qtbot, w)
    click_node(qtbot, w, "y")
    assert view.model is not None and view.model.depth is not None
    box = view.slice_box
    assert box.isVisible() and (box.minimum(), box.maximum()) == (0, 3)
    assert view.slice_label.text() == "Output plane"
    first = shown(view)
    box.setFocus()
    qtbot.keyClick(box, QtCore.Qt.Key_Up)
    assert view.depth_slice == 1
    assert not np.array_equal(shown(view), first)
    assert shown(view).shape == first.shape
    # the overlap map: the box picks an input plane (7 of them)
    qtbot.mouseClick(view.overlap_button, QtCore.Qt.LeftButton)
    assert view.frame_label.text() == "overlap map"
    assert (box.maximum(), view.slice_label.text()) == (6, "Input plane")
    box.setValue(1)  # never read with depth stride 2 and dilation 2: a map of zeros
    assert not view.model.plane_overlap(1).any()
    zeros = shown(view)
    box.setValue(2)
    assert not np.array_equal(shown(view), zeros)


def test_the_slice_box_is_hidden_for_a_2d_block(qtbot, grad_window):
    view = open_dock(qtbot, grad_window)
    click_node(qtbot, grad_window, "grad")
    assert view.model is not None and view.model.depth is None
    assert not view.slice_box.isVisible() and view.depth_slice == 0


def test_a_click_on_a_3d_output_in_the_viewer_explains_it(qtbot, window3d):
    """The viewer shows plane 0, channel 0 of y: a click on its cell (1, 2) explains
    y[0, 0, 1, 2, 0]."""
    from tests.test_app_explain import click_viewer_element

    w = window3d
    click_node(qtbot, w, "y")
    qtbot.waitUntil(lambda: w.viewer_dock.shown == ("y.output",))
    index = (0, 0, 1, 2, 0)
    click_viewer_element(qtbot, w, index)
    panel = w.explain_panel
    qtbot.waitUntil(lambda: panel.request is not None)
    step, inputs = _inputs(w, "y")
    e = explain_element("Conv3D", step.attrs, inputs, index)
    assert panel.request.index == index and panel.formula.text() == e.formula
    assert panel.index_edit.text() == "0,0,1,2,0"
    assert e.padding_terms > 0  # output plane 0: depth tap 0 reads plane -2
