"""What the compiled depthwise loops share: numba's flags and the column span of a tap."""

from __future__ import annotations

import numba

from engine.kernels._compiled import cache_key  # noqa: F401 - before any cache=True

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
