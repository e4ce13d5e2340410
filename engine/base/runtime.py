"""Process settings the kernels depend on for speed, applied once when ``engine`` is imported.

- OpenBLAS's idle threads spin for a while after each threaded call and then steal the cores
  that our per-range BLAS calls need (:mod:`engine.kernels.parallel`); ``OPENBLAS_THREAD_TIMEOUT=4``
  makes them sleep at once. It only counts if set before NumPy loads OpenBLAS; a user's own
  setting wins.
- glibc serves large blocks with fresh ``mmap`` pages, so every kernel call pays page faults on
  its temporaries (tens of MB). Raising the mmap and trim thresholds lets freed temporaries be
  reused by the next call (:data:`MMAP_BYTES`, :data:`TRIM_BYTES`). Cost: up to :data:`TRIM_BYTES` of freed memory may stay with the process for reuse.
"""

from __future__ import annotations

import ctypes
import os
import sys

MMAP_BYTES = 128 * 2**20
TRIM_BYTES = 256 * 2**20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def _tune_malloc() -> bool:
    """Raise glibc's mmap/trim thresholds; False where there is no glibc ``mallopt``."""
    if not sys.platform.startswith("linux"):
        return False
    try:  # the process's own symbols include libc's (ctypes.util.find_library runs ldconfig)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES) and mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES))


def configure() -> None:
    """Apply both settings (idempotent)."""
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    _tune_malloc()
