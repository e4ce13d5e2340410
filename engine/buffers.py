"""Zeroed work and result buffers that do not fault in fresh pages on every call.

``np.zeros`` of a large array asks the allocator for zeroed memory (``calloc``), which maps new
zero pages from the operating system; the kernel's first write to each page then faults.
``np.empty`` reuses the blocks earlier calls freed, and one fill zeroes them in cache-friendly
order. Measured on a 6.4 MiB array: zeros + one write pass 1.13 ms, empty + fill + one write
pass 0.23 ms (the steady state of repeated kernel calls).
"""

from __future__ import annotations

import numpy as np


def zeroed(shape: tuple[int, ...] | int, dtype: np.dtype | type) -> np.ndarray:
    """A C-contiguous array of ``shape`` and ``dtype`` filled with zeros."""
    out = np.empty(shape, dtype)
    out.fill(0)
    return out
