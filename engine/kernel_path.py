"""Which compute path the last kernel call of this thread took (for benchmarks and reports).

Each dispatch in :mod:`engine.kernels` records a name such as ``"numpy gather"`` (engine, then
strategy); compiled paths record their own (``"numba ..."``, ``"winograd ..."``). Thread-local,
so concurrent runs do not mix their answers.
"""

from __future__ import annotations

import threading

_local = threading.local()


def record(name: str) -> None:
    """Note that this thread's current kernel call computes through ``name``."""
    _local.name = name


def last() -> str | None:
    """The path recorded by this thread's last kernel call (None before any)."""
    return getattr(_local, "name", None)
