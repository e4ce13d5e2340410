"""Run a compiled plan on a worker thread so the window stays responsive.

The executor (with its cache) lives as long as the window: a second run recomputes only nodes
whose type, attributes or inputs changed. Progress arrives node by node; Cancel sets an event
the executor checks between nodes and the kernels check between batch chunks. A long block that
reports how far it got (GradCheck) sends ``step_progress(node_id, fraction)`` in between.
"""

from __future__ import annotations

import threading
import traceback

from PySide6 import QtCore

from engine.graph.executor import Executor


class _RunThread(QtCore.QThread):
    """One run of ``executor.run(plan)``; signals are delivered queued to the GUI thread."""

    progress = QtCore.Signal(str, int, int)  # node_id, index, total
    step_progress = QtCore.Signal(str, float)  # node_id, fraction of it done
    done = QtCore.Signal(object)  # RunResult
    crashed = QtCore.Signal(str)  # unexpected exception (a bug, not a user's mistake)

    def __init__(self, executor: Executor, plan, cancel: threading.Event):
        super().__init__()
        self._executor, self._plan, self._cancel = executor, plan, cancel

    def run(self) -> None:
        try:
            result = self._executor.run(self._plan, progress=self._report, cancel=self._cancel,
                                        step_progress=self.step_progress.emit)
        except Exception as exc:  # noqa: BLE001 - shown in the log instead of killing the app
            self.crashed.emit(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            return
        self.done.emit(result)

    def _report(self, node_id: str, index: int, total: int) -> None:
        self.progress.emit(node_id, index, total)


class RunController(QtCore.QObject):
    """Start, cancel and report runs; at most one run at a time."""

    started = QtCore.Signal(int)  # number of steps
    progress = QtCore.Signal(str, int, int)
    step_progress = QtCore.Signal(str, float)  # node_id, fraction: inside a long block
    finished = QtCore.Signal(object)  # RunResult
    crashed = QtCore.Signal(str)
    running_changed = QtCore.Signal(bool)

    def __init__(self, executor: Executor | None = None, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.executor = executor or Executor()
        self._thread: _RunThread | None = None
        self._cancel = threading.Event()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, plan) -> bool:
        """Run ``plan`` in the background; False if a run is already going."""
        if self._thread is not None:
            return False
        self._cancel = threading.Event()
        thread = _RunThread(self.executor, plan, self._cancel)
        thread.progress.connect(self.progress)
        thread.step_progress.connect(self.step_progress)
        thread.done.connect(self._on_done)
        thread.crashed.connect(self._on_crashed)
        self._thread = thread
        self.started.emit(len(plan.steps))
        self.running_changed.emit(True)
        thread.start()
        return True

    def cancel(self) -> None:
        """Ask the running plan to stop before its next node."""
        self._cancel.set()

    def wait(self, msecs: int = 60_000) -> bool:
        """Block until the worker thread ends (used on close)."""
        thread = self._thread
        return thread.wait(msecs) if thread is not None else True

    def shutdown(self, msecs: int = 1000) -> bool:
        """Cancel the run and wait at most ``msecs`` for the worker to stop (kernels check
        for cancellation between batch chunks, :mod:`engine.base.cancel`); True when no worker
        thread is left running."""
        if self._thread is None:
            return True
        self.cancel()
        return self._thread.wait(msecs)

    def _end(self) -> None:
        if self._thread is not None:
            self._thread.wait()
        self._thread = None
        self.running_changed.emit(False)

    def _on_done(self, result) -> None:
        self._end()
        self.finished.emit(result)

    def _on_crashed(self, message: str) -> None:
        self._end()
        self.crashed.emit(message)
