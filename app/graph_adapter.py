"""Keep NodeGraphQt (the view) in sync with the engine Canvas (the source of truth).

Canvas -> view: after every Document change, :meth:`GraphAdapter.sync` adds, removes, moves,
renames and rewires view nodes so the view equals the canvas (NodeGraphQt node ids change on every
reload; the adapter maps them to our stable Canvas ids).

View -> canvas: gestures made in the view (wiring, cutting wires, moving, renaming a title,
dropping a block, dragging or resizing a frame or note) become one Document edit each, so they
are undoable with our undo stack. NodeGraphQt's own undo stack is not used (it is emptied after
each change).

Frames and notes (:mod:`app.annotation_items`) are NodeGraphQt backdrops kept apart from blocks:
``selected_ids`` names blocks only, ``selected_item_ids`` frames and notes.
"""

from __future__ import annotations

import re

from NodeGraphQt import NodeGraph
from PySide6 import QtCore, QtWidgets

from app import annotation_items, view_zoom, visible_placement
from app.document import Document
from app.key_state import ModifierReset
from app.new_blocks import new_block_attrs
from app.ngqt_private import release_view_handlers
from app.node_classes import node_class, node_type
from app.placement import free_offset
from blocks.registry import REGISTRY, get_spec
from engine.base.errors import InvalidArgumentError

NODE_MIME = "nodegraphqt/nodes"
_URN_NODES = re.compile(r"node:([\w.:]+)")


def block_mime_text(type_ids: list[str]) -> bytes:
    """Payload of the ``nodegraphqt/nodes`` drag MIME type for the given block types."""
    return ("ngqt::" + ";".join(f"node:{node_type(t)}" for t in type_ids)).encode()


def parse_block_mime(payload: bytes) -> list[str]:
    """Block type ids in a ``nodegraphqt/nodes`` payload (unknown types are dropped)."""
    out = []
    for full in _URN_NODES.findall(payload.decode(errors="replace")):
        type_id = full.split(".", 1)[1] if full.startswith("gradblocks.") else full
        if type_id in REGISTRY:
            out.append(type_id)
    return out


def _show_title(view_node, title: str) -> None:
    """Show ``title`` on a view node. NodeGraphQt's public ``set_name`` renames a node whose
    name another node has ("x" -> "x 1"), but two blocks may share a title (ids tell them
    apart), so the title goes straight to the node's view item."""
    view_node.view.name = title


class GraphAdapter(QtCore.QObject):
    """Owns the NodeGraph widget and mirrors the Document's canvas into it."""

    selection_changed = QtCore.Signal(list)  # canvas node ids
    files_dropped = QtCore.Signal(list, tuple)  # [paths], (x, y) scene position
    edit_failed = QtCore.Signal(str)  # a gesture the canvas refused (message)
    synced = QtCore.Signal()
    item_activated = QtCore.Signal(str)  # a frame or note was double-clicked (canvas id)

    def __init__(self, doc: Document, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.doc = doc
        self.graph = NodeGraph()
        self.viewer = self.graph.viewer()
        self.graph.register_nodes([node_class(spec) for spec in REGISTRY.values()]
                                  + [annotation_items.FrameNode, annotation_items.NoteNode])
        self._nodes: dict[str, object] = {}  # canvas id -> NodeGraphQt node
        self._cids: dict[str, str] = {}  # NodeGraphQt id -> canvas id
        self._items: dict[str, object] = {}  # frame or note canvas id -> NodeGraphQt backdrop
        self._item_cids: dict[str, str] = {}  # NodeGraphQt id -> frame or note canvas id
        self._syncing = False
        self._edges_pending = False
        self._selection: list[str] = []
        #: ``(src, dst) -> why not, or None``: asked for every wire a gesture adds (set by
        #: app.wire_drop from blocks.port_kinds); a refused wire is put back, the reason said
        self.connection_rule = None
        self._take_over_view_handlers()
        self._hint = self._make_hint()
        doc.changed.connect(self._on_doc_changed)
        self.sync()

    # --- wiring NodeGraphQt ----------------------------------------------------------------
    def _take_over_view_handlers(self) -> None:
        g, v = self.graph, self.viewer
        # our handlers replace NodeGraphQt's for drops, renames and the built-in tab search;
        # resizing a frame or note becomes one Document edit instead of NodeGraphQt's own
        release_view_handlers(g)
        v.data_dropped.connect(self._on_data_dropped)
        v.node_name_changed.connect(self._on_title_edited)
        v.moved_nodes.connect(self._on_nodes_moved)
        v.node_backdrop_updated.connect(self._on_item_resized)
        v.node_double_clicked.connect(self._on_double_clicked)
        g.port_connected.connect(self._on_ports_changed)
        g.port_disconnected.connect(self._on_ports_changed)
        v.scene().selectionChanged.connect(self._on_scene_selection)
        # NodeGraphQt's own undo/redo actions would shadow the window's Ctrl+Z
        for action in (v.qaction_for_undo(), v.qaction_for_redo()):
            if action is not None:
                action.setShortcuts([])
                v.context_menus()["graph"].removeAction(action)
        g.set_pipe_collision(False)
        g.set_acyclic(True)
        self._modifier_reset = ModifierReset(v)  # no stale "CTRL: Deselect Nodes" after dialogs
        # NodeGraphQt resizes block items (titles, port labels) without prepareGeometryChange, so
        # a BSP index keeps them under stale rectangles: deleted blocks stayed in it, were painted
        # after removal and freed under it (a segfault). No index is exact and fast enough here.
        v.scene().setItemIndexMethod(QtWidgets.QGraphicsScene.NoIndex)

    def _make_hint(self):
        """Text shown on an empty canvas."""
        from PySide6 import QtGui

        item = QtWidgets.QGraphicsSimpleTextItem(
            "Drag blocks here from the palette on the left (or press Tab),\n"
            "or open an example: File > Examples.")
        item.setBrush(QtGui.QColor(150, 156, 164))
        font = item.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)  # the canvas opens at 100 %
        item.setFont(font)
        item.setZValue(-10)
        self.viewer.scene().addItem(item)
        return item

    def place_hint(self) -> None:
        empty = not (self._nodes or self._items)
        self._hint.setVisible(empty)
        if empty:
            center = self.viewer.mapToScene(self.viewer.viewport().rect().center())
            r = self._hint.boundingRect()
            self._hint.setPos(center.x() - r.width() / 2, center.y() - r.height() / 2)

    @property
    def widget(self):
        return self.graph.widget

    # --- lookups ---------------------------------------------------------------------------
    def node(self, cid: str):
        """The NodeGraphQt node showing canvas node ``cid``."""
        return self._nodes[cid]

    def cid(self, node) -> str | None:
        """The canvas id of a NodeGraphQt node (or of its id string)."""
        return self._cids.get(node if isinstance(node, str) else node.id)

    def node_boxes(self) -> dict[str, tuple[float, float, float, float]]:
        """``{id: (x, y, width, height)}`` of every block as drawn (scene units)."""
        out = {}
        for cid, node in self._nodes.items():
            r = node.view.sceneBoundingRect()
            out[cid] = (r.x(), r.y(), r.width(), r.height())
        return out

    def block_size(self, type_id: str) -> tuple[float, float]:
        """The drawn size of a block of ``type_id`` (a block of that type on the canvas, else
        a new one's, :func:`app.visible_placement.new_block_size`)."""
        for cid, node in self._nodes.items():
            n = self.doc.canvas.nodes.get(cid)
            if n is not None and n.type == type_id:
                r = node.view.sceneBoundingRect()
                return r.width(), r.height()
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

    def node_ids(self) -> list[str]:
        return list(self._nodes)

    def item(self, cid: str):
        """The NodeGraphQt backdrop showing frame or note ``cid``."""
        return self._items[cid]

    def item_ids(self) -> list[str]:
        """Canvas ids of the frames and notes drawn."""
        return list(self._items)

    def selected_item_ids(self) -> list[str]:
        """Canvas ids of the selected frames and notes."""
        return sorted(cid for cid, node in self._items.items() if node.view.isSelected())

    def view_edges(self) -> set[tuple[tuple[str, str], tuple[str, str]]]:
        """Wires currently drawn, as ((src_id, port), (dst_id, port))."""
        edges = set()
        for cid, node in self._nodes.items():
            for port in node.input_ports():
                for src in port.connected_ports():
                    src_cid = self.cid(src.node())
                    if src_cid is not None:
                        edges.add(((src_cid, src.name()), (cid, port.name())))
        return edges

    def selected_ids(self) -> list[str]:
        out = []
        for item in self.viewer.scene().selectedItems():
            cid = self._cids.get(getattr(item, "id", None))
            if cid is not None:
                out.append(cid)
        return sorted(out)

    # --- canvas -> view --------------------------------------------------------------------
    def _on_doc_changed(self, change) -> None:
        self.sync()
        if change.reloaded:  # an opened (or new) canvas starts fitted to the view
            self.fit_to_view()

    def sync(self) -> None:
        """Make the view equal to the document's canvas."""
        canvas = self.doc.canvas
        self._syncing = True
        try:
            for cid in list(self._nodes):
                n = canvas.nodes.get(cid)
                if n is None or self._nodes[cid].type_ != node_type(n.type):
                    self._remove_view_node(cid)
            for cid, n in canvas.nodes.items():
                view_node = self._nodes.get(cid)
                if view_node is None:
                    self._add_view_node(n)
                    continue
                x, y = float(n.pos[0]), float(n.pos[1])
                if list(view_node.view.xy_pos) != [x, y]:
                    view_node.set_property("pos", [x, y], push_undo=False)  # model and view
                if view_node.view.name != n.title:
                    _show_title(view_node, n.title)
            self._sync_items(canvas)
            want = {(tuple(e.src), tuple(e.dst)) for e in canvas.edges}
            have = self.view_edges()
            for src, dst in have - want:
                self._port(src, out=True).disconnect_from(
                    self._port(dst, out=False), push_undo=False, emit_signal=False)
            for src, dst in sorted(want - have):
                if src[0] in self._nodes and dst[0] in self._nodes:
                    self._port(src, out=True).connect_to(
                        self._port(dst, out=False), push_undo=False, emit_signal=False)
        finally:
            self._syncing = False
            self.graph.undo_stack().clear()
        self.place_hint()
        self._emit_selection()
        self.synced.emit()

    def _sync_items(self, canvas) -> None:
        """Frames and notes: add, remove and update backdrops to match the canvas."""
        tables = {"frame": canvas.frames, "note": canvas.notes}
        for cid in list(self._items):
            kind = self._item_kind(self._items[cid])
            if cid not in tables[kind]:
                node = self._items.pop(cid)
                self._item_cids.pop(node.id, None)
                self.graph.remove_node(node, push_undo=False)
        for kind, table in tables.items():
            cls = annotation_items.FrameNode if kind == "frame" else annotation_items.NoteNode
            for cid, item in table.items():
                node = self._items.get(cid)
                if node is not None and self._item_kind(node) != kind:
                    self._item_cids.pop(node.id, None)
                    self.graph.remove_node(node, push_undo=False)
                    node = None
                if node is None:
                    node = self.graph.create_node(cls.type_, name=cid, selected=False,
                                                  pos=tuple(item.pos), push_undo=False)
                    self._items[cid] = node
                    self._item_cids[node.id] = cid
                annotation_items.show(node, item, kind)

    @staticmethod
    def _item_kind(node) -> str:
        return "note" if isinstance(node, annotation_items.NoteNode) else "frame"

    def _port(self, ref: tuple[str, str], out: bool):
        node = self._nodes[ref[0]]
        return node.outputs()[ref[1]] if out else node.inputs()[ref[1]]

    def _add_view_node(self, n) -> None:
        get_spec(n.type)  # raises for unknown types (the canvas loader rejects them first)
        node = self.graph.create_node(node_type(n.type), name=n.id, selected=False,
                                      pos=(float(n.pos[0]), float(n.pos[1])), push_undo=False)
        _show_title(node, n.title)
        self._nodes[n.id] = node
        self._cids[node.id] = n.id

    def _remove_view_node(self, cid: str) -> None:
        node = self._nodes.pop(cid)
        self._cids.pop(node.id, None)
        for port in node.input_ports() + node.output_ports():
            port.clear_connections(push_undo=False, emit_signal=False)
        self.graph.remove_node(node, push_undo=False)

    # --- view -> canvas --------------------------------------------------------------------
    def _on_ports_changed(self, *_ports) -> None:
        if self._syncing or self._edges_pending:
            return
        # one gesture can disconnect and connect several ports: reconcile once, afterwards
        self._edges_pending = True
        QtCore.QTimer.singleShot(0, self._reconcile_edges)

    def _reconcile_edges(self) -> None:
        self._edges_pending = False
        have = self.view_edges()
        want = {(tuple(e.src), tuple(e.dst)) for e in self.doc.canvas.edges}
        if have == want:
            return
        added, removed = have - want, want - have
        rule = self.connection_rule
        refused = [why for edge in sorted(added) if rule and (why := rule(*edge))]
        if refused:  # the whole gesture is refused: the view goes back to the canvas
            self.edit_failed.emit(f"Connect refused: {refused[0]}")
            self.sync()
            return
        label = "Connect" if added else "Disconnect"
        if added and removed:
            label = "Rewire"

        def mutate(canvas):
            for _src, dst in sorted(removed):
                if dst not in {d for _s, d in added}:
                    canvas.disconnect(dst)
            for src, dst in sorted(added):
                canvas.connect(src, dst)

        self._try_edit(label, mutate)

    def _on_nodes_moved(self, moved: dict) -> None:
        """One edit for a drag: blocks, and frames or notes (a frame drags what it holds)."""
        positions, item_positions = {}, {}
        for view in moved:
            x, y = (float(v) for v in view.xy_pos)
            if view.id in self._cids:
                positions[self._cids[view.id]] = (x, y)
            elif view.id in self._item_cids:
                item_positions[self._item_cids[view.id]] = (x, y)
        if not positions and not item_positions:
            return

        def mutate(canvas):
            for cid, pos in positions.items():
                if cid in canvas.nodes:
                    canvas.move(cid, pos)
            for cid, pos in item_positions.items():
                if canvas.has_id(cid):
                    canvas.move_item(cid, pos)

        count = len(positions) + len(item_positions)
        if item_positions and count == 1:
            label = f"Move {next(iter(item_positions))}"
        elif item_positions:
            label = f"Move {', '.join(sorted(item_positions))} with {len(positions)} block(s)"
        else:
            label = "Move" if count == 1 else f"Move {count} blocks"
        self._try_edit(label, mutate)

    def _on_item_resized(self, ngqt_id: str, what: str, value) -> None:
        """The resize handle of a frame or note was released (or double-clicked: fit a frame
        around the blocks it touches): one edit of its position and size."""
        cid = self._item_cids.get(ngqt_id)
        if cid is None or what not in ("sizer_mouse_release", "sizer_double_clicked"):
            return
        pos = tuple(float(round(v)) for v in value["pos"])
        size = (float(round(value["width"])), float(round(value["height"])))

        def mutate(canvas):
            canvas.move_item(cid, pos)
            canvas.resize_item(cid, size)

        self._try_edit(f"Resize {cid}", mutate)

    def _on_double_clicked(self, ngqt_id: str) -> None:
        cid = self._item_cids.get(ngqt_id)
        if cid is not None:
            self.item_activated.emit(cid)

    def _on_title_edited(self, ngqt_id: str, title: str) -> None:
        cid = self._cids.get(ngqt_id)
        title = title.strip()
        if cid is None:
            return
        if not title:
            self.sync()
            return
        self._try_edit(f"Rename {cid}", lambda c: c.set_title(cid, title))

    def _try_edit(self, label: str, mutate) -> bool:
        try:
            changed = self.doc.edit(label, mutate)
        except (InvalidArgumentError, KeyError, ValueError) as exc:
            self.edit_failed.emit(f"{label}: {exc}")
            self.sync()  # put the view back to the canvas
            return False
        if not changed:
            self.sync()
        return changed

    # --- drops and adding blocks -----------------------------------------------------------
    def _on_data_dropped(self, mime: QtCore.QMimeData, pos) -> None:
        x, y = float(pos.x()), float(pos.y())
        if mime.hasFormat(NODE_MIME):
            types = parse_block_mime(bytes(mime.data(NODE_MIME).data()))
            if types:
                self.add_blocks(types, (x, y))
            return
        if mime.hasUrls():
            paths = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
            if paths:
                self.files_dropped.emit(paths, (x, y))

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
        if self._try_edit(label, mutate):
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

        if self._try_edit(f"Add {type_id} and connect", mutate):
            self.select(created)
            self.reveal(created)
            return created[0]
        return None

    def scene_pos_at_cursor(self) -> tuple[float, float]:
        """Scene position under the mouse (or the view centre when the mouse is outside)."""
        from PySide6 import QtGui

        local = self.viewer.mapFromGlobal(QtGui.QCursor.pos())
        if not self.viewer.rect().contains(local):
            local = self.viewer.rect().center()
        p = self.viewer.mapToScene(local)
        return float(p.x()), float(p.y())

    # --- selection -------------------------------------------------------------------------
    def select(self, cids: list[str]) -> None:
        """Select exactly these blocks, frames and notes."""
        scene = self.viewer.scene()
        scene.blockSignals(True)
        try:
            for item in scene.selectedItems():
                item.setSelected(False)
            for cid in cids:
                node = self._nodes.get(cid) or self._items.get(cid)
                if node is not None:
                    node.view.setSelected(True)
        finally:
            scene.blockSignals(False)
        self._emit_selection()

    def _on_scene_selection(self) -> None:
        if not self._syncing:
            self._emit_selection()

    def _emit_selection(self) -> None:
        ids = self.selected_ids()
        if ids != self._selection:
            self._selection = ids
            self.selection_changed.emit(ids)

    # --- zoom ------------------------------------------------------------------------------
    def blocks_rect(self, cids: list[str] | None = None) -> QtCore.QRectF:
        """Scene rectangle covering the blocks, frames and notes ``cids`` (all when None) as
        drawn."""
        rect = QtCore.QRectF()
        for cid, node in [*self._nodes.items(), *self._items.items()]:
            if cids is not None and cid not in cids:
                continue
            view = node.view
            rect = rect.united(view.sceneBoundingRect())
            rect = rect.united(view.mapRectToScene(view.childrenBoundingRect()))
        return rect

    def readable_scale(self) -> float:
        """The smallest zoom at which node titles stay readable (view_zoom.MIN_TITLE_PX)."""
        node = next(iter(self._nodes.values()), None)
        font = node.view.text_item.font() if node is not None else self.viewer.font()
        return view_zoom.readable_scale(font)

    def fit_to_view(self) -> None:
        """Zoom so every block is visible, between the readable zoom and 100 % (how a canvas
        opens: a big one shows its top-left part at the readable zoom)."""
        self._frame(None)

    def fit_all(self) -> None:
        """View > Fit All (F): the whole canvas, however small that makes it (down to the
        manual zoom limit); the user asked to see everything."""
        self._frame(None, view_zoom.MIN_SCALE)

    def frame_selected(self) -> None:
        """Zoom to the selected blocks (every block when none is selected)."""
        self._frame([*self.selected_ids(), *self.selected_item_ids()] or None)

    def _frame(self, cids: list[str] | None, min_scale: float | None = None) -> None:
        rect = self.blocks_rect(cids)
        if rect.isNull():
            self.viewer.reset_zoom()
        else:
            view_zoom.frame(self.viewer, rect,
                            self.readable_scale() if min_scale is None else min_scale)
        self.place_hint()

    def zoom_in(self) -> None:
        view_zoom.zoom_by(self.viewer, view_zoom.ZOOM_STEP)

    def zoom_out(self) -> None:
        view_zoom.zoom_by(self.viewer, 1.0 / view_zoom.ZOOM_STEP)

    def zoom_actual_size(self) -> None:
        view_zoom.actual_size(self.viewer)
