"""Previews on the canvas, driven as a user: F5 draws each block's thumbnail (the engine's
thumbnail of the session's output, the viewer's view and colours), Compare shows PASS / FAIL,
View > Show Previews hides them (and is remembered), an edit drops the changed blocks' previews."""

from __future__ import annotations

import numpy as np
import pytest

from tests.app_support import close_window, focus_canvas, make_window, no_dialogs

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtWidgets

from app.node_previews import SETTINGS_KEY, STALE_OPACITY, THUMB_SIZE, preview_of
from engine.graph.canvas import Canvas
from engine.view.thumbnail import thumbnail, thumbnail_view

Qt = QtCore.Qt


def press_f5(qtbot, w) -> None:
    focus_canvas(qtbot, w)
    qtbot.keyClick(w.adapter.viewer, Qt.Key_F5)
    assert w.wait_for_run()
    QtWidgets.QApplication.processEvents()


def view_of(w, nid):
    return w.adapter.node(nid).view


def expected(w, nid, port="output") -> np.ndarray:
    axes = w.session.plan.specs[(nid, port)].axes
    return thumbnail(w.session.outputs[(nid, port)], axes, THUMB_SIZE)


def menu_action(w, menu_title: str, text: str):
    """The action ``text`` of the menu bar's menu ``menu_title`` (as a user finds it)."""
    for act in w.menuBar().actions():
        if act.text().replace("&", "") == menu_title:
            for sub in act.menu().actions():
                if sub.text().replace("&", "") == text:
                    return sub
    raise AssertionError(f"no {menu_title} > {text}")


def type_into(qtbot, edit, text: str) -> None:
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, text)
    qtbot.keyClick(edit, Qt.Key_Return)


def test_f5_draws_thumbnails_equal_to_the_engine_thumbnail_of_each_output(qtbot, grad_window):
    w = grad_window
    for nid in ("x", "fs", "dy", "grad"):
        assert preview_of(view_of(w, nid)) is None  # nothing before a run
    heights = {nid: view_of(w, nid).height for nid in ("x", "grad")}
    press_f5(qtbot, w)
    for nid in ("x", "fs", "dy", "grad"):
        shown = preview_of(view_of(w, nid))
        assert shown is not None, nid
        np.testing.assert_array_equal(shown, expected(w, nid))
    grad = view_of(w, "grad")
    # the filter gradient is the montage of its 2 x 2 tiles of 3 x 3, like the viewer's first view
    assert thumbnail_view(w.session.outputs[("grad", "output")],
                          ("kh", "kw", "in", "out")).kind == "montage"
    assert preview_of(grad).shape[:2] == (56, 56)  # 7 x 7 montage cells of 8 px
    # the node kept its size (its preview area is there before a run: issue 24), and the
    # preview is under its ports and inside its box
    assert grad.height == heights["grad"] and view_of(w, "x").height == heights["x"]
    pix = grad.preview_pixmap
    box = pix.mapRectToParent(pix.boundingRect())
    last_port = max(p.mapRectToParent(p.boundingRect()).bottom()
                    for p in grad.inputs + grad.outputs)
    assert box.top() > last_port and box.bottom() < grad.boundingRect().bottom()
    assert 0 < box.left() and box.right() < grad.boundingRect().right()
    badge = w.session.decorator._badges["grad"]
    # the run badge: in the node's bottom row, under the thumbnail (never on a neighbour)
    assert badge.pos().y() >= box.bottom()
    assert grad.boundingRect().contains(grad.mapRectFromItem(badge, badge.boundingRect()))
    g = w.session.outputs[("grad", "output")].astype(np.float64)
    assert pix.toolTip() == f"grad.output: {g.min():.6g} .. {g.max():.6g}, shape [3, 3, 2, 2] " \
                            "float32"


def test_thumbnail_has_the_viewers_levels_and_colour_map(qtbot, grad_window):
    w = grad_window
    press_f5(qtbot, w)
    for nid in ("x", "grad"):
        w.adapter.select([nid])
        panel = w.viewer_dock.viewer.panels[0]
        view = thumbnail_view(w.session.outputs[(nid, "output")],
                              w.session.plan.specs[(nid, "output")].axes)
        assert (view.cmap, view.levels) == (panel.cmap_name, panel.levels)
        assert view.cells == w.viewer_dock.viewer.current_image().shape


def compare_canvas(seed_b: int) -> Canvas:
    c = Canvas()
    for nid, seed, y in (("a", 1, 0), ("b", seed_b, 160)):
        c.add_node("Tensor", pos=(0, y), id=nid,
                   attrs={"shape": [2, 4, 4, 1], "fill": "random_normal", "seed": seed})
    c.add_node("Compare", pos=(380, 60), id="cmp")
    c.connect(("a", "output"), ("cmp", "a"))
    c.connect(("b", "output"), ("cmp", "b"))
    return c


@pytest.fixture
def compare_window(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, compare_canvas(seed_b=1))
    yield w
    close_window(w)


def test_compare_shows_pass_for_agreeing_inputs_and_fail_after_an_edit_makes_them_differ(
        qtbot, compare_window):
    w = compare_window
    cmp = view_of(w, "cmp")
    assert not cmp.preview_badge.isVisible()
    press_f5(qtbot, w)
    assert cmp.preview_badge.isVisible() and cmp.preview_badge.text == "PASS"
    assert "agree = true" in cmp.preview_badge.toolTip()
    np.testing.assert_array_equal(preview_of(cmp), expected(w, "cmp"))  # a - b = 0
    # the user gives b another seed in the attribute panel: b's and Compare's previews stay,
    # greyed and labelled stale, until they run again; a's stays as it was
    w.adapter.select(["b"])
    type_into(qtbot, w.attributes.rows["seed"].editor.edit, "2")
    assert w.doc.canvas.nodes["b"].attrs["seed"] == 2
    for nid in ("b", "cmp"):
        view = view_of(w, nid)
        assert view.preview_pixmap.isVisible()
        assert view.preview_pixmap.opacity() == pytest.approx(STALE_OPACITY)
        assert view.preview_pixmap.toolTip().startswith("stale: ")
    assert cmp.preview_badge.opacity() == pytest.approx(STALE_OPACITY)
    assert view_of(w, "a").preview_pixmap.opacity() == 1.0  # a did not change
    press_f5(qtbot, w)
    assert cmp.preview_badge.isVisible() and cmp.preview_badge.text == "FAIL"
    assert cmp.preview_badge.opacity() == 1.0 and cmp.preview_pixmap.opacity() == 1.0
    assert not bool(w.session.outputs[("cmp", "agree")])
    np.testing.assert_array_equal(preview_of(cmp), expected(w, "cmp"))
    # badge and thumbnail sit side by side under the ports, inside the node
    pix, badge = cmp.preview_pixmap, cmp.preview_badge
    assert badge.x() >= pix.x() + pix.pixmap().width()
    assert cmp.mapRectFromItem(badge, badge.boundingRect()).right() < cmp.boundingRect().right()


def test_view_show_previews_hides_and_shows_them_and_is_remembered(qtbot, grad_window,
                                                                   tmp_path, monkeypatch):
    w = grad_window
    press_f5(qtbot, w)
    grad = view_of(w, "grad")
    tall = grad.height
    act = menu_action(w, "View", "Show Previews")
    assert act.isCheckable() and act.isChecked()
    act.trigger()  # View > Show Previews: off
    assert not act.isChecked()
    for nid in ("x", "fs", "dy", "grad"):
        assert preview_of(view_of(w, nid)) is None
    assert grad.height < tall  # the node shrank back
    assert w.settings.value(SETTINGS_KEY) in (False, "false")
    act.trigger()  # on again: the same pictures
    assert preview_of(grad) is not None and grad.height == tall
    np.testing.assert_array_equal(preview_of(grad), expected(w, "grad"))
    act.trigger()
    w.settings.sync()
    # a new window with the same settings starts with previews off, and a run draws none
    second = make_window(qtbot, tmp_path)
    try:
        assert not menu_action(second, "View", "Show Previews").isChecked()
        second.doc.load(w.doc.canvas, None)
        press_f5(qtbot, second)
        assert ("grad", "output") in second.session.outputs
        assert preview_of(view_of(second, "grad")) is None
    finally:
        close_window(second)


def test_scalar_main_output_is_shown_as_its_value(qtbot, window):
    w = window
    c = Canvas()
    c.add_node("Tensor", pos=(0, 0), id="s", attrs={"shape": [], "fill": "ones"})
    w.doc.load(c, None)
    press_f5(qtbot, w)
    view = view_of(w, "s")
    assert view.preview_value.isVisible() and view.preview_value.text() == "1"
    assert preview_of(view) is None


def test_reopening_a_canvas_drops_previews_without_drawing_the_old_results(qtbot, grad_window,
                                                                          monkeypatch):
    from app import node_previews
    from tests.app_support import grad_canvas

    w = grad_window
    press_f5(qtbot, w)
    assert preview_of(view_of(w, "grad")) is not None
    drawn = []
    real = node_previews.thumbnail
    monkeypatch.setattr(node_previews, "thumbnail",
                        lambda *a, **k: drawn.append(1) or real(*a, **k))
    w.doc.load(grad_canvas(), None)  # the same ids, new node items, no results yet
    QtWidgets.QApplication.processEvents()
    assert drawn == []
    for nid in ("x", "fs", "dy", "grad"):
        assert preview_of(view_of(w, nid)) is None
    press_f5(qtbot, w)
    assert len(drawn) == 4
    np.testing.assert_array_equal(preview_of(view_of(w, "grad")), expected(w, "grad"))


def test_a_node_is_selected_and_moved_by_dragging_its_preview(qtbot, grad_window):
    from tests.app_support import drag, view_point

    w = grad_window
    press_f5(qtbot, w)
    grad = view_of(w, "grad")
    before = w.doc.canvas.nodes["grad"].pos
    start = view_point(w, grad.preview_pixmap)
    drag(w, start, start + QtCore.QPoint(60, 40))
    after = w.doc.canvas.nodes["grad"].pos
    assert after[0] > before[0] + 20 and after[1] > before[1] + 10
    assert grad.isSelected()
    # the move is a canvas edit, not a change of results: the preview stays
    np.testing.assert_array_equal(preview_of(grad), expected(w, "grad"))


def test_a_result_no_thumbnail_can_draw_says_so_in_the_tooltip(qtbot, grad_window):
    w = grad_window
    press_f5(qtbot, w)
    # a future block whose main output is text: no picture, no traceback, the reason on hover
    w.session.outputs[("grad", "output")] = np.array([["a", "b"]])
    w.previews.update()
    grad = view_of(w, "grad")
    assert preview_of(grad) is None
    assert grad.preview_value.isVisible() and grad.preview_value.text() == "no preview"
    assert grad.preview_value.toolTip().startswith("grad.output: no preview: ")
    assert preview_of(view_of(w, "x")) is not None
