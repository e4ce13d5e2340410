"""Editing the canvas the way a user does: drag from the palette, wire ports with the mouse, move,
delete, undo/redo, copy/paste/duplicate, the Tab search menu, renaming."""

from __future__ import annotations

import pytest

from tests.app_support import (
    drag,
    drop_mime,
    focus_canvas,
    grad_canvas,
    view_point,
)

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtGui, QtTest, QtWidgets


def edges(w):
    return sorted((tuple(e.src), tuple(e.dst)) for e in w.doc.canvas.edges)


def test_drag_block_from_palette_onto_canvas(window):
    item = window.palette.items["Conv2DBackpropFilter"]
    mime = window.palette.tree.mimeData([item])
    assert mime.hasFormat("nodegraphqt/nodes")
    target = QtCore.QPoint(300, 200)
    drop_mime(window, mime, target)

    nodes = list(window.doc.canvas.nodes.values())
    assert [n.type for n in nodes] == ["Conv2DBackpropFilter"]
    node = nodes[0]
    scene = window.adapter.viewer.mapToScene(target)
    assert node.pos == pytest.approx((scene.x(), scene.y()), abs=1.0)
    # the view shows it, selected, and the attribute panel edits it
    assert window.adapter.node_ids() == [node.id]
    assert window.adapter.selected_ids() == [node.id]
    assert window.attributes.node_id == node.id
    assert set(window.attributes.rows) >= {"strides", "padding", "data_format", "dilations"}
    # one undo step removes it again
    window.doc.undo_stack.undo()
    assert window.doc.canvas.nodes == {}
    assert window.adapter.node_ids() == []


def test_palette_search_filters_blocks(window):
    window.palette.search.setText("depthwisebackpropfilter")
    assert window.palette.visible_types() == ["DepthwiseBackpropFilter"]
    window.palette.search.setText("gradient input")
    assert "Conv2DBackpropInput" in window.palette.visible_types()
    assert "Tensor" not in window.palette.visible_types()
    window.palette.search.setText("")
    assert len(window.palette.visible_types()) == len(window.palette.items)


def test_connect_ports_with_the_mouse_updates_canvas_and_shapes(qtbot, window):
    c = grad_canvas()
    c.disconnect(("grad", "input"))
    window.doc.load(c, None)
    window.adapter.fit_to_view()
    assert window.session.plan.errors.get("grad")  # input missing: cannot infer
    src = window.adapter.node("x").outputs()["output"].view
    dst = window.adapter.node("grad").inputs()["input"].view
    with qtbot.waitSignal(window.adapter.graph.port_connected):
        drag(window, view_point(window, src), view_point(window, dst))
    qtbot.waitUntil(lambda: (("x", "output"), ("grad", "input")) in edges(window))
    assert not window.session.plan.errors.get("grad")
    label = window.adapter.node("grad").view.get_output_text_item(
        window.adapter.node("grad").outputs()["output"].view).toPlainText()
    assert label == "output  3×3×2×2 f32"
    # undo disconnects in the canvas and in the view
    window.doc.undo_stack.undo()
    assert (("x", "output"), ("grad", "input")) not in edges(window)
    assert (("x", "output"), ("grad", "input")) not in window.adapter.view_edges()
    window.doc.undo_stack.redo()
    assert window.adapter.view_edges() == set(edges(window))


def test_disconnect_through_the_view_is_one_undo_step(qtbot, grad_window):
    w = grad_window
    n_before = w.doc.undo_stack.count()
    grad_in = w.adapter.node("grad").inputs()["out_backprop"]
    with qtbot.waitSignal(w.adapter.graph.port_disconnected):
        grad_in.disconnect_from(w.adapter.node("dy").outputs()["output"])
    qtbot.waitUntil(lambda: (("dy", "output"), ("grad", "out_backprop")) not in edges(w))
    assert w.doc.undo_stack.count() == n_before + 1
    assert "grad" in w.session.plan.errors
    w.doc.undo_stack.undo()
    assert (("dy", "output"), ("grad", "out_backprop")) in edges(w)
    assert w.adapter.view_edges() == set(edges(w))
    assert "grad" not in w.session.plan.errors


def test_move_block_with_the_mouse_and_undo(grad_window):
    w = grad_window
    view = w.adapter.node("x").view
    start = w.adapter.viewer.mapFromScene(view.sceneBoundingRect().topLeft()
                                          + QtCore.QPointF(30, 8))
    before = w.doc.canvas.nodes["x"].pos
    drag(w, start, start + QtCore.QPoint(60, 90))
    after = w.doc.canvas.nodes["x"].pos
    assert after[0] > before[0] + 20 and after[1] > before[1] + 30
    assert list(view.xy_pos) == pytest.approx(list(after))
    w.doc.undo_stack.undo()
    assert w.doc.canvas.nodes["x"].pos == before
    assert list(view.xy_pos) == pytest.approx(list(before))


def test_delete_key_removes_selected_block_and_its_wires(qtbot, grad_window):
    w = grad_window
    w.adapter.select(["dy"])
    focus_canvas(qtbot, w)
    QtTest.QTest.keyClick(w.adapter.viewer, QtCore.Qt.Key_Delete)
    assert "dy" not in w.doc.canvas.nodes
    assert "dy" not in w.adapter.node_ids()
    assert all("dy" not in (s[0], d[0]) for s, d in edges(w))
    QtTest.QTest.keyClick(w.adapter.viewer, QtCore.Qt.Key_Z, QtCore.Qt.ControlModifier)
    assert "dy" in w.doc.canvas.nodes
    assert (("dy", "output"), ("grad", "out_backprop")) in edges(w)
    assert w.adapter.view_edges() == set(edges(w))
    QtTest.QTest.keyClick(w.adapter.viewer, QtCore.Qt.Key_Z,
                          QtCore.Qt.ControlModifier | QtCore.Qt.ShiftModifier)
    assert "dy" not in w.doc.canvas.nodes


def assert_no_overlap(w, new_ids) -> None:
    """No block in ``new_ids`` covers any other block as drawn."""
    QtWidgets.QApplication.processEvents()
    boxes = w.adapter.node_boxes()
    for a in new_ids:
        ra = QtCore.QRectF(*boxes[a])
        for b, box in boxes.items():
            if b != a:
                assert not ra.intersects(QtCore.QRectF(*box)), (a, b)


def test_blocks_added_repeatedly_land_on_free_spots(window):
    """Double-clicking the same palette entry five times stacks nothing on top of anything."""
    item = window.palette.items["Conv2DBackpropFilter"]
    for _ in range(5):
        window.palette.tree.itemActivated.emit(item, 0)
    assert len(window.doc.canvas.nodes) == 5
    assert_no_overlap(window, list(window.doc.canvas.nodes))


def test_paste_lands_at_the_cursor(qtbot, grad_window, monkeypatch):
    w = grad_window
    w.adapter.select(["dy"])
    assert w.edits.copy_selection()
    for _ in range(3):  # room in view beside the blocks (a paste lands in view: issue 24)
        w.adapter.zoom_out()
    seen = w.adapter.viewer.mapToScene(w.adapter.viewer.viewport().rect()).boundingRect()
    at = (float(round(seen.right() - 260)), float(round(seen.bottom() - 160)))
    monkeypatch.setattr(w.adapter, "scene_pos_at_cursor", lambda: at)
    (new,) = w.edits.paste()
    assert w.doc.canvas.nodes[new].pos == at  # nothing there: exactly at it


def test_copy_paste_and_duplicate_keep_attributes_and_inner_wires(grad_window):
    w = grad_window
    w.doc.edit("set", lambda c: c.set_attr("grad", "padding", "VALID"))
    w.adapter.select(["x", "grad"])
    assert w.edits.copy_selection()
    created = w.edits.paste()
    assert len(created) == 2
    new = {w.doc.canvas.nodes[n].type: n for n in created}
    g2 = w.doc.canvas.nodes[new["Conv2DBackpropFilter"]]
    assert g2.attrs["padding"] == "VALID"
    x2, nodes = w.doc.canvas.nodes[new["Tensor"]], w.doc.canvas.nodes
    assert (g2.pos[0] - x2.pos[0], g2.pos[1] - x2.pos[1]) == (  # the group keeps its shape
        nodes["grad"].pos[0] - nodes["x"].pos[0], nodes["grad"].pos[1] - nodes["x"].pos[1])
    assert_no_overlap(w, created)
    assert ((new["Tensor"], "output"), (g2.id, "input")) in edges(w)  # inner wire copied
    assert sorted(w.adapter.selected_ids()) == sorted(created)
    dup = w.edits.duplicate_selection()
    assert len(dup) == 2 and len(w.doc.canvas.nodes) == 8
    assert_no_overlap(w, dup)
    w.doc.undo_stack.undo()
    w.doc.undo_stack.undo()
    assert sorted(w.doc.canvas.nodes) == ["dy", "fs", "grad", "x"]


def test_tab_menu_adds_block_at_cursor(qtbot, window):
    viewer = window.adapter.viewer
    focus_canvas(qtbot, window)
    QtTest.QTest.keyClick(viewer, QtCore.Qt.Key_Tab)
    popup = window.search_popup
    assert popup.isVisible()
    QtTest.QTest.keyClicks(popup.edit, "shapeof")
    assert popup.list.count() == 1
    QtTest.QTest.keyClick(popup.edit, QtCore.Qt.Key_Return)
    assert not popup.isVisible()
    assert [n.type for n in window.doc.canvas.nodes.values()] == ["ShapeOf"]


def test_rename_title_in_panel_is_undoable(grad_window):
    w = grad_window
    w.adapter.select(["grad"])
    w.attributes.title_edit.setText("filter gradient")
    w.attributes.title_edit.editingFinished.emit()
    assert w.doc.canvas.nodes["grad"].title == "filter gradient"
    assert w.adapter.node("grad").view.name == "filter gradient"
    w.doc.undo_stack.undo()
    assert w.adapter.node("grad").view.name == "grad"


def test_fit_to_view_shows_every_block(grad_window):
    w = grad_window
    w.adapter.viewer.set_zoom(-0.9)
    w.adapter.fit_to_view()
    QtWidgets.QApplication.processEvents()
    visible = w.adapter.viewer.mapToScene(w.adapter.viewer.viewport().rect()).boundingRect()
    for cid in w.adapter.node_ids():
        assert visible.contains(w.adapter.node(cid).view.sceneBoundingRect())


def test_help_lists_shortcuts(grad_window):
    from app.help import shortcut_rows

    grad_window.doc.edit("pad", lambda c: c.set_attr("grad", "padding", "VALID"))
    rows = dict(shortcut_rows(grad_window))
    assert rows["Run"] == "F5"
    assert rows["Redo"] == "Ctrl+Shift+Z, Ctrl+Y"
    assert rows["Quit"] == "Ctrl+Q"
    assert "Del" in rows["Delete"]
    assert rows["Undo"] == "Ctrl+Z"


def test_double_click_in_palette_adds_block(window):
    item = window.palette.items["IntVector"]
    window.palette.tree.itemActivated.emit(item, 0)
    assert [n.type for n in window.doc.canvas.nodes.values()] == ["IntVector"]
    assert window.adapter.selected_ids() == list(window.doc.canvas.nodes)


def test_dragging_a_wire_end_away_disconnects(qtbot, grad_window):
    w = grad_window
    port = w.adapter.node("grad").inputs()["filter_sizes"].view
    start = view_point(w, port)
    with qtbot.waitSignal(w.adapter.graph.port_disconnected):
        drag(w, start, start + QtCore.QPoint(-40, 160))
    qtbot.waitUntil(lambda: (("fs", "output"), ("grad", "filter_sizes")) not in edges(w))
    assert w.adapter.view_edges() == set(edges(w))
    w.doc.undo_stack.undo()
    assert (("fs", "output"), ("grad", "filter_sizes")) in edges(w)


def test_alt_shift_drag_cuts_wires(qtbot, grad_window):
    w = grad_window
    v = w.adapter.viewer
    focus_canvas(qtbot, w)
    mods = QtCore.Qt.AltModifier | QtCore.Qt.ShiftModifier
    # the user holds Alt, then presses Shift (Qt reports Alt|Shift for that key press)
    for key, held in ((QtCore.Qt.Key_Alt, QtCore.Qt.NoModifier),
                      (QtCore.Qt.Key_Shift, QtCore.Qt.AltModifier)):
        QtWidgets.QApplication.sendEvent(
            v, QtGui.QKeyEvent(QtCore.QEvent.KeyPress, key, held))
    # a vertical cut between the sources and grad crosses all three wires
    x_mid = (w.adapter.node("x").view.sceneBoundingRect().right()
             + w.adapter.node("grad").view.sceneBoundingRect().left()) / 2
    top = v.mapFromScene(QtCore.QPointF(x_mid, -60))
    bottom = v.mapFromScene(QtCore.QPointF(x_mid, 400))
    vp = v.viewport()

    def send(kind, pos, button, buttons):
        ev = QtGui.QMouseEvent(kind, QtCore.QPointF(pos), QtCore.QPointF(vp.mapToGlobal(pos)),
                               button, buttons, mods)
        QtWidgets.QApplication.sendEvent(vp, ev)

    left = QtCore.Qt.LeftButton
    send(QtCore.QEvent.MouseButtonPress, top, left, left)
    for i in range(1, 9):
        send(QtCore.QEvent.MouseMove, top + (bottom - top) * (i / 8), QtCore.Qt.NoButton, left)
    send(QtCore.QEvent.MouseButtonRelease, bottom, left, QtCore.Qt.NoButton)
    QtWidgets.QApplication.sendEvent(
        v, QtGui.QKeyEvent(QtCore.QEvent.KeyRelease, QtCore.Qt.Key_Shift, mods))
    qtbot.waitUntil(lambda: edges(w) == [])
    assert w.adapter.view_edges() == set()
    w.doc.undo_stack.undo()  # one gesture, one undo step
    assert len(edges(w)) == 3


def test_empty_canvas_shows_a_hint(window):
    assert window.adapter._hint.isVisible()
    window.adapter.add_blocks(["Tensor"], (0.0, 0.0))
    assert not window.adapter._hint.isVisible()
    window.doc.undo_stack.undo()
    assert window.adapter._hint.isVisible()


def test_renaming_on_the_node_title_is_an_undoable_edit(grad_window):
    w = grad_window
    node = w.adapter.node("grad")
    w.adapter.viewer.node_name_changed.emit(node.id, "dW")  # what editing the title emits
    assert w.doc.canvas.nodes["grad"].title == "dW"
    assert node.view.name == "dW"
    w.doc.undo_stack.undo()
    assert w.doc.canvas.nodes["grad"].title == "grad"
    assert node.view.name == "grad"


def test_tab_search_ranks_names_above_descriptions(qtbot, window):
    """"shape" + Enter inserts ShapeOf (a name prefix), not Conv2DBackpropFilter (whose
    description mentions shapes); "conv" lists Conv2D first."""
    viewer = window.adapter.viewer
    focus_canvas(qtbot, window)
    QtTest.QTest.keyClick(viewer, QtCore.Qt.Key_Tab)
    popup = window.search_popup
    QtTest.QTest.keyClicks(popup.edit, "shape")
    assert popup.list.count() > 1  # descriptions still match, ranked below the name
    assert popup.list.item(0).data(QtCore.Qt.UserRole) == "ShapeOf"
    popup.edit.clear()
    QtTest.QTest.keyClicks(popup.edit, "conv")
    assert popup.list.item(0).data(QtCore.Qt.UserRole) == "Conv2D"
    popup.edit.clear()
    QtTest.QTest.keyClicks(popup.edit, "shape")
    QtTest.QTest.keyClick(popup.edit, QtCore.Qt.Key_Return)
    assert [n.type for n in window.doc.canvas.nodes.values()] == ["ShapeOf"]


def test_palette_search_enter_adds_the_best_ranked_block(qtbot, window):
    search = window.palette.search
    QtTest.QTest.keyClicks(search, "shape")
    assert "Conv2DBackpropFilter" in window.palette.visible_types()  # a description match
    QtTest.QTest.keyClick(search, QtCore.Qt.Key_Return)
    search.clear()
    QtTest.QTest.keyClicks(search, "back filt")  # word prefixes of the name
    QtTest.QTest.keyClick(search, QtCore.Qt.Key_Return)
    assert [n.type for n in window.doc.canvas.nodes.values()] == ["ShapeOf",
                                                                   "Conv2DBackpropFilter"]


def test_search_rank_order_exact_prefix_word_prefix_description():
    from app.block_search import search_rank
    from blocks.registry import REGISTRY

    assert search_rank(REGISTRY["Tensor"], "tensor") == 0
    assert search_rank(REGISTRY["ShapeOf"], "shape") == 1
    assert search_rank(REGISTRY["Conv2DBackpropFilter"], "back filt") == 2
    assert search_rank(REGISTRY["DepthwiseConv2D"], "wiseconv") == 3
    assert search_rank(REGISTRY["Conv2DBackpropFilter"], "shape") == 4
    assert search_rank(REGISTRY["Compare"], "zzz") is None


def test_help_about_shows_the_version(window, monkeypatch):
    from importlib import metadata

    shown = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "about",
                        staticmethod(lambda _parent, title, text: shown.append((title, text))))
    window.act_about.trigger()
    title, text = shown[0]
    assert title == "About GradBlocks"
    assert text.startswith(f"GradBlocks {metadata.version('gradblocks')}\n")
    assert "NumPy" in text and "PySide6" in text
