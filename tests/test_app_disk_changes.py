"""A canvas file changed on disk by someone else is never silently overwritten: Ctrl+S asks
(Reload / Overwrite / Save As / Cancel), and regaining focus reloads it (asking first when the
canvas has unsaved edits, once per disk state). Saves keep permission bits and symbolic links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.app_support import choose_button, focus_canvas, grad_canvas, no_dialogs

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtWidgets

from engine.graph.canvas import Canvas
from engine.graph.canvas_file import load_canvas, save_canvas


def _other_canvas() -> Canvas:
    c = Canvas()
    c.add_node("Tensor", pos=(0, 0), id="theirs", attrs={"shape": [2, 2]})
    return c


def _open_and_edit(window, path: Path) -> dict:
    """Open ``path`` (the grad canvas) and change one attribute; returns the edited JSON."""
    save_canvas(grad_canvas(), path)
    assert window.files.open_path(path, ask=False)
    window.doc.edit("padding", lambda c: c.set_attr("grad", "padding", "VALID"))
    assert window.doc.modified
    return window.doc.canvas.to_json()


def _focus(qtbot, window) -> None:
    """Make the window active and let its focus check run (the file is as it was opened)."""
    focus_canvas(qtbot, window)
    QtWidgets.QApplication.processEvents()


def _ctrl_s(qtbot, window) -> None:
    """Ctrl+S on the canvas (the window already active: coming back to it is _activate)."""
    qtbot.keyClick(window.adapter.viewer, QtCore.Qt.Key_S, QtCore.Qt.ControlModifier)


def _activate(window) -> None:
    """What the window gets when the user comes back to it from another program."""
    QtWidgets.QApplication.sendEvent(window, QtCore.QEvent(QtCore.QEvent.WindowActivate))
    QtWidgets.QApplication.processEvents()  # the check runs right after the activation
    QtWidgets.QApplication.processEvents()


def _ids(path: Path) -> set[str]:
    return set(load_canvas(path).nodes)


@pytest.mark.parametrize("button", ["Reload", "Overwrite", "Save As...", "Cancel"])
def test_ctrl_s_over_a_file_changed_on_disk_asks_and_does_what_was_chosen(
        qtbot, tmp_path, window, monkeypatch, button):
    path = tmp_path / "mine.gbc.json"
    ours = _open_and_edit(window, path)
    _focus(qtbot, window)  # activation now: the file has not changed yet
    save_canvas(_other_canvas(), path)  # another program saves over it
    elsewhere = tmp_path / "copy.gbc.json"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(elsewhere), "")))
    shown = choose_button(monkeypatch, button)
    _ctrl_s(qtbot, window)
    assert len(shown) == 1 and "since it was opened or saved" in shown[0]
    if button == "Reload":
        assert set(window.doc.canvas.nodes) == {"theirs"} and not window.doc.modified
        assert _ids(path) == {"theirs"}
        window.doc.undo_stack.undo()  # the edits are not lost
        assert window.doc.canvas.to_json() == ours and window.doc.modified
    elif button == "Overwrite":
        assert load_canvas(path).to_json() == ours and not window.doc.modified
    elif button == "Save As...":
        assert load_canvas(elsewhere).to_json() == ours and _ids(path) == {"theirs"}
        assert window.doc.path == elsewhere.resolve() and not window.doc.modified
    else:
        assert _ids(path) == {"theirs"} and window.doc.modified
        assert window.doc.canvas.to_json() == ours
        no_dialogs(monkeypatch)
        _activate(window)  # coming back to the window does not ask about it again
        assert window.doc.canvas.to_json() == ours


def test_ctrl_s_after_the_file_was_deleted_asks_and_writes_it_again(qtbot, tmp_path, window,
                                                                    monkeypatch):
    path = tmp_path / "mine.gbc.json"
    ours = _open_and_edit(window, path)
    _focus(qtbot, window)
    path.unlink()
    shown = choose_button(monkeypatch, "Save Here")
    _ctrl_s(qtbot, window)
    assert len(shown) == 1 and "deleted" in shown[0]
    assert load_canvas(path).to_json() == ours and not window.doc.modified


def test_ctrl_s_does_not_ask_when_only_we_or_a_touch_changed_the_file(qtbot, tmp_path, window):
    path = tmp_path / "mine.gbc.json"
    _open_and_edit(window, path)
    _focus(qtbot, window)
    os.utime(path, ns=(1, 10**18))  # same bytes, new mtime
    _ctrl_s(qtbot, window)  # no_dialogs: any question fails the test
    assert not window.doc.modified
    window.doc.edit("padding", lambda c: c.set_attr("grad", "padding", "SAME"))
    _ctrl_s(qtbot, window)  # our own save is not a change made by someone else
    assert load_canvas(path).to_json() == window.doc.canvas.to_json()


def test_regaining_focus_reloads_an_unmodified_canvas_silently_and_undoably(tmp_path, window):
    path = tmp_path / "mine.gbc.json"
    save_canvas(grad_canvas(), path)
    assert window.files.open_path(path, ask=False)
    save_canvas(_other_canvas(), path)
    _activate(window)  # no_dialogs: a question fails the test
    assert set(window.doc.canvas.nodes) == {"theirs"} and not window.doc.modified
    assert set(window.adapter.node_ids()) == {"theirs"}  # the view shows it
    window.doc.undo_stack.undo()
    assert set(window.doc.canvas.nodes) == set(grad_canvas().nodes) == set(
        window.adapter.node_ids())
    assert window.windowTitle().startswith("mine*")


def test_coming_back_from_another_program_checks_too(tmp_path, window):
    """A floating panel may be the active window: the application's state counts as well."""
    path = tmp_path / "mine.gbc.json"
    save_canvas(grad_canvas(), path)
    assert window.files.open_path(path, ask=False)
    save_canvas(_other_canvas(), path)
    app = QtWidgets.QApplication.instance()
    app.applicationStateChanged.emit(QtCore.Qt.ApplicationActive)
    QtWidgets.QApplication.processEvents()
    assert set(window.doc.canvas.nodes) == {"theirs"}


def test_regaining_focus_with_unsaved_edits_asks_once_per_disk_state(tmp_path, window,
                                                                    monkeypatch):
    path = tmp_path / "mine.gbc.json"
    ours = _open_and_edit(window, path)
    save_canvas(_other_canvas(), path)
    shown = choose_button(monkeypatch, "Keep Mine")
    _activate(window)
    assert len(shown) == 1 and "unsaved" in shown[0]
    assert window.doc.canvas.to_json() == ours and window.doc.modified
    _activate(window)
    _activate(window)
    assert len(shown) == 1  # the same disk state is not asked about again
    third = _other_canvas()
    third.add_node("Tensor", id="again")
    save_canvas(third, path)
    shown = choose_button(monkeypatch, "Reload")
    _activate(window)
    assert len(shown) == 1 and set(window.doc.canvas.nodes) == {"theirs", "again"}
    assert not window.doc.modified


def test_regaining_focus_after_the_file_was_deleted_only_warns_once(tmp_path, window):
    path = tmp_path / "mine.gbc.json"
    ours = _open_and_edit(window, path)
    path.unlink()
    logged = []
    window.files.message.connect(lambda text, level: logged.append((level, text)))
    _activate(window)
    _activate(window)
    assert [lv for lv, t in logged if "deleted" in t] == ["warning"]
    assert window.doc.canvas.to_json() == ours


def test_a_file_changed_into_a_bad_canvas_is_not_reloaded_and_reported_once(tmp_path, window):
    path = tmp_path / "mine.gbc.json"
    save_canvas(grad_canvas(), path)
    assert window.files.open_path(path, ask=False)
    before = window.doc.canvas.to_json()
    path.write_text("{ half a file")  # another program is writing it, or broke it
    logged = []
    window.files.message.connect(lambda text, level: logged.append((level, text)))
    _activate(window)  # no_dialogs: an error dialog fails the test
    _activate(window)
    assert [lv for lv, t in logged if "not JSON" in t] == ["warning"]
    assert window.doc.canvas.to_json() == before and not window.doc.modified
    save_canvas(_other_canvas(), path)  # the writer finished
    _activate(window)
    assert set(window.doc.canvas.nodes) == {"theirs"}


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_ctrl_s_keeps_the_permission_bits_and_writes_through_a_symlink(qtbot, tmp_path, window,
                                                                      mode):
    real = tmp_path / "real"
    real.mkdir()
    target = real / "canvas.gbc.json"
    save_canvas(grad_canvas(), target)
    target.chmod(mode)
    link = tmp_path / "link.gbc.json"
    link.symlink_to(target)
    assert window.files.open_path(link, ask=False)
    window.doc.edit("padding", lambda c: c.set_attr("grad", "padding", "VALID"))
    _focus(qtbot, window)
    _ctrl_s(qtbot, window)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert load_canvas(target).nodes["grad"].attrs["padding"] == "VALID"
    assert (target.stat().st_mode & 0o777) == mode
    assert not [p for p in tmp_path.rglob("*.tmp")] and list(real.iterdir()) == [target]
