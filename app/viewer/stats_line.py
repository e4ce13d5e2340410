"""The viewer's statistics line: NumPy's figures of the tensor(s) shown, named by their titles;
the internal ids (``node_id.port``) are in its tooltip."""

from __future__ import annotations

from PySide6 import QtWidgets

from app.message_label import MessageLabel
from engine.view.stats import DiffStats, TensorStats


class StatsLine(MessageLabel):
    """One line per tensor (three when comparing: left, right, their difference)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__("", parent)
        self.setObjectName("stats")

    def show_one(self, title: str, stats: TensorStats, source: str = "") -> None:
        self._show((f"{title}:  " if title else "") + stats.summary(), [(title, source)])

    def show_pair(self, titles: tuple[str, str], stats: tuple[TensorStats, TensorStats],
                  diff: DiffStats, sources: tuple[str, str]) -> None:
        ta, tb = titles
        self._show(f"{ta}:  {stats[0].summary()}\n{tb}:  {stats[1].summary()}\n"
                   f"{ta} − {tb}:  {diff.summary()}", list(zip(titles, sources, strict=True)))

    def show_mismatch(self, titles: tuple[str, str], shapes: tuple, stats: TensorStats,
                      sources: tuple[str, str]) -> None:
        """Two tensors of different shapes: say so, and show the first one's figures."""
        ta, tb = titles
        self._show(f"{ta} shape {list(shapes[0])} and {tb} shape {list(shapes[1])} differ: "
                   f"showing {ta} only.  " + stats.summary(),
                   list(zip(titles, sources, strict=True)))

    def show_nothing(self, text: str) -> None:
        self._show(text, [])

    def _show(self, text: str, named: list[tuple[str, str]]) -> None:
        """``text``; the tooltip pairs each title with its id (and repeats long text)."""
        self.setText(text)
        ids = "\n".join(f"{t or 'tensor'}: {s}" for t, s in named if s)
        tip = text + ("\n\n" + ids if ids else "") if len(text) > 60 else ids
        self.setToolTip(tip)
