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
import functools
import itertools
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np
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


#: How long a kernel thread keeps its core awake after its range (and the caller after its
#: own) before it blocks, when a spinning wait is installed (:func:`use_spin`).
SPIN_SECONDS = 2e-3

_spin: Callable[[np.ndarray, int, int, int], bool] | None = None
_spin_polls = 0


def use_spin(wait: Callable[[np.ndarray, int, int, int], bool], polls: int) -> None:
    """Install a GIL-free wait ``wait(flags, index, old, polls)``: True once ``flags[index]``
    differs from ``old``, False after ``polls`` polls (:mod:`engine.kernels._compiled.spin`,
    installed by :mod:`engine.kernels.accel` with numba). Without it the threads block at
    once."""
    global _spin, _spin_polls
    _spin, _spin_polls = wait, polls


class _Team:
    """``size`` kernel threads, each given one range at a time through its slot: generation
    ``flags[32*i]`` given, ``flags[32*i + 16]`` done (a cache line and more apart). A thread
    waits for its next range with :func:`use_spin`'s wait for up to :data:`SPIN_SECONDS`, then
    on the condition; the caller waits for the ranges' ends the same way."""

    def __init__(self, size: int) -> None:
        self.flags = np.zeros(32 * size, np.int64)
        self.tasks: list[Callable[[], object] | None] = [None] * size
        self.outcomes: list[tuple[bool, object]] = [(True, None)] * size
        self.cond = threading.Condition()
        self.busy = threading.Lock()  # one map_ranges at a time uses the team
        for i in range(size):
            threading.Thread(target=self._serve, args=(i,), daemon=True,
                             name=f"gradblocks-kernel-team-{i}").start()

    def _wait(self, index: int, old: int) -> None:
        """Until ``flags[index] != old``: polling, then blocked."""
        if _spin is not None and _spin(self.flags, index, old, _spin_polls):
            return
        with self.cond:
            while self.flags[index] == old:
                self.cond.wait()

    def _serve(self, i: int) -> None:
        seen = 0
        while True:
            self._wait(32 * i, seen)
            seen = int(self.flags[32 * i])
            task = self.tasks[i]
            self.tasks[i] = None
            try:
                outcome: tuple[bool, object] = (True, task() if task is not None else None)
            except BaseException as err:  # noqa: BLE001 - handed to the caller, raised there
                outcome = (False, err)
            self.outcomes[i] = outcome
            del task, outcome  # nothing of the range stays alive in this thread
            self.flags[32 * i + 16] = seen
            with self.cond:
                self.cond.notify_all()

    def start(self, tasks: list[Callable[[], object]]) -> Callable[[], list[tuple[bool, object]]]:
        """Give task ``i`` to thread ``i``; the returned call waits until they have all ended
        and gives their outcomes ``(ok, result or error)`` in order."""
        for i, task in enumerate(tasks):
            self.tasks[i] = task
            self.flags[32 * i] += 1
        with self.cond:
            self.cond.notify_all()
        return lambda: self._collect(len(tasks))

    def _collect(self, count: int) -> list[tuple[bool, object]]:
        for i in range(count):
            given = int(self.flags[32 * i])
            if self.flags[32 * i + 16] != given:
                self._wait(32 * i + 16, given - 1)
        done = self.outcomes[:count]
        self.outcomes[:count] = [(True, None)] * count  # the team holds no result after
        return done


_team: _Team | None = None


def _the_team() -> _Team:
    global _team
    if _team is not None:  # made once: no lock on every call
        return _team
    with _lock:
        if _team is None:
            _team = _Team(workers() - 1)
        return _team


def _forget_team() -> None:  # a forked child has none of the parent's threads
    global _team, _pool
    _team, _pool = None, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_team)


def map_ranges(
    fn: Callable[[int, int], T], total: int, min_size: int | None = None
) -> list[T]:
    """``[fn(lo, hi) for each range of [0, total)]``, ranges run in parallel threads, each in a
    copy of the caller's context (so NumPy's ``errstate`` and other context variables hold
    there too). The first range runs in the calling thread (its caches hold the operands, and
    a worker's wake-up costs tens of microseconds); the call returns once every range has
    ended, whichever raised. The ranges go to the kernel team (:class:`_Team`); while another
    call (or an enclosing one) has it, to a thread pool."""
    spans = ranges(total, min_size)
    if len(spans) <= 1:
        return [fn(lo, hi) for lo, hi in spans]
    pool, controller = _resources()
    fn = cancel.bound(fn)  # a cancelled run stops in every worker thread too
    rest: list[Callable[[], object]] = [
        functools.partial(contextvars.copy_context().run, fn, lo, hi) for lo, hi in spans[1:]]
    team = _the_team()
    on_team = len(rest) <= len(team.tasks) and team.busy.acquire(blocking=False)
    try:
        with controller.limit(limits=1, user_api="blas"):
            ended = team.start(rest) if on_team else _start_on_pool(pool, rest)
            try:
                first = contextvars.copy_context().run(fn, *spans[0])
            finally:
                outcomes = ended()  # no range still writes once the call returns
    finally:
        if on_team:
            team.busy.release()
    for ok, value in outcomes:
        if not ok:
            raise cast(BaseException, value)
    return [first] + [cast(T, value) for _, value in outcomes]


def _start_on_pool(pool: ThreadPoolExecutor, tasks: list[Callable[[], object]]
                   ) -> Callable[[], list[tuple[bool, object]]]:
    """:meth:`_Team.start` on the thread pool."""
    from concurrent.futures import wait

    futures = [pool.submit(task) for task in tasks]

    def ended() -> list[tuple[bool, object]]:
        wait(futures)
        return [(True, f.result()) if f.exception() is None else (False, f.exception())
                for f in futures]

    return ended
