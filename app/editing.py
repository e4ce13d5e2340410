"""Edit-menu operations on the selected blocks: delete, cut/copy/paste, duplicate, select all,
and Tensor blocks for dropped .npy files and images. Each is one undoable Document edit."""

from __future__ import annotations

from pathlib import Path

import shiboken6
from PySide6 import QtCore, QtGui

from app import clipboard
from app.dropped_tensors import dropped_tensor_attrs
from engine.graph.canvas import CanvasError, parse_fragment


class EditActions(QtCore.QObject):
    """Operations of the Edit menu for one Document shown by one GraphAdapter."""

    message = QtCore.Signal(str, str)  # text, level

    def __init__(self, doc, adapter, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.doc, self.adapter = doc, adapter

    def free_spot(self) -> tuple[float, float]:
        """Where a block added without a drop position goes: the view centre (the adapter
        then moves it to the nearest spot where it covers no block)."""
        v = self.adapter.viewer
        p = v.mapToScene(v.rect().center())
        return float(p.x()) - 80, float(p.y()) - 40

    def delete_selection(self) -> list[str]:
        """Remove the selected blocks with their wires, and the selected frames and notes
        (one edit); returns the removed ids."""
        items = self.adapter.selected_item_ids()
        ids = self.adapter.selected_ids() + items
        if not ids:
            return []

        def mutate(canvas):
            for nid in ids:
                if nid in canvas.nodes:
                    canvas.remove_node(nid)
                elif nid in items and canvas.has_id(nid):
                    canvas.remove_item(nid)

        self.doc.edit(f"Delete {ids[0]}" if len(ids) == 1 else f"Delete {len(ids)} items",
                      mutate)
        return ids

    def _selection(self) -> list[str]:
        """The selected blocks, then the selected frames and notes."""
        return self.adapter.selected_ids() + self.adapter.selected_item_ids()

    def copy_selection(self) -> bool:
        ids = self._selection()
        if not ids:
            return False
        clipboard.put(self.doc.canvas.fragment(ids))
        items = len(self.adapter.selected_item_ids())
        self.message.emit(f"copied {_count(len(ids) - items, items)}", "info")
        return True

    def cut_selection(self) -> list[str]:
        return self.delete_selection() if self.copy_selection() else []

    def paste(self) -> list[str]:
        """Add the blocks on the clipboard (fresh ids) with their top-left block at the cursor,
        moved to the nearest spot where they cover no block; returns and selects them.

        What the clipboard holds is validated like a canvas file: plain text or a bad fragment
        is a message in the log and changes nothing."""
        try:
            frag = clipboard.get()
        except clipboard.NoBlocks as exc:
            self.message.emit(f"Paste: nothing to paste: {exc}", "warning")
            return []
        except CanvasError as exc:
            self.message.emit(f"Paste failed: {exc}", "error")
            return []
        return self._paste_fragment(frag, "Paste", self.adapter.scene_pos_at_cursor())

    def duplicate_selection(self) -> list[str]:
        """Copies of the selected blocks (frames, notes) next to them, where they cover no
        block."""
        ids = self._selection()
        if not ids:
            return []
        return self._paste_fragment(self.doc.canvas.fragment(ids), "Duplicate")

    def _group_boxes(self, frag) -> list[tuple[float, float, float, float]]:
        """The boxes the fragment's blocks, frames and notes (a validated Canvas) cover at their
        positions."""
        boxes = self.adapter.node_boxes()
        out = []
        for n in frag.nodes.values():
            w, h = boxes[n.id][2:] if n.id in boxes else self.adapter.block_size(n.type)
            out.append((n.pos[0], n.pos[1], w, h))
        for item in [*frag.frames.values(), *frag.notes.values()]:
            out.append((item.pos[0], item.pos[1], item.size[0], item.size[1]))
        return out

    def _paste_fragment(self, frag, label: str,
                        at: tuple[float, float] | None = None) -> list[str]:
        """Add ``frag`` with its top-left corner at ``at`` (else next to where it was), then
        shifted to the nearest spot where it covers no block (one undo step)."""
        try:
            part = parse_fragment(frag, clipboard.SOURCE)
        except CanvasError as exc:
            self.message.emit(f"{label} failed: {exc}", "error")
            return []
        group = self._group_boxes(part)
        if at is None:
            offset = (clipboard.PASTE_OFFSET, clipboard.PASTE_OFFSET)
        else:
            offset = (at[0] - min(b[0] for b in group), at[1] - min(b[1] for b in group))
        moved = [(b[0] + offset[0], b[1] + offset[1], b[2], b[3]) for b in group]
        dx, dy = self.adapter.visible_offset(moved)  # in view, covering no block
        offset = (float(round(offset[0] + dx)), float(round(offset[1] + dy)))  # whole units
        created: list[str] = []

        def mutate(canvas):
            created[:] = canvas.paste(frag, offset, clipboard.SOURCE)

        try:
            self.doc.edit(f"{label} {_count(len(part.nodes), len(part.frames) + len(part.notes))}",
                          mutate)
        except CanvasError as exc:  # e.g. the offset pushes a block beyond the coordinate limit
            self.message.emit(f"{label} failed: {exc}", "error")
            return []
        self.adapter.select(created)
        self.adapter.reveal(created)
        return created

    def select_all(self) -> None:
        self.adapter.select(self.adapter.node_ids() + self.adapter.item_ids())

    def add_npy_tensors(self, paths: list[Path], pos: tuple[float, float] | None = None
                        ) -> list[str]:
        """One Tensor block per .npy file (fill=file) or PNG/JPEG image (fill=image); the path
        is stored relative to the canvas file when the canvas is saved and the file lies below
        it."""
        pos = pos if pos is not None else self.free_spot()
        base = self.doc.base_dir if self.doc.path else None
        found = [dropped_tensor_attrs(Path(p), base) for p in paths]
        for _attrs, warning in found:
            if warning:
                self.message.emit(warning, "warning")
        created: list[str] = []

        def mutate(canvas):
            created.clear()
            for i, (attrs, _warning) in enumerate(found):
                node = canvas.add_node("Tensor", pos=(pos[0] + 40 * i, pos[1] + 40 * i),
                                       attrs=attrs)
                created.append(node.id)

        self.doc.edit(f"Add Tensor from {Path(paths[0]).name}", mutate)
        self.adapter.select(created)
        return created


def _count(blocks: int, items: int) -> str:
    """``3 block(s)``, ``2 block(s) and 1 frame/note(s)``: what an edit covers."""
    return f"{blocks} block(s)" + (f" and {items} frame/note(s)" if items else "")


class UndoAction(QtGui.QAction):
    """Edit > Undo. An invalid value typed into a field was never an undo step: while one is
    pending, Undo drops it (the field shows the last valid value again, the block runs with it)
    and undoes nothing else; otherwise it undoes the last edit of the undo stack. Its text
    names what it undoes, as QUndoStack's own action does."""

    def __init__(self, stack: QtGui.QUndoStack, session, parent: QtCore.QObject):
        super().__init__(parent)
        self.stack, self.session = stack, session
        stack.canUndoChanged.connect(lambda _b: self._update())
        stack.undoTextChanged.connect(lambda _t: self._update())
        session.pending_changed.connect(lambda _n: self._update())
        self.triggered.connect(lambda _checked=False: self.undo())
        self._update()

    def _update(self) -> None:
        if not shiboken6.isValid(self.stack):  # Qt tears the window down
            return
        if self.session.pending:
            self.setText("&Undo Invalid Edit")
            self.setEnabled(True)
        else:
            text = self.stack.undoText()
            self.setText(f"&Undo {text}" if text else "&Undo")
            self.setEnabled(self.stack.canUndo())

    def undo(self) -> None:
        if not self.session.drop_pending():
            self.stack.undo()
