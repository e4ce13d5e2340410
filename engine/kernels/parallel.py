"""Run a kernel's independent position ranges on all cores.

BLAS parallelizes a product over its output blocks, which does little for the thin products of
a filter gradient (a ``(C, O)`` result summed over tens of thousands of positions) and nothing
for NumPy's elementwise loops. Splitting the positions into one contiguous range per core and
running the ranges in threads (NumPy and BLAS release the GIL) with BLAS held to one thread
each keeps every core busy without oversubscribing them. threadpoolctl is the well-kept way to
set the thread count of the BLAS libraries NumPy and SciPy load.
"""

from __future__ import annotations

import contextvars
import itertools
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from threadpoolctl import ThreadpoolController

from engine.base import cancel

if TYPE_CHECKING:  # concurrent.futures (and the logging it imports) loads on first use
    from concurrent.futures import ThreadPoolExecutor

T = TypeVar("T")

#: Below this many positions per range, threads cost more than they give.
MIN_POSITIONS_PER_RANGE = 2048
#: The same for the compiled depthwise loops, counted in multiply-adds (few channels or taps
#: make a position cheap).
MIN_PRODUCTS_PER_RANGE = 2**20

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_controller: ThreadpoolController | None = None


def workers() -> int:
    """Cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def _resources() -> tuple[ThreadPoolExecutor, ThreadpoolController]:
    global _pool, _controller
    with _lock:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor

            _pool = ThreadPoolExecutor(workers(), thread_name_prefix="gradblocks-kernel")
            _controller = ThreadpoolController()
        return _pool, _controller


def ranges(total: int, min_size: int | None = None) -> list[tuple[int, int]]:
    """Split ``[0, total)`` into one contiguous, nearly equal range per core, each at least
    ``min_size`` (default :data:`MIN_POSITIONS_PER_RANGE`) long."""
    min_size = MIN_POSITIONS_PER_RANGE if min_size is None else min_size
    parts = max(1, min(workers(), total // max(1, min_size)))
    bounds = [total * k // parts for k in range(parts + 1)]
    return [(lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo]


#: Copies smaller than this stay on one core.
MIN_COPY_BYTES = 1 << 20


def copy_ranges(fn: Callable[[int, int], object], images: int, bytes_per_image: int) -> None:
    """Run a batch copy ``fn(lo, hi)`` over images, split over cores when it is large."""
    map_ranges(fn, images, max(1, MIN_COPY_BYTES // max(1, bytes_per_image)))


def map_ranges(
    fn: Callable[[int, int], T], total: int, min_size: int | None = None
) -> list[T]:
    """``[fn(lo, hi) for each range of [0, total)]``, ranges run in parallel threads, each in a
    copy of the caller's context (so NumPy's ``errstate`` and other context variables hold
    there too). The first range runs in the calling thread (its caches hold the operands, and
    a worker's wake-up costs tens of microseconds); the call returns once every range has
    ended, whichever raised."""
    spans = ranges(total, min_size)
    if len(spans) <= 1:
        return [fn(lo, hi) for lo, hi in spans]
    pool, controller = _resources()
    fn = cancel.bound(fn)  # a cancelled run stops in every worker thread too
    with controller.limit(limits=1, user_api="blas"):
        futures = [pool.submit(contextvars.copy_context().run, fn, lo, hi)
                   for lo, hi in spans[1:]]
        try:
            first = contextvars.copy_context().run(fn, *spans[0])
        finally:
            from concurrent.futures import wait

            wait(futures)  # no range still writes once the call returns
        return [first] + [f.result() for f in futures]
