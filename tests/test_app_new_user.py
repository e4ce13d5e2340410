"""Defects found when the app was tried as a new user would (issue 34 part 2), each driven as
that user: the menus, the keys, the files they open."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtTest, QtWidgets
from PySide6.QtCore import Qt

from tests.app_support import wait_run


def _log_lines(window) -> list[str]:
    """What the log shows (its rows' text, without the time stamp)."""
    rows = window.log.list
    return [rows.item(i).text().split("  ", 1)[1] for i in range(rows.count())]


def test_a_missing_file_says_cannot_open_it(window, tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "critical",
                        staticmethod(lambda _parent, title, text: shown.append((title, text))))
    missing = tmp_path / "nope.gbc.json"
    assert not window.files.open_path(missing, ask=False)
    assert shown == [("Cannot open canvas", "Cannot open nope.gbc.json: no such file")]
    assert _log_lines(window)[-1] == "Cannot open nope.gbc.json: no such file"


def test_the_log_shows_the_problems_of_a_canvas_that_fails_to_load(window, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setattr(QtWidgets.QMessageBox, "critical", staticmethod(lambda *_a: None))
    bad = tmp_path / "bad.gbc.json"
    bad.write_text('{"format": "gradblocks-canvas", "version": 1, "nodes": [{"id": "a", '
                   '"type": "NoSuchBlock"}, {"id": "b", "type": "AlsoNone"}], "edges": []}')
    assert not window.files.open_path(bad, ask=False)
    line = _log_lines(window)[-1]
    assert line.startswith("bad.gbc.json: ")
    assert "NoSuchBlock" in line and "AlsoNone" in line  # the problems, not only a header


def test_each_new_tensor_block_gets_its_own_seed(qtbot, window):
    """Two Tensor blocks double-clicked from the palette (an input and an out_backprop, say)
    hold different random values; the seeds are the smallest unused."""
    palette = window.palette
    first = palette.tree.visualItemRect(palette.items["Tensor"]).center()
    QtTest.QTest.mouseClick(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier, first)
    qtbot.wait(QtWidgets.QApplication.doubleClickInterval() + 50)
    for _ in range(3):
        rect = palette.tree.visualItemRect(palette.items["Tensor"])
        QtTest.QTest.mouseDClick(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier,
                                 rect.center())
        qtbot.wait(QtWidgets.QApplication.doubleClickInterval() + 50)
    nodes = [n for n in window.doc.canvas.nodes.values() if n.type == "Tensor"]
    assert sorted(n.attrs.get("seed", 0) for n in nodes) == [0, 1, 2]
    wait_run(qtbot, window)
    values = [window.session.outputs[(n.id, "output")] for n in nodes]
    assert not np.array_equal(values[0], values[1]) and not np.array_equal(values[1], values[2])


SAME_OFF_BY_ONE = '''
from engine import kernels


def backprop_input(**kw):
    """SAME padding computed by hand, the odd row or column put before (an off-by-one)."""
    if kw["padding"] != "SAME":
        return kernels.conv2d_backprop_input(**kw)
    rows_cols = (1, 2) if kw["data_format"] == "NHWC" else (2, 3)
    pads = [0] * 8
    for i, axis in enumerate(rows_cols):
        n, k = kw["input_sizes"][axis], kw["filter"].shape[i]
        s, d = kw["strides"][axis], kw["dilations"][axis]
        total = max(0, (-(-n // s) - 1) * s + (k - 1) * d + 1 - n)
        pads[2 * axis], pads[2 * axis + 1] = total - total // 2, total // 2
    return kernels.conv2d_backprop_input(**dict(kw, padding="EXPLICIT",
                                                explicit_paddings=pads))
'''


def test_verify_shrinks_a_same_off_by_one_to_strides_and_dilations_1(qtbot, window, tmp_path):
    """Run > Verify of a SAME off-by-one: the report's minimal case is input 1x1 with strides
    and dilations all 1 (it was input 2x3, strides [1, 2, 3, 1], dilations [1, 1, 3, 1])."""
    from tests.test_app_verify import choose, load, open_dialog, run

    target = tmp_path / "samepad.py"
    target.write_text(SAME_OFF_BY_ONE)
    dialog = open_dialog(qtbot, window)
    load(qtbot, dialog, target)
    choose(dialog, "backprop_input", "tf", "Conv2DBackpropInput", 300)
    assert run(qtbot, dialog) == "done"
    text = dialog.view.minimal_edit.toPlainText()
    assert text.startswith("minimal wrong_values (3 elements"), text
    assert "diagnosis: same_pad_extra_before" in text
    reproduce = next(line for line in text.splitlines() if line.startswith("reproduce:"))
    assert "input_sizes=[1, 1, 1, 1]" in reproduce, reproduce
    assert "strides=[1, 1, 1, 1]" in reproduce and "dilations=[1, 1, 1, 1]" in reproduce, \
        reproduce


def _field_tops(panel) -> dict[str, int]:
    """Each shown attribute field's top, in the panel's coordinates."""
    QtWidgets.QApplication.processEvents()
    return {name: row.editor.mapTo(panel, row.editor.rect().topLeft()).y()
            for name, row in panel.rows.items() if row.editor.isVisible()}


def _type_and_leave(qtbot, field: QtWidgets.QLineEdit, text: str) -> None:
    qtbot.mouseClick(field, Qt.LeftButton)
    field.selectAll()
    qtbot.keyClicks(field, text)
    qtbot.keyClick(field, Qt.Key_Return)
    QtWidgets.QApplication.processEvents()


def test_an_invalid_strides_cell_is_kept_red_and_moves_no_field(qtbot, grad_window):
    """Typing "abc" into a strides cell: the text stays, marked red, the reason below the
    fields, and padding, data_format and dilations stay where they were (they moved ~40 px
    down under a hint, and the cell refused the letters)."""
    from app.attr_editor_base import ERROR_STYLE

    w = grad_window
    w.adapter.select(["grad"])
    panel = w.attributes
    before = _field_tops(panel)
    assert {"strides", "padding", "data_format", "dilations"} <= set(before)
    cell = panel.rows["strides"].editor.cells[1]
    _type_and_leave(qtbot, cell, "abc")
    assert cell.text() == "abc"
    assert cell.styleSheet() == ERROR_STYLE
    error = panel.rows["strides"].error
    assert error.isVisible() and error.text() == "grad.strides: strides[1] must be an integer, "\
        "got 'abc'"
    assert _field_tops(panel) == before
    assert error.mapTo(panel, error.rect().topLeft()).y() > max(before.values())


def test_the_tensor_shape_field_behaves_as_a_strides_cell(qtbot, grad_window):
    """The same "abc" in a Tensor block's shape field: kept, red, the reason below the fields,
    no field moved."""
    from app.attr_editor_base import ERROR_STYLE

    w = grad_window
    w.adapter.select(["x"])
    panel = w.attributes
    before = _field_tops(panel)
    field = panel.rows["shape"].editor.edit
    _type_and_leave(qtbot, field, "abc")
    assert field.text() == "abc" and field.styleSheet() == ERROR_STYLE
    error = panel.rows["shape"].error
    assert error.isVisible() and "shape[0] must be an integer, got 'abc'" in error.text()
    assert _field_tops(panel) == before


def _wires(window):
    from NodeGraphQt.qgraphics.pipe import PipeItem

    return [i for i in window.adapter.viewer.scene().items()
            if isinstance(i, PipeItem) and i.input_port is not None
            and i.output_port is not None]


def _assert_placed_in_view(window, cid: str) -> None:
    """``cid``'s block lies inside the visible canvas, on no other block and no wire."""
    QtWidgets.QApplication.processEvents()
    from app.view_zoom import visible_rect

    rect = window.adapter.node(cid).view.sceneBoundingRect()
    shown = visible_rect(window.adapter.viewer)
    assert shown.contains(rect), (rect, shown)
    for other, node in window.adapter._nodes.items():
        if other != cid:
            assert not rect.intersects(node.view.sceneBoundingRect()), other
    view = window.adapter.node(cid).view
    for wire in _wires(window):
        if view not in (wire.input_port.node, wire.output_port.node):  # not its own wire
            assert not wire.shape().intersects(rect), "on a wire"


def test_a_block_added_with_tab_search_lands_in_view_near_the_cursor(qtbot, grad_window):
    """Tab over the lower canvas, "gradch", Enter: the GradCheck block is in view, on no block
    and no wire (it landed outside the visible area)."""
    from PySide6 import QtGui

    from tests.app_support import focus_canvas

    w = grad_window
    w.resize(1400, 900)
    w.adapter.fit_all()
    focus_canvas(qtbot, w)
    viewer = w.adapter.viewer
    vp = viewer.viewport().rect()
    at = QtCore.QPoint(vp.width() // 2, vp.height() - 15)  # the lower canvas
    QtGui.QCursor.setPos(viewer.viewport().mapToGlobal(at))
    QtWidgets.QApplication.processEvents()
    qtbot.keyClick(viewer, Qt.Key_Tab)
    popup = w.search_popup
    assert popup.isVisible()
    qtbot.keyClicks(popup.edit, "gradch")
    qtbot.keyClick(popup.edit, Qt.Key_Return)
    [cid] = [c for c, n in w.doc.canvas.nodes.items() if n.type == "GradCheck"]
    _assert_placed_in_view(w, cid)
    near = w.adapter.node(cid).view.sceneBoundingRect()
    cursor = viewer.mapToScene(at)
    assert abs(near.center().x() - cursor.x()) < near.width() * 2  # near where it was asked


def test_a_block_added_by_a_wire_drop_lands_in_view_on_no_wire(qtbot, grad_window):
    """A wire from x.output dropped on empty canvas across another wire: the Output block
    chosen lies in view, on no block and no wire."""
    from tests.app_support import drag, view_point

    w = grad_window
    w.resize(1400, 900)
    w.adapter.fit_all()
    QtWidgets.QApplication.processEvents()
    wire = max(_wires(w), key=lambda p: p.path().length())
    middle = wire.mapToScene(wire.path().pointAtPercent(0.5))
    # the new block's top-left goes where the wire is dropped: just above-left of a wire
    end = w.adapter.viewer.mapFromScene(middle - QtCore.QPointF(60.0, 40.0))
    drag(w, view_point(w, w.adapter.node("x").outputs()["output"].view), end)
    popup = w.wire_drop.popup
    qtbot.waitUntil(popup.isVisible)
    qtbot.keyClicks(popup.edit, "output")
    qtbot.keyClick(popup.edit, Qt.Key_Return)
    [cid] = [c for c, n in w.doc.canvas.nodes.items() if n.type == "Output"]
    assert (("x", "output"), (cid, "input")) in {(tuple(e.src), tuple(e.dst))
                                                 for e in w.doc.canvas.edges}
    _assert_placed_in_view(w, cid)


def _panel_shows_its_content(window) -> None:
    """The palette's labels and the Attributes panel's fields are whole, or a scrollbar
    reaches what is cut."""
    QtWidgets.QApplication.processEvents()
    tree = window.palette.tree
    assert (tree.viewport().width() >= tree.sizeHintForColumn(0) + tree.indentation()
            or tree.horizontalScrollBar().isVisible()), "palette labels cut"
    scroll, body = window.attributes.scroll, window.attributes.body
    if not scroll.isVisible():  # no block selected: the panel shows a hint
        return
    assert body.width() >= body.minimumSizeHint().width()
    assert (scroll.viewport().width() >= body.width()
            or scroll.horizontalScrollBar().isVisible()), "Attributes clipped"


def test_panels_keep_their_width_when_the_window_shrinks_and_grows_again(qtbot, grad_window):
    """Window made small, then large again: the palette and the Attributes panel never go
    below a usable width, show a scrollbar while narrower than their content, and get their
    widths back (they stayed squeezed: palette ~100 px with cut labels, Attributes clipped)."""
    from app.panel_widths import MIN_WIDTHS

    w = grad_window
    w.adapter.select(["grad"])
    QtWidgets.QApplication.processEvents()
    widths = (w.palette_dock.width(), w.attributes_dock.width())
    w.resize(500, 400)
    QtWidgets.QApplication.processEvents()
    assert w.palette_dock.width() >= MIN_WIDTHS["dock_blocks"]
    assert w.attributes_dock.width() >= MIN_WIDTHS["dock_attributes"]
    _panel_shows_its_content(w)
    w.resize(1300, 850)
    qtbot.waitUntil(lambda: (w.palette_dock.width(), w.attributes_dock.width()) == widths)
    _panel_shows_its_content(w)
    strides = w.attributes.rows["strides"].editor.cells[-1]
    right = strides.mapTo(w.attributes.scroll.viewport(), strides.rect().topRight()).x()
    assert right <= w.attributes.scroll.viewport().width()  # the last strides cell is whole


def test_a_saved_layout_with_a_squeezed_panel_is_not_restored(qtbot, tmp_path, monkeypatch):
    from tests.app_support import close_window, make_window, no_dialogs

    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, restore_layout=True)
    QtWidgets.QApplication.processEvents()  # laid out: the panels' minimums set
    default = w.palette_dock.width()
    for dock in (w.palette_dock, w.attributes_dock):  # as an older version let it be
        dock.setMinimumWidth(0)
    w.resizeDocks([w.palette_dock], [40], Qt.Horizontal)
    QtWidgets.QApplication.processEvents()
    squeezed = w.palette_dock.width()
    assert squeezed < default - 50
    close_window(w)  # saves the layout
    w2 = make_window(qtbot, tmp_path, restore_layout=True)
    try:
        qtbot.waitUntil(lambda: abs(w2.palette_dock.width() - default) <= 2)
        _panel_shows_its_content(w2)
    finally:
        close_window(w2)


def _strides(qtbot, window, values) -> None:
    """Type ``values`` into grad's strides cells and leave the last one."""
    cells = window.attributes.rows["strides"].editor.cells
    for cell, v in zip(cells, values):
        qtbot.mouseClick(cell, Qt.LeftButton)
        cell.selectAll()
        qtbot.keyClicks(cell, str(v))
    qtbot.keyClick(cells[-1], Qt.Key_Return)
    QtWidgets.QApplication.processEvents()


def test_a_block_keeps_its_size_valid_invalid_or_stale_and_its_badge_inside(qtbot, grad_window):
    """grad before a run, invalid (a batch stride) before a run, run (valid), made invalid,
    fixed, made stale (x's seed), given an invalid strides cell: its size never changes, and
    its badge lies inside it, never on the blocks around (it grew and shrank with the
    "(stale)" label, the shapes, the preview area and the badge)."""
    w = grad_window
    view = w.adapter.node("grad").view
    badge = w.session.decorator._badges

    def state() -> tuple[float, float]:
        QtWidgets.QApplication.processEvents()
        rect = view.sceneBoundingRect()
        shown = badge.get("grad")
        if shown is not None and shown.isVisible():
            assert rect.contains(shown.sceneBoundingRect()), (shown.text(), rect,
                                                             shown.sceneBoundingRect())
        return rect.width(), rect.height()

    w.adapter.select(["grad"])
    sizes = {"not run": state()}
    _strides(qtbot, w, [2, 1, 1, 1])  # invalid before any run: no shape, no result
    assert w.session.plan.errors.get("grad")
    sizes["invalid, not run"] = state()
    _strides(qtbot, w, [1, 1, 1, 1])
    with qtbot.waitSignal(w.session.runner.finished, timeout=60_000):
        w.act_run.trigger()
    qtbot.waitUntil(lambda: not w.session.runner.running, timeout=60_000)
    sizes["valid"] = state()
    _strides(qtbot, w, [2, 1, 1, 1])  # TF refuses a batch stride: invalid, its result stale
    assert w.session.plan.errors.get("grad")
    sizes["invalid"] = state()
    _strides(qtbot, w, [1, 1, 1, 1])
    assert not w.session.plan.errors.get("grad")
    sizes["fixed"] = state()
    w.adapter.select(["x"])
    seed = w.attributes.rows["seed"].editor.edit
    _type_and_leave(qtbot, seed, "7")
    assert w.session.stale_reason("grad")
    sizes["stale"] = state()
    w.adapter.select(["grad"])
    _type_and_leave(qtbot, w.attributes.rows["strides"].editor.cells[1], "abc")
    assert badge["grad"].text().startswith("⚠ runs with last valid")
    sizes["pending"] = state()
    assert len(set(sizes.values())) == 1, sizes


def test_the_reproduction_canvas_note_shows_all_its_text(qtbot, window, tmp_path):
    """Run > Verify, Open reproduction: the note verify wrote on the canvas holds its whole
    text (its last lines, the diagnosis and the layout, were cut off at the bottom)."""
    from PySide6 import QtGui

    from tests.test_app_verify import choose, click, load, open_dialog, run, type_into

    target = tmp_path / "samepad.py"  # its diagnosis is long: it names lookalike mistakes
    target.write_text(SAME_OFF_BY_ONE)
    dialog = open_dialog(qtbot, window)
    load(qtbot, dialog, target)
    choose(dialog, "backprop_input", "tf", "Conv2DBackpropInput", 300)
    assert run(qtbot, dialog) == "done"
    type_into(dialog.repro_edit, str(tmp_path / "repro"))
    click(dialog.open_repro_button)
    QtWidgets.QApplication.processEvents()
    from app.annotation_items import NoteItem

    note = window.doc.canvas.notes["case_note"]
    assert note.text.endswith("float64.")
    [item] = [i for i in window.adapter.viewer.scene().items()
              if isinstance(i, NoteItem) and i.backdrop_text == note.text]
    rect = item.boundingRect().adjusted(9.0, 7.0, -9.0, -7.0)  # where its text is painted
    font = QtGui.QFont(window.adapter.viewer.font())
    font.setPointSizeF(10.0)  # as the note item paints it
    needed = QtGui.QFontMetricsF(font).boundingRect(
        rect, int(Qt.AlignLeft | Qt.AlignTop | Qt.TextWordWrap | Qt.TextExpandTabs), note.text)
    assert needed.height() <= rect.height(), (needed, rect)


def test_the_tensor_seed_field_lines_up_with_the_other_fields(qtbot, grad_window):
    """The Tensor block's seed field starts where shape, dtype and fill start (it sat
    further right)."""
    w = grad_window
    w.adapter.select(["x"])
    QtWidgets.QApplication.processEvents()
    panel = w.attributes
    fields = {"shape": panel.rows["shape"].editor.edit, "dtype": panel.rows["dtype"].editor.combo,
              "fill": panel.rows["fill"].editor.combo, "seed": panel.rows["seed"].editor.edit}
    lefts = {name: f.mapTo(panel, f.rect().topLeft()).x() for name, f in fields.items()}
    assert len(set(lefts.values())) == 1, lefts
