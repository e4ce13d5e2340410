"""A big result's statistics and histogram are computed off the GUI thread: the viewer says so,
then shows exactly what it shows for a small tensor computed on the spot."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tests.test_app_stale import press_run

QtCore = pytest.importorskip("PySide6.QtCore")

from app.viewer import dock, tensor_viewer


def test_a_big_result_is_summarized_on_a_worker_thread_then_shown(qtbot, grad_window,
                                                                   monkeypatch):
    w = grad_window
    press_run(qtbot, w)
    w.adapter.select(["x"])
    direct = (w.viewer_dock.viewer.stats_label.text(),
              w.viewer_dock.viewer.hist_counts.copy(), w.viewer_dock.viewer.hist_edges.copy())
    w.adapter.select([])
    monkeypatch.setattr(dock, "BACKGROUND_ELEMENTS", 10)  # x (50 values) counts as big
    threads = []
    real = tensor_viewer.summarize
    monkeypatch.setattr(dock, "summarize",
                        lambda a: threads.append(threading.current_thread()) or real(a))
    w.adapter.select(["x"])
    assert "computing the statistics of 50 values" in w.viewer_dock.caption.text()
    assert w.viewer_dock.viewer.array is None
    x = w.session.outputs[("x", "output")]
    qtbot.waitUntil(lambda: w.viewer_dock.viewer.array is x, timeout=10_000)
    assert threads and threads[0] is not threading.main_thread()
    viewer = w.viewer_dock.viewer
    assert viewer.stats_label.text() == direct[0]
    np.testing.assert_array_equal(viewer.hist_counts, direct[1])
    np.testing.assert_array_equal(viewer.hist_edges, direct[2])
    assert w.viewer_dock.caption.text() == "x · Tensor · port output"
    w.adapter.select(["fs"])
    w.adapter.select(["x"])  # reselected: the kept summary shows it at once
    assert viewer.array is x and len(threads) == 1


def test_comparing_two_big_results_computes_their_numbers_on_a_worker_thread(qtbot, grad_window,
                                                                             monkeypatch):
    """Measured: selecting two 16M-element results to compare froze the window 2.4 s (their
    statistics and differences on the GUI thread). Now the viewer says it is computing, then
    shows exactly what it shows for small tensors."""
    w = grad_window
    press_run(qtbot, w)
    w.adapter.select(["x", "dy"])  # small: computed on the spot
    viewer = w.viewer_dock.viewer
    direct = viewer.stats_label.text()
    assert "max abs error" in direct
    w.adapter.select([])
    monkeypatch.setattr(dock, "BACKGROUND_ELEMENTS", 10)  # x, dy (50 values) are big
    threads = []
    real = tensor_viewer.summarize_pair
    monkeypatch.setattr(dock, "summarize_pair",
                        lambda a, b: threads.append(threading.current_thread()) or real(a, b))
    w.adapter.select(["x", "dy"])
    assert "computing the comparison of 2 × 50 values" in w.viewer_dock.caption.text()
    assert viewer.array is None
    left = w.session.outputs[("dy", "output")]  # the selection is in id order
    qtbot.waitUntil(lambda: viewer.array is left, timeout=10_000)
    assert threads and threads[0] is not threading.main_thread()
    assert viewer.stats_label.text() == direct
    assert w.viewer_dock.caption.text() == "Comparing dy (left) with x (right)"


QUIT_WHILE_SUMMARIZING = r'''
import os, sys, time
os.environ["QT_QPA_PLATFORM"] = "offscreen"
sys.path.insert(0, sys.argv[1])
import app
from PySide6 import QtCore, QtWidgets
qapp = QtWidgets.QApplication([])
from app.viewer import dock as viewer_dock
from app.main_window import MainWindow
from tests.app_support import grad_canvas
viewer_dock.BACKGROUND_ELEMENTS = 10
viewer_dock.summarize_pair = lambda a, b: time.sleep(600)  # a comparison that takes long
settings = QtCore.QSettings(sys.argv[2], QtCore.QSettings.IniFormat)
settings.setValue("run/auto_run", False)
w = MainWindow(settings=settings, recovery_dir=None, autosave=False)
w.show()
w.doc.load(grad_canvas(), None)
w.run()
w.wait_for_run()
w.adapter.select(["x", "dy"])
assert "computing the comparison" in w.viewer_dock.caption.text()
w.act_quit.trigger()  # File > Quit while the worker computes
print("closed", flush=True)
'''


def test_quitting_while_a_comparison_is_computed_ends_the_process(tmp_path):
    """Measured: quitting with two 33M-element results selected closed the window at once, but
    the process lived 7 s more (exit waited for the summary worker, a ThreadPoolExecutor)."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-c", QUIT_WHILE_SUMMARIZING, str(repo),
                             str(tmp_path / "settings.ini")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=60)  # a hang check (the worker sleeps 600 s)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "closed" in out
