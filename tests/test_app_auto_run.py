"""Run > Auto-run (on by default, persisted): after an edit, what changed re-runs by itself when
its last run took under 200 ms; otherwise (or with the toggle off) F5 is needed."""

from __future__ import annotations

import numpy as np
import pytest

from tests.app_support import close_window, grad_canvas, make_window, no_dialogs
from tests.test_app_stale import press_run

QtCore = pytest.importorskip("PySide6.QtCore")

from app.session import AUTO_RUN_DELAY_MS


@pytest.fixture
def auto_window(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, grad_canvas(), auto_run=True)
    yield w
    close_window(w)


def type_seed(qtbot, w, node_id: str, seed: int) -> None:
    w.adapter.select([node_id])
    edit = w.attributes.rows["seed"].editor.edit
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, str(seed))
    qtbot.keyClick(edit, QtCore.Qt.Key_Return)
    assert w.doc.canvas.nodes[node_id].attrs["seed"] == seed


def test_auto_run_is_on_by_default_and_persisted(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    settings = QtCore.QSettings(str(tmp_path / "fresh.ini"), QtCore.QSettings.IniFormat)
    from app.main_window import MainWindow

    w = MainWindow(settings=settings, recovery_dir=None, autosave=False)
    assert w.act_auto_run.isCheckable() and w.act_auto_run.isChecked() and w.session.auto_run
    run_menu = next(a.menu() for a in w.menuBar().actions() if a.text() == "&Run")
    assert w.act_auto_run in run_menu.actions()
    w.act_auto_run.trigger()  # the user unticks Run > Auto-run
    assert not w.session.auto_run
    w.close()
    again = MainWindow(settings=settings, recovery_dir=None, autosave=False)
    assert not again.act_auto_run.isChecked() and not again.session.auto_run
    again.close()


def test_an_edit_reruns_by_itself_when_the_blocks_are_fast(qtbot, auto_window):
    w = auto_window
    press_run(qtbot, w)
    first = w.session.outputs[("grad", "output")].copy()
    # fast blocks, whatever this machine's speed (a loaded one ran grad in over 0.2 s)
    w.session.last_seconds.update({"dy": 0.001, "grad": 0.001})
    with qtbot.waitSignal(w.session.runner.finished, timeout=10_000) as blocker:
        type_seed(qtbot, w, "dy", 9)  # no Run pressed
    qtbot.waitUntil(lambda: not w.session.runner.running, timeout=10_000)
    assert blocker.args[0].computed == {"dy", "grad"}
    assert w.session.stale_nodes() == {}
    assert not np.array_equal(w.session.outputs[("grad", "output")], first)
    assert any("auto-run started" in m for m in w.log.messages("info"))


def test_no_auto_run_when_toggled_off_or_when_the_blocks_were_slow(qtbot, auto_window):
    w = auto_window
    press_run(qtbot, w)
    started = []
    w.session.runner.started.connect(started.append)
    w.act_auto_run.trigger()  # off
    type_seed(qtbot, w, "dy", 9)
    qtbot.wait(AUTO_RUN_DELAY_MS * 3)  # past the debounce: nothing may start
    assert started == [] and set(w.session.stale_nodes()) == {"dy", "grad"}
    w.act_auto_run.trigger()  # on again, but grad last took 0.5 s: F5 is needed
    w.session.last_seconds["grad"] = 0.5
    type_seed(qtbot, w, "dy", 8)
    assert not w.session.auto_run_due()
    qtbot.wait(AUTO_RUN_DELAY_MS * 3)
    assert started == [] and set(w.session.stale_nodes()) == {"dy", "grad"}
    assert press_run(qtbot, w).computed == {"dy", "grad"}


def test_no_auto_run_after_an_edit_that_makes_a_fast_block_far_bigger(qtbot, auto_window):
    """Seen under X11: typing a shape 40000x bigger into a block that last ran in 0.2 ms
    started a multi-second run by itself (its last time, not its new size, was judged). The
    last time now scales with the outputs' element count: F5 is needed."""
    w = auto_window
    press_run(qtbot, w)
    started = []
    w.session.runner.started.connect(started.append)
    w.adapter.select(["x"])
    edit = w.attributes.rows["shape"].editor.edit
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, "40000, 5, 5, 2")
    qtbot.keyClick(edit, QtCore.Qt.Key_Return)
    assert w.doc.canvas.nodes["x"].attrs["shape"] == [40000, 5, 5, 2]
    assert not w.session.auto_run_due()
    qtbot.wait(AUTO_RUN_DELAY_MS * 3)
    assert started == []
    type_seed(qtbot, w, "dy", 9)  # an edit that changes no size still re-runs dy by itself
    assert w.session.auto_run_due() is False  # x (now big, never run) must run first: F5
