"""View -> canvas: each gesture made in the NodeGraphQt view (wiring and cutting wires, moving
blocks, frames and notes, resizing a frame or note, renaming a title, dropping blocks or files)
becomes one Document edit (:meth:`app.graph_adapter.GraphAdapter.try_edit`), so it is undoable
with our undo stack; a gesture the canvas or the connection rule refuses puts the view back.
"""

from __future__ import annotations

from PySide6 import QtCore

from app.block_mime import NODE_MIME, parse_block_mime


class ViewGestures(QtCore.QObject):
    """Listens to the view of ``adapter`` (a GraphAdapter) and edits its Document."""

    def __init__(self, adapter) -> None:
        super().__init__(adapter)
        self.adapter = adapter
        self._edges_pending = False
        g, v = adapter.graph, adapter.viewer
        v.data_dropped.connect(self._on_data_dropped)
        v.node_name_changed.connect(self._on_title_edited)
        v.moved_nodes.connect(self._on_nodes_moved)
        v.node_backdrop_updated.connect(self._on_item_resized)
        v.node_double_clicked.connect(self._on_double_clicked)
        g.port_connected.connect(self._on_ports_changed)
        g.port_disconnected.connect(self._on_ports_changed)

    def _on_ports_changed(self, *_ports) -> None:
        if self.adapter.syncing or self._edges_pending:
            return
        # one gesture can disconnect and connect several ports: reconcile once, afterwards
        self._edges_pending = True
        QtCore.QTimer.singleShot(0, self._reconcile_edges)

    def _reconcile_edges(self) -> None:
        self._edges_pending = False
        have = self.adapter.view_edges()
        want = {(tuple(e.src), tuple(e.dst)) for e in self.adapter.doc.canvas.edges}
        if have == want:
            return
        added, removed = have - want, want - have
        rule = self.adapter.connection_rule
        refused = [why for edge in sorted(added) if rule and (why := rule(*edge))]
        if refused:  # the whole gesture is refused: the view goes back to the canvas
            self.adapter.edit_failed.emit(f"Connect refused: {refused[0]}")
            self.adapter.sync()
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

        self.adapter.try_edit(label, mutate)

    def _on_nodes_moved(self, moved: dict) -> None:
        """One edit for a drag: blocks, and frames or notes (a frame drags what it holds)."""
        positions, item_positions = {}, {}
        for view in moved:
            x, y = (float(v) for v in view.xy_pos)
            if (cid := self.adapter.cid(view.id)) is not None:
                positions[cid] = (x, y)
            elif (cid := self.adapter.item_cid(view.id)) is not None:
                item_positions[cid] = (x, y)
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
        self.adapter.try_edit(label, mutate)

    def _on_item_resized(self, ngqt_id: str, what: str, value) -> None:
        """The resize handle of a frame or note was released (or double-clicked: fit a frame
        around the blocks it touches): one edit of its position and size."""
        cid = self.adapter.item_cid(ngqt_id)
        if cid is None or what not in ("sizer_mouse_release", "sizer_double_clicked"):
            return
        pos = tuple(float(round(v)) for v in value["pos"])
        size = (float(round(value["width"])), float(round(value["height"])))

        def mutate(canvas):
            canvas.move_item(cid, pos)
            canvas.resize_item(cid, size)

        self.adapter.try_edit(f"Resize {cid}", mutate)

    def _on_double_clicked(self, ngqt_id: str) -> None:
        cid = self.adapter.item_cid(ngqt_id)
        if cid is not None:
            self.adapter.item_activated.emit(cid)

    def _on_title_edited(self, ngqt_id: str, title: str) -> None:
        cid = self.adapter.cid(ngqt_id)
        title = title.strip()
        if cid is None:
            return
        if not title:
            self.adapter.sync()
            return
        self.adapter.try_edit(f"Rename {cid}", lambda c: c.set_title(cid, title))

    def _on_data_dropped(self, mime: QtCore.QMimeData, pos) -> None:
        """Blocks dragged from the palette are added where dropped; files go to
        ``files_dropped`` (the window opens a canvas or adds Tensor blocks)."""
        x, y = float(pos.x()), float(pos.y())
        if mime.hasFormat(NODE_MIME):
            types = parse_block_mime(bytes(mime.data(NODE_MIME).data()))
            if types:
                self.adapter.add_blocks(types, (x, y))
            return
        if mime.hasUrls():
            paths = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
            if paths:
                self.adapter.files_dropped.emit(paths, (x, y))
