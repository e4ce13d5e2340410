"""Python's cyclic garbage collection in the GUI thread only.

The interpreter runs a collection in whichever thread happens to allocate past its threshold.
When that is a background thread (numba compiling the kernels at start-up, a kernel worker, a
summary thread) and the garbage holds Qt objects (the wrappers of a closed window's menus), the
Qt destructors run in that thread: they take Qt's connection lock and then wait for the GIL,
while the GUI thread, connecting a signal, holds the GIL and waits for that lock. The app hangs
(seen in CI: a widget's ``connect`` in the GUI thread against a ``QMenu`` destructor in the
compile thread).

:func:`install` turns automatic collection off and collects from a timer in the GUI thread,
by the interpreter's own thresholds, so cyclic garbage is still freed, only always there.
"""

from __future__ import annotations

import gc

from PySide6 import QtCore

#: How often the GUI thread checks whether a collection is due (ms).
INTERVAL_MS = 250

_timer: QtCore.QTimer | None = None


def collect_due() -> int:
    """Run the collection the interpreter would have run by now (the oldest generation whose
    count passed its threshold), in this thread; returns the generation, or -1 for none."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    due = -1
    for generation in range(3):
        if counts[generation] > thresholds[generation]:
            due = generation
        else:
            break
    if due >= 0:
        gc.collect(due)
    return due


def install() -> None:
    """Collect only in the GUI thread from now on (idempotent; needs a QApplication)."""
    global _timer
    app = QtCore.QCoreApplication.instance()
    if _timer is not None or app is None:
        return
    gc.disable()
    _timer = QtCore.QTimer(app)
    _timer.setObjectName("gradblocks-gc")
    _timer.timeout.connect(collect_due)
    _timer.start(INTERVAL_MS)


def installed() -> bool:
    return _timer is not None and not gc.isenabled()
