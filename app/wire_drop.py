"""Dropping a wire on empty canvas: search a fitting block, add it there, wired (one undo step).

Dragging from an output port and releasing over empty canvas opens the block search popup at the
cursor, listing only blocks with an input that fits the output (:mod:`blocks.port_kinds`, using
the output's inferred tensor when the compiler knows it); dragging from a free input port lists
blocks with a fitting output. Choosing a block adds it at the drop point wired to the dragged
port; Escape adds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from NodeGraphQt.constants import PortTypeEnum
from NodeGraphQt.qgraphics.node_abstract import AbstractNodeItem
from NodeGraphQt.qgraphics.port import PortItem
from PySide6 import QtCore, QtWidgets

from app.ngqt_private import dragged_wire_start
from app.palette import BlockSearchPopup
from blocks.port_kinds import fitting_inputs, fitting_outputs, refusal, tensor_kind
from blocks.registry import REGISTRY, get_spec


@dataclass(frozen=True)
class DroppedWire:
    """A wire released on empty canvas: the dragged port and where it was dropped."""

    node_id: str
    port: str
    is_output: bool
    scene_pos: tuple[float, float]


class WireDrop(QtCore.QObject):
    """Watches the canvas for wires dropped on empty space and offers fitting blocks."""

    def __init__(self, adapter, session, parent: QtWidgets.QWidget):
        super().__init__(parent)
        self.adapter, self.session = adapter, session
        self.popup = BlockSearchPopup(parent)
        self.popup.setObjectName("wire_drop_search")
        self.popup.chosen.connect(self._add)
        self.wire: DroppedWire | None = None
        adapter.viewer.viewport().installEventFilter(self)
        adapter.connection_rule = self.connection_problem  # a wire that does not fit: refused

    # --- noticing the drop -------------------------------------------------------------
    def eventFilter(self, obj, event) -> bool:
        if (event.type() == QtCore.QEvent.MouseButtonRelease
                and event.button() == QtCore.Qt.LeftButton):
            wire = self._dropped_wire(event.position().toPoint())
            if wire is not None:
                global_pos = event.globalPosition().toPoint()
                # open after NodeGraphQt has ended its live wire for this release
                QtCore.QTimer.singleShot(0, lambda: self.open(wire, global_pos))
        return False

    def _dropped_wire(self, view_pos: QtCore.QPoint) -> DroppedWire | None:
        """The new wire being released at ``view_pos`` when that spot is empty canvas, else
        None."""
        v = self.adapter.viewer
        start = dragged_wire_start(v)
        if start is None:
            return None
        scene_pos = v.mapToScene(view_pos)
        for item in v.scene().items(scene_pos):
            if isinstance(item, (PortItem, AbstractNodeItem)):
                return None
        cid = self.adapter.cid(start.node.id)
        if cid is None:
            return None
        return DroppedWire(cid, start.name, start.port_type == PortTypeEnum.OUT.value,
                           (float(scene_pos.x()), float(scene_pos.y())))

    # --- offering blocks ---------------------------------------------------------------
    def port_kind(self, node_id: str, port: str, is_output: bool) -> str:
        """The kind of a port: an output's inferred kind when the plan knows it, else the
        declared one."""
        plan = self.session.plan
        if is_output and plan is not None:
            ts = plan.specs.get((node_id, port))
            if ts is not None:
                return tensor_kind(ts)
        spec = get_spec(self.adapter.doc.canvas.nodes[node_id].type)
        ports = spec.outputs if is_output else spec.inputs
        return next(p.kind for p in ports if p.name == port)

    def dragged_kind(self, wire: DroppedWire) -> str:
        """The kind of the dragged port."""
        return self.port_kind(wire.node_id, wire.port, wire.is_output)

    def connection_problem(self, src: tuple[str, str], dst: tuple[str, str]) -> str | None:
        """Why output ``src`` may not feed input ``dst`` (:func:`blocks.port_kinds.refusal`,
        blocks named by label), or None. The adapter asks before it makes a dragged wire an
        edit."""
        nodes = self.adapter.doc.canvas.nodes
        if src[0] not in nodes or dst[0] not in nodes:
            return None
        label = self.session.label
        return refusal(f"{label(src[0])}.{src[1]}", self.port_kind(*src, True),
                       f"{label(dst[0])}.{dst[1]}", self.port_kind(*dst, False))

    def fitting_port(self, type_id: str, wire: DroppedWire) -> str | None:
        """The port of a new ``type_id`` block the dragged wire goes to (its first fitting
        input for a dragged output, first fitting output for a dragged input)."""
        kind = self.dragged_kind(wire)
        spec = get_spec(type_id)
        ports = fitting_inputs(spec, kind) if wire.is_output else fitting_outputs(spec, kind)
        return ports[0].name if ports else None

    def open(self, wire: DroppedWire, global_pos: QtCore.QPoint) -> None:
        """Show the search popup at ``global_pos`` listing the blocks that fit ``wire``."""
        if wire.node_id not in self.adapter.doc.canvas.nodes:
            return
        self.wire = wire
        node = self.adapter.doc.canvas.nodes[wire.node_id]
        end = f"{node.title or node.id}.{wire.port}"
        self.popup.edit.setPlaceholderText(
            f"Add a block fed by {end}…" if wire.is_output else f"Add a block feeding {end}…")
        types = [t for t in REGISTRY if self.fitting_port(t, wire) is not None]
        self.popup.open_at(global_pos, wire.scene_pos, types)

    def _add(self, type_id: str, scene_pos: tuple[float, float]) -> None:
        wire, self.wire = self.wire, None
        if wire is None or wire.node_id not in self.adapter.doc.canvas.nodes:
            return
        port = self.fitting_port(type_id, wire)
        if port is None:
            return
        w, h = self.adapter.block_size(type_id)
        x, y = scene_pos
        ref = (wire.node_id, wire.port)
        if wire.is_output:  # the new block's inputs are on its left, at the drop point
            self.adapter.add_wired_block(type_id, (x, y - 30.0), port, src=ref)
        else:  # the new block's outputs are on its right, at the drop point
            self.adapter.add_wired_block(type_id, (x - w, y - min(h / 2, 30.0)), port, dst=ref)
