"""Keep NodeGraphQt (the view) in sync with the engine Canvas (the source of truth).

Canvas -> view: after every Document change, :meth:`GraphAdapter.sync` adds, removes, moves,
renames and rewires view nodes so the view equals the canvas (NodeGraphQt node ids change on every
reload; the adapter maps them to our stable Canvas ids).

View -> canvas: gestures made in the view become one Document edit each
(:mod:`app.view_gestures`), so they are undoable with our undo stack. NodeGraphQt's own undo
stack is not used (it is emptied after each change). Where new blocks go and adding them:
:mod:`app.block_placing`; the empty canvas's hint: :mod:`app.canvas_hint`.

Frames and notes (:mod:`app.annotation_items`) are NodeGraphQt backdrops kept apart from blocks:
``selected_ids`` names blocks only, ``selected_item_ids`` frames and notes.
"""

from __future__ import annotations

from NodeGraphQt import NodeGraph
from PySide6 import QtCore, QtWidgets

from app import annotation_items, view_zoom
from app.block_placing import BlockPlacing
from app.canvas_hint import EmptyCanvasHint
from app.document import Document
from app.key_state import ModifierReset
from app.ngqt_private import release_view_handlers
from app.node_classes import node_class, node_type
from app.view_gestures import ViewGestures
from blocks.registry import REGISTRY, get_spec
from engine.base.errors import InvalidArgumentError


def _show_title(view_node, title: str) -> None:
    """Show ``title`` on a view node. NodeGraphQt's public ``set_name`` renames a node whose
    name another node has ("x" -> "x 1"), but two blocks may share a title (ids tell them
    apart), so the title goes straight to the node's view item."""
    view_node.view.name = title


class GraphAdapter(BlockPlacing, QtCore.QObject):
    """Owns the NodeGraph widget and mirrors the Document's canvas into it (new blocks placed
    by :class:`app.block_placing.BlockPlacing`)."""

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
        self._selection: list[str] = []
        #: ``(src, dst) -> why not, or None``: asked for every wire a gesture adds (set by
        #: app.wire_drop from blocks.port_kinds); a refused wire is put back, the reason said
        self.connection_rule = None
        self._take_over_view_handlers()
        self._hint = EmptyCanvasHint()
        self.viewer.scene().addItem(self._hint)
        doc.changed.connect(self._on_doc_changed)
        self.sync()

    # --- wiring NodeGraphQt ----------------------------------------------------------------
    def _take_over_view_handlers(self) -> None:
        g, v = self.graph, self.viewer
        # our handlers replace NodeGraphQt's for drops, renames and the built-in tab search;
        # resizing a frame or note becomes one Document edit instead of NodeGraphQt's own
        release_view_handlers(g)
        self.gestures = ViewGestures(self)
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

    def place_hint(self) -> None:
        """Show the empty canvas's hint in the middle of the view, or hide it."""
        self._hint.place(self.viewer, not (self._nodes or self._items))

    @property
    def syncing(self) -> bool:
        """True while :meth:`sync` changes the view (its signals are no gestures)."""
        return self._syncing

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

    def item_cid(self, ngqt_id: str) -> str | None:
        """The canvas id of the frame or note drawn by NodeGraphQt node ``ngqt_id``."""
        return self._item_cids.get(ngqt_id)

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

    # --- edits -----------------------------------------------------------------------------
    def try_edit(self, label: str, mutate) -> bool:
        """``mutate`` as one Document edit named ``label``; a refused (or empty) edit puts the
        view back to the canvas, a refused one says why (``edit_failed``)."""
        try:
            changed = self.doc.edit(label, mutate)
        except (InvalidArgumentError, KeyError, ValueError) as exc:
            self.edit_failed.emit(f"{label}: {exc}")
            self.sync()  # put the view back to the canvas
            return False
        if not changed:
            self.sync()
        return changed

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
