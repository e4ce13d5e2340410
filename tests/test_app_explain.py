"""The explain panel, driven as a user: open the conv2d_backprop_filter example, run it, select the
gradient block, click an element of the viewer's image (or right-click > Explain element), and
read the panel (formula, term count, sum vs value, outlined contributing cells); click an input
element in the panel (or in the viewer showing an input) and see every output element it feeds.

Expected values come from engine.explain.terms.explain_element; the reverse sets are enumerated here
from explain_element over every output element (not from engine.explain.reverse), and marked
cells are mapped back to tensor indices through the picture's own pixel_index."""

import numpy as np
import pytest
from PySide6 import QtCore, QtWidgets

from engine.base.dtypes import RTOL
from engine.explain.terms import explain_element
from engine.graph.canvas import Canvas
from tests.app_support import make_window, wait_run

Qt = QtCore.Qt
EXAMPLE = "conv2d_backprop_filter"


def open_example(qtbot, w, name: str = EXAMPLE) -> None:
    """File > Examples > name, then run."""
    action = next(a for a in w.examples_menu.actions() if a.text() == name)
    action.trigger()
    wait_run(qtbot, w)


def pixel_of(picture_state, index) -> tuple[int, int]:
    """The picture cell the viewer maps to ``index`` (searched through pixel_index)."""
    data = picture_state.pictures()[0].data
    for r in range(data.shape[0]):
        for c in range(data.shape[1]):
            if picture_state.pixel_index(r, c) == tuple(index):
                return r, c
    raise AssertionError(f"{index} is not shown")


def click_cell(qtbot, panel, row: int, col: int, button=Qt.LeftButton) -> None:
    """A real click on the centre of image cell (row, col) of a pyqtgraph image panel."""
    scene = panel.plot.vb.mapViewToScene(QtCore.QPointF(col, row))
    qtbot.mouseClick(panel.viewport(), button, pos=panel.mapFromScene(scene))


def click_viewer_element(qtbot, w, index, button=Qt.LeftButton) -> None:
    viewer = w.viewer_dock.viewer
    click_cell(qtbot, viewer.panels[0], *pixel_of(viewer.state, index), button=button)


def step_inputs(w, node_id):
    step = next(s for s in w.session.plan.steps if s.node_id == node_id)
    return step, {p: w.session.outputs[src] for p, src in step.inputs.items()}


def marked_indices(picture) -> set[tuple[int, ...]]:
    """The tensor indices of the outlined cells, through the picture's own pixel mapping."""
    return {picture.state.pixel_index(int(r), int(c)) for r, c in picture.mark_cells}


def in_slice(picture, indices) -> set[tuple[int, ...]]:
    """Those of ``indices`` the picture's current slice (or montage) shows."""
    st = picture.state
    fixed = st.fixed_axes()
    return {tuple(i) for i in np.asarray(indices).tolist()
            if all(i[ax] == st.index.get(ax, 0) for ax in fixed)}


def fed_by(type_id, attrs, inputs, out_shape, port, index) -> set[tuple[int, ...]]:
    """Every output element whose listed terms have ``port[index]`` as a factor."""
    out = set()
    for y in np.ndindex(*out_shape):
        e = explain_element(type_id, attrs, inputs, y)
        f = next(f for f in e.factors if f.port == port)
        if any(tuple(i) == tuple(index) for i in f.index.tolist()):
            out.add(y)
    return out


@pytest.fixture
def example_window(qtbot, window):
    open_example(qtbot, window)
    window.adapter.select(["grad_filter"])
    return window


def test_clicking_a_gradient_element_explains_it(qtbot, example_window):
    w = example_window
    panel, dock = w.explain_panel, w.explain_dock
    assert not dock.isVisible()
    index = (1, 2, 0, 3)
    click_viewer_element(qtbot, w, index)
    assert dock.isVisible()
    step, inputs = step_inputs(w, "grad_filter")
    e = explain_element("Conv2DBackpropFilter", step.attrs, inputs, index)
    value = float(w.session.outputs[("grad_filter", "output")][index])
    assert panel.title.text().endswith("dw[1, 2, 0, 3]")
    assert panel.formula.text() == e.formula
    assert e.formula.startswith("dw[1,2,0,3] = sum over n,r,c of input[")
    assert panel.counts.text().startswith(f"{e.terms} term(s); {e.padding_terms} padding term")
    assert e.terms == 6 and e.padding_terms == 3  # SAME, stride 2: row 1 reads the pad
    assert panel.model.count == panel.model.rowCount() == e.terms
    assert abs(e.sum - value) <= RTOL["float32"] * float(np.abs(e.products).sum())
    assert f"= {e.sum!r}" in panel.sum_label.text() and "|difference| = 0" in \
        panel.sum_label.text()
    # the table lists the terms in order, with their products
    a, b = e.factors
    for t in range(e.terms):
        row = panel.model.row(t)
        assert row[1] == str(a.index[t].tolist()) and row[3] == str(b.index[t].tolist())
        assert float(row[5]) == pytest.approx(float(e.products[t]))
    # the contributing cells are outlined on each input's picture (the first term's slice)
    for f in e.factors:
        pic = panel.pictures[f.port]
        assert pic.state.array is inputs[f.port]
        assert tuple(f.index[0]) in in_slice(pic, f.index)
        assert marked_indices(pic) == in_slice(pic, f.index)
        assert len(pic.mark_cells) == 6
        assert len(pic.marks.data) == 6 and not pic.mask.isVisible()  # outlines, no mask
        channel = f.index[0][3]
        assert panel.notes[f.port].text() == (f"{f.port}: 6 of {e.terms} terms in this slice\n"
                                              f"slice N = 0, C = {channel}")
        assert pic.state.index == {0: 0, 3: channel}
        source = w.doc.canvas.nodes[step.inputs[f.port][0]].title
        assert pic.toolTip().startswith(f"{f.port} from {source}: ")
    out_pic = panel.pictures["dw"]
    assert out_pic.state.pixel_index(*out_pic.focus_cell) == index
    assert panel.grab().save("/tmp/explain_panel.png")


def test_clicking_an_input_element_in_the_panel_shows_what_it_feeds(qtbot, example_window):
    w = example_window
    panel = w.explain_panel
    click_viewer_element(qtbot, w, (0, 0, 1, 2))
    pic = panel.pictures["input"]
    assert pic.state.index == {0: 0, 3: 1}  # dw[..., q=1, ...] reads input channel 1
    target = (0, 3, 4, 1)
    click_cell(qtbot, pic, *pixel_of(pic.state, target))
    step, inputs = step_inputs(w, "grad_filter")
    out = w.session.outputs[("grad_filter", "output")]
    expected = fed_by("Conv2DBackpropFilter", step.attrs, inputs, out.shape, "input", target)
    assert expected  # x[0,3,4,1] is read by some taps
    assert panel.request.port == "input" and panel.request.index == target
    assert panel.title.text().endswith("input[0, 3, 4, 1] = " +
                                       str(inputs["input"][target]).removesuffix(".0"))
    assert panel.model.count == len(expected)
    assert {tuple(int(v) for v in panel.model.row(t)[1][1:-1].split(", "))
            for t in range(panel.model.count)} == expected
    out_pic = panel.pictures["dw"]  # a montage shows every filter element
    assert marked_indices(out_pic) == expected
    assert f"{len(expected)} of {len(expected)} fed elements" in panel.notes["dw"].text()
    assert panel.pictures["input"].state.pixel_index(*panel.pictures["input"].focus_cell) == \
        target
    # and clicking an output element in the panel explains it again
    y = min(expected)
    click_cell(qtbot, out_pic, *pixel_of(out_pic.state, y))
    assert panel.request.explanation is not None and panel.request.index == y
    assert panel.formula.text().startswith(f"dw[{','.join(map(str, y))}] = ")


def test_clicking_an_input_tensor_in_the_viewer_shows_what_it_feeds(qtbot, window):
    w = window
    open_example(qtbot, w)
    w.adapter.select(["out_backprop"])
    target = (0, 2, 1, 3)
    w.viewer_dock.viewer.set_index(3, 3)  # the C spin box: the slice holding the element
    click_viewer_element(qtbot, w, target)
    panel = w.explain_panel
    assert w.explain_dock.isVisible()
    step, inputs = step_inputs(w, "grad_filter")
    out = w.session.outputs[("grad_filter", "output")]
    expected = fed_by("Conv2DBackpropFilter", step.attrs, inputs, out.shape, "out_backprop",
                      target)
    assert panel.request.port == "out_backprop" and panel.model.count == len(expected)
    assert marked_indices(panel.pictures["dw"]) == expected
    # a tensor that feeds no array operand (filter_sizes) explains nothing
    w.adapter.select(["filter_sizes"])
    assert w.explain_link.target() is None
    click_viewer_element(qtbot, w, (1,))
    assert panel.request.index == target


def test_context_menu_explain_element(qtbot, example_window):
    w = example_window
    index = (2, 1, 1, 0)
    click_viewer_element(qtbot, w, index, button=Qt.RightButton)
    menu = w.viewer_dock.viewer.panels[0].plot.vb.menu
    qtbot.waitUntil(menu.isVisible)
    action = next(a for a in menu.actions() if a.text().startswith("Explain element"))
    assert action.text() == "Explain element [2, 1, 1, 0]" and action.isEnabled()
    assert menu.actions()[0] is action
    menu.setActiveAction(action)
    qtbot.keyClick(menu, Qt.Key_Return)
    qtbot.waitUntil(lambda: w.explain_panel.request is not None)
    assert w.explain_panel.title.text().endswith("dw[2, 1, 1, 0]")
    step, inputs = step_inputs(w, "grad_filter")
    e = explain_element("Conv2DBackpropFilter", step.attrs, inputs, index)
    assert w.explain_panel.formula.text() == e.formula
    assert w.explain_panel.model.count == e.terms


def test_a_stale_result_is_refused_and_a_run_refreshes(qtbot, example_window):
    w = example_window
    index = (0, 0, 0, 0)
    click_viewer_element(qtbot, w, index)
    w.doc.edit("fill", lambda c: c.set_attr("out_backprop", "fill", "arange"))
    click_viewer_element(qtbot, w, index)
    assert "stale" in w.explain_panel.title.text()
    assert "run the canvas" in w.explain_panel.title.text()
    wait_run(qtbot, w)  # the run refreshes the explanation of the element asked for
    step, inputs = step_inputs(w, "grad_filter")
    e = explain_element("Conv2DBackpropFilter", step.attrs, inputs, index)
    assert float(e.factors[1].values[-1]) > 1  # the arange out_backprop, not the ones
    assert w.explain_panel.formula.text() == e.formula
    assert w.explain_panel.model.count == e.terms
    assert f"= {e.sum!r}" in w.explain_panel.sum_label.text()
    # a block made invalid says so
    w.doc.edit("pad", lambda c: c.set_attr("grad_filter", "padding", "VALID"))
    click_viewer_element(qtbot, w, index)
    assert w.explain_panel.title.text() == ("Conv2DBackpropFilter is not valid now: fix it and "
                                            "run to explain its elements.")


def big_canvas() -> Canvas:
    """A 1x1 filter gradient over 4 x 64 x 64 positions: 16,384 terms per element."""
    c = Canvas()
    c.add_node("Tensor", pos=(0, 0), id="x",
               attrs={"shape": [4, 64, 64, 1], "fill": "random_normal", "seed": 1})
    c.add_node("IntVector", pos=(0, 130), id="fs", attrs={"values": [1, 1, 1, 1]})
    c.add_node("Tensor", pos=(0, 260), id="dy",
               attrs={"shape": [4, 64, 64, 1], "fill": "random_normal", "seed": 2})
    c.add_node("Conv2DBackpropFilter", pos=(360, 100), id="grad")
    c.connect(("x", "output"), ("grad", "input"))
    c.connect(("fs", "output"), ("grad", "filter_sizes"))
    c.connect(("dy", "output"), ("grad", "out_backprop"))
    return c


def test_the_table_is_capped_and_copy_takes_every_term(qtbot, tmp_path, monkeypatch):
    from tests.app_support import close_window, no_dialogs

    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, big_canvas())
    try:
        wait_run(qtbot, w)
        w.adapter.select(["grad"])
        click_viewer_element(qtbot, w, (0, 0, 0, 0))
        panel = w.explain_panel
        assert panel.model.count == 4 * 64 * 64
        assert panel.model.rowCount() == 10_000
        assert panel.table_note.text() == ("showing the first 10,000 of 16,384 terms; Copy all "
                                           "rows copies every one")
        qtbot.mouseClick(panel.copy_button, Qt.LeftButton)
        lines = QtWidgets.QApplication.clipboard().text().splitlines()
        assert len(lines) == 1 + 16_384 and lines[0].startswith("#\tinput index")
        assert lines[-1].split("\t")[1] == "[3, 63, 63, 0]"
        # the input picture shows batch 0 of the first term: 4,096 of the 16,384 terms
        assert "4,096 of 16,384 terms in this slice" in panel.notes["input"].text()
        # so many cells are a translucent mask, not 4,096 outlines
        pic = panel.pictures["input"]
        step, inputs = step_inputs(w, "grad")
        e = explain_element("Conv2DBackpropFilter", step.attrs, inputs, (0, 0, 0, 0))
        assert marked_indices(pic) == in_slice(pic, e.factors[0].index)
        assert pic.mask.isVisible() and len(pic.marks.data) == 0
        alpha = pic.mask.image[..., 3]
        assert alpha.shape == (64, 64) and np.all(alpha > 0)  # 1x1 filter: every position
    finally:
        close_window(w)


def test_explain_shot_writes_the_panel_picture(qapp, tmp_path):
    """``python -m app.explain.shot`` (the README's picture) explains the element and saves the
    panel; a bad node is exit 2."""
    from app.canvas_paths import example_files
    from app.explain.shot import main

    example = next(p for p in example_files() if p.name.startswith(EXAMPLE))
    out = tmp_path / "shots" / "explain.png"
    assert main([str(example), "grad_filter", "1,2,0,3", str(out)]) == 0
    from PySide6 import QtGui

    image = QtGui.QImage(str(out))
    assert not image.isNull() and image.width() > 600 and image.height() > 400
    colors = {image.pixel(x, y) for x in range(0, image.width(), 19)
              for y in range(0, image.height(), 13)}
    assert len(colors) > 20
    assert main([str(example), "nope", "0,0,0,0", str(tmp_path / "x.png")]) == 2
    assert not (tmp_path / "x.png").exists()


def test_an_input_gradient_shows_the_taps_and_out_backprop_that_scatter_into_it(qtbot,
                                                                                window):
    w = window
    open_example(qtbot, w, "conv2d_backprop_input")
    w.adapter.select(["grad_input"])
    viewer = w.viewer_dock.viewer
    viewer.set_index(0, 1)  # N = 1
    viewer.set_index(3, 2)  # C = 2
    index = (1, 4, 2, 2)
    click_viewer_element(qtbot, w, index)
    step, inputs = step_inputs(w, "grad_input")
    e = explain_element("Conv2DBackpropInput", step.attrs, inputs, index)
    panel = w.explain_panel
    assert panel.formula.text() == e.formula and e.formula.startswith("dx[1,4,2,2] = ")
    assert panel.model.count == e.terms == 2 * 2 * 5  # taps i in {0, 2}, j in {0, 2}, 5 outputs
    value = float(w.session.outputs[("grad_input", "output")][index])
    assert abs(e.sum - value) <= RTOL["float32"] * float(np.abs(e.products).sum())
    w_factor, dy_factor = e.factors
    assert (w_factor.port, dy_factor.port) == ("filter", "out_backprop")
    filt = panel.pictures["filter"]
    assert filt.state.montage_mode  # every tap is on the montage
    assert marked_indices(filt) == {tuple(i) for i in w_factor.index.tolist()}
    dy_pic = panel.pictures["out_backprop"]
    assert marked_indices(dy_pic) == in_slice(dy_pic, dy_factor.index)
    assert dy_pic.state.index == {0: 1, 3: 0}
    assert f"4 of {e.terms} terms in this slice" in panel.notes["out_backprop"].text()
    # the reverse from a filter tap in the panel: the input positions it scatters to
    tap = (2, 0, 2, 4)
    click_cell(qtbot, filt, *pixel_of(filt.state, tap))
    out = w.session.outputs[("grad_input", "output")]
    expected = fed_by("Conv2DBackpropInput", step.attrs, inputs, out.shape, "filter", tap)
    assert panel.request.port == "filter" and panel.model.count == len(expected) == 2 * 3 * 3
    assert marked_indices(panel.pictures["dx"]) == in_slice(panel.pictures["dx"], expected)


def test_an_nchw_gradient_reads_its_layout(qtbot, window):
    w = window
    open_example(qtbot, w, "training_step")
    w.adapter.select(["dw_nchw"])
    index = (0, 1, 2, 5)
    click_viewer_element(qtbot, w, index)
    step, inputs = step_inputs(w, "dw_nchw")
    e = explain_element("Conv2DBackpropFilter", step.attrs, inputs, index)
    panel = w.explain_panel
    assert panel.formula.text() == e.formula
    assert e.formula == ("dw[0,1,2,5] = sum over n,r,c of input[n, 2, r-1, c] * "
                         "out_backprop[n, 5, r, c]")  # NCHW: channel second
    assert panel.model.count == e.terms == 528 and e.padding_terms == 48
    for f, channel in zip(e.factors, (2, 5), strict=True):
        pic = panel.pictures[f.port]
        assert pic.state.index == {0: 0, 1: channel}  # N and C fixed, H x W shown
        assert pic.state.array.shape == inputs[f.port].shape
        assert marked_indices(pic) == in_slice(pic, f.index)
        assert marked_indices(pic)  # the first term's slice holds some terms


def test_nothing_to_explain_leaves_the_panel_closed(qtbot, window):
    """A size vector (feeds no array operand) and a comparison of two blocks explain nothing:
    the context menu's item is disabled and a click opens no panel."""
    w = window
    open_example(qtbot, w)
    w.adapter.select(["filter_sizes"])
    click_viewer_element(qtbot, w, (2,), button=Qt.RightButton)
    menu = w.viewer_dock.viewer.panels[0].plot.vb.menu
    qtbot.waitUntil(menu.isVisible)
    assert menu.actions()[0].text() == "Explain element [2]"
    assert not menu.actions()[0].isEnabled()
    menu.close()
    click_viewer_element(qtbot, w, (2,))
    w.adapter.select(["input", "out_backprop"])  # two blocks selected (their shapes differ)
    assert len(w.viewer_dock.shown) == 2 and w.explain_link.target() is None
    click_cell(qtbot, w.viewer_dock.viewer.panels[0], 0, 0)
    assert not w.explain_dock.isVisible() and w.explain_panel.request is None


def test_a_closed_panel_catches_up_when_reopened(qtbot, example_window):
    w = example_window
    index = (1, 1, 1, 1)
    click_viewer_element(qtbot, w, index)
    before = w.explain_panel.sum_label.text()
    w.explain_dock.close()
    w.doc.edit("fill", lambda c: c.set_attr("out_backprop", "fill", "arange"))
    wait_run(qtbot, w)
    assert w.explain_panel.sum_label.text() == before  # hidden: not recomputed
    w.explain_dock.toggleViewAction().trigger()  # View > Explain
    qtbot.waitUntil(w.explain_dock.isVisible)
    step, inputs = step_inputs(w, "grad_filter")
    e = explain_element("Conv2DBackpropFilter", step.attrs, inputs, index)
    assert f"= {e.sum!r}" in w.explain_panel.sum_label.text() != before


@pytest.mark.parametrize("example, node, type_id, index", [
    ("depthwise_backprop_filter", "grad_filter", "DepthwiseBackpropFilter", (2, 0, 1, 1)),
    ("training_step", "forward", "Conv2D", (0, 0, 0, 0)),
])
def test_depthwise_and_forward_blocks_explain_too(qtbot, window, example, node, type_id, index):
    w = window
    open_example(qtbot, w, example)
    w.adapter.select([node])
    click_viewer_element(qtbot, w, index)
    step, inputs = step_inputs(w, node)
    e = explain_element(type_id, step.attrs, inputs, index)
    panel = w.explain_panel
    assert panel.formula.text() == e.formula and panel.model.count == e.terms > 0
    assert panel.counts.text().startswith(f"{e.terms} term(s); {e.padding_terms} padding")
    for f in e.factors:
        pic = panel.pictures[f.port]
        assert marked_indices(pic) == in_slice(pic, f.index) != set()
