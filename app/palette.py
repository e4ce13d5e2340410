"""The block palette (blocks by category, with search, dragged onto the canvas) and the Tab
search popup that adds a block at the cursor.

Drags carry NodeGraphQt's MIME type ``nodegraphqt/nodes``; the GraphAdapter turns the drop into
one undoable "Add" edit.
"""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from app.block_mime import NODE_MIME, block_mime_text
from app.block_search import ranked, search_rank
from blocks.registry import categories

TYPE_ROLE = QtCore.Qt.UserRole


def _tooltip(spec) -> str:
    ins = ", ".join(p.name for p in spec.inputs) or "—"
    outs = ", ".join(p.name for p in spec.outputs) or "—"
    return f"{spec.title} (mirrors {spec.op})\n{spec.doc.strip()}\n\ninputs: {ins}\noutputs: {outs}"


class _BlockTree(QtWidgets.QTreeWidget):
    """Tree of blocks; dragging items produces the ``nodegraphqt/nodes`` MIME payload."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setHeaderHidden(True)
        self.setDragEnabled(True)
        self.setDragDropMode(QtWidgets.QAbstractItemView.DragOnly)
        self.setSelectionMode(QtWidgets.QAbstractItemView.ExtendedSelection)
        self.setRootIsDecorated(True)
        self.setIndentation(12)
        # a narrow palette scrolls to the rest of a name instead of cutting it
        self.header().setStretchLastSection(False)
        self.header().setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeToContents)

    def mimeTypes(self) -> list[str]:
        return [NODE_MIME]

    def mimeData(self, items) -> QtCore.QMimeData:
        types = [i.data(0, TYPE_ROLE) for i in items if i.data(0, TYPE_ROLE)]
        mime = QtCore.QMimeData()
        mime.setData(NODE_MIME, QtCore.QByteArray(block_mime_text(types)))
        return mime


class BlockPalette(QtWidgets.QWidget):
    """Search field + category tree. Double-click (or Enter) adds the block at the view centre."""

    add_requested = QtCore.Signal(str)  # type id

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.search = QtWidgets.QLineEdit(self)
        self.search.setObjectName("palette_search")
        self.search.setPlaceholderText("Search blocks…")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.filter)
        self.search.returnPressed.connect(self._add_first_visible)
        self.tree = _BlockTree(self)
        self.tree.itemActivated.connect(self._activated)
        self.items: dict[str, QtWidgets.QTreeWidgetItem] = {}
        self._query = ""
        self._build()
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.setSpacing(2)
        lay.addWidget(self.search)
        lay.addWidget(self.tree)
        hint = QtWidgets.QLabel("Drag onto the canvas, double-click, or press Tab on the canvas",
                                self)
        hint.setWordWrap(True)
        hint.setStyleSheet("color: #8a8f98; font-size: 8pt;")
        lay.addWidget(hint)

    def _build(self) -> None:
        bold = self.font()
        bold.setBold(True)
        for category, specs in categories().items():
            cat = QtWidgets.QTreeWidgetItem(self.tree, [category])
            cat.setFlags(QtCore.Qt.ItemIsEnabled)
            cat.setFont(0, bold)
            for spec in specs:
                item = QtWidgets.QTreeWidgetItem(cat, [spec.title])
                item.setData(0, TYPE_ROLE, spec.type_id)
                item.setToolTip(0, _tooltip(spec))
                item.setFlags(QtCore.Qt.ItemIsEnabled | QtCore.Qt.ItemIsSelectable
                              | QtCore.Qt.ItemIsDragEnabled)
                item.setData(0, TYPE_ROLE + 1, spec)
                self.items[spec.type_id] = item
            cat.setExpanded(True)

    def filter(self, text: str) -> None:
        """Show only blocks matching every word of ``text`` (title, id, category, op, doc)."""
        self._query = text
        for i in range(self.tree.topLevelItemCount()):
            cat = self.tree.topLevelItem(i)
            any_visible = False
            for j in range(cat.childCount()):
                item = cat.child(j)
                ok = search_rank(item.data(0, TYPE_ROLE + 1), text) is not None
                item.setHidden(not ok)
                any_visible |= ok
            cat.setHidden(not any_visible)
            cat.setExpanded(True)

    def visible_types(self) -> list[str]:
        return [t for t, item in self.items.items()
                if not item.isHidden() and not item.parent().isHidden()]

    def _activated(self, item: QtWidgets.QTreeWidgetItem, _col: int) -> None:
        type_id = item.data(0, TYPE_ROLE)
        if type_id:
            self.add_requested.emit(type_id)

    def best_match(self) -> str | None:
        """The type id Enter adds: the best-ranked visible block (block_search)."""
        specs = [self.items[t].data(0, TYPE_ROLE + 1) for t in self.visible_types()]
        best = ranked(specs, self._query)
        return best[0].type_id if best else None

    def _add_first_visible(self) -> None:
        best = self.best_match()
        if best:
            self.add_requested.emit(best)


class BlockSearchPopup(QtWidgets.QFrame):
    """Tab menu: type to filter, Enter (or click) adds the block where the popup was opened."""

    chosen = QtCore.Signal(str, tuple)  # type id, scene position

    def __init__(self, parent: QtWidgets.QWidget):
        super().__init__(parent, QtCore.Qt.Popup)
        self.setFrameShape(QtWidgets.QFrame.StyledPanel)
        self.edit = QtWidgets.QLineEdit(self)
        self.edit.setPlaceholderText("Add block…")
        self.list = QtWidgets.QListWidget(self)
        self.list.setUniformItemSizes(True)
        self.list.itemActivated.connect(self._choose_item)
        self.list.itemClicked.connect(self._choose_item)
        self.edit.textChanged.connect(self._filter)
        self.edit.installEventFilter(self)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(3, 3, 3, 3)
        lay.setSpacing(2)
        lay.addWidget(self.edit)
        lay.addWidget(self.list)
        self.resize(260, 300)
        self._all_specs = [s for specs in categories().values() for s in specs]
        self._specs = list(self._all_specs)
        self._scene_pos: tuple[float, float] = (0.0, 0.0)
        self._filter("")

    def open_at(self, global_pos: QtCore.QPoint, scene_pos: tuple[float, float],
                type_ids: list[str] | None = None) -> None:
        """Show the popup at ``global_pos``, offering every block, or only ``type_ids``."""
        self._scene_pos = scene_pos
        allowed = None if type_ids is None else set(type_ids)
        self._specs = [s for s in self._all_specs if allowed is None or s.type_id in allowed]
        self.edit.clear()
        self._filter("")
        self.move(global_pos)
        self.show()
        self.edit.setFocus()

    def _filter(self, text: str) -> None:
        self.list.clear()
        for spec in ranked(self._specs, text):
            item = QtWidgets.QListWidgetItem(f"{spec.title}    ·  {spec.category}")
            item.setData(TYPE_ROLE, spec.type_id)
            item.setToolTip(_tooltip(spec))
            self.list.addItem(item)
        if self.list.count():
            self.list.setCurrentRow(0)

    def eventFilter(self, obj, event) -> bool:
        if obj is self.edit and event.type() == QtCore.QEvent.KeyPress:
            key = event.key()
            if key in (QtCore.Qt.Key_Down, QtCore.Qt.Key_Up):
                step = 1 if key == QtCore.Qt.Key_Down else -1
                row = max(0, min(self.list.count() - 1, self.list.currentRow() + step))
                self.list.setCurrentRow(row)
                return True
            if key in (QtCore.Qt.Key_Return, QtCore.Qt.Key_Enter):
                item = self.list.currentItem()
                if item is not None:
                    self._choose_item(item)
                return True
            if key in (QtCore.Qt.Key_Escape, QtCore.Qt.Key_Tab):
                self.hide()
                return True
        return super().eventFilter(obj, event)

    def shown_types(self) -> list[str]:
        """Type ids listed now, in the list's order."""
        return [self.list.item(i).data(TYPE_ROLE) for i in range(self.list.count())]

    def _choose_item(self, item: QtWidgets.QListWidgetItem) -> None:
        type_id = item.data(TYPE_ROLE)
        self.hide()
        if type_id:
            self.chosen.emit(type_id, self._scene_pos)


class TabKeyFilter(QtCore.QObject):
    """Opens the block search popup when Tab is pressed over the canvas."""

    def __init__(self, viewer: QtWidgets.QGraphicsView, popup: BlockSearchPopup):
        super().__init__(viewer)
        self.viewer, self.popup = viewer, popup
        viewer.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QtCore.QEvent.KeyPress and event.key() == QtCore.Qt.Key_Tab:
            self.open()
            return True
        return super().eventFilter(obj, event)

    def open(self) -> None:
        cursor = QtGui.QCursor.pos()
        local = self.viewer.mapFromGlobal(cursor)
        if not self.viewer.rect().contains(local):
            local = self.viewer.rect().center()
            cursor = self.viewer.mapToGlobal(local)
        p = self.viewer.mapToScene(local)
        self.popup.open_at(cursor, (float(p.x()), float(p.y())))
