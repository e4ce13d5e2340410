"""The open canvas: the engine Canvas (the source of truth), its file and its undo history.

Every edit goes through :meth:`Document.edit`: the edit runs on a copy of the canvas and is pushed
as one undoable snapshot (canvas JSON before and after). Undo and redo swap whole canvases; the
graph view, the attribute panel and the live shapes follow :attr:`Document.changed`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import shiboken6
from PySide6 import QtCore, QtGui

from engine.graph.canvas import Canvas

UNDO_LIMIT = 200


@dataclass(frozen=True)
class Change:
    """One change of the document's canvas: JSON before and after (before is None on load)."""

    before: dict | None
    after: dict
    label: str = ""
    reloaded: bool = False


def _copy_value(value):
    """Copy of an attribute value (nested lists/dicts of scalars) without deepcopy's overhead."""
    if isinstance(value, list):
        return [_copy_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy_value(v) for k, v in value.items()}
    return value


def copy_canvas(canvas: Canvas) -> Canvas:
    """An independent copy of a canvas (nodes, attrs, edges, frames and notes), several times faster than
    ``Canvas.copy`` (deepcopy) on large canvases; edits of the copy never touch the original."""
    nodes = {nid: dataclasses.replace(n, pos=tuple(n.pos), attrs=_copy_value(n.attrs))
             for nid, n in canvas.nodes.items()}
    frames = {fid: dataclasses.replace(f) for fid, f in canvas.frames.items()}
    notes = {nid: dataclasses.replace(n) for nid, n in canvas.notes.items()}
    return Canvas(nodes=nodes, edges=list(canvas.edges), frames=frames, notes=notes)


class _SnapshotCommand(QtGui.QUndoCommand):
    """Swap the document's canvas between two JSON snapshots."""

    def __init__(self, doc: Document, label: str, before: dict, after: dict, canvas: Canvas):
        super().__init__(label)
        self._doc, self._before, self._after = doc, before, after
        self._first_canvas: Canvas | None = canvas

    def redo(self) -> None:
        canvas = self._first_canvas or Canvas.from_json(self._after)
        self._first_canvas = None
        self._doc._replace(canvas, Change(self._before, self._after, self.text()))

    def undo(self) -> None:
        self._doc._replace(Canvas.from_json(self._before),
                           Change(self._after, self._before, "Undo " + self.text()))


class Document(QtCore.QObject):
    """The canvas being edited, its path and its undo stack (clean state = saved)."""

    changed = QtCore.Signal(object)  # Change
    path_changed = QtCore.Signal()
    modified_changed = QtCore.Signal(bool)

    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.canvas = Canvas(nodes={}, edges=[])
        self.path: Path | None = None
        self.example_dir: Path | None = None
        self.undo_stack = QtGui.QUndoStack(self)
        self.undo_stack.setUndoLimit(UNDO_LIMIT)
        self._snapshot = self.canvas.to_json()
        self._unsaved_origin = False  # restored from a recovery file: unsaved until saved
        self.undo_stack.cleanChanged.connect(lambda _clean: self._emit_modified())

    def _emit_modified(self) -> None:
        if shiboken6.isValid(self.undo_stack):  # not while Qt tears the stack down
            self.modified_changed.emit(self.modified)

    # --- state -----------------------------------------------------------------------------
    @property
    def modified(self) -> bool:
        return self._unsaved_origin or not self.undo_stack.isClean()

    @property
    def base_dir(self) -> Path:
        """Directory that relative paths in the canvas (Tensor fill=file) are resolved against."""
        if self.path is not None:
            return self.path.parent
        if self.example_dir is not None:
            return self.example_dir
        return Path.cwd()

    def snapshot(self) -> dict:
        """The canvas as file-format JSON (cached; do not mutate)."""
        return self._snapshot

    # --- editing ---------------------------------------------------------------------------
    def edit(self, label: str, mutate: Callable[[Canvas], object]) -> bool:
        """Apply ``mutate`` to a copy of the canvas and push it as one undo step.

        Exceptions from ``mutate`` (e.g. InvalidArgumentError) propagate and change nothing.
        Returns False when the edit changed nothing (no undo step is pushed).
        """
        canvas = copy_canvas(self.canvas)
        mutate(canvas)
        after = canvas.to_json()
        if after == self._snapshot:
            return False
        self.undo_stack.push(_SnapshotCommand(self, label, self._snapshot, after, canvas))
        return True

    def load(self, canvas: Canvas, path: Path | None, *, modified: bool = False,
             example_dir: Path | None = None) -> None:
        """Replace the canvas wholesale (open, new, restore); clears the undo history."""
        self.undo_stack.clear()
        self.path = Path(path) if path is not None else None
        self.example_dir = example_dir
        self._unsaved_origin = modified
        self._replace(canvas, Change(None, canvas.to_json(), "load", reloaded=True))
        self.path_changed.emit()
        self._emit_modified()

    def reload(self, canvas: Canvas) -> None:
        """Show ``canvas`` (the file's version on disk) as one undoable step; the document is then
        clean, and Undo brings back the canvas it replaced (unsaved)."""
        after = canvas.to_json()
        if after != self._snapshot:
            self.undo_stack.push(_SnapshotCommand(self, "Reload from disk", self._snapshot, after,
                                                  canvas))
        self._unsaved_origin = False
        self.undo_stack.setClean()
        self._emit_modified()

    def mark_saved(self, path: Path) -> None:
        self.path = Path(path)
        self.example_dir = None
        self._unsaved_origin = False
        self.undo_stack.setClean()
        self.path_changed.emit()
        self._emit_modified()

    def _replace(self, canvas: Canvas, change: Change) -> None:
        self.canvas = canvas
        self._snapshot = change.after
        self.changed.emit(change)

