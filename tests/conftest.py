"""Test setup: Qt runs offscreen (no screen needed) and hypothesis stays quick on 2 cores.

``HYPOTHESIS_PROFILE=thorough python -m pytest`` runs the property tests with many more examples.
"""

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from hypothesis import HealthCheck, settings

import app  # noqa: F401  (before any Qt import: guards None/True/False refcounts, PySide6 6.12)

_quiet = [HealthCheck.too_slow]
settings.register_profile("gradblocks", max_examples=40, deadline=None,
                          suppress_health_check=_quiet)
settings.register_profile("thorough", max_examples=600, deadline=None,
                          suppress_health_check=_quiet)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "gradblocks"))


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    """A main window on an empty canvas (settings and recovery under tmp_path, no dialogs)."""
    from tests.app_support import close_window, make_window, no_dialogs

    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path)
    yield w
    close_window(w)


@pytest.fixture
def grad_window(qtbot, tmp_path, monkeypatch):
    """A main window on the small Conv2DBackpropFilter canvas of tests.app_support."""
    from tests.app_support import close_window, grad_canvas, make_window, no_dialogs

    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, grad_canvas())
    yield w
    close_window(w)


def pytest_runtest_teardown(item):
    """Once a window has turned automatic garbage collection over to the GUI thread's timer
    (app.gc_guard), collect what is due after each test too: tests that never spin the event
    loop would otherwise never collect."""
    import sys

    guard = sys.modules.get("app.gc_guard")
    if guard is not None and guard.installed():
        guard.collect_due()


@pytest.fixture(autouse=True)
def _library_kernel_policy():
    """Each test starts with the compile note and warm-up thread it found: an in-process
    ``engine.cli.main`` (announce_compiles) or the app's warm-up sets them, as process state
    (engine.kernels.accel); they change no kernel path, but the note would print in later
    tests."""
    from engine.kernels import accel

    saved = accel._note_wanted, accel._note_stream, accel._warm_thread
    yield
    accel._note_wanted, accel._note_stream, accel._warm_thread = saved
