"""Screenshot mode: ``gradblocks CANVAS --run --select NODE --screenshot out.png``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.app_support import grad_canvas

QtGui = pytest.importorskip("PySide6.QtGui")

from engine.graph.canvas_file import save_canvas

ROOT = Path(__file__).resolve().parent.parent


def test_screenshot_mode_writes_png_of_the_window(qapp, tmp_path):
    from app.startup import SCREENSHOT_SIZE, main

    canvas = tmp_path / "grad.gbc.json"
    save_canvas(grad_canvas(), canvas)
    out = tmp_path / "shots" / "grad.png"
    assert main([str(canvas), "--run", "--select", "grad", "--screenshot", str(out)]) == 0
    image = QtGui.QImage(str(out))
    assert not image.isNull()
    assert (image.width(), image.height()) == SCREENSHOT_SIZE
    # not a blank picture: many distinct colours
    colors = {image.pixel(x, y) for x in range(0, image.width(), 23)
              for y in range(0, image.height(), 17)}
    assert len(colors) > 20


def test_screenshot_mode_reports_bad_input(qapp, tmp_path, capsys):
    from app.startup import main

    bad = tmp_path / "bad.gbc.json"
    bad.write_text("[]")
    assert main([str(bad), "--screenshot", str(tmp_path / "x.png")]) == 2
    assert "bad.gbc.json" in capsys.readouterr().err
    canvas = tmp_path / "grad.gbc.json"
    save_canvas(grad_canvas(), canvas)
    assert main([str(canvas), "--select", "nope", "--screenshot", str(tmp_path / "y.png")]) == 2
    assert "no block 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_screenshot_from_a_fresh_process_offscreen(tmp_path):
    canvas = tmp_path / "grad.gbc.json"
    save_canvas(grad_canvas(), canvas)
    out = tmp_path / "p.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    code = ("import sys; from app.startup import main; "
            "sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, str(canvas), "--run", "--select", "grad",
                           "--screenshot", str(out)], env=env, capture_output=True, text=True, check=False,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 10_000
    assert proc.stderr == ""  # not Qt's "does not support propagateSizeHints()" noise


def test_gradblocks_canvas_opens_the_window_and_runs(qapp, tmp_path, monkeypatch):
    """``gradblocks CANVAS --run --select ID`` (interactive): the event loop is replaced by a
    check of the window it would show."""
    from PySide6 import QtCore, QtWidgets

    from app.main_window import MainWindow
    from app.startup import main

    # settings and the recovery folder go to tmp_path, not $HOME
    config_home = QtCore.QStandardPaths.writableLocation(
        QtCore.QStandardPaths.GenericConfigLocation)
    S = QtCore.QSettings
    for fmt in (S.NativeFormat, S.IniFormat):
        S.setPath(fmt, S.UserScope, str(tmp_path / "config"))
    monkeypatch.setattr("app.startup.default_recovery_dir", lambda: tmp_path / "recovery")
    canvas = tmp_path / "grad.gbc.json"
    save_canvas(grad_canvas(), canvas)
    seen = {}

    def fake_exec(_self=None):
        window = next(w for w in QtWidgets.QApplication.topLevelWidgets()
                      if isinstance(w, MainWindow) and w.isVisible())
        window.wait_for_run()
        seen["title"] = window.windowTitle()
        seen["selected"] = window.adapter.selected_ids()
        seen["ran"] = ("grad", "output") in window.session.outputs
        window.files.recovery.release()
        window.doc.undo_stack.setClean()
        window.quiet = True
        window.close()
        return 0

    monkeypatch.setattr(QtWidgets.QApplication, "exec", fake_exec)
    try:
        assert main([str(canvas), "--run", "--select", "grad"]) == 0
    finally:
        for fmt in (S.NativeFormat, S.IniFormat):
            S.setPath(fmt, S.UserScope, config_home)
    assert (tmp_path / "config" / "GradBlocks" / "GradBlocks.conf").is_file()  # recent files
    assert seen == {"title": "grad — GradBlocks", "selected": ["grad"], "ran": True}
