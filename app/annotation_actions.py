"""Edit-menu operations on frames and notes: add a frame (around the selected blocks, else at
the cursor), add a note, edit a frame's title or a note's text (double-click), recolour the
selected frames and notes. Each is one undoable Document edit; deleting goes through
:meth:`app.editing.EditActions.delete_selection`."""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from app.annotation_editor import TextEditDialog
from app.placement import free_offset
from engine.base.errors import InvalidArgumentError
from engine.graph import annotations

#: Room around the blocks a new frame encloses (more on top, for its title bar).
FRAME_MARGIN = 40.0
FRAME_TITLE_ROOM = 30.0


def _meets(a, b) -> bool:
    """Whether boxes ``a`` and ``b`` (x, y, width, height) overlap."""
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def _swatch(colour: str) -> QtGui.QIcon:
    pixmap = QtGui.QPixmap(14, 14)
    pixmap.fill(QtGui.QColor(colour))
    return QtGui.QIcon(pixmap)


class AnnotationActions(QtCore.QObject):
    """Frames and notes of one Document shown by one GraphAdapter."""

    message = QtCore.Signal(str, str)  # text, level

    def __init__(self, doc, adapter, parent: QtWidgets.QWidget):
        super().__init__(parent)
        self.doc, self.adapter, self.window = doc, adapter, parent
        self.editor: TextEditDialog | None = None
        self.act_add_frame = self._action("Add &Frame", self.add_frame,
                                          "Frame the selected blocks (or add a frame at the "
                                          "cursor); dragging a frame moves its blocks")
        self.act_add_note = self._action("Add &Note", self.add_note,
                                         "Add a note of plain text at the cursor")
        self.colour_menu = QtWidgets.QMenu("Frame/Note &Colour", parent)
        for name, colour in annotations.COLOURS.items():
            act = self.colour_menu.addAction(_swatch(colour), name)
            act.setData(colour)
            act.triggered.connect(lambda _c=False, c=colour: self.recolour_selection(c))
        self.colour_menu.aboutToShow.connect(
            lambda: [a.setEnabled(bool(self.adapter.selected_item_ids()))
                     for a in self.colour_menu.actions()])
        adapter.item_activated.connect(self.edit_item)

    def _action(self, text: str, slot, tip: str) -> QtGui.QAction:
        act = QtGui.QAction(text, self.window)
        act.setStatusTip(tip)
        act.triggered.connect(lambda _checked=False: slot())
        return act

    def install(self, edit_menu: QtWidgets.QMenu, context_menu) -> None:
        """Add the actions to the Edit menu and the canvas context menu."""
        for menu in (edit_menu, context_menu):
            menu.addSeparator()
            menu.addActions([self.act_add_frame, self.act_add_note])
            menu.addMenu(self.colour_menu)

    # --- adding ----------------------------------------------------------------------------
    def frame_rect_for_selection(self) -> tuple[float, float, float, float] | None:
        """(x, y, width, height) enclosing the selected blocks with a margin (None when no block
        is selected)."""
        boxes = self.adapter.node_boxes()
        chosen = [boxes[cid] for cid in self.adapter.selected_ids() if cid in boxes]
        if not chosen:
            return None
        left = min(b[0] for b in chosen) - FRAME_MARGIN
        top = min(b[1] for b in chosen) - FRAME_MARGIN - FRAME_TITLE_ROOM
        right = max(b[0] + b[2] for b in chosen) + FRAME_MARGIN
        bottom = max(b[1] + b[3] for b in chosen) + FRAME_MARGIN
        return (float(round(left)), float(round(top)), float(round(right - left)),
                float(round(bottom - top)))

    def add_frame(self) -> str | None:
        """Add a frame titled "Frame" around the selected blocks, else at the cursor; returns
        and selects its id. A frame around a selection holds exactly the selected blocks:
        unselected blocks its rectangle would cover move just outside it, in the same edit
        (the log names them), so none is taken in and none covers its title bar."""
        rect = self.frame_rect_for_selection()
        moves: dict[str, tuple[float, float]] = {}
        if rect is None:
            x, y = self.adapter.scene_pos_at_cursor()
            rect = (float(round(x)), float(round(y)), *annotations.FRAME_SIZE)
        else:
            moves = self.clear_of(rect)
        created: list[str] = []

        def mutate(canvas):
            for cid, pos in moves.items():
                canvas.move(cid, pos)
            created[:] = [canvas.add_frame(rect[:2], rect[2:]).id]

        if not self._edit("Add Frame", mutate):
            return None
        if moves:
            names = ", ".join(self.doc.canvas.nodes[c].title or c for c in moves)
            self.message.emit(f"Add Frame: moved {names} out of the frame (not selected)",
                              "info")
        self.adapter.select(created)
        return created[0]

    def clear_of(self, rect: tuple[float, float, float, float]
                 ) -> dict[str, tuple[float, float]]:
        """``{id: new position}`` of the unselected blocks that meet ``rect`` (x, y, w, h),
        each moved to the nearest spot outside it where it covers no block."""
        boxes = self.adapter.node_boxes()
        chosen = set(self.adapter.selected_ids())
        inside = [cid for cid, b in boxes.items() if cid not in chosen and _meets(b, rect)]
        occupied = [b for cid, b in boxes.items() if cid not in inside] + [rect]
        moves = {}
        for cid in sorted(inside, key=lambda c: (boxes[c][1], boxes[c][0])):
            box = boxes[cid]
            dx, dy = free_offset(occupied, [box])
            occupied.append((box[0] + dx, box[1] + dy, box[2], box[3]))
            x, y = self.doc.canvas.nodes[cid].pos
            moves[cid] = (float(round(x + dx)), float(round(y + dy)))
        return moves

    def add_note(self) -> str | None:
        """Add an empty note at the cursor (moved to the nearest spot where it covers no block)
        and open its text editor; returns its id."""
        x, y = self.adapter.scene_pos_at_cursor()
        dx, dy = free_offset(list(self.adapter.node_boxes().values()),
                             [(x, y, *annotations.NOTE_SIZE)])
        x, y = x + dx, y + dy
        created: list[str] = []

        def mutate(canvas):
            created[:] = [canvas.add_note((float(round(x)), float(round(y)))).id]

        if not self._edit("Add Note", mutate):
            return None
        self.adapter.select(created)
        self.edit_item(created[0])
        return created[0]

    # --- editing ---------------------------------------------------------------------------
    def edit_item(self, cid: str) -> TextEditDialog | None:
        """Open the editor of a frame's title or a note's text (one edit on OK)."""
        canvas = self.doc.canvas
        if cid in canvas.frames:
            dialog = TextEditDialog(self.window, f"Frame title ({cid})",
                                    canvas.frames[cid].title, False,
                                    lambda text: self._commit(
                                        f"Rename {cid}",
                                        lambda c: c.retitle_frame(cid, text.strip())))
        elif cid in canvas.notes:
            dialog = TextEditDialog(self.window, f"Note text ({cid})", canvas.notes[cid].text,
                                    True, lambda text: self._commit(
                                        f"Edit {cid}", lambda c: c.set_note_text(cid, text)))
        else:
            return None
        if self.editor is not None:
            self.editor.close()
        self.editor = dialog
        dialog.finished.connect(lambda _r, d=dialog: self._forget(d))
        dialog.open()
        return dialog

    def _forget(self, dialog) -> None:
        if self.editor is dialog:
            self.editor = None

    def _commit(self, label: str, mutate) -> str | None:
        """Apply an edit from the editor; the refusal's message, or None."""
        try:
            self.doc.edit(label, mutate)
        except InvalidArgumentError as exc:
            return f"{label}: {exc}"
        return None

    def recolour_selection(self, colour: str) -> list[str]:
        """Give the selected frames and notes ``colour``; returns their ids."""
        ids = self.adapter.selected_item_ids()
        if not ids:
            self.message.emit("select a frame or note to recolour it", "warning")
            return []

        def mutate(canvas):
            for cid in ids:
                canvas.recolour_item(cid, colour)

        self._edit(f"Colour {ids[0]}" if len(ids) == 1 else f"Colour {len(ids)} items",
                   mutate)
        return ids

    def _edit(self, label: str, mutate) -> bool:
        try:
            return self.doc.edit(label, mutate)
        except InvalidArgumentError as exc:
            self.message.emit(f"{label}: {exc}", "error")
            return False
