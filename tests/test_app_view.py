"""The View menu and the zoom of opened canvases: every opened canvas starts fitted, between a
readable zoom (node titles >= view_zoom.MIN_TITLE_PX on screen) and 100 %; zoom in / out / 100 %
/ fit all / frame selected from their shortcuts."""

from __future__ import annotations

import pytest

from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas
from tests.app_support import focus_canvas, grad_canvas

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtGui, QtTest, QtWidgets

from app import view_zoom


def scale(w) -> float:
    return view_zoom.view_scale(w.adapter.viewer)


def visible(w) -> QtCore.QRectF:
    QtWidgets.QApplication.processEvents()
    return view_zoom.visible_rect(w.adapter.viewer)


def shows(w, cid: str) -> bool:
    return visible(w).contains(w.adapter.node(cid).view.sceneBoundingRect())


def title_px_on_screen(w, cid: str) -> float:
    font = w.adapter.node(cid).view.text_item.font()
    return view_zoom.font_px(font) * scale(w)


def wide_canvas(n: int = 14) -> Canvas:
    """A row of n Tensor blocks far wider than the view at any readable zoom."""
    c = Canvas()
    for i in range(n):
        c.add_node("Tensor", pos=(1000 + 400 * i, 500 + 60 * (i % 3)), id=f"t{i}")
    return c


def key(w, k, mods=QtCore.Qt.NoModifier) -> None:
    QtTest.QTest.keyClick(w.adapter.viewer, k, mods)
    QtWidgets.QApplication.processEvents()


def test_opening_a_file_fits_it_to_the_view_whatever_the_previous_zoom(window, tmp_path,
                                                                        monkeypatch):
    path = tmp_path / "far.gbc.json"
    c = grad_canvas()
    for nid, n in c.nodes.items():  # far from the origin: off-screen without fitting
        c.move(nid, (n.pos[0] + 5000, n.pos[1] - 3000))
    save_canvas(c, path)
    window.adapter.viewer.set_zoom(1.5)  # the user had zoomed in a lot
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (str(path), "")))
    window.act_open.trigger()
    assert sorted(window.doc.canvas.nodes) == ["dy", "fs", "grad", "x"]
    assert all(shows(window, cid) for cid in window.doc.canvas.nodes)
    assert window.adapter.readable_scale() * 0.98 <= scale(window) <= 1.0
    assert title_px_on_screen(window, "grad") >= view_zoom.MIN_TITLE_PX * 0.98


def test_a_canvas_too_big_to_fit_opens_at_the_readable_zoom_from_its_top_left(window,
                                                                           tmp_path):
    path = tmp_path / "wide.gbc.json"
    save_canvas(wide_canvas(), path)
    window.files.open_path(path)  # what File > Open Recent does
    assert scale(window) == pytest.approx(window.adapter.readable_scale(), rel=0.02)
    assert title_px_on_screen(window, "t0") >= view_zoom.MIN_TITLE_PX * 0.98
    assert shows(window, "t0") and not shows(window, "t13")


def test_a_tiny_canvas_opens_at_100_percent_and_new_resets_the_zoom(window, tmp_path):
    c = Canvas()
    c.add_node("IntVector", pos=(-700, 900), id="v")
    path = tmp_path / "tiny.gbc.json"
    save_canvas(c, path)
    window.files.open_path(path)
    assert scale(window) == pytest.approx(1.0, rel=0.02)
    assert shows(window, "v")
    window.adapter.viewer.set_zoom(-0.8)
    window.act_new.trigger()
    assert window.doc.canvas.nodes == {}
    assert scale(window) == pytest.approx(1.0, rel=0.02)


def test_examples_open_fitted_and_readable(window):
    examples = [a for menu in (window.examples_menu, window.pitfalls_menu)
                for a in menu.actions() if a.text() and a.menu() is None]
    assert examples
    for act in examples:
        window.adapter.viewer.set_zoom(-0.9)
        act.trigger()
        cids = list(window.doc.canvas.nodes)
        assert cids
        assert scale(window) >= window.adapter.readable_scale() * 0.98, act.text()
        first = min(cids, key=lambda c: window.adapter.node(c).view.sceneBoundingRect().left())
        assert shows(window, first), act.text()


def test_zoom_shortcuts_in_out_and_actual_size(qtbot, grad_window):
    w = grad_window
    focus_canvas(qtbot, w)
    key(w, QtCore.Qt.Key_0, QtCore.Qt.ControlModifier)
    assert scale(w) == pytest.approx(1.0, rel=0.02)
    center = visible(w).center()
    key(w, QtCore.Qt.Key_Equal, QtCore.Qt.ControlModifier)
    assert scale(w) == pytest.approx(view_zoom.ZOOM_STEP, rel=0.02)
    assert visible(w).center().x() == pytest.approx(center.x(), abs=2)  # about the centre
    key(w, QtCore.Qt.Key_Plus, QtCore.Qt.ControlModifier)
    assert scale(w) == pytest.approx(view_zoom.ZOOM_STEP ** 2, rel=0.02)
    for _ in range(3):
        key(w, QtCore.Qt.Key_Minus, QtCore.Qt.ControlModifier)
    assert scale(w) == pytest.approx(1 / view_zoom.ZOOM_STEP, rel=0.02)
    for _ in range(40):  # never beyond the limits
        key(w, QtCore.Qt.Key_Minus, QtCore.Qt.ControlModifier)
    assert scale(w) == pytest.approx(view_zoom.MIN_SCALE, rel=0.02)
    key(w, QtCore.Qt.Key_0, QtCore.Qt.ControlModifier)
    assert scale(w) == pytest.approx(1.0, rel=0.02)


def test_fit_all_and_frame_selected_shortcuts(qtbot, grad_window):
    w = grad_window
    focus_canvas(qtbot, w)
    w.adapter.viewer.set_zoom(1.5)
    key(w, QtCore.Qt.Key_F)
    assert all(shows(w, cid) for cid in w.doc.canvas.nodes)
    fit_all = scale(w)
    w.adapter.viewer.set_zoom(-0.9)
    w.adapter.select(["grad"])
    key(w, QtCore.Qt.Key_F, QtCore.Qt.ShiftModifier)
    assert shows(w, "grad")
    assert scale(w) == pytest.approx(1.0, rel=0.02)  # one block: 100 %, not magnified
    assert scale(w) > fit_all
    assert not shows(w, "dy")
    w.adapter.select([])
    key(w, QtCore.Qt.Key_F, QtCore.Qt.ShiftModifier)  # nothing selected: every block
    assert all(shows(w, cid) for cid in w.doc.canvas.nodes)


def test_view_menu_lists_the_zoom_actions_with_their_shortcuts(window):
    from app.help import shortcut_rows

    rows = dict(shortcut_rows(window))
    native = QtGui.QKeySequence.NativeText
    assert rows["Zoom In"] == ", ".join(QtGui.QKeySequence(k).toString(native)
                                        for k in ("Ctrl++", "Ctrl+="))
    assert rows["Zoom Out"] == QtGui.QKeySequence("Ctrl+-").toString(native)
    assert rows["Actual Size (100%)"] == QtGui.QKeySequence("Ctrl+0").toString(native)
    assert rows["Fit All"] == "F"
    assert rows["Frame Selected"] == QtGui.QKeySequence("Shift+F").toString(native)
    keys = [k for _name, k in shortcut_rows(window)]
    assert len(keys) == len(set(keys))  # no shortcut on two actions


def test_fit_all_shows_a_canvas_too_big_for_the_readable_zoom_while_opening_does_not(
        qtbot, window):
    """Opening a big canvas shows its top-left part at the readable zoom; F (Fit All) then
    shows every block, below that zoom, because the user asked to see everything."""
    from engine.graph.canvas import Canvas

    c = Canvas()
    for i in range(6):
        for j in range(6):
            c.add_node("Tensor", pos=(600.0 * i, 400.0 * j), id=f"t{i}_{j}")
    window.doc.load(c, None)
    qtbot.waitUntil(lambda: scale(window) > 0)
    readable = window.adapter.readable_scale()
    assert scale(window) == pytest.approx(readable, rel=0.05)
    assert not all(shows(window, cid) for cid in c.nodes)
    focus_canvas(qtbot, window)
    key(window, QtCore.Qt.Key_F)
    assert all(shows(window, cid) for cid in c.nodes)
    assert scale(window) < readable


def test_a_fresh_window_on_an_empty_canvas_adds_blocks_at_a_readable_zoom(qtbot, window):
    """Seen at start-up without a file: NodeGraphQt shrank the zoom while the window was laid
    out (0.54), so the first block added had 6 px titles. An empty canvas shows at 100 %."""
    qtbot.wait(20)  # the first show's queued work
    tree = window.palette.tree
    item = window.palette.items["Conv2DBackpropFilter"]
    tree.scrollToItem(item)
    pos = tree.visualItemRect(item).center()
    QtTest.QTest.mouseClick(tree.viewport(), QtCore.Qt.LeftButton, pos=pos)
    QtTest.QTest.mouseDClick(tree.viewport(), QtCore.Qt.LeftButton, pos=pos)
    QtWidgets.QApplication.processEvents()
    (cid,) = window.doc.canvas.nodes
    assert title_px_on_screen(window, cid) >= view_zoom.MIN_TITLE_PX * 0.98
    assert shows(window, cid)


def test_the_empty_canvas_hint_reads_at_the_size_of_the_interface_text(qtbot, window):
    """At 100 % the hint (made twice the font size for the old shrunken zoom) was huge."""
    qtbot.wait(20)
    hint = window.adapter._hint
    assert hint.isVisible()
    on_screen = hint.font().pointSizeF() * scale(window)
    assert on_screen <= 1.5 * window.font().pointSizeF()
    assert visible(window).contains(hint.sceneBoundingRect())
