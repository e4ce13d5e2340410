"""Run > Cross-check in the app: the table in the log, disagreeing blocks as error entries that
select their block when clicked; frameworks that are not installed listed as skipped."""

from __future__ import annotations

import pytest

QtCore = pytest.importorskip("PySide6.QtCore")

from PySide6 import QtTest

from app import crosscheck_action
from app.log_panel import LEVEL_ROLE
from engine.export import crosscheck, frameworks
from tests.app_support import focus_canvas
from tests.test_crosscheck import _fake


def _menu_action(window, menu: str, text: str):
    bar = window.menuBar()
    m = next(a.menu() for a in bar.actions() if a.text().replace("&", "") == menu)
    return next(a for a in m.actions() if a.text().replace("&", "") == text)


def test_cross_check_logs_the_table_and_marks_the_disagreeing_block(qtbot, grad_window,
                                                                    monkeypatch):
    monkeypatch.setitem(frameworks.TARGETS, "fakefw", _fake("fakefw", "numpy"))
    monkeypatch.setattr(crosscheck_action, "FRAMEWORKS", ("fakefw",))
    monkeypatch.setattr(crosscheck, "FRAMEWORKS", ("fakefw",))
    w = grad_window
    assert _menu_action(w, "Run", "Cross-check with Frameworks") is w.crosscheck.action
    w.log.list.clear()
    focus_canvas(qtbot, w)
    with qtbot.waitSignal(w.crosscheck.finished, timeout=120_000) as signal:
        QtTest.QTest.keyClick(w.adapter.viewer, QtCore.Qt.Key_K,
                              QtCore.Qt.ControlModifier | QtCore.Qt.ShiftModifier)
    report = signal.args[0]
    assert report.frameworks == {"fakefw": "ran"}
    items = [w.log.list.item(i) for i in range(w.log.list.count())]
    by_node = {item.data(QtCore.Qt.UserRole): item for item in items
               if item.data(QtCore.Qt.UserRole)}
    assert set(by_node) == {"x", "fs", "dy", "grad"}  # one table row per output
    assert "NO" in by_node["grad"].text().split()  # the fake's zero gradient disagrees
    assert "yes" in by_node["x"].text().split()  # sources are exact
    errors = w.log.messages("error")
    assert by_node["grad"].data(LEVEL_ROLE) == "error"
    assert by_node["x"].data(LEVEL_ROLE) == "info"
    assert "cross-check: 1 of 4 row(s) disagree" in errors
    assert "fakefw: ran" in w.log.messages("info")
    assert any(m.startswith("output ") and "framework" in m for m in w.log.messages("info"))
    # clicking the disagreeing row selects its block
    w.adapter.select([])
    rect = w.log.list.visualItemRect(by_node["grad"])
    QtTest.QTest.mouseClick(w.log.list.viewport(), QtCore.Qt.LeftButton, pos=rect.center())
    assert w.adapter.selected_ids() == ["grad"]
    assert w.crosscheck.action.isEnabled()


def test_frameworks_that_are_not_installed_are_listed_as_skipped(qtbot, grad_window,
                                                                 monkeypatch):
    monkeypatch.setitem(frameworks.TARGETS, "absentfw",
                        _fake("absentfw", "gradblocks_no_such_framework"))
    monkeypatch.setattr(crosscheck_action, "FRAMEWORKS", ("absentfw",))
    w = grad_window
    with qtbot.waitSignal(w.crosscheck.finished, timeout=120_000):
        w.crosscheck.action.trigger()
    info = w.log.messages("info")
    assert any(m.startswith("absentfw: skipped: gradblocks_no_such_framework") for m in info)
    assert w.log.messages("warning")[-1].startswith(  # not "all 0 row(s) agree" (issue 24)
        "cross-check: nothing was compared: absentfw is not installed (skipped)")
