"""The log dock: runs, timings and errors, newest last; clicking an entry selects its node."""

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
        """Append one entry (multi-line messages keep their first line; the rest is the tooltip)."""
        first = message.partition("\n")[0]
        item = QtWidgets.QListWidgetItem(f"{time.strftime('%H:%M:%S')}  {first}")
        item.setForeground(LEVEL_COLORS.get(level, LEVEL_COLORS["info"]))
        item.setToolTip(message)
        item.setData(QtCore.Qt.UserRole, node_id)
        item.setData(QtCore.Qt.UserRole + 1, level)
        self.list.addItem(item)
        while self.list.count() > MAX_ENTRIES:
            self.list.takeItem(0)
        self.list.scrollToBottom()

    def messages(self, level: str | None = None) -> list[str]:
        """The logged messages (without timestamps), optionally of one level."""
        out = []
        for i in range(self.list.count()):
            item = self.list.item(i)
            if level is None or item.data(QtCore.Qt.UserRole + 1) == level:
                out.append(item.toolTip())
        return out

    def _activated(self, item: QtWidgets.QListWidgetItem) -> None:
        node_id = item.data(QtCore.Qt.UserRole)
        if node_id:
            self.node_activated.emit(node_id)
