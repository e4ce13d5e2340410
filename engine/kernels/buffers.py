"""Zeroed work and result buffers that do not fault in fresh pages on every call,
contiguous operand copies made on all cores, and read-only operand views for the compiled
loops.

``np.zeros`` of a large array asks the allocator for zeroed memory (``calloc``), which maps new
zero pages from the operating system; the kernel's first write to each page then faults.
``np.empty`` reuses the blocks earlier calls freed, and one fill zeroes them in cache-friendly
order.
"""

from __future__ import annotations

import numpy as np

from engine.kernels.parallel import copy_ranges


def zeroed(shape: tuple[int, ...] | int, dtype: np.dtype | type) -> np.ndarray:
    """A C-contiguous array of ``shape`` and ``dtype`` filled with zeros."""
    out = np.empty(shape, dtype)
    out.fill(0)
    return out


def contiguous(a: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    """``a`` C-contiguous in ``dtype``: itself when it is, else a copy with its images (first
    axis) split over cores. A layout change (NCHW to NHWC) or a half-type conversion runs at
    one core's speed otherwise."""
    dtype = np.dtype(dtype)
    if a.dtype == dtype and a.flags.c_contiguous:
        return a
    out = np.empty(a.shape, dtype)
    if a.ndim == 0 or a.shape[0] == 0:
        out[...] = a
        return out

    def part(lo: int, hi: int) -> None:
        out[lo:hi] = a[lo:hi]

    copy_ranges(part, a.shape[0], out[:1].nbytes)
    return out


def readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view: the compiled loops always get their operands so, whatever the
    caller's flags, and so run the one version their warm-up compiled (numba types a
    read-only array apart and would compile again at the first call)."""
    v = a.view()
    v.flags.writeable = False
    return v
