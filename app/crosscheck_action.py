"""Run > Cross-check: the canvas against TensorFlow, PyTorch and JAX, on a worker thread.

The worker runs the canvas with its own executor (the window's runs and cache are untouched)
and :func:`engine.export.crosscheck.crosscheck` with the Pythons of
:func:`engine.export.crosscheck.env_pythons` (this interpreter by default). The result goes to the
log as a table, one entry per line: each row's entry is tied to its block (click it to select the
block) and is an error when the row disagrees; then one line per framework (ran, skipped, failed)
and a summary.
"""

from __future__ import annotations

import traceback

from PySide6 import QtCore, QtGui

from engine.export.crosscheck import (
    FRAMEWORKS,
    PYTHON_ENV,
    crosscheck,
    env_pythons,
    status_lines,
    table_lines,
)
from engine.graph.executor import Executor

#: How a row's verdict is reached (engine.export.crosscheck.tolerance and compare): the header
#: entry's tooltip and the note under the table.
AGREE_RULE = ("agree = max abs <= tolerance, where tolerance = rtol of the dtype × the largest "
              "|value| compared (for a difference, such as Compare's output or GradCheck's "
              "error: × the largest |value| of the tensors it compares). max rel = max abs / "
              "max |ours| is shown for information, not the verdict: an output near 0 (a "
              "difference of two equal results) can have a large max rel and agree.")


class _CrossCheckThread(QtCore.QThread):
    """One cross-check of ``plan``; ``done`` carries the Report, ``crashed`` a bug's text."""

    done = QtCore.Signal(object)
    crashed = QtCore.Signal(str)

    def __init__(self, plan, titles: dict[str, str], source: str):
        super().__init__()
        self._plan, self._titles, self._source = plan, titles, source

    def run(self) -> None:
        try:
            result = Executor().run(self._plan)
            report = crosscheck(self._plan, result.outputs, list(FRAMEWORKS), env_pythons(),
                                self._source, self._titles)
        except Exception as exc:  # noqa: BLE001 - shown in the log instead of killing the app
            self.crashed.emit(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            return
        self.done.emit(report)


class CrossCheckAction(QtCore.QObject):
    """The Run > Cross-check action of ``window`` (a MainWindow: its session, doc and log)."""

    finished = QtCore.Signal(object)  # the Report

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.action = QtGui.QAction("Cross-&check with Frameworks", window)
        self.action.setObjectName("act_crosscheck")
        self.action.setShortcut(QtGui.QKeySequence("Ctrl+Shift+K"))
        self.action.setStatusTip("Run the canvas's exported scripts in TensorFlow, PyTorch and "
                                 "JAX (those installed) and compare every output")
        self.action.triggered.connect(self.start)
        self._thread: _CrossCheckThread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> bool:
        """Start a cross-check of the current canvas; False when one is running or the canvas
        has problems (said in the log)."""
        w = self.window
        if self._thread is not None:
            return False
        plan = w.session.plan
        if plan is None or plan.errors:
            w.log.add("cross-check: fix the canvas's problems first", "error")
            return False
        titles = {nid: node.title for nid, node in w.doc.canvas.nodes.items()}
        source = w.doc.path.name if getattr(w.doc, "path", None) else "canvas"
        thread = _CrossCheckThread(plan, titles, source)
        thread.done.connect(self._on_done)
        thread.crashed.connect(self._on_crashed)
        self._thread = thread
        self.action.setEnabled(False)
        w.log.add(f"cross-check started ({', '.join(FRAMEWORKS)}: those installed)", "info")
        thread.start()
        return True

    def wait(self, msecs: int = 600_000) -> bool:
        """Block until the worker ends (on close)."""
        return self._thread.wait(msecs) if self._thread is not None else True

    def _end(self) -> None:
        if self._thread is not None:
            self._thread.wait()
        self._thread = None
        self.action.setEnabled(True)

    def _on_done(self, report) -> None:
        self._end()
        log = self.window.log
        lines = table_lines(report, ids=False)  # the block id is in each entry's tooltip
        if lines:
            log.add(f"{lines[0]}\n{AGREE_RULE}", "info")  # the rule in the header's tooltip
        for row, line in zip(report.rows, lines[1:], strict=True):
            log.add(line, "info" if row.agree else "error", row.output.rpartition(".")[0])
        if lines:
            log.add(AGREE_RULE, "info")
        for line in status_lines(report):
            log.add(line, "error" if ": failed" in line else "info")
        bad = sum(not r.agree for r in report.rows)
        if not report.rows:
            log.add(nothing_compared(report), "warning")
        elif report.ok:
            skipped = [n for n, s in report.frameworks.items() if s.startswith("skipped")]
            also = f" ({', '.join(skipped)} skipped)" if skipped else ""
            log.add(f"cross-check: all {len(report.rows)} row(s) agree{also}", "ok")
        else:
            known = sum(not r.agree and bool(r.known_defect) for r in report.rows)
            named = f" ({known} of them a known framework defect)" if known else ""
            log.add(f"cross-check: {bad} of {len(report.rows)} row(s) disagree{named}", "error")
        self.finished.emit(report)

    def _on_crashed(self, message: str) -> None:
        self._end()
        self.window.log.add(f"cross-check failed: {message}", "error")


def nothing_compared(report) -> str:
    """The summary of a cross-check that compared no output: which frameworks were skipped or
    failed, and what to do."""
    skipped = [n for n, s in report.frameworks.items() if s.startswith("skipped")]
    if skipped and len(skipped) == len(report.frameworks):
        envs = ", ".join(PYTHON_ENV[n] for n in skipped if n in PYTHON_ENV)
        where = f" (or set {envs} to a Python that has it)" if envs else ""
        return (f"cross-check: nothing was compared: {', '.join(skipped)} "
                f"{'is' if len(skipped) == 1 else 'are'} not installed (skipped); install one"
                f"{where}")
    return "cross-check: nothing was compared: the canvas has no output to compare"
