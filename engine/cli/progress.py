"""The progress line of a long block in ``gradblocks run`` (GradCheck: :mod:`blocks.gradcheck`).

Only on a terminal, like ``verify``'s count of cases (:mod:`engine.cli.verify`): a single line
rewritten in place (``\\r``), ``gc (GradCheck): 12.5% done, about 3 min left``, at most
:data:`UPDATES_PER_SECOND` times a second (the executor's fractions come at most
:data:`engine.base.cancel.PROGRESS_STEPS` times a block), erased when the block ends, and erased
when the run stops (Ctrl+C, an error) so that the one line that follows starts the line. Piped
or redirected, stderr gets no progress: ``run``'s cost warning (the one ``check`` prints) says
how long a block will take.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Self, TextIO

from engine.base.names import escaped

#: Rewrites of the progress line per second, at most (the first and the end always show).
UPDATES_PER_SECOND = 4
#: Carriage return and erase to the end of the line: the line is gone, the cursor at its start.
ERASE = "\r\x1b[K"
#: Characters of a block's label in the line.
LABEL_LIMIT = 60


def _left(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class StepProgress:
    """A ``step_progress(node_id, fraction)`` callback for :meth:`Executor.run` that draws the
    progress line on ``stream``; a context manager that erases a line still shown on exit."""

    def __init__(self, stream: TextIO, label: Callable[[str], str],
                 clock: Callable[[], float] = time.monotonic):
        self.stream, self.label, self.clock = stream, label, clock
        self.node: str | None = None
        self.started = self.shown = 0.0
        self.pending = False  # a line is on the terminal

    def __call__(self, node_id: str, fraction: float) -> None:
        now = self.clock()
        if node_id != self.node:
            self.node, self.started, self.shown = node_id, now, -1.0
        if fraction >= 1.0:
            if self.pending:
                self._write(ERASE)
            self.pending, self.node = False, None
            return
        if self.shown >= 0 and now - self.shown < 1.0 / UPDATES_PER_SECOND:
            return
        self.shown = now
        elapsed = now - self.started
        left = f", about {_left(elapsed * (1 - fraction) / fraction)} left" \
            if fraction > 0 and elapsed >= 1.0 else ""
        name = escaped(self.label(node_id), LABEL_LIMIT)
        self.pending = True  # first: a Ctrl+C right after the write still erases the line
        self._write(f"{ERASE}{name}: {100 * fraction:.1f}% done{left}")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a terminal gone away loses the line, not the run
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        if self.pending:
            self.pending = False
            self._write(ERASE)
