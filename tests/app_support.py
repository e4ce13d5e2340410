"""Helpers shared by the GUI tests (tests/test_app_*.py; fixtures `window`, `grad_window` in conftest).

``make_window`` builds a MainWindow with settings and recovery files under tmp_path; ``mouse``
drives real mouse gestures on the canvas; ``no_dialogs`` makes any unexpected modal dialog fail
the test instead of blocking it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("NodeGraphQt")

from PySide6 import QtCore, QtGui, QtWidgets

import app  # noqa: F401  (PySide6 refcount workaround before any Qt call)
from engine.graph.canvas import Canvas


def grad_canvas() -> Canvas:
    """x [1,5,5,2], filter_sizes [3,3,2,2], dy [1,5,5,2] -> Conv2DBackpropFilter (SAME, 1)."""
    c = Canvas()
    c.add_node("Tensor", pos=(0, 0), id="x",
               attrs={"shape": [1, 5, 5, 2], "fill": "random_normal", "seed": 1})
    c.add_node("IntVector", pos=(0, 130), id="fs", attrs={"values": [3, 3, 2, 2]})
    c.add_node("Tensor", pos=(0, 260), id="dy",
               attrs={"shape": [1, 5, 5, 2], "fill": "random_normal", "seed": 2})
    c.add_node("Conv2DBackpropFilter", pos=(360, 100), id="grad")
    c.connect(("x", "output"), ("grad", "input"))
    c.connect(("fs", "output"), ("grad", "filter_sizes"))
    c.connect(("dy", "output"), ("grad", "out_backprop"))
    return c


def make_window(qtbot, tmp_path: Path, canvas: Canvas | None = None, **kwargs):
    from app.main_window import MainWindow

    settings = QtCore.QSettings(str(tmp_path / "settings.ini"), QtCore.QSettings.IniFormat)
    # runs start only when a test asks (auto_run=True for the tests of auto-run itself)
    settings.setValue("run/auto_run", kwargs.pop("auto_run", False))
    kwargs.setdefault("recovery_dir", tmp_path / "recovery")
    kwargs.setdefault("autosave", False)
    window = MainWindow(settings=settings, **kwargs)
    window.resize(1300, 850)
    window.show()
    qtbot.waitExposed(window)
    if canvas is not None:
        window.doc.load(canvas, None)
        window.adapter.fit_to_view()
    return window


def close_window(window) -> None:
    """Close without the unsaved-changes prompt."""
    window.doc.undo_stack.setClean()
    window.doc._unsaved_origin = False
    if window.session.runner.running:
        window.session.runner.cancel()
        window.session.runner.wait()
    window.close()
    window.deleteLater()


def no_dialogs(monkeypatch) -> list:
    """Make modal dialogs fail the test; returns the list of attempted (kind, text)."""
    calls: list = []

    def fail(kind):
        def _f(*args, **_kw):
            text = " | ".join(str(a) for a in args[1:3])
            calls.append((kind, text))
            raise AssertionError(f"unexpected {kind} dialog: {text}")
        return staticmethod(_f)

    box = QtWidgets.QMessageBox
    for kind in ("question", "critical", "warning", "information"):
        monkeypatch.setattr(box, kind, fail(kind))
    monkeypatch.setattr(box, "exec", lambda self: fail("message box")(self, self.text()))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", fail("open file"))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName", fail("save file"))
    return calls


def focus_canvas(qtbot, window) -> None:
    """Make the window active and give the canvas keyboard focus (for shortcuts)."""
    window.activateWindow()
    window.raise_()
    qtbot.waitUntil(lambda: QtWidgets.QApplication.activeWindow() is window)
    window.adapter.viewer.setFocus()
    qtbot.waitUntil(window.adapter.viewer.hasFocus)


def view_point(window, item) -> QtCore.QPoint:
    """Viewport coordinates of the centre of a graphics item."""
    v = window.adapter.viewer
    return v.mapFromScene(item.sceneBoundingRect().center())


def mouse(window, kind: QtCore.QEvent.Type, pos: QtCore.QPoint, held: bool = True) -> None:
    """Send one mouse event to the canvas viewport (the left button held while moving)."""
    vp = window.adapter.viewer.viewport()
    left = QtCore.Qt.LeftButton
    button = QtCore.Qt.NoButton if kind == QtCore.QEvent.MouseMove else left
    buttons = left if (held and kind != QtCore.QEvent.MouseButtonRelease) else QtCore.Qt.NoButton
    ev = QtGui.QMouseEvent(kind, QtCore.QPointF(pos), QtCore.QPointF(vp.mapToGlobal(pos)),
                           button, buttons, QtCore.Qt.NoModifier)
    QtWidgets.QApplication.sendEvent(vp, ev)


def drag(window, start: QtCore.QPoint, end: QtCore.QPoint, steps: int = 8) -> None:
    """Press at ``start``, move in steps to ``end``, release: a real drag on the canvas."""
    mouse(window, QtCore.QEvent.MouseButtonPress, start)
    for i in range(1, steps + 1):
        mouse(window, QtCore.QEvent.MouseMove, start + (end - start) * (i / steps))
    mouse(window, QtCore.QEvent.MouseButtonRelease, end)
    QtWidgets.QApplication.processEvents()


def drop_mime(window, mime: QtCore.QMimeData, pos: QtCore.QPoint) -> None:
    """Deliver a drop of ``mime`` at viewport position ``pos`` (what a finished drag does)."""
    drop_on(window.adapter.viewer.viewport(), mime, pos)


def drop_on(widget: QtWidgets.QWidget, mime: QtCore.QMimeData, pos: QtCore.QPoint) -> None:
    """Drag enter, move and drop ``mime`` at ``pos`` of ``widget`` (Qt delivers a drop only to
    the widget a drag entered)."""
    for kind in (QtCore.QEvent.DragEnter, QtCore.QEvent.DragMove):
        cls = QtGui.QDragEnterEvent if kind == QtCore.QEvent.DragEnter else QtGui.QDragMoveEvent
        ev = cls(pos, QtCore.Qt.CopyAction, mime, QtCore.Qt.LeftButton, QtCore.Qt.NoModifier)
        ev.acceptProposedAction()
        QtWidgets.QApplication.sendEvent(widget, ev)
    ev = QtGui.QDropEvent(QtCore.QPointF(pos), QtCore.Qt.CopyAction, mime,
                          QtCore.Qt.LeftButton, QtCore.Qt.NoModifier)
    QtWidgets.QApplication.sendEvent(widget, ev)
    QtWidgets.QApplication.processEvents()


def url_mime(*paths: Path) -> QtCore.QMimeData:
    mime = QtCore.QMimeData()
    mime.setUrls([QtCore.QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def wait_run(qtbot, window, timeout: int = 60_000) -> None:
    """Start a run and wait until it has finished."""
    with qtbot.waitSignal(window.session.results_changed, timeout=timeout):
        assert window.run()
    qtbot.waitUntil(lambda: not window.session.runner.running, timeout=timeout)


def choose_button(monkeypatch, label: str) -> list[str]:
    """Answer every QMessageBox run by ``exec`` by clicking its button ``label``; returns the
    texts of the boxes shown."""
    shown: list[str] = []

    def exec_(box) -> int:
        shown.append(box.text())
        labels = [b.text() for b in box.buttons()]
        assert label in labels, f"no button {label!r} in {labels}: {box.text()}"
        next(b for b in box.buttons() if b.text() == label).click()
        return 0

    monkeypatch.setattr(QtWidgets.QMessageBox, "exec", exec_)
    return shown
