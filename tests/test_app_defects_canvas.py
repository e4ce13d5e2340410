"""Canvas defects a new user found (issue 24: 1, 6, 7, 9, 12, 13), each driven as the user did:
mouse events on the canvas viewport, menu actions, keys; each test checks what the canvas and
the view hold afterwards."""

from __future__ import annotations

import numpy as np
import pytest

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtGui, QtTest, QtWidgets

from engine.graph.canvas import Canvas
from tests.app_support import drag, focus_canvas, mouse, view_point, wait_run
from tests.test_app_frames import menu_action

Qt = QtCore.Qt


def click(w, point: QtCore.QPoint) -> None:
    mouse(w, QtCore.QEvent.MouseButtonPress, point)
    mouse(w, QtCore.QEvent.MouseButtonRelease, point)
    QtWidgets.QApplication.processEvents()


def key(qtbot, w, k, modifiers=Qt.NoModifier) -> None:
    focus_canvas(qtbot, w)
    QtTest.QTest.keyClick(w.adapter.viewer, k, modifiers)
    QtWidgets.QApplication.processEvents()


def add_frame(w, ids: list[str]) -> str:
    """Select ``ids`` and Edit > Add Frame; the new frame's id."""
    w.adapter.select(ids)
    before = set(w.doc.canvas.frames)
    menu_action(w.edit_menu, "Add Frame").trigger()
    (fid,) = set(w.doc.canvas.frames) - before
    return fid


def visible_scene_rect(w) -> QtCore.QRectF:
    v = w.adapter.viewer
    return v.mapToScene(v.viewport().rect()).boundingRect()


def drawn_rect(view) -> QtCore.QRectF:
    """A block as drawn: its item with the run badge and preview under it (scene units)."""
    return view.sceneBoundingRect().united(view.mapRectToScene(view.childrenBoundingRect()))


# --- 1: a click in a frame's body selects nothing; Delete then removes nothing ----------------
def test_clicking_inside_a_frame_selects_nothing_and_delete_removes_nothing(qtbot, grad_window):
    w = grad_window
    fid = add_frame(w, ["grad"])
    rect = w.adapter.item(fid).view.sceneBoundingRect()
    body = w.adapter.viewer.mapFromScene(QtCore.QPointF(rect.right() - 15, rect.bottom() - 15))
    click(w, body)
    assert w.adapter.selected_ids() == [] and w.adapter.selected_item_ids() == []
    blocks, frames = set(w.doc.canvas.nodes), set(w.doc.canvas.frames)
    key(qtbot, w, Qt.Key_Delete)
    assert set(w.doc.canvas.nodes) == blocks and set(w.doc.canvas.frames) == frames

    # its title bar selects the frame alone: Delete removes the frame, not its blocks
    title = w.adapter.viewer.mapFromScene(rect.topLeft() + QtCore.QPointF(20, 10))
    click(w, title)
    assert w.adapter.selected_item_ids() == [fid] and w.adapter.selected_ids() == []
    key(qtbot, w, Qt.Key_Delete)
    assert set(w.doc.canvas.nodes) == blocks and w.doc.canvas.frames == {}
    key(qtbot, w, Qt.Key_Z, Qt.ControlModifier)
    assert set(w.doc.canvas.frames) == frames


def test_dragging_a_frame_by_its_title_moves_its_blocks_and_leaves_only_the_frame_selected(
        grad_window):
    w = grad_window
    fid = add_frame(w, ["grad"])
    w.adapter.select([])
    rect = w.adapter.item(fid).view.sceneBoundingRect()
    title = w.adapter.viewer.mapFromScene(rect.topLeft() + QtCore.QPointF(20, 10))
    before = w.doc.canvas.nodes["grad"].pos
    drag(w, title, title + QtCore.QPoint(60, 40))
    after = w.doc.canvas.nodes["grad"].pos
    moved = w.doc.canvas.frames[fid].pos
    assert after[0] - before[0] == pytest.approx(moved[0] - rect.x(), abs=0.01)
    assert after[0] > before[0] + 20 and after[1] > before[1] + 10
    assert w.adapter.selected_item_ids() == [fid] and w.adapter.selected_ids() == []


# --- 7: a frame around the selection holds only the selection; its title bar on top ---------
def test_a_frame_around_selected_blocks_holds_only_them_in_one_undo_step(grad_window):
    w = grad_window
    before = w.doc.canvas.to_json()
    steps = w.doc.undo_stack.count()
    fid = add_frame(w, ["x", "dy"])  # fs lies between them
    frame = w.adapter.item(fid).view
    held = {w.adapter.cid(n.id) for n in frame.get_nodes(False)}
    assert held == {"x", "dy"}
    rect = frame.sceneBoundingRect()
    for cid, (x, y, bw, bh) in w.adapter.node_boxes().items():  # nothing else even overlaps
        if cid not in held:
            assert not rect.intersects(QtCore.QRectF(x, y, bw, bh)), cid
    assert w.doc.undo_stack.count() == steps + 1
    w.doc.undo_stack.undo()
    assert w.doc.canvas.to_json() == before


def test_the_title_bar_of_a_new_frame_is_not_under_another_block(grad_window):
    w = grad_window
    # a block right above grad, where the title bar of a frame around grad goes
    gx, gy = w.doc.canvas.nodes["grad"].pos
    w.doc.edit("above", lambda c: c.add_node("IntVector", pos=(gx, gy - 75), id="above"))
    fid = add_frame(w, ["grad"])
    view = w.adapter.item(fid).view
    bar = view.sceneBoundingRect()
    for dx in (10, bar.width() / 2, bar.width() - 10):
        point = bar.topLeft() + QtCore.QPointF(dx, 12)
        top = next(i for i in w.adapter.viewer.scene().items(point)
                   if i.flags() & QtWidgets.QGraphicsItem.ItemIsSelectable)
        assert top is view, (dx, top)


# --- 9: a wire the port kinds refuse is refused when dropped, with the reason ---------------
def test_a_float_tensor_is_refused_by_filter_sizes_with_a_status_message(qtbot, grad_window):
    w = grad_window
    w.doc.edit("cut", lambda c: c.disconnect(("grad", "filter_sizes")))
    before = w.doc.canvas.to_json()
    steps = w.doc.undo_stack.count()
    start = view_point(w, w.adapter.node("x").outputs()["output"].view)
    end = view_point(w, w.adapter.node("grad").inputs()["filter_sizes"].view)
    drag(w, start, end)
    qtbot.wait(20)  # the wire is reconciled after the gesture
    assert w.doc.canvas.to_json() == before and w.doc.undo_stack.count() == steps
    assert w.adapter.view_edges() == {(tuple(e.src), tuple(e.dst)) for e in w.doc.canvas.edges}
    message = w.statusBar().currentMessage()
    assert "x.output is a float tensor" in message
    assert "grad.filter_sizes takes an integer shape vector" in message
    # the right kind still connects
    start = view_point(w, w.adapter.node("fs").outputs()["output"].view)
    drag(w, start, end)
    qtbot.waitUntil(lambda: any(tuple(e.dst) == ("grad", "filter_sizes")
                                for e in w.doc.canvas.edges))


# --- 6: blocks added by a wire drop, and pasted groups, land in view --------------------------
def test_a_block_added_by_dropping_a_wire_near_the_edge_is_fully_visible(qtbot, grad_window):
    w = grad_window
    vp = w.adapter.viewer.viewport()
    port = w.adapter.node("grad").outputs()["output"].view
    end = QtCore.QPoint(vp.width() - 8, vp.height() - 8)  # the bottom-right corner
    drag(w, view_point(w, port), end)
    popup = w.wire_drop.popup
    qtbot.waitUntil(popup.isVisible)
    QtTest.QTest.keyClicks(popup.edit, "output")
    QtTest.QTest.keyClick(popup.edit, Qt.Key_Return)
    (new,) = [c for c, n in w.doc.canvas.nodes.items() if n.type == "Output"]
    shown = drawn_rect(w.adapter.node(new).view)
    assert visible_scene_rect(w).contains(shown)
    drop = w.adapter.viewer.mapToScene(end)
    assert abs(shown.right() - drop.x()) < 2 * shown.width()  # near the drop point
    assert abs(shown.bottom() - drop.y()) < 2 * shown.height()


def test_a_pasted_group_lands_in_view(qtbot, grad_window):
    w = grad_window
    key(qtbot, w, Qt.Key_A, Qt.ControlModifier)
    key(qtbot, w, Qt.Key_C, Qt.ControlModifier)
    QtGui.QCursor.setPos(w.adapter.viewer.viewport().mapToGlobal(QtCore.QPoint(-50, -50)))
    key(qtbot, w, Qt.Key_V, Qt.ControlModifier)
    pasted = w.adapter.selected_ids()
    assert len(pasted) == 4 and not set(pasted) & {"x", "fs", "dy", "grad"}
    seen = visible_scene_rect(w)
    for cid in pasted:
        assert seen.contains(w.adapter.node(cid).view.sceneBoundingRect()), cid


# --- 12: a run neither grows blocks into their neighbours nor out of the view ----------------
def test_a_run_does_not_make_blocks_overlap_or_change_their_size(qtbot, window):
    w = window
    palette = w.palette
    first = palette.tree.visualItemRect(palette.items["Tensor"]).center()
    QtTest.QTest.mouseClick(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier, first)
    qtbot.wait(QtWidgets.QApplication.doubleClickInterval() + 50)
    for _ in range(3):  # double-click Tensor in the palette three times: stacked tightly
        item = palette.items["Tensor"]
        rect = palette.tree.visualItemRect(item)
        QtTest.QTest.mouseDClick(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier,
                                 rect.center())
        qtbot.wait(QtWidgets.QApplication.doubleClickInterval() + 50)  # separate gestures
    ids = sorted(w.doc.canvas.nodes)
    assert len(ids) == 3
    sizes = {cid: drawn_rect(w.adapter.node(cid).view).size() for cid in ids}
    wait_run(qtbot, w)
    QtWidgets.QApplication.processEvents()
    assert all(w.session.outputs.get((cid, "output")) is not None for cid in ids)
    rects = {cid: drawn_rect(w.adapter.node(cid).view) for cid in ids}
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            assert not rects[a].intersects(rects[b]), (a, b)
    assert {cid: r.size() for cid, r in rects.items()} == sizes  # the footprint is fixed


# --- 13: a one-element tensor shows its number, not one big coloured rectangle ---------------
def test_a_one_element_tensor_shows_its_value(qtbot, window):
    w = window
    c = Canvas()
    c.add_node("Tensor", pos=(0, 0), id="s", attrs={"shape": [1, 1, 1, 1], "fill": "ones"})
    c.add_node("Tensor", pos=(0, 200), id="v", attrs={"shape": [1, 2, 2, 1], "fill": "ones"})
    w.doc.load(c, None)
    wait_run(qtbot, w)
    view = w.adapter.node("s").view
    assert view.preview_value.isVisible() and view.preview_value.text() == "1"
    assert not view.preview_pixmap.isVisible()
    assert "shape [1, 1, 1, 1]" in view.preview_value.toolTip()
    assert w.adapter.node("v").view.preview_pixmap.isVisible()  # 4 elements: a picture
    assert np.asarray(w.session.outputs[("s", "output")]).shape == (1, 1, 1, 1)
