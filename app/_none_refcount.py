"""Work around reference-count bugs of PySide6 6.12 on Python 3.11.

On Python 3.11, every PySide6 6.12 method that returns nothing (``QPainter.drawPath``,
``QGraphicsItem.setPos``, ``QWidget.update``, ...) returns ``None`` without taking a reference to
it, so each call lowers ``None``'s reference count by one; some rendering paths (seen with
pyqtgraph) do the same to ``True``/``False``. ``None`` starts near 5,000 references and the
booleans near 1,000, so after a few thousand calls (one repaint of a node graph) Python aborts
with ``Fatal Python error: none_dealloc`` (or ``bool_dealloc``). From Python 3.12 on these objects
are immortal (PEP 683) and the bug is harmless; for 3.11 we give them a reference count so large
that it cannot reach zero, which is what 3.12 does by design. They are never freed either way.
"""

from __future__ import annotations

import ctypes
import sys

_HEADROOM = 1 << 60


def keep_none_alive() -> None:
    """Raise the reference counts of None, True and False far out of reach of the leaks
    (no-op on Python >= 3.12, where they are immortal)."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return
    for singleton in (None, True, False):
        refcnt = ctypes.c_ssize_t.from_address(id(singleton))
        if refcnt.value < _HEADROOM:
            refcnt.value += _HEADROOM
