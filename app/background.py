"""One daemon worker thread for the viewer's whole-tensor numbers (statistics, histograms,
comparisons of big results).

A ``ThreadPoolExecutor`` is joined when the interpreter exits, so quitting while a summary of a
big tensor was computed kept the process alive for seconds after its window had closed. The
jobs are pure NumPy with no side effects, so a daemon thread may simply stop with the process.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future


class DaemonWorker:
    """Runs submitted jobs one at a time, in order, on a daemon thread."""

    def __init__(self, name: str):
        self._name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable, *args) -> Future:
        """Queue ``fn(*args)``; the future gets its result or exception."""
        future: Future = Future()
        self._jobs.put((future, fn, args))
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name,
                                                daemon=True)
                self._thread.start()
        return future

    def _loop(self) -> None:
        while True:
            future, fn, args = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for it
                future.set_exception(exc)
