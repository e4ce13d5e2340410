"""Opening a bad canvas never raises: File > Open, Open Recent, drag and drop and start-up in
screenshot mode show the loader's messages and leave the open canvas as it was."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.app_support import drop_mime, grad_canvas, url_mime

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtWidgets

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
        window._fill_recent()
        window.recent_menu.actions()[0].trigger()
        drop_mime(window, url_mime(path), QtCore.QPoint(200, 200))
        assert len(errors) == count + 3, name  # one dialog per attempt
        assert path.name in errors[-1] and "internal error" not in errors[-1], errors[-1]
        assert window.doc.canvas.to_json() == before, name


@pytest.mark.parametrize("name", ["type_list", "deep", "bigint"])
def test_start_up_on_a_bad_canvas_says_why_and_exits_2(tmp_path, name):
    path = hostile_files(tmp_path)[name]
    proc = subprocess.run([sys.executable, "-m", "engine.cli", str(path), "--screenshot",
                           str(tmp_path / "shot.png")], capture_output=True, text=True,
                          env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"},
                          timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and path.name in proc.stderr
    assert not (tmp_path / "shot.png").exists()
