"""Edit-menu operations on the selected blocks: delete, cut/copy/paste, duplicate, select all,
and Tensor blocks for dropped .npy files. Each is one undoable Document edit."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore

from app import clipboard
from app.files import npy_tensor_attrs


class EditActions(QtCore.QObject):
    """Operations of the Edit menu for one Document shown by one GraphAdapter."""

    message = QtCore.Signal(str, str)  # text, level

    def __init__(self, doc, adapter, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.doc, self.adapter = doc, adapter

    def free_spot(self) -> tuple[float, float]:
        """Where a block added without a drop position goes: near the view centre, staggered."""
        v = self.adapter.viewer
        p = v.mapToScene(v.rect().center())
        n = len(self.doc.canvas.nodes) % 6
        return float(p.x()) - 80 + 20 * n, float(p.y()) - 40 + 20 * n

    def delete_selection(self) -> list[str]:
        """Remove the selected blocks and their wires; returns the removed ids."""
        ids = self.adapter.selected_ids()
        if not ids:
            return []

        def mutate(canvas):
            for nid in ids:
                if nid in canvas.nodes:
                    canvas.remove_node(nid)

        self.doc.edit(f"Delete {ids[0]}" if len(ids) == 1 else f"Delete {len(ids)} blocks",
                      mutate)
        return ids

    def copy_selection(self) -> bool:
        ids = self.adapter.selected_ids()
        if not ids:
            return False
        clipboard.put(clipboard.fragment(self.doc.canvas, ids))
        self.message.emit(f"copied {len(ids)} block(s)", "info")
        return True

    def cut_selection(self) -> list[str]:
        return self.delete_selection() if self.copy_selection() else []

    def paste(self) -> list[str]:
        """Add the blocks on the clipboard (offset, fresh ids); returns and selects them."""
        frag = clipboard.get()
        if not frag or not frag.get("nodes"):
            return []
        return self._paste_fragment(frag, "Paste")

    def duplicate_selection(self) -> list[str]:
        ids = self.adapter.selected_ids()
        if not ids:
            return []
        return self._paste_fragment(clipboard.fragment(self.doc.canvas, ids), "Duplicate")

    def _paste_fragment(self, frag: dict, label: str) -> list[str]:
        created: list[str] = []

        def mutate(canvas):
            created[:] = clipboard.paste_fragment(
                canvas, frag, (clipboard.PASTE_OFFSET, clipboard.PASTE_OFFSET))

        try:
            self.doc.edit(f"{label} {len(frag['nodes'])} block(s)", mutate)
        except (ValueError, KeyError) as exc:  # a hand-edited clipboard: say what is wrong
            self.message.emit(f"{label} failed: {exc}", "error")
            return []
        self.adapter.select(created)
        return created

    def select_all(self) -> None:
        self.adapter.select(self.adapter.node_ids())

    def add_npy_tensors(self, paths: list[Path], pos: tuple[float, float] | None = None
                        ) -> list[str]:
        """One Tensor block (fill=file) per .npy file; the path is stored relative to the
        canvas file when the canvas is saved and the file lies below it."""
        pos = pos if pos is not None else self.free_spot()
        base = self.doc.base_dir if self.doc.path else None
        found = [npy_tensor_attrs(Path(p), base) for p in paths]
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
