"""Work around a reference-count bug of PySide6 6.12 on Python 3.11.

On Python 3.11, every PySide6 6.12 method that returns nothing (``QPainter.drawPath``,
``QGraphicsItem.setPos``, ``QWidget.update``, ...) returns ``None`` without taking a reference to
it, so each call lowers ``None``'s reference count by one. ``None`` starts near 5,000 references,
so after a few thousand calls (one repaint of a node graph) Python aborts with
``Fatal Python error: none_dealloc``. From Python 3.12 on ``None`` is immortal (PEP 683) and the
bug is harmless; for 3.11 we give ``None`` a reference count so large that it cannot reach zero,
which is what 3.12 does by design. ``None`` is never freed in either case.
"""

from __future__ import annotations

import ctypes
import sys

_HEADROOM = 1 << 60


def keep_none_alive() -> None:
    """Raise ``None``'s reference count far out of reach of the leak (no-op on Python >= 3.12)."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return
    refcnt = ctypes.c_ssize_t.from_address(id(None))
    if refcnt.value < _HEADROOM:
        refcnt.value += _HEADROOM
