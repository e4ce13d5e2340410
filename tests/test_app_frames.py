"""Frames and notes in the app, driven as a user would: Edit > Add Frame around selected blocks,
dragging and resizing a frame with the mouse, double-clicking to retitle or write a note,
recolouring from the menu, the Delete key, undo/redo, save and reopen."""

import json

import pytest
from PySide6 import QtCore, QtGui, QtTest, QtWidgets

from app.annotation_items import rgb
from engine.graph.canvas_file import dumps, load_canvas
from tests.app_support import drag, focus_canvas, make_window, mouse


def menu_action(menu: QtWidgets.QMenu, text: str):
    """The action of ``menu`` (or its submenus) whose text without '&' is ``text``."""
    for act in menu.actions():
        if act.text().replace("&", "") == text:
            return act
        if act.menu() is not None:
            found = menu_action(act.menu(), text)
            if found is not None:
                return found
    raise AssertionError(f"no {text!r} in {[a.text() for a in menu.actions()]}")


def view_matches_canvas(w) -> bool:
    """Every frame and note drawn where, how big, which colour and with what text the canvas
    says; nothing else drawn."""
    canvas = w.doc.canvas
    if sorted(w.adapter.item_ids()) != sorted([*canvas.frames, *canvas.notes]):
        return False
    for cid, item in [*canvas.frames.items(), *canvas.notes.items()]:
        view = w.adapter.item(cid).view
        text = view.name if cid in canvas.frames else view.backdrop_text
        want_text = item.title if cid in canvas.frames else item.text
        if (list(view.xy_pos) != list(item.pos) or (view.width, view.height) != item.size
                or tuple(view.color[:3]) != rgb(item.colour) or text != want_text):
            return False
    return True


def header_point(w, cid) -> QtCore.QPoint:
    """Viewport point on the title bar of frame ``cid`` (left part, away from blocks)."""
    rect = w.adapter.item(cid).view.sceneBoundingRect()
    return w.adapter.viewer.mapFromScene(rect.topLeft() + QtCore.QPointF(20, 10))


def add_frame_around(w, ids) -> str:
    w.adapter.select(ids)
    menu_action(w.edit_menu, "Add Frame").trigger()
    (fid,) = w.doc.canvas.frames
    return fid


def test_add_frame_around_selected_blocks_then_drag_it_moves_them_as_one_edit(grad_window):
    w = grad_window
    fid = add_frame_around(w, ["x", "dy"])
    frame = w.doc.canvas.frames[fid]
    assert (frame.title, frame.colour) == ("Frame", "#3465a4")
    fx, fy, fw, fh = (*frame.pos, *frame.size)
    boxes = w.adapter.node_boxes()
    for cid in ("x", "dy"):  # the frame encloses both selected blocks
        x, y, bw, bh = boxes[cid]
        assert fx < x and fy < y and x + bw < fx + fw and y + bh < fy + fh
    assert w.adapter.selected_item_ids() == [fid] and view_matches_canvas(w)

    before = {cid: n.pos for cid, n in w.doc.canvas.nodes.items()}
    inside = {"x", "dy"}  # fs lay between x and dy: Add Frame moved it out (issue 24)
    steps = w.doc.undo_stack.count()
    start = header_point(w, fid)
    assert w.adapter.selected_item_ids() == [fid]  # as Add Frame left it: drag right away
    drag(w, start, start + QtCore.QPoint(90, 60))
    moved = w.doc.canvas.frames[fid].pos
    delta = (moved[0] - fx, moved[1] - fy)
    assert delta[0] > 30 and delta[1] > 20
    for cid, (x, y) in before.items():
        want = (x + delta[0], y + delta[1]) if cid in inside else (x, y)
        assert w.doc.canvas.nodes[cid].pos == pytest.approx(want), cid
        assert list(w.adapter.node(cid).view.xy_pos) == pytest.approx(list(want)), cid
    assert w.doc.undo_stack.count() == steps + 1  # one undoable edit for the whole drag
    assert view_matches_canvas(w)

    w.doc.undo_stack.undo()
    assert {cid: n.pos for cid, n in w.doc.canvas.nodes.items()} == before
    assert w.doc.canvas.frames[fid].pos == (fx, fy) and view_matches_canvas(w)
    assert list(w.adapter.node("x").view.xy_pos) == list(before["x"])
    w.doc.undo_stack.redo()
    assert w.doc.canvas.frames[fid].pos == moved and view_matches_canvas(w)
    w.doc.undo_stack.undo()
    w.doc.undo_stack.undo()  # the frame itself goes
    assert w.doc.canvas.frames == {} and w.adapter.item_ids() == []


def test_add_frame_without_a_selection_puts_one_at_the_cursor(grad_window):
    w = grad_window
    w.adapter.select([])
    at = w.adapter.scene_pos_at_cursor()
    menu_action(w.edit_menu, "Add Frame").trigger()
    (frame,) = w.doc.canvas.frames.values()
    assert frame.pos == pytest.approx(at, abs=1.0) and frame.size == (400.0, 260.0)


def test_resize_frame_with_its_handle_is_one_edit(grad_window):
    w = grad_window
    fid = add_frame_around(w, ["grad"])
    size = w.doc.canvas.frames[fid].size
    view = w.adapter.item(fid).view
    corner = view.sceneBoundingRect().bottomRight() - QtCore.QPointF(4, 4)
    start = w.adapter.viewer.mapFromScene(corner)
    steps = w.doc.undo_stack.count()
    drag(w, start, start + QtCore.QPoint(80, 50))
    new = w.doc.canvas.frames[fid].size
    zoom = w.adapter.viewer.transform().m11()
    assert new[0] == pytest.approx(size[0] + 80 / zoom, abs=3)
    assert new[1] == pytest.approx(size[1] + 50 / zoom, abs=3)
    assert w.doc.undo_stack.count() == steps + 1 and view_matches_canvas(w)
    w.doc.undo_stack.undo()
    assert w.doc.canvas.frames[fid].size == size and view_matches_canvas(w)


def double_click(w, point: QtCore.QPoint) -> None:
    mouse(w, QtCore.QEvent.MouseButtonPress, point)
    mouse(w, QtCore.QEvent.MouseButtonRelease, point)
    QtTest.QTest.mouseDClick(w.adapter.viewer.viewport(), QtCore.Qt.LeftButton,
                             QtCore.Qt.NoModifier, point)


def test_double_click_a_frame_retitles_it_and_a_bad_title_keeps_the_dialog(qtbot, grad_window):
    w = grad_window
    fid = add_frame_around(w, ["x"])
    double_click(w, header_point(w, fid))
    dialog = w.annotations.editor
    assert dialog is not None and dialog.isVisible() and dialog.text() == "Frame"
    dialog.editor.clear()
    qtbot.keyClicks(dialog.editor, "x" * 201)
    qtbot.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    assert dialog.isVisible() and "201 characters" in dialog.error.text()
    assert w.doc.canvas.frames[fid].title == "Frame"
    dialog.editor.clear()
    qtbot.keyClicks(dialog.editor, "Inputs <i>& seeds</i>")
    qtbot.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    assert not dialog.isVisible()
    assert w.doc.canvas.frames[fid].title == "Inputs <i>& seeds</i>"
    assert w.adapter.item(fid).view.name == "Inputs <i>& seeds</i>"
    assert shown_text(w.adapter.item(fid).view.toolTip()) == "Inputs <i>& seeds</i>"
    w.doc.undo_stack.undo()
    assert w.doc.canvas.frames[fid].title == "Frame" and view_matches_canvas(w)


def shown_text(tooltip: str) -> str:
    """The text a tooltip shows (Qt renders it as rich text when it looks like HTML)."""
    if not QtGui.Qt.mightBeRichText(tooltip):
        return tooltip
    doc = QtGui.QTextDocument()
    doc.setHtml(tooltip)
    return doc.toPlainText()


def test_recolour_from_the_context_menu_and_delete_key(qtbot, grad_window):
    w = grad_window
    fid = add_frame_around(w, ["grad"])
    w.adapter.select([fid])
    context = w.adapter.viewer.context_menus()["graph"]
    menu_action(context, "Red").trigger()
    assert w.doc.canvas.frames[fid].colour == "#a40000" and view_matches_canvas(w)
    w.doc.undo_stack.undo()
    assert w.doc.canvas.frames[fid].colour == "#3465a4" and view_matches_canvas(w)

    w.adapter.select([fid])
    focus_canvas(qtbot, w)
    QtTest.QTest.keyClick(w.adapter.viewer, QtCore.Qt.Key_Delete)
    assert w.doc.canvas.frames == {} and w.adapter.item_ids() == []
    assert "grad" in w.doc.canvas.nodes  # only the frame was selected
    QtTest.QTest.keyClick(w.adapter.viewer, QtCore.Qt.Key_Z, QtCore.Qt.ControlModifier)
    assert list(w.doc.canvas.frames) == [fid] and view_matches_canvas(w)


def test_add_note_write_text_save_and_reopen(qtbot, tmp_path, window, monkeypatch):
    w = window
    menu_action(w.edit_menu, "Add Note").trigger()
    (nid,) = w.doc.canvas.notes
    dialog = w.annotations.editor
    assert dialog.isVisible() and dialog.text() == ""
    text = "dW = x * dy\n<b>not bold</b> & tabs\there"
    qtbot.keyClicks(dialog.editor, "dW = x * dy")
    QtTest.QTest.keyClick(dialog.editor, QtCore.Qt.Key_Return)
    qtbot.keyClicks(dialog.editor, "<b>not bold</b> & tabs")
    QtTest.QTest.keyClick(dialog.editor, QtCore.Qt.Key_Tab)
    qtbot.keyClicks(dialog.editor, "here")
    qtbot.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    assert w.doc.canvas.notes[nid].text == text
    assert w.adapter.item(nid).view.backdrop_text == text and view_matches_canvas(w)
    assert shown_text(w.adapter.item(nid).view.toolTip()) == text

    # dragging a note moves only the note
    start = w.adapter.viewer.mapFromScene(
        w.adapter.item(nid).view.sceneBoundingRect().center())
    pos = w.doc.canvas.notes[nid].pos
    drag(w, start, start + QtCore.QPoint(40, 30))
    assert w.doc.canvas.notes[nid].pos[0] > pos[0] + 10 and view_matches_canvas(w)

    menu_action(w.edit_menu, "Add Frame").trigger()  # a frame too, recoloured
    (fid,) = w.doc.canvas.frames
    w.adapter.select([fid])
    menu_action(w.annotations.colour_menu, "Orange").trigger()
    assert w.doc.canvas.frames[fid].colour == "#ce5c00"

    path = tmp_path / "noted.gbc.json"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(path), "")))
    assert w.files.save()
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["version"] == 2 and saved["notes"][0]["text"] == text
    w2 = make_window(qtbot, tmp_path / "second")
    try:
        assert w2.files.open_path(path, ask=False)
        assert w2.doc.canvas.notes[nid].text == text
        assert w2.doc.canvas == load_canvas(path) == w.doc.canvas
        assert dumps(w2.doc.canvas) == path.read_text(encoding="utf-8")
        assert view_matches_canvas(w2)
    finally:
        w2.doc.undo_stack.setClean()
        w2.close()


def test_note_dialog_cancel_changes_nothing(qtbot, window):
    w = window
    menu_action(w.edit_menu, "Add Note").trigger()
    steps = w.doc.undo_stack.count()
    dialog = w.annotations.editor
    qtbot.keyClicks(dialog.editor, "draft")
    dialog.reject()
    assert w.doc.undo_stack.count() == steps
    assert next(iter(w.doc.canvas.notes.values())).text == ""


def test_the_smallest_size_is_drawn_as_it_is_and_the_handle_stops_there(window):
    w = window
    w.doc.edit("frames", lambda c: (c.add_frame((0, 0), (40, 40), id="tiny"),
                                    c.add_frame((100, 0), (200, 150), id="big")))
    assert view_matches_canvas(w)
    view = w.adapter.item("big").view
    start = w.adapter.viewer.mapFromScene(view.sceneBoundingRect().bottomRight()
                                          - QtCore.QPointF(4, 4))
    drag(w, start, start - QtCore.QPoint(500, 500))
    assert w.doc.canvas.frames["big"].size == (40.0, 40.0) and view_matches_canvas(w)


def test_double_click_the_handle_fits_the_frame_around_its_blocks(grad_window):
    w = grad_window
    fid = add_frame_around(w, ["grad"])
    w.doc.edit("grow", lambda c: c.resize_item(fid, (900, 600)))
    view = w.adapter.item(fid).view
    handle = w.adapter.viewer.mapFromScene(view.sceneBoundingRect().bottomRight()
                                           - QtCore.QPointF(4, 4))
    steps = w.doc.undo_stack.count()
    QtTest.QTest.mouseDClick(w.adapter.viewer.viewport(), QtCore.Qt.LeftButton,
                             QtCore.Qt.NoModifier, handle)
    x, y, bw, bh = w.adapter.node_boxes()["grad"]
    frame = w.doc.canvas.frames[fid]
    fx, fy, fw, fh = (*frame.pos, *frame.size)
    assert fx < x and fy < y and x + bw < fx + fw and y + bh < fy + fh  # still holds grad
    assert fw < bw + 160 and fh < bh + 160  # and fits it (NodeGraphQt pads 40 around)
    assert w.doc.undo_stack.count() == steps + 1 and view_matches_canvas(w)


def test_select_all_copy_paste_duplicates_blocks_frames_and_notes_and_undo_restores(
        qtbot, grad_window):
    w = grad_window
    add_frame_around(w, ["x", "dy"])
    w.doc.edit("Add note", lambda c: c.add_note((0.0, 500.0), "read me"))
    before = dumps(w.doc.canvas)
    focus_canvas(qtbot, w)
    QtTest.QTest.keyClick(w.adapter.viewer, QtCore.Qt.Key_A, QtCore.Qt.ControlModifier)
    QtTest.QTest.keyClick(w.adapter.viewer, QtCore.Qt.Key_C, QtCore.Qt.ControlModifier)
    QtTest.QTest.keyClick(w.adapter.viewer, QtCore.Qt.Key_V, QtCore.Qt.ControlModifier)
    c = w.doc.canvas
    assert len(c.frames) == 2 and len(c.notes) == 2
    assert sorted(n.text for n in c.notes.values()) == ["read me", "read me"]
    assert len(c.nodes) == 2 * len(load_canvas_text(before).nodes)
    assert view_matches_canvas(w)
    QtTest.QTest.keyClick(w.adapter.viewer, QtCore.Qt.Key_Z, QtCore.Qt.ControlModifier)
    assert dumps(w.doc.canvas) == before
    assert view_matches_canvas(w)


def load_canvas_text(text: str):
    from engine.graph.canvas import Canvas

    return Canvas.from_json(json.loads(text))
