"""What the compiled loops share: numba's flags, the column span of a tap (:func:`span`, and
:func:`inside` for the conv tiles' edges), the finiteness check of rows in cache and the
filter as ``(KH, KW, C*M)`` (the depthwise loops, NHWC and NCHW planes)."""

from __future__ import annotations

import numba
import numpy as np
from numba.extending import overload

from engine.kernels._compiled import cache_key  # noqa: F401 - before any cache=True
from engine.kernels._compiled.simd_runs import finite_run
from engine.kernels.buffers import readonly
from engine.shapes.conv import ConvGeometry

#: ``contract``: ``a*b + c`` may be one fused multiply-add (one rounding instead of two; sums
#: keep their order, NaN/Inf rules stay IEEE). No other fast-math flag.
JIT = {"nopython": True, "nogil": True, "cache": True, "fastmath": {"contract"}}


@numba.njit(inline="always")
def span(count, step, offset, size):  # pragma: no cover - compiled
    """``[lo, hi)``: the ``q < count`` with ``0 <= q*step + offset < size``."""
    lo = 0 if offset >= 0 else (step - 1 - offset) // step
    last = size - 1 - offset
    hi = min(count, last // step + 1) if last >= 0 else 0
    return lo, max(lo, hi)


@numba.njit(nogil=True, cache=True)
def inside(off, stride, size, count):  # pragma: no cover - compiled
    """Output indices ``[lo, hi)`` (within ``[0, count)``, ``lo <= count``) whose input index
    ``k*stride + off`` is in ``[0, size)``: :func:`span` with ``lo`` clamped to ``count``, so
    ``[0, lo)`` and ``[hi, count)`` are the indices outside (the conv tiles' edges)."""
    lo = min(count, (-off + stride - 1) // stride) if off < 0 else 0
    hi = min(count, (size - 1 - off) // stride + 1) if size - 1 - off >= 0 else 0
    return lo, max(lo, hi)


@numba.njit(inline="always")
def inside_all(count, step, offset, dc, taps, size):  # pragma: no cover - compiled
    """``[lo, hi)`` where every tap ``offset + j*dc`` (``j < taps``) reads inside."""
    lo, hi = span(count, step, offset, size)
    for j in range(1, taps):
        la, ha = span(count, step, offset + j * dc, size)
        lo, hi = max(lo, la), min(hi, ha)
    return lo, max(lo, hi)


def finite_rows(rows):  # pragma: no cover - compiled (the overload below)
    """True when no element of the 2-D ``rows`` is NaN or ±Inf (``v - v`` is 0 just then):
    C-contiguous rows in vectors (:func:`~engine.kernels._compiled.simd_runs.finite_run`),
    others value by value."""
    return bool(np.isfinite(rows).all())


@overload(finite_rows, jit_options={"nogil": True})
def _finite_rows(rows):
    if getattr(rows, "layout", None) == "C":
        def contiguous(rows):  # pragma: no cover - compiled
            flat = rows.reshape(rows.size)
            return finite_run(flat, np.int64(0), np.int64(flat.size))
        return contiguous

    def strided(rows):  # pragma: no cover - compiled
        ok = True
        for q in range(rows.shape[0]):
            o = rows[q]
            for k in range(rows.shape[1]):
                v = o[k]
                ok &= (v - v) == 0
        return ok
    return strided


def filter_taps(g: ConvGeometry, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """The filter ``(KH, KW, C, M)`` as read-only ``(KH, KW, C*M)`` in ``ctype``."""
    return readonly(np.ascontiguousarray(w, ctype).reshape(g.filter_rows, g.filter_cols, -1))
