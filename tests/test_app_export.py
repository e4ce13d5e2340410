"""File > Export as Script... in the app, Run > Cross-check when nothing was compared, and
``gradblocks --help`` naming every way to start the app.

The exported files are compared byte for byte with what ``gradblocks export [--to ...]``
writes from the same canvas file; refusals (the canvas file itself, a file the canvas reads, a
folder) are one line in a message box and leave the files as they were."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtTest, QtWidgets

from app import crosscheck_action
from engine.export import frameworks
from engine.export.frameworks import sources_path
from engine.graph.canvas_file import dumps
from tests.app_support import grad_canvas
from tests.test_crosscheck import _fake

REPO = Path(__file__).resolve().parents[1]


def menu_action(window, menu: str, text: str):
    bar = window.menuBar()
    m = next(a.menu() for a in bar.actions() if a.text().replace("&", "") == menu)
    return next(a for a in m.actions() if a.text().replace("&", "") == text)


def cli_export(canvas: Path, output: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", "export", str(canvas), "-o",
                           str(output), *args], capture_output=True, text=True, cwd=REPO,
                          check=False)


@pytest.fixture
def saved_window(grad_window, tmp_path):
    """The grad canvas saved as tmp_path/grad.gbc.json and opened from there."""
    path = tmp_path / "grad.gbc.json"
    path.write_text(dumps(grad_canvas()), encoding="utf-8")
    assert grad_window.files.open_path(path, ask=False)
    return grad_window


def export_from_menu(qtbot, w, target_text: str, path: Path):
    """File > Export as Script...: pick the framework and type the path, click Export."""
    menu_action(w, "File", "Export as Script…").trigger()
    dialog = w.export.dialog
    qtbot.waitUntil(dialog.isVisible)
    combo = dialog.target
    combo.setFocus()
    while combo.currentText() != target_text:  # the arrow keys, as a user picks
        QtTest.QTest.keyClick(combo, QtCore.Qt.Key_Down)
    dialog.path.selectAll()
    QtTest.QTest.keyClicks(dialog.path, str(path))
    qtbot.mouseClick(dialog.export_button, QtCore.Qt.LeftButton)
    return dialog


@pytest.mark.parametrize(("shown", "target"), [("NumPy (engine.kernels)", "numpy"),
                                               ("TensorFlow", "tensorflow"),
                                               ("JAX", "jax")])
def test_export_from_the_menu_writes_the_files_the_cli_writes(qtbot, saved_window, tmp_path,
                                                              shown, target):
    w = saved_window
    (tmp_path / "app").mkdir()
    (tmp_path / "cli").mkdir()
    script = tmp_path / "app" / "grad_script.py"
    dialog = export_from_menu(qtbot, w, shown, script)
    assert not dialog.isVisible()  # done: the dialog closed
    proc = cli_export(tmp_path / "grad.gbc.json", tmp_path / "cli" / "grad_script.py",
                      "--to", target)
    assert proc.returncode == 0, proc.stderr
    ours = sorted(p.name for p in (tmp_path / "app").iterdir())
    theirs = sorted(p.name for p in (tmp_path / "cli").iterdir())
    assert ours == theirs  # the script, and for a framework its sources.<hash>.npz
    assert len(ours) == (1 if target == "numpy" else 2)
    for name in ours:
        assert (tmp_path / "app" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    if target != "numpy":
        companion = sources_path(script)
        with np.load(companion) as f:  # the Tensor blocks' exact values
            assert sorted(f.files) == ["s0", "s1"]
    logged = w.log.messages("ok")[-1]
    assert logged.startswith(f"exported {script}") and logged.endswith(f"4 block(s), {target}")


def test_export_refuses_the_canvas_file_and_a_file_the_canvas_reads_in_one_line(
        qtbot, window, tmp_path, monkeypatch):
    w = window
    values = tmp_path / "x.npy"
    np.save(values, np.ones((1, 5, 5, 2), np.float32))
    c = grad_canvas()
    c.nodes["x"].attrs.update({"fill": "file", "path": "x.npy"})
    canvas = tmp_path / "reads.gbc.json"
    canvas.write_text(dumps(c), encoding="utf-8")
    assert w.files.open_path(canvas, ask=False)
    shown: list[str] = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "critical",
                        staticmethod(lambda _parent, _title, text: shown.append(text)))
    before = (canvas.read_bytes(), values.read_bytes())
    dialog = export_from_menu(qtbot, w, "NumPy (engine.kernels)", canvas)
    assert shown == [f"{str(canvas)!r} is the canvas being read: refusing to overwrite it"]
    assert dialog.isVisible()  # still open: the path can be fixed
    dialog.close()
    dialog = export_from_menu(qtbot, w, "PyTorch", values)
    assert shown[-1] == (f"{str(values)!r} is a file the canvas reads (block 'x'): refusing to "
                         "overwrite it")
    dialog.close()
    dialog = export_from_menu(qtbot, w, "NumPy (engine.kernels)", tmp_path)
    assert shown[-1] == f"{str(tmp_path)!r} is a folder"
    dialog.close()
    assert all("\n" not in s and "Traceback" not in s for s in shown)
    assert (canvas.read_bytes(), values.read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(
        ("settings", "recovery"))) == ["reads.gbc.json", "x.npy"]


def test_a_canvas_with_problems_is_not_exported(qtbot, grad_window, tmp_path, monkeypatch):
    w = grad_window
    w.doc.edit("cut", lambda c: c.disconnect(("grad", "filter_sizes")))
    shown: list[str] = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "critical",
                        staticmethod(lambda _parent, _title, text: shown.append(text)))
    dialog = export_from_menu(qtbot, w, "NumPy (engine.kernels)", tmp_path / "s.py")
    assert len(shown) == 1 and shown[0].startswith("the canvas has 1 problem; fix them first")
    assert "filter_sizes" in shown[0] and not (tmp_path / "s.py").exists()
    dialog.close()


def test_cross_check_with_no_framework_installed_says_nothing_was_compared(
        qtbot, grad_window, monkeypatch):
    """Defect 4: all three skipped, then a green "all 0 row(s) agree"."""
    names = ("tfabsent", "torchabsent", "jaxabsent")
    for name in names:
        monkeypatch.setitem(frameworks.TARGETS, name, _fake(name, f"gradblocks_no_{name}"))
    monkeypatch.setattr(crosscheck_action, "FRAMEWORKS", names)
    w = grad_window
    with qtbot.waitSignal(w.crosscheck.finished, timeout=120_000):
        menu_action(w, "Run", "Cross-check with Frameworks").trigger()
    assert not any("row(s) agree" in m for m in w.log.messages("ok"))
    warning = w.log.messages("warning")[-1]
    assert warning == ("cross-check: nothing was compared: tfabsent, torchabsent, jaxabsent "
                       "are not installed (skipped); install one")


def test_help_lists_every_way_to_start_the_app():
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "--help"], capture_output=True,
                          text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "gradblocks [CANVAS] [--run] [--select ID] [--screenshot PNG]" in proc.stdout
    examples = [line for line in proc.stdout.splitlines() if line.startswith("  gradblocks ")]
    for option in ("CANVAS", "--run", "--select", "--screenshot"):  # each shown in use
        assert any(option in line for line in examples[1:]), option
