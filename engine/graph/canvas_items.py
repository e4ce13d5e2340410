"""The frames and notes of a canvas (:mod:`engine.graph.annotations`) and their editing, each
field validated; the base of :class:`engine.graph.canvas.Canvas`, which adds the blocks. Ids are
unique across everything :meth:`CanvasItems.has_id` knows (the canvas extends it with its
blocks' ids), and new ones are ``<stem>_<k>`` with the smallest free ``k``.
"""

from __future__ import annotations

import re

from engine.base.errors import InvalidArgumentError
from engine.base.names import id_problem, shown
from engine.graph import annotations as items  # `annotations` is the __future__ feature
from engine.graph.annotations import Frame, Note


class CanvasItems:
    """Frames and notes by id, in insertion order."""

    def __init__(self, frames: dict[str, Frame] | None = None,
                 notes: dict[str, Note] | None = None):
        self.frames: dict[str, Frame] = dict(frames or {})
        self.notes: dict[str, Note] = dict(notes or {})

    def has_id(self, item_id: str) -> bool:
        """Whether a frame or note has ``item_id``."""
        return item_id in self.frames or item_id in self.notes

    def new_id(self, type_id: str) -> str:
        """A fresh id ``<type in lower case>_<k>`` with the smallest unused ``k`` (unused by
        anything :meth:`has_id` knows: the canvas's blocks, frames and notes)."""
        stem = re.sub(r"[^a-z0-9]+", "_", type_id.lower()).strip("_")[:50] or "node"
        k = 1
        while self.has_id(f"{stem}_{k}"):
            k += 1
        return f"{stem}_{k}"

    def add_frame(self, pos: tuple[float, float], size: tuple[float, float] = items.FRAME_SIZE,
                  title: str = "Frame", colour: str = items.FRAME_COLOUR,
                  id: str | None = None) -> Frame:
        """Add a frame (all fields validated; a fresh ``frame_<k>`` id unless given)."""
        frame = Frame(self.fresh_id(id, "frame"), items.title(title),
                      items.colour(colour), items.position(pos),
                      items.size(size))
        self.frames[frame.id] = frame
        return frame

    def add_note(self, pos: tuple[float, float], text: str = "",
                 size: tuple[float, float] = items.NOTE_SIZE,
                 colour: str = items.NOTE_COLOUR, id: str | None = None) -> Note:
        """Add a note of plain ``text`` (all fields validated; a fresh ``note_<k>`` id unless
        given)."""
        note = Note(self.fresh_id(id, "note"), items.note_text(text),
                    items.colour(colour), items.position(pos),
                    items.size(size))
        self.notes[note.id] = note
        return note

    def remove_item(self, item_id: str) -> None:
        """Remove a frame or note (the blocks a frame holds stay)."""
        self._item(item_id)
        self.frames.pop(item_id, None)
        self.notes.pop(item_id, None)

    def move_item(self, item_id: str, pos: tuple[float, float]) -> None:
        """Put a frame or note's top-left corner at ``pos``."""
        self._item(item_id).pos = items.position(pos)

    def resize_item(self, item_id: str, size: tuple[float, float]) -> None:
        """Give a frame or note ``size`` [width, height]."""
        self._item(item_id).size = items.size(size)

    def recolour_item(self, item_id: str, colour: str) -> None:
        """Give a frame or note a ``#rrggbb`` colour."""
        self._item(item_id).colour = items.colour(colour)

    def retitle_frame(self, frame_id: str, title: str) -> None:
        """Rename a frame (the title rule of blocks)."""
        if frame_id not in self.frames:
            raise InvalidArgumentError(f"no frame {shown(frame_id)} on the canvas")
        self.frames[frame_id].title = items.title(title)

    def set_note_text(self, note_id: str, text: str) -> None:
        """Replace a note's plain text (:func:`engine.graph.annotations.note_text_problem`)."""
        if note_id not in self.notes:
            raise InvalidArgumentError(f"no note {shown(note_id)} on the canvas")
        self.notes[note_id].text = items.note_text(text)

    def _item(self, item_id: str) -> Frame | Note:
        """The frame or note ``item_id``; InvalidArgumentError when there is none."""
        item = (self.frames.get(item_id) or self.notes.get(item_id)
                if isinstance(item_id, str) else None)
        if item is None:
            raise InvalidArgumentError(f"no frame or note {shown(item_id)} on the canvas")
        return item

    def fresh_id(self, item_id: str | None, stem: str) -> str:
        """``item_id`` checked (valid and unused), or a fresh ``<stem>_<k>``."""
        if item_id is None:
            return self.new_id(stem)
        problem = id_problem(item_id)
        if problem:
            raise InvalidArgumentError(problem, argument="id")
        if self.has_id(item_id):
            raise InvalidArgumentError(f"id {item_id!r} is already on the canvas",
                                       argument="id")
        return item_id
