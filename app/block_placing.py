"""Placing new blocks on the canvas: where they go (the nearest spot covering no block; for the
Tab search and wire drops, inside the view and on no wire) and adding them, one undo step each.

:class:`BlockPlacing` is a part of :class:`app.graph_adapter.GraphAdapter`; the adapter
provides ``doc``, ``viewer``, :meth:`~app.graph_adapter.GraphAdapter.node_boxes`,
:meth:`~app.graph_adapter.GraphAdapter.try_edit`, :meth:`~app.graph_adapter.GraphAdapter.select`,
:meth:`~app.graph_adapter.GraphAdapter.blocks_rect` and
:meth:`~app.graph_adapter.GraphAdapter.readable_scale`.
"""

from __future__ import annotations

from PySide6 import QtGui

from app import visible_placement
from app.new_blocks import new_block_attrs
from app.placement import free_offset


class BlockPlacing:
    """Where new blocks go, and adding them (plain or wired to a port)."""

    def block_size(self, type_id: str) -> tuple[float, float]:
        """The drawn size of a block of ``type_id`` (a block of that type on the canvas, else
        a new one's, :func:`app.visible_placement.new_block_size`)."""
        for cid, (_x, _y, width, height) in self.node_boxes().items():
            n = self.doc.canvas.nodes.get(cid)
            if n is not None and n.type == type_id:
                return width, height
        return visible_placement.new_block_size(type_id)

    def free_position(self, type_ids: list[str], pos: tuple[float, float],
                      visible: bool = False) -> tuple[float, float]:
        """``pos`` moved to the nearest spot where blocks of ``type_ids`` (staggered as
        :meth:`add_blocks` places them) cover no block; with ``visible``, inside the view and
        on no wire (:meth:`visible_offset`)."""
        group = [(pos[0] + 40.0 * i, pos[1] + 40.0 * i, *self.block_size(t))
                 for i, t in enumerate(type_ids)]
        if visible:
            dx, dy = self.visible_offset(group, wires=True)
        else:
            dx, dy = free_offset(list(self.node_boxes().values()), group)
        return float(round(pos[0] + dx)), float(round(pos[1] + dy))

    def visible_offset(self, group: list[tuple[float, float, float, float]],
                       wires: bool = False) -> tuple[float, float]:
        """The shift of ``group`` (boxes) to the nearest spot in view that covers no block,
        and with ``wires`` no wire either (:func:`app.visible_placement.visible_offset`)."""
        occupied = list(self.node_boxes().values())
        if wires:
            occupied += self.wire_boxes()
        return visible_placement.visible_offset(occupied, group,
                                                visible_placement.view_box(self.viewer))

    def wire_boxes(self, step: float = 8.0) -> list[tuple[float, float, float, float]]:
        """Small boxes ``step`` apart along every wire (scene units): a block kept a gap away
        from them lies on no wire."""
        out = []
        for pipe in self.viewer.all_pipes():
            if pipe.input_port is None or pipe.output_port is None or not pipe.isVisible():
                continue
            path = pipe.path()
            n = max(1, int(path.length() / step) + 1)
            for i in range(n + 1):
                p = pipe.mapToScene(path.pointAtPercent(i / n))
                out.append((p.x() - 1.0, p.y() - 1.0, 2.0, 2.0))
        return out

    def reveal(self, cids: list[str]) -> None:
        """Pan (or zoom out, down to the readable zoom) until ``cids`` are in view."""
        rect = self.blocks_rect(cids)
        if not rect.isNull():
            visible_placement.reveal(self.viewer, rect, self.readable_scale())

    def add_blocks(self, type_ids: list[str], pos: tuple[float, float],
                   attrs: dict | None = None, visible: bool = False) -> list[str]:
        """Add blocks (one undo step) at ``pos`` (staggered), or the nearest spot where they
        cover no block (with ``visible``: inside the view, on no wire, as the Tab search adds
        them); select and return their ids."""
        created: list[str] = []
        pos = self.free_position(type_ids, pos, visible=visible)

        def mutate(canvas):
            created.clear()
            for i, type_id in enumerate(type_ids):
                p = (pos[0] + 40.0 * i, pos[1] + 40.0 * i)
                created.append(canvas.add_node(
                    type_id, pos=p, attrs=new_block_attrs(canvas, type_id, attrs)).id)

        label = f"Add {type_ids[0]}" if len(type_ids) == 1 else f"Add {len(type_ids)} blocks"
        if self.try_edit(label, mutate):
            self.select(created)
            if visible:
                self.reveal(created)  # no free spot in view: the view goes to it
            return list(created)
        return []

    def add_wired_block(self, type_id: str, pos: tuple[float, float], port: str, *,
                        src: tuple[str, str] | None = None,
                        dst: tuple[str, str] | None = None) -> str | None:
        """Add a ``type_id`` block near ``pos`` wired either from output ``src`` into its
        input ``port`` or from its output ``port`` into input ``dst`` (replacing that input's
        wire): one undo step. Selects and returns the new block's id (None if refused)."""
        created: list[str] = []
        pos = self.free_position([type_id], pos, visible=True)

        def mutate(canvas):
            created[:] = [canvas.add_node(type_id, pos=pos,
                                          attrs=new_block_attrs(canvas, type_id)).id]
            if src is not None:
                canvas.connect(src, (created[0], port))
            else:
                canvas.connect((created[0], port), dst)

        if self.try_edit(f"Add {type_id} and connect", mutate):
            self.select(created)
            self.reveal(created)
            return created[0]
        return None

    def scene_pos_at_cursor(self) -> tuple[float, float]:
        """Scene position under the mouse (or the view centre when the mouse is outside)."""
        local = self.viewer.mapFromGlobal(QtGui.QCursor.pos())
        if not self.viewer.rect().contains(local):
            local = self.viewer.rect().center()
        p = self.viewer.mapToScene(local)
        return float(p.x()), float(p.y())
