"""Closing the window (or File > Quit) during a long run cancels it inside the running kernel
and closes cleanly: the worker thread has finished, never 'QThread: Destroyed while thread is
still running' (which aborted the process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.app_support import make_window, no_dialogs

QtCore = pytest.importorskip("PySide6.QtCore")

from engine.kernels import compute
from tests.test_executor_cache import big_grad_canvas

CHUNKS = 48  # one image per chunk


def slow_chunks(monkeypatch, started: threading.Event, seen: list) -> None:
    """Each batch chunk of the filter gradient takes 0.2 s (48 chunks: ~10 s uncancelled)."""
    real = compute._backprop_filter_chunk

    def chunk(*args):
        seen.append(1)
        started.set()
        time.sleep(0.2)
        return real(*args)

    monkeypatch.setattr(compute, "_backprop_filter_chunk", chunk)
    monkeypatch.setattr(compute, "CHUNK_BYTES", 1)
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numpy")  # these chunks are the NumPy path's


@pytest.mark.parametrize("how", ["close", "quit"])
def test_closing_during_a_long_kernel_cancels_it_and_closes(qtbot, tmp_path, monkeypatch, how):
    no_dialogs(monkeypatch)
    started, seen = threading.Event(), []
    slow_chunks(monkeypatch, started, seen)
    w = make_window(qtbot, tmp_path, big_grad_canvas(batch=CHUNKS))
    w.doc.undo_stack.setClean()
    w.doc._unsaved_origin = False
    assert w.run()
    thread = w.session.runner._thread
    qtbot.waitUntil(started.is_set, timeout=60_000)  # the conv kernel is running
    if how == "close":
        w.close()
    else:
        w.act_quit.trigger()  # File > Quit
    assert not w.isVisible()
    assert thread.isFinished()  # the worker stopped inside the kernel, not after it
    assert len(seen) < CHUNKS // 2
    w.deleteLater()


SCRIPT = textwrap.dedent("""
    import os, sys, threading, time
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    os.environ["GRADBLOCKS_KERNELS"] = "numpy"  # the slowed chunks are the NumPy path's
    sys.path.insert(0, {root!r})
    import app
    from PySide6 import QtCore, QtWidgets
    from engine.kernels import compute as conv_compute
    from tests.test_executor_cache import big_grad_canvas
    from app.main_window import MainWindow

    seen = []
    real = conv_compute._backprop_filter_chunk
    def chunk(*args):
        seen.append(1)
        time.sleep(0.2)
        return real(*args)
    conv_compute._backprop_filter_chunk = chunk
    conv_compute.CHUNK_BYTES = 1

    qapp = QtWidgets.QApplication([])
    settings = QtCore.QSettings({ini!r}, QtCore.QSettings.IniFormat)
    w = MainWindow(settings=settings, recovery_dir=None, autosave=False,
                   restore_layout=False)
    w.show()
    w.doc.load(big_grad_canvas(batch={chunks}), None)
    w.run()
    def close_when_running():
        if seen:
            w.close()
        else:
            QtCore.QTimer.singleShot(20, close_when_running)
    QtCore.QTimer.singleShot(20, close_when_running)
    code = qapp.exec()
    print("chunks", len(seen), flush=True)
    sys.exit(code)
""")


def test_the_app_process_exits_cleanly_when_closed_during_a_run(tmp_path):
    root = str(Path(__file__).resolve().parents[1])
    script = tmp_path / "close_during_run.py"
    script.write_text(SCRIPT.format(root=root, ini=str(tmp_path / "s.ini"), chunks=CHUNKS))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "QThread: Destroyed" not in proc.stderr
    chunks = int(proc.stdout.split("chunks")[1])
    assert 1 <= chunks < CHUNKS // 2
