"""The rest of issue 24's defects, driven as the user met them: the third compare pane's colour
bar, the montage's Table, the cross-check table's ``max rel``, "a AdjointCheck" (13); the badge
of a block running with its last valid value; the Explain panel after its block is deleted.

Screenshots go to /tmp/h24b/ (looked at by hand; no test reads them back)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtTest, QtWidgets

from app import crosscheck_action
from app.explain.panel import HINT
from engine.base.names import article
from engine.export import crosscheck, frameworks
from engine.graph.canvas import Canvas
from engine.graph.executor import internal_error
from engine.view.stats import exact_text
from tests.app_support import focus_canvas, wait_run
from tests.test_app_defects_panels import open_file, type_cell
from tests.test_app_explain import click_viewer_element
from tests.test_app_geometry import click_node, open_dock
from tests.test_app_input_size_hint import click_block
from tests.test_crosscheck import _fake

Qt = QtCore.Qt
EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"
SHOTS = Path("/tmp/h24b")


def shot(widget: QtWidgets.QWidget, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert widget.grab().save(str(SHOTS / f"{name}.png"))


def shift_click(qtbot, w, node_id: str) -> None:
    """Shift+click on a block's title bar: adds it to the selection."""
    viewer = w.adapter.viewer
    qtbot.keyPress(viewer, Qt.Key_Shift)
    click_block(w, node_id)
    qtbot.keyRelease(viewer, Qt.Key_Shift)


# -- 13: the third compare pane's colour bar --------------------------------------------------

def test_every_compare_pane_shows_its_whole_colour_bar(qtbot, window, monkeypatch):
    """A laptop-sized window with the Explain panel beside the viewer: comparing two blocks
    with long titles draws three narrow panes; the difference pane's long title must not push
    its colour bar out of the pane."""
    w = window
    w.resize(1280, 800)
    open_file(qtbot, w, monkeypatch, EXAMPLES / "training_step.gbc.json")
    wait_run(qtbot, w)
    focus_canvas(qtbot, w)
    click_block(w, "dw")
    click_viewer_element(qtbot, w, (0, 0, 0, 0))  # opens the Explain panel beside the viewer
    qtbot.waitUntil(w.explain_dock.isVisible)
    click_block(w, "dx")
    shift_click(qtbot, w, "x")
    qtbot.waitUntil(lambda: sorted(w.adapter.selected_ids()) == ["dx", "x"])
    viewer = w.viewer_dock.viewer
    qtbot.waitUntil(lambda: viewer.other is not None)
    qtbot.wait(50)  # the panes' layouts settle
    shot(w, "compare_panes")
    titles = ["dX (NHWC)", "x 4x12x12x3", "dX (NHWC) − x 4x12x12x3"]
    dock = w.viewer_dock_widget.geometry()  # in the window
    explain = w.explain_dock.geometry()
    for pane, title in zip(viewer.panels, titles, strict=True):
        assert pane.isVisible()
        axis = pane.bar.axis
        bar = axis.mapRectToScene(axis.boundingRect())  # the bar's scale and its labels
        plot = pane.plot.mapRectToScene(pane.plot.boundingRect())
        # inside its pane ...
        assert 0 <= plot.left() and plot.right() <= pane.viewport().width(), (title, plot)
        assert bar.right() <= pane.viewport().width(), (title, bar, pane.width())
        # ... and the pane inside the viewer's dock, not under the Explain panel beside it
        right = pane.viewport().mapTo(w, QtCore.QPoint(math.ceil(bar.right()), 0)).x()
        assert right <= dock.right() and right < explain.left(), (title, right, dock, explain)
    assert w.width() == 1280  # the window did not grow past the screen it was given
    for pane, title in zip(viewer.panels, titles, strict=True):
        assert pane.title_text() == title  # the whole title: on the pane or in its tooltip
        label = pane.plot.titleLabel
        assert label.shown == title or (label.shown.endswith("…") and label.toolTip() == title)


# -- 13: the montage's Table -----------------------------------------------------------------

def _table_texts(viewer) -> list[list[str]]:
    m = viewer.table_model
    return [[m.data(m.index(r, c)) for c in range(m.columnCount())] for r in range(m.rowCount())]


def _headers(viewer, orientation) -> list[str]:
    m = viewer.table_model
    n = m.rowCount() if orientation == Qt.Vertical else m.columnCount()
    return [m.headerData(i, orientation) for i in range(n)]


def test_the_table_of_a_filter_montage_gives_tensor_indices_and_whole_values(qtbot, window,
                                                                               monkeypatch):
    w = window
    open_file(qtbot, w, monkeypatch, EXAMPLES / "training_step.gbc.json")
    wait_run(qtbot, w)
    click_block(w, "dw")
    viewer = w.viewer_dock.viewer
    assert viewer.state.montage_mode  # dW opens as a montage
    dw = np.asarray(w.session.outputs[("dw", "output")])  # [kh 3, kw 3, in 3, out 8] float32
    kh, kw, cin, cout = dw.shape
    tabs = viewer.tabs
    qtbot.mouseClick(tabs, Qt.LeftButton, pos=tabs.tabRect(2).center())  # Table
    assert viewer.pages.currentWidget() is viewer.table_page
    qtbot.wait(20)
    shot(viewer, "montage_table")
    # rows: (in, kh), columns: (out, kw), as the montage's tiles; no separator rows/columns
    assert _headers(viewer, Qt.Vertical) == [f"in {i}, kh {a}" for i in range(cin)
                                             for a in range(kh)]
    assert _headers(viewer, Qt.Horizontal) == [f"out {o}, kw {b}" for o in range(cout)
                                               for b in range(kw)]
    texts = _table_texts(viewer)
    for r, row in enumerate(texts):
        for c, text in enumerate(row):
            i, a = divmod(r, kh)
            o, b = divmod(c, kw)
            value = dw[a, b, i, o]
            assert text == exact_text(value, dw.dtype)  # every digit float32 needs
            assert np.float32(text) == value
    # no cell is cut: each column is as wide as its widest text
    table = viewer.table
    metrics = QtGui.QFontMetrics(table.font())
    for c in range(len(texts[0])):
        widest = max(metrics.horizontalAdvance(row[c]) for row in texts)
        assert table.columnWidth(c) >= widest + 8, (c, table.columnWidth(c), widest)
    tip = viewer.table_model.data(viewer.table_model.index(1, 4), Qt.ToolTipRole)
    assert tip.startswith("[kh 1, kw 1, in 0, out 1] = ")
    assert "in (3) × kh (3) down, out (8) × kw (3) across" in viewer.table_info.text()
    # the slice view's Table: the slice's own axes and indices
    viewer.mode_combo.setFocus()
    qtbot.keyClick(viewer.mode_combo, Qt.Key_Up)  # montage -> slice
    assert not viewer.state.montage_mode
    r_ax, c_ax = viewer.state.view_axes
    names = viewer.state.axes
    assert _headers(viewer, Qt.Vertical)[:2] == [f"{names[r_ax]} 0", f"{names[r_ax]} 1"]
    assert _headers(viewer, Qt.Horizontal)[1] == f"{names[c_ax]} 1"


# -- 13: the cross-check table explains its verdict -------------------------------------------

def test_the_cross_check_table_says_rows_agree_on_the_tolerance_not_on_max_rel(
        qtbot, grad_window, monkeypatch):
    monkeypatch.setitem(frameworks.TARGETS, "fakefw", _fake("fakefw", "numpy"))
    monkeypatch.setattr(crosscheck_action, "FRAMEWORKS", ("fakefw",))
    monkeypatch.setattr(crosscheck, "FRAMEWORKS", ("fakefw",))
    w = grad_window
    w.log.list.clear()
    focus_canvas(qtbot, w)
    with qtbot.waitSignal(w.crosscheck.finished, timeout=120_000):
        QtTest.QTest.keyClick(w.adapter.viewer, Qt.Key_K, Qt.ControlModifier | Qt.ShiftModifier)
    items = [w.log.list.item(i) for i in range(w.log.list.count())]
    header = next(it for it in items if "max rel" in it.text())
    tip = header.toolTip()
    assert "agree" in tip and "max abs <= tolerance" in tip
    assert "max rel" in tip and "not the verdict" in tip
    notes = [it for it in items if it.text().split("  ", 1)[-1].startswith("agree = ")]
    assert len(notes) == 1 and items.index(notes[0]) == items.index(header) + 5  # under rows
    w.log_dock.show()
    w.log_dock.raise_()
    qtbot.wait(20)
    shot(w.log, "crosscheck_log")


# -- 13: "a AdjointCheck" ---------------------------------------------------------------------

@pytest.mark.parametrize(("word", "phrase"), [
    ("AdjointCheck", "an AdjointCheck"), ("Output", "an Output"), ("IntVector", "an IntVector"),
    ("Conv2D", "a Conv2D"), ("Tensor", "a Tensor"), ("GradCheck", "a GradCheck"),
    ("ShapeOf", "a ShapeOf"), ("Transpose", "a Transpose"), ("Compare", "a Compare"),
    ("8-D", "an 8-D"), ("11-D", "an 11-D"), ("18-D", "an 18-D"), ("3-D", "a 3-D"),
    ("80-D", "an 80-D"), ("110-D", "a 110-D"), ("NHWC", "an NHWC"), ("URL", "a URL"),
    ("NaN", "a NaN"), ("int", "an int"), ("unit", "a unit"), ("user", "a user"),
    ("one", "a one"), ("hour", "an hour"), ("", "a"), (".gbc.json", "a .gbc.json"),
])
def test_article_before_a_word(word, phrase):
    assert article(word) == phrase


def test_messages_name_an_adjointcheck_with_an(qtbot, grad_window):
    assert internal_error("AdjointCheck", ValueError("x")).startswith(
        "internal error in an AdjointCheck block: ")
    w = grad_window
    c = Canvas.from_json(w.doc.canvas.to_json())
    c.add_node("AdjointCheck", (360, 300), {"padding": "SAME"}, id="adj", title="adjoint")
    w.doc.load(c, None)
    view = open_dock(qtbot, w)
    click_node(qtbot, w, "adj")
    assert view.message.text().startswith("adjoint is an AdjointCheck block: ")
    click_node(qtbot, w, "x")
    assert view.message.text().startswith("x is a Tensor block: ")


# -- an invalid edit: the badge says the block runs with the last valid value -----------------

def _badge(w, node_id: str) -> QtWidgets.QGraphicsSimpleTextItem:
    return w.session.decorator._badges[node_id]


def test_a_block_with_an_invalid_edit_says_it_runs_with_the_last_valid_value(qtbot,
                                                                             grad_window):
    w = grad_window
    focus_canvas(qtbot, w)
    click_block(w, "grad")
    row = w.attributes.rows["strides"]
    type_cell(qtbot, row.editor.cells[1], "0")
    assert row.error.isVisible()
    badge = _badge(w, "grad")
    assert badge.isVisible() and badge.text() == "⚠ runs with last valid strides"
    shot(w, "invalid_edit_badge")
    # a second invalid attribute is named too
    type_cell(qtbot, w.attributes.rows["dilations"].editor.cells[2], "0")
    assert badge.text() == "⚠ runs with last valid strides, dilations"
    # F5 runs it with the last valid values: the badge keeps saying so, not "stale: invalid"
    wait_run(qtbot, w)
    assert w.session.outputs[("grad", "output")].shape == (3, 3, 2, 2)
    assert badge.text() == "⚠ runs with last valid strides, dilations"
    w.act_undo.trigger()  # drops the invalid text: the block is as it ran
    assert not w.session.pending
    assert badge.text().startswith("✓")


def test_a_block_that_really_cannot_run_still_says_so(qtbot, grad_window):
    w = grad_window
    focus_canvas(qtbot, w)
    click_block(w, "grad")
    w.doc.edit("disconnect", lambda c: c.disconnect(("grad", "out_backprop")))
    type_cell(qtbot, w.attributes.rows["strides"].editor.cells[1], "0")
    assert _badge(w, "grad").text() == "⚠ cannot run"


# -- the Explain panel after its block is deleted ---------------------------------------------

def test_deleting_the_explained_block_clears_the_explain_panel(qtbot, window, monkeypatch):
    w = window
    open_file(qtbot, w, monkeypatch, EXAMPLES / "conv2d_backprop_filter.gbc.json")
    wait_run(qtbot, w)
    click_block(w, "grad_filter")
    click_viewer_element(qtbot, w, (0, 0, 0, 0))
    panel = w.explain_panel
    assert panel.request is not None
    focus_canvas(qtbot, w)
    click_block(w, "grad_filter")
    qtbot.keyClick(w.adapter.viewer, Qt.Key_Delete)
    assert "grad_filter" not in w.doc.canvas.nodes
    assert panel.title.text() == HINT and panel.request is None
    wait_run(qtbot, w)  # a run refreshes what the panel shows: still the hint
    assert panel.title.text() == HINT
    assert "not a conv block" not in panel.title.text()
    shot(w, "explain_after_delete")
    # undo brings the block back; the panel does not explain it until asked
    w.act_undo.trigger()
    assert "grad_filter" in w.doc.canvas.nodes and panel.title.text() == HINT
