"""The log dock: runs, timings and errors, newest last; clicking an entry selects its node.

Entries read as the messages were written (blocks named by title, :mod:`engine.graph.labels`); an
entry tied to a block keeps the block's id as data (the click target) and shows it in the
tooltip only.
"""

from __future__ import annotations

import time

from PySide6 import QtCore, QtGui, QtWidgets

LEVEL_COLORS = {
    "info": QtGui.QColor(200, 200, 200),
    "ok": QtGui.QColor(120, 200, 120),
    "warning": QtGui.QColor(230, 190, 90),
    "error": QtGui.QColor(240, 110, 100),
}
MAX_ENTRIES = 2000
NODE_ROLE = QtCore.Qt.UserRole  #: the node id an entry selects (None for none)
LEVEL_ROLE = QtCore.Qt.UserRole + 1
MESSAGE_ROLE = QtCore.Qt.UserRole + 2  #: the whole message, without timestamp or id


class LogPanel(QtWidgets.QWidget):
    """A list of timestamped messages; entries tied to a node emit ``node_activated``."""

    node_activated = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.list = QtWidgets.QListWidget(self)
        self.list.setObjectName("log_list")
        self.list.setUniformItemSizes(True)
        self.list.setWordWrap(False)
        self.list.setSelectionMode(QtWidgets.QAbstractItemView.SingleSelection)
        self.list.itemActivated.connect(self._activated)
        self.list.itemClicked.connect(self._activated)
        clear = QtWidgets.QToolButton(self)
        clear.setText("Clear")
        clear.setToolTip("Clear the log")
        clear.clicked.connect(self.list.clear)
        bar = QtWidgets.QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addStretch(1)
        bar.addWidget(clear)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(2)
        layout.addLayout(bar)
        layout.addWidget(self.list)

    def add(self, message: str, level: str = "info", node_id: str | None = None) -> None:
        """Append one entry (multi-line messages keep their first line; the rest is the tooltip,
        followed by the block id of an entry tied to a block)."""
        first = message.partition("\n")[0]
        item = QtWidgets.QListWidgetItem(f"{time.strftime('%H:%M:%S')}  {first}")
        item.setForeground(LEVEL_COLORS.get(level, LEVEL_COLORS["info"]))
        item.setToolTip(f"{message}\n(block id: {node_id}; click to select it)" if node_id
                        else message)
        item.setData(NODE_ROLE, node_id)
        item.setData(LEVEL_ROLE, level)
        item.setData(MESSAGE_ROLE, message)
        self.list.addItem(item)
        while self.list.count() > MAX_ENTRIES:
            self.list.takeItem(0)
        self.list.scrollToBottom()

    def messages(self, level: str | None = None) -> list[str]:
        """The logged messages (without timestamps), optionally of one level."""
        out = []
        for i in range(self.list.count()):
            item = self.list.item(i)
            if level is None or item.data(LEVEL_ROLE) == level:
                out.append(item.data(MESSAGE_ROLE))
        return out

    def _activated(self, item: QtWidgets.QListWidgetItem) -> None:
        node_id = item.data(NODE_ROLE)
        if node_id:
            self.node_activated.emit(node_id)
