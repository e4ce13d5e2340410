"""The toolbar's run progress bar: "idle", "running 2/5", the block running (and how far a
long block got), then how the run ended ("done", "cancelled" or the run's summary, elided to
fit, whole in the tooltip)."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.formatting import progress_format_literal


class RunProgress(QtWidgets.QProgressBar):
    """The progress of ``session``'s runs (an :class:`app.session.Session`)."""

    def __init__(self, session, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.setObjectName("run_progress")
        self.setFixedWidth(300)  # a run summary of three blocks fits
        self.setTextVisible(True)
        self.setFormat("idle")
        self.setValue(0)
        runner = session.runner
        runner.started.connect(self._on_run_started)
        runner.progress.connect(self._on_run_progress)
        runner.step_progress.connect(self._on_step_progress)
        runner.running_changed.connect(self._on_running_changed)
        session.run_summary.connect(self._on_run_summary)

    def show_idle(self) -> None:
        """Another canvas was opened: nothing of the old one's last run stays shown (a run
        still going keeps its bar)."""
        if not self.session.runner.running:
            self.setValue(0)
            self.setFormat("idle")
            self.setToolTip("")

    def _on_run_started(self, total: int) -> None:
        self.setMaximum(max(total, 1))
        self.setValue(0)
        self.setFormat("running %v/%m")

    def _on_run_progress(self, node_id: str, index: int, total: int) -> None:
        self.setMaximum(max(total, 1))
        self.setValue(index)
        self.setFormat("%v/%m  " + progress_format_literal(self.session.label(node_id)))

    def _on_step_progress(self, node_id: str, fraction: float) -> None:
        """Inside a long block (a GradCheck): the bar shows how far that block got."""
        if not self.session.runner.running:
            return
        label = progress_format_literal(self.session.label(node_id))
        self.setFormat(f"%v/%m  {label} {100 * fraction:.0f}%")

    def _on_running_changed(self, running: bool) -> None:
        if not running:
            self.setValue(self.maximum())
            self.setFormat("done" if self.maximum() else "idle")

    def _on_run_summary(self, summary: str, cancelled: bool) -> None:
        """The bar ends on what happened: "cancelled" or "3 ok, 1 skipped, 0 failed"."""
        room = self.contentsRect().width() - 12  # the style's text margins
        shown = self.fontMetrics().elidedText(summary, QtCore.Qt.ElideRight, room)
        self.setFormat(progress_format_literal(shown))  # one line: elided, not cut
        self.setToolTip(summary)
