"""Cooperative cancellation of a running block.

The executor runs each block inside :func:`scope` with the run's cancel event; long kernels and
source generation call :func:`checkpoint` between batch chunks (and tiles), which raises
:class:`Cancelled` once the event is set. Outside a scope ``checkpoint`` does nothing, so the
kernels stay plain functions for every other caller. The event is thread-local;
:func:`bound` carries the caller's event into the worker threads of :mod:`engine.parallel`.
A checkpoint is one attribute read and one ``Event.is_set``: far below a chunk's cost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

_local = threading.local()


class Cancelled(Exception):
    """The run was cancelled while a block was computing (not an error of the block)."""


@contextmanager
def scope(event: threading.Event | None) -> Iterator[None]:
    """Make :func:`checkpoint` in this thread raise once ``event`` is set (None: never)."""
    previous = getattr(_local, "event", None)
    _local.event = event
    try:
        yield
    finally:
        _local.event = previous


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
