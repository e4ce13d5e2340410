"""app.gc_guard: with a window open, Python's cyclic garbage collection runs in the GUI thread
only, so Qt objects in garbage cycles are never destroyed in a background thread (a compile or
kernel thread collecting a closed window's menus deadlocked against the GUI thread in CI)."""

import gc
import threading

from PySide6.QtCore import SIGNAL

from app import gc_guard


def test_a_background_thread_never_collects_garbage_cycles(window):
    """A cycle dropped while a background thread allocates far past the thresholds is not
    collected by that thread (where a Qt object in it would be destroyed in the wrong
    thread), and the GUI thread's collection frees it."""
    assert gc_guard.installed()
    assert gc_guard._timer.isActive() and gc_guard._timer.receivers(SIGNAL("timeout()")) == 1
    collected_in: list[int] = []

    class Probe:
        def __del__(self):
            collected_in.append(threading.get_ident())

    probe = Probe()
    probe.me = probe  # only the cyclic collector frees it
    del probe
    kept: list = []

    def churn():  # far past the youngest generation's threshold, and kept: a collection is due
        kept.extend([] for _ in range(5 * gc.get_threshold()[0]))

    thread = threading.Thread(target=churn)
    thread.start()
    thread.join()
    assert collected_in == []
    assert gc_guard.collect_due() >= 0  # what the timer runs in the GUI thread
    assert collected_in == [threading.get_ident()]
    kept.clear()


def test_collect_due_runs_the_generation_past_its_threshold(window):
    assert not gc.isenabled()
    gc.collect()
    assert gc_guard.collect_due() == -1  # nothing due right after a collection

    class Node:
        pass

    nodes = [Node() for _ in range(gc.get_threshold()[0] + 10)]
    for a in nodes:
        a.me = a
    del nodes, a
    assert gc_guard.collect_due() >= 0
