"""Files in the app: save/reopen, the unsaved-changes prompt, load errors, recovery after a crash,
dropped files, examples, recent files, title, persisted layout."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from tests.app_support import (
    close_window,
    drop_mime,
    grad_canvas,
    make_window,
    no_dialogs,
    url_mime,
)

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtWidgets

from engine.graph.canvas_file import load_canvas, save_canvas

Box = QtWidgets.QMessageBox


def answer(monkeypatch, kind: str, button) -> list:
    """Patch QMessageBox.<kind> to answer ``button``; returns the texts it was shown."""
    shown: list = []

    def fake(parent, title, text, *args, **kwargs):
        shown.append(text)
        return button

    monkeypatch.setattr(Box, kind, staticmethod(fake))
    return shown


def test_save_reopen_and_compare(qtbot, tmp_path, window, monkeypatch):
    w = window
    w.doc.load(grad_canvas(), None)
    w.doc.edit("set", lambda c: c.set_attr("grad", "padding", "VALID"))
    assert w.windowTitle() == "untitled* — GradBlocks"
    path = tmp_path / "mine.gbc.json"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(tmp_path / "mine"), "")))
    assert w.files.save()  # Save on an untitled canvas asks for a name; suffix added
    assert path.is_file()
    assert w.windowTitle() == "mine — GradBlocks"
    text = path.read_text()
    assert text.endswith("\n") and json.loads(text)["format"] == "gradblocks.canvas"
    saved = w.doc.canvas.to_json()

    w2 = make_window(qtbot, tmp_path / "second")
    try:
        assert w2.files.open_path(path, ask=False)
        assert w2.doc.canvas.to_json() == saved
        assert w2.adapter.view_edges() == {(tuple(e.src), tuple(e.dst))
                                           for e in w2.doc.canvas.edges}
        assert w2.windowTitle() == "mine — GradBlocks"
        assert w2.files.recent()[0] == path.resolve()
        assert w2.recent_menu.actions()[0].text().startswith("mine")
    finally:
        close_window(w2)
    # the file is the canvas format: the engine loads the same canvas
    assert load_canvas(path).to_json() == saved
    w.doc.edit("move", lambda c: setattr(c.nodes["x"], "pos", (5.0, 5.0)))
    assert w.windowTitle() == "mine* — GradBlocks"
    w.doc.undo_stack.undo()
    assert w.windowTitle() == "mine — GradBlocks"


def test_unsaved_changes_prompt_cancel_discard_save(tmp_path, window, monkeypatch):
    w = window
    w.doc.load(grad_canvas(), None)
    w.doc.edit("set", lambda c: c.set_attr("grad", "padding", "VALID"))
    shown = answer(monkeypatch, "question", Box.Cancel)
    assert not w.files.new()
    assert "unsaved changes" in shown[0] and "untitled" in shown[0]
    assert "grad" in w.doc.canvas.nodes  # Cancel keeps everything

    answer(monkeypatch, "question", Box.Save)
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(tmp_path / "kept.gbc.json"), "")))
    assert w.files.new()
    assert load_canvas(tmp_path / "kept.gbc.json").nodes["grad"].attrs["padding"] == "VALID"
    assert w.doc.canvas.nodes == {}

    w.doc.edit("add", lambda c: c.add_node("Tensor"))
    answer(monkeypatch, "question", Box.Discard)
    assert w.files.new()
    assert w.doc.canvas.nodes == {} and not w.doc.modified


def test_closing_with_unsaved_changes_asks(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, grad_canvas())
    w.doc.edit("set", lambda c: c.set_attr("grad", "padding", "VALID"))
    shown = answer(monkeypatch, "question", Box.Cancel)
    assert not w.close()
    assert len(shown) == 1 and w.isVisible()
    answer(monkeypatch, "question", Box.Discard)
    assert w.close()


def test_load_error_shows_every_problem_and_keeps_canvas(tmp_path, window, monkeypatch):
    w = window
    w.doc.load(grad_canvas(), None)
    before = w.doc.canvas.to_json()
    bad = tmp_path / "bad.gbc.json"
    data = grad_canvas().to_json()
    data["nodes"][0]["type"] = "NoSuchBlock"
    data["edges"].append({"src": ["x", "output"], "dst": ["ghost", "input"]})
    bad.write_text(json.dumps(data))
    shown = answer(monkeypatch, "critical", Box.Ok)
    assert not w.files.open_path(bad, ask=False)
    assert "NoSuchBlock" in shown[0] and "ghost" in shown[0]
    assert "nodes[0]" in shown[0]  # problems carry their JSON path
    assert w.doc.canvas.to_json() == before
    assert w.adapter.node_ids() == ["x", "fs", "dy", "grad"]
    (tmp_path / "notjson.gbc.json").write_text("{not json")
    assert not w.files.open_path(tmp_path / "notjson.gbc.json", ask=False)
    assert w.doc.canvas.to_json() == before
    assert any("notjson" in m for m in w.log.messages("error"))


def test_recovery_after_a_crash(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    crashed = make_window(qtbot, tmp_path, grad_canvas())
    crashed.doc.edit("set", lambda c: c.set_attr("grad", "padding", "VALID"))
    assert crashed.files.autosave_now()
    assert not crashed.files.autosave_now()  # nothing new since the last autosave
    edited = crashed.doc.canvas.to_json()
    # the process dies: its lock is gone, its autosave stays
    crashed.files.recovery.lock.unlock()
    crashed.files.recovery = None
    close_window(crashed)

    shown = answer(monkeypatch, "question", Box.Yes)
    w = make_window(qtbot, tmp_path)
    try:
        assert w.files.offer_recovery()
        assert "did not close normally" in shown[0]
        assert w.doc.canvas.to_json() == edited
        assert w.doc.modified and w.windowTitle() == "untitled* — GradBlocks"
        assert w.adapter.node_ids() == ["x", "fs", "dy", "grad"]
        # offered once: the orphaned autosave is gone
        assert not w.files.offer_recovery()
    finally:
        close_window(w)


def test_running_session_is_not_offered_for_recovery(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    alive = make_window(qtbot, tmp_path, grad_canvas())
    alive.doc.edit("set", lambda c: c.set_attr("grad", "padding", "VALID"))
    assert alive.files.autosave_now()
    other = make_window(qtbot, tmp_path / "other", recovery_dir=tmp_path / "recovery")
    try:
        assert not other.files.offer_recovery()  # the lock of the live session is held
    finally:
        close_window(other)
        close_window(alive)
    # a clean exit removes the autosave
    assert not list((tmp_path / "recovery").glob("*.gbc.json"))


def test_autosave_every_30_seconds(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, autosave=True)
    try:
        assert w.files.autosave_timer.isActive()
        assert w.files.autosave_timer.interval() == 30_000
    finally:
        close_window(w)


def test_drop_canvas_file_opens_it(tmp_path, window):
    path = tmp_path / "dropped.gbc.json"
    save_canvas(grad_canvas(), path)
    drop_mime(window, url_mime(path), QtCore.QPoint(200, 200))
    assert window.doc.path == path.resolve()
    assert sorted(window.doc.canvas.nodes) == ["dy", "fs", "grad", "x"]


def test_drop_npy_creates_tensor_block_reading_it(tmp_path, window):
    path = tmp_path / "dropped.gbc.json"
    save_canvas(grad_canvas(), path)
    assert window.files.open_path(path, ask=False)
    arr = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    np.save(tmp_path / "weights.npy", arr)
    drop_mime(window, url_mime(tmp_path / "weights.npy"), QtCore.QPoint(250, 150))
    new = [n for n in window.doc.canvas.nodes.values() if n.id not in
           {"x", "fs", "dy", "grad"}]
    assert len(new) == 1
    node = new[0]
    assert node.type == "Tensor"
    assert node.attrs["fill"] == "file" and node.attrs["path"] == "weights.npy"
    assert node.attrs["dtype"] == "float64"
    spec = window.session.plan.specs[(node.id, "output")]
    assert spec.shape == (2, 3, 4) and spec.dtype == "float64"
    assert window.adapter.selected_ids() == [node.id]


def test_examples_are_in_the_file_menu_and_open(window):
    from app.canvas_paths import example_files

    examples = example_files()
    assert len(examples) >= 5
    # the canvases at the top, then the Pitfalls submenu (test_pitfalls.py opens its entries)
    actions = [a for a in window.examples_menu.actions() if a.menu() is None]
    assert [a.text() for a in actions] == [p.name[: -len(".gbc.json")] for p in examples]
    assert window.examples_menu.actions()[-1].menu() is window.pitfalls_menu
    for action, path in zip(actions, examples):
        action.trigger()
        assert window.doc.canvas.to_json() == load_canvas(path).to_json()
        assert window.session.plan.errors == {}, path.name
        assert window.doc.path is None  # an example opens as a copy: Save asks for a name
        assert "(example)" in window.windowTitle()
        assert window.doc.base_dir == path.parent


def test_layout_and_geometry_persist(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, restore_layout=True)
    w.log_dock.hide()
    w.resize(1111, 777)
    close_window(w)
    w2 = make_window(qtbot, tmp_path, restore_layout=True)
    try:
        assert not w2.log_dock.isVisible()
        assert w2.palette_dock.isVisible()
        assert w2.settings.value("window/geometry") is not None
    finally:
        close_window(w2)


def test_long_error_lines_wrap_inside_their_panels_and_never_widen_the_window(
        qtbot, tmp_path, monkeypatch):
    """A 300-character path in an error message used to widen the window (1000 -> 2606 px)."""
    from PySide6 import QtWidgets

    from tests.app_support import close_window, grad_canvas, make_window, wait_run

    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, grad_canvas())
    w.resize(1000, 700)
    w.show()
    QtWidgets.QApplication.processEvents()
    long_path = "/nonexistent/" + "averyveryverylongfoldername" * 12 + ".npy"
    w.doc.edit("file", lambda c: c.set_attr("x", "fill", "file"))
    w.doc.edit("path", lambda c: c.set_attr("x", "path", long_path))
    w.adapter.select(["x"])
    wait_run(qtbot, w)
    w.adapter.select(["x"])
    QtWidgets.QApplication.processEvents()
    error = w.attributes.rows["path"].error
    assert long_path in error.text() and error.isVisible()
    assert long_path in w.viewer_dock.caption.text()
    assert w.width() == 1000
    assert error.width() < 1000 and error.height() > 2 * error.fontMetrics().height()  # wrapped
    close_window(w)


def test_file_dialogs_remember_the_last_folder_of_each_kind(qtbot, tmp_path, window,
                                                            monkeypatch):
    """Save As, Open and the .npy/.png dialogs start where the user last went for that kind of
    file (kept in the settings), never in the working directory; an example's Save As
    suggests the example's name."""
    from app.canvas_paths import example_files

    starts: list[tuple[str, str]] = []

    def dialog(answer_path):
        def ask(_parent, caption, start, *_a, **_k):
            starts.append((caption, start))
            return str(answer_path), ""
        return staticmethod(ask)

    canvases, tensors = tmp_path / "canvases", tmp_path / "tensors"
    canvases.mkdir()
    tensors.mkdir()
    example = example_files()[0]
    assert window.files.open_path(example, ask=False, as_example=True)
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        dialog(canvases / example.name))
    assert window.files.save_as()
    assert starts[-1] == ("Save canvas as", str(pathlib.Path.home() / example.name))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                        dialog(canvases / example.name))
    assert window.files.open_dialog()
    assert starts[-1] == ("Open canvas", str(canvases))  # the folder saved into last
    window.viewer_dock.viewer.show_tensor(np.ones((2, 2), np.float32))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        dialog(tensors / "t.npy"))
    window.viewer_dock.viewer._ask_npy()
    assert starts[-1][1] == str(canvases / "tensor.npy")  # no tensor folder yet: the canvas's
    assert np.load(tensors / "t.npy").shape == (2, 2)
    window.viewer_dock.viewer._ask_npy()
    assert starts[-1][1] == str(tensors / "tensor.npy")
    assert window.settings.value("dialogs/canvas") == str(canvases)
