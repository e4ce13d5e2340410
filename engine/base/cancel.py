"""Cooperative cancellation and progress of a running block.

The executor runs each block inside :func:`scope` with the run's cancel event; long kernels and
source generation call :func:`checkpoint` between batch chunks (and tiles), which raises
:class:`Cancelled` once the event is set. Outside a scope ``checkpoint`` does nothing, so the
kernels stay plain functions for every other caller. The event is thread-local;
:func:`bound` carries the caller's event into the worker threads of :mod:`engine.kernels.parallel`.
A checkpoint is one attribute read and one ``Event.is_set``: far below a chunk's cost.

A long block also says how far it is with :func:`progress` (``done`` of ``total`` units, e.g.
GradCheck's samples); the scope's ``progress`` callback gets the fraction done, rising, at most
:data:`PROGRESS_STEPS` times plus once at 1.0 (so a GUI is not flooded). Only the thread that
opened the scope reports: worker threads of :func:`bound` do not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

_local = threading.local()

#: A block's progress callback is called at most this many times, plus once at the end.
PROGRESS_STEPS = 200


class _Progress:
    """A scope's progress callback and the last fraction it was given."""

    def __init__(self, callback: Callable[[float], None]):
        self.callback, self.last = callback, -1.0


class Cancelled(Exception):
    """The run was cancelled while a block was computing (not an error of the block)."""


@contextmanager
def scope(event: threading.Event | None,
          progress: Callable[[float], None] | None = None) -> Iterator[None]:
    """Make :func:`checkpoint` in this thread raise once ``event`` is set (None: never), and
    pass what :func:`progress` is told to ``progress`` as a fraction in [0, 1]."""
    previous = getattr(_local, "event", None), getattr(_local, "progress", None)
    _local.event = event
    _local.progress = None if progress is None else _Progress(progress)
    try:
        yield
    finally:
        _local.event, _local.progress = previous


def current() -> threading.Event | None:
    """The cancel event of this thread's scope, if any."""
    return getattr(_local, "event", None)


def checkpoint() -> None:
    """Raise :class:`Cancelled` when this thread's run has been cancelled."""
    event = getattr(_local, "event", None)
    if event is not None and event.is_set():
        raise Cancelled("cancelled")


def bound(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` run under the calling thread's cancel scope (for work handed to other threads)."""
    event = current()
    if event is None:
        return fn

    def run(*args, **kwargs) -> T:
        with scope(event):
            checkpoint()
            return fn(*args, **kwargs)
    return run


def progress(done: int, total: int) -> None:
    """Tell this thread's scope that ``done`` of ``total`` units are done (nothing outside a
    scope with a progress callback). The callback sees rising fractions: every
    ``1 / PROGRESS_STEPS`` of the way at most, and 1.0 once when ``done >= total``."""
    state = getattr(_local, "progress", None)
    if state is None:
        return
    fraction = 1.0 if total <= 0 else min(1.0, max(0.0, done / total))
    if fraction <= state.last:
        return
    if fraction >= 1.0 or fraction - state.last >= 1.0 / PROGRESS_STEPS:
        state.last = fraction
        state.callback(fraction)
