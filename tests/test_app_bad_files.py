"""Opening a bad canvas never raises: File > Open, Open Recent, drag and drop and start-up in
screenshot mode show the loader's messages and leave the open canvas as it was; start-up on a
bad file shows them in a dialog over an empty canvas; screenshot mode exits 2 with one line."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.app_support import drop_mime, drop_on, grad_canvas, url_mime

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtWidgets

from app import window_menus
from engine.graph.canvas_file import MAX_FILE_BYTES, save_canvas

EXAMPLE = Path(__file__).parents[1] / "assets" / "examples" / "enuspace_style.gbc.json"


def hostile_files(folder: Path) -> dict[str, Path]:
    """Canvas files that broke the open handler or the loader: a block type given as a list or
    an object, a > 4300-digit integer, arrays nested 10^5 deep, a non-string title, a BOM,
    bytes that are not UTF-8, an empty file and a folder named like a canvas."""
    base = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    files: dict[str, bytes] = {}

    def variant(name, change):
        doc = json.loads(json.dumps(base))
        change(doc)
        files[name] = json.dumps(doc).encode()

    variant("type_list", lambda d: d["nodes"][0].update(type=["Tensor"]))
    variant("type_dict", lambda d: d["nodes"][0].update(type={"a": 1}))
    variant("title_int", lambda d: d["nodes"][0].update(title=123))
    files["bigint"] = json.dumps(base).replace('"version": 1', '"version": 1' + "0" * 5000).encode()
    files["deep"] = b"[" * 100_000 + b"]" * 100_000
    files["not_utf8"] = b'{"format": "gradblocks.canvas", "version": 1, "nodes": [], "\xff": 1}'
    files["empty"] = b""
    out = {}
    for name, data in files.items():
        path = folder / f"{name}.gbc.json"
        path.write_bytes(data)
        out[name] = path
    (folder / "folder.gbc.json").mkdir()
    out["folder"] = folder / "folder.gbc.json"
    return out


@pytest.fixture
def errors(monkeypatch) -> list[str]:
    """Error dialogs shown (QMessageBox.critical texts) instead of showing them."""
    shown: list[str] = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "critical",
                        staticmethod(lambda _p, _title, text, *a, **k: shown.append(text)))
    return shown


def test_file_open_recent_and_drop_of_bad_canvases_show_a_dialog_and_keep_the_canvas(
        qtbot, tmp_path, window, errors, monkeypatch):
    window.doc.load(grad_canvas(), None)
    before = window.doc.canvas.to_json()
    for name, path in hostile_files(tmp_path).items():
        count = len(errors)
        monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                            staticmethod(lambda *a, p=path, **k: (str(p), "")))
        assert not window.files.open_dialog(), name
        window.files.add_recent(path)
        window_menus.fill_recent(window)
        window.recent_menu.actions()[0].trigger()
        drop_mime(window, url_mime(path), QtCore.QPoint(200, 200))
        assert len(errors) == count + 3, name  # one dialog per attempt
        assert path.name in errors[-1] and "internal error" not in errors[-1], errors[-1]
        assert window.doc.canvas.to_json() == before, name


@pytest.mark.parametrize("name", ["type_list", "deep", "bigint"])
def test_start_up_on_a_bad_canvas_says_why_and_exits_2(tmp_path, name):
    path = hostile_files(tmp_path)[name]
    proc = subprocess.run([sys.executable, "-m", "app", str(path), "--screenshot",
                           str(tmp_path / "shot.png")], capture_output=True, text=True,
                          env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"},
                          timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and path.name in proc.stderr
    assert not (tmp_path / "shot.png").exists()


def bad_files(folder: Path) -> dict[str, Path]:
    """One canvas file of each kind of bad: invalid JSON, wrong types, an unknown block type, a
    newer version, a folder, an unreadable file (chmod 000), bytes that are not UTF-8, a file
    over the size limit (sparse), a dangling symbolic link and a FIFO."""
    base = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    texts: dict[str, bytes] = {}

    def variant(name, change):
        doc = json.loads(json.dumps(base))
        change(doc)
        texts[name] = json.dumps(doc).encode()

    texts["invalid_json"] = b'{"format": "gradblocks.canvas", "version": 1, "nodes": [,]}'
    variant("wrong_types", lambda d: (d.update(nodes={"a": 1}), d.update(edges="none")))
    variant("unknown_type", lambda d: d["nodes"][0].update(type="Conv9DBackpropEverything"))
    variant("newer_version", lambda d: d.update(version=99))
    texts["not_utf8"] = b'{"format": "gradblocks.canvas", "version": 1, "nodes": [], "\xff": 1}'
    texts["unreadable"] = EXAMPLE.read_bytes()
    out = {}
    for name, data in texts.items():
        out[name] = folder / f"{name}.gbc.json"
        out[name].write_bytes(data)
    out["unreadable"].chmod(0)
    out["folder"] = folder / "folder.gbc.json"
    out["folder"].mkdir()
    out["huge"] = folder / "huge.gbc.json"
    with open(out["huge"], "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk space used
    out["dangling_symlink"] = folder / "dangling_symlink.gbc.json"
    out["dangling_symlink"].symlink_to(folder / "gone.gbc.json")
    out["fifo"] = folder / "fifo.gbc.json"
    os.mkfifo(out["fifo"])
    return out


#: What each bad file's message must say (besides its name).
WHY = {"invalid_json": "", "wrong_types": "$.nodes", "unknown_type": "Conv9DBackpropEverything",
       "newer_version": "newer", "not_utf8": "UTF-8", "unreadable": "ermission denied",
       "folder": "folder", "huge": "limit", "dangling_symlink": "symbolic link to",
       "fifo": "not a regular file"}

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture
def unreadable_even_for_root(monkeypatch):
    """As root a chmod 000 file is still readable: refuse to open it, as the kernel would for
    anyone else (the loader's own os.open)."""
    import engine.graph.canvas_file as canvas_module

    real_open = canvas_module.os.open

    def deny(path, *args, **kwargs):
        if str(path).endswith("unreadable.gbc.json"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(canvas_module.os, "open", deny)


def test_every_kind_of_bad_file_on_every_open_path_shows_its_message_and_keeps_the_canvas(
        qtbot, tmp_path, window, errors, monkeypatch, unreadable_even_for_root):
    window.doc.load(grad_canvas(), None)
    window.doc.edit("padding", lambda c: c.set_attr("grad", "padding", "VALID"))
    before = window.doc.canvas.to_json()
    paths = bad_files(tmp_path)
    assert set(paths) == set(WHY)
    discard = QtWidgets.QMessageBox.Discard  # the unsaved edit is given up for the new file
    monkeypatch.setattr(QtWidgets.QMessageBox, "question", staticmethod(lambda *a, **k: discard))
    for name, path in paths.items():
        count = len(errors)
        monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                            staticmethod(lambda *a, p=path, **k: (str(p), "")))
        window.act_open.trigger()  # File > Open
        window.files.add_recent(path)
        window_menus.fill_recent(window)
        window.recent_menu.actions()[0].trigger()  # File > Open Recent > the file
        drop_mime(window, url_mime(path), QtCore.QPoint(200, 200))  # drop on the canvas
        drop_on(window.log, url_mime(path), QtCore.QPoint(5, 5))  # drop on a panel
        assert len(errors) == count + 4, (name, errors[count:])  # one dialog per attempt
        for text in errors[count:]:
            assert path.name in text and WHY[name] in text, (name, text)
            assert "internal error" not in text, text
        assert window.doc.canvas.to_json() == before, name
        assert window.doc.modified, name


STARTUP = """
import sys
from PySide6 import QtWidgets

from app import window_menus
import app

def critical(parent, title, text, *args, **kwargs):
    print("DIALOG:", title, "|", " ".join(str(text).split()), flush=True)
    return QtWidgets.QMessageBox.Ok

def exec_(self=None):  # instead of the event loop: report what the window shows, then quit
    QtWidgets.QApplication.processEvents()
    for w in QtWidgets.QApplication.topLevelWidgets():
        if hasattr(w, "doc") and w.isVisible():
            print("WINDOW:", len(w.doc.canvas.nodes), "blocks, path", w.doc.path, flush=True)
            w.doc.undo_stack.setClean()
            w.close()
    return 0

QtWidgets.QMessageBox.critical = staticmethod(critical)
QtWidgets.QApplication.exec = exec_
from app.launch import main
extra, paths = sys.argv[1].split(), sys.argv[2:]
for path in paths:  # one start-up after the other, as `gradblocks PATH EXTRA...` would do
    print("=== " + path, flush=True)
    print("=== " + path, file=sys.stderr, flush=True)
    print("EXIT:", main([path, *extra]), flush=True)
"""


def _start_ups(tmp_path: Path, extra: str, paths: list[Path]) -> dict[str, tuple[str, str]]:
    """Run the app's start-up (app.launch.main, the console script) on each path in one
    offscreen process with dialogs printed; {path: (stdout, stderr)} of each start-up."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HOME": str(home),
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local")}
    proc = subprocess.run([sys.executable, "-c", STARTUP, extra, *map(str, paths)],
                          capture_output=True, text=True, env=env, timeout=300, check=False,
                          cwd=Path(__file__).parents[1])
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr

    def split(text: str) -> dict[str, str]:
        parts = text.split("=== ")[1:]
        return {part.split("\n", 1)[0]: part.split("\n", 1)[1] for part in parts}

    out, err = split(proc.stdout), split(proc.stderr)
    assert list(out) == [str(p) for p in paths], proc.stdout
    return {path: (out[path], err.get(path, "")) for path in out}


def _readable_bad_files(tmp_path: Path) -> dict[str, Path]:
    """Every bad file; the unreadable one only when the tests do not run as root."""
    files = bad_files(tmp_path)
    if ROOT:  # root reads a chmod 000 file: the in-process test covers it
        del files["unreadable"]
    return files


def test_start_up_on_a_bad_file_shows_a_dialog_over_an_empty_canvas(tmp_path):
    files = _readable_bad_files(tmp_path)
    results = _start_ups(tmp_path, "", list(files.values()))
    for name, path in files.items():
        out, _err = results[str(path)]
        dialogs = [line for line in out.splitlines() if line.startswith("DIALOG:")]
        assert len(dialogs) == 1 and path.name in dialogs[0] and WHY[name] in dialogs[0], out
        assert "WINDOW: 0 blocks, path None" in out and "EXIT: 0" in out, out


def test_screenshot_mode_on_a_bad_file_exits_2_with_one_line(tmp_path):
    files = _readable_bad_files(tmp_path)
    shot = tmp_path / "shot.png"
    results = _start_ups(tmp_path, f"--screenshot {shot}", list(files.values()))
    for name, path in files.items():
        out, err = results[str(path)]
        lines = [line for line in err.splitlines() if "propagateSizeHints" not in line]
        assert len(lines) == 1 and lines[0].startswith("gradblocks: "), err
        assert path.name in lines[0] and WHY[name] in lines[0], lines[0]
        assert "EXIT: 2" in out and "DIALOG:" not in out and not shot.exists(), out


@pytest.mark.parametrize("meta", [b"[1, 2]", b'{"path": 5, "saved_at": []}', b'"text"',
                                  b"\xff\xfe", b'{"path": "a\\u0000b"}'])
def test_a_bad_recovery_file_at_start_up_never_raises(qtbot, tmp_path, monkeypatch, meta):
    """An orphaned autosave whose note is not what we wrote (another version, a broken disk)
    is still offered, as an untitled canvas, instead of crashing start-up."""
    from tests.app_support import close_window, make_window

    recovery = tmp_path / "recovery"
    recovery.mkdir()
    save_canvas(grad_canvas(), recovery / "session-1-dead.gbc.json")
    (recovery / "session-1-dead.json").write_bytes(meta)
    asked = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "question",
                        staticmethod(lambda _p, _t, text, *a, **k: asked.append(text)
                                     or QtWidgets.QMessageBox.Yes))
    w = make_window(qtbot, tmp_path)
    try:
        assert w.files.offer_recovery()
        assert "an untitled canvas" in asked[0]
        assert w.doc.path is None and w.doc.modified
        assert set(w.doc.canvas.nodes) == set(grad_canvas().nodes)
    finally:
        close_window(w)


@pytest.mark.parametrize("value", [5, [1, None, "/x/a.gbc.json"], "", ["", "a\x00b"],
                                   QtCore.QByteArray(b"\xff")])
def test_a_bad_recent_files_setting_at_start_up_never_raises(qtbot, tmp_path, value):
    """The settings file is the user's too (edited, from another version): odd values in the
    recent list are left out instead of stopping start-up."""
    from tests.app_support import close_window, make_window

    settings = QtCore.QSettings(str(tmp_path / "settings.ini"), QtCore.QSettings.IniFormat)
    settings.setValue("files/recent", value)
    settings.sync()
    del settings
    w = make_window(qtbot, tmp_path)
    try:
        expected = ["/x/a.gbc.json"] if isinstance(value, list) and None in value else []
        assert [str(p) for p in w.files.recent()] == expected
        assert w.recent_menu.isEnabled() == bool(expected)
    finally:
        close_window(w)
