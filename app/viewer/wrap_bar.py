"""A bar of widget groups in one row that wraps onto more rows when it is too narrow (the
viewer's tabs and controls: a narrow viewer, beside the Explain panel, gets two rows instead of
controls cut off or a window wider than the screen).

Rows are plain box layouts (no height-for-width): :meth:`WrapBar.arrange` puts the groups into
rows greedily by their size hints, on every resize and when a group's size hint changes."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets


class WrapBar(QtWidgets.QWidget):
    """Groups (:meth:`set_groups`) left to right, wrapped onto new rows as the width requires; each row's last
    group is pushed right (``align_right``) or left."""

    def __init__(self, parent: QtWidgets.QWidget | None = None, spacing: int = 12,
                 align_right: bool = True):
        super().__init__(parent)
        self.groups: list[QtWidgets.QWidget] = []
        self._spacing, self._align_right = spacing, align_right
        self._rows: list[list[int]] = []
        self._box = QtWidgets.QVBoxLayout(self)
        self._box.setContentsMargins(0, 0, 0, 0)
        self._box.setSpacing(2)

    def set_groups(self, groups: list[QtWidgets.QWidget]) -> None:
        """The groups, left to right (made children of the bar)."""
        self.groups = list(groups)
        for g in self.groups:
            g.setParent(self)
            g.installEventFilter(self)
        self._rows = []
        self.arrange()

    def rows(self) -> list[list[QtWidgets.QWidget]]:
        """The groups of each row, as laid out now."""
        return [[self.groups[i] for i in row] for row in self._rows]

    def sizeHint(self) -> QtCore.QSize:
        """Everything in one row."""
        shown = [g for g in self.groups if not g.isHidden()]
        width = sum(g.sizeHint().width() for g in shown) + self._spacing * max(0, len(shown) - 1)
        return QtCore.QSize(width, super().sizeHint().height())

    def minimumSizeHint(self) -> QtCore.QSize:
        """One group per row."""
        width = max((g.minimumSizeHint().width() for g in self.groups if not g.isHidden()),
                    default=0)
        return QtCore.QSize(width, super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.arrange()

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QtCore.QEvent.LayoutRequest and obj in self.groups:
            QtCore.QTimer.singleShot(0, self.arrange)  # a group's size hint changed
        return False

    def arrange(self) -> None:
        """Put the groups into rows for the current width (nothing moves when the rows are
        the same)."""
        width = self.width()
        rows: list[list[int]] = [[]]
        x = 0
        for i, g in enumerate(self.groups):
            w = g.sizeHint().width() if not g.isHidden() else 0
            if rows[-1] and x + w > width:
                rows.append([])
                x = 0
            rows[-1].append(i)
            x += w + self._spacing
        if rows == self._rows:
            return
        self._rows = rows
        while self._box.count():
            item = self._box.takeAt(0)
            if item.layout() is not None:
                inner = item.layout()
                while inner.count():
                    inner.takeAt(0)
                inner.deleteLater()
        for row in rows:
            line = QtWidgets.QHBoxLayout()
            line.setContentsMargins(0, 0, 0, 0)
            line.setSpacing(self._spacing)
            # the last group goes right (unless it is the first group, alone on its row)
            right = self._align_right and row[-1] != 0
            for k, i in enumerate(row):
                if k == len(row) - 1 and right:
                    line.addStretch(1)
                line.addWidget(self.groups[i])
            if not right:
                line.addStretch(1)
            self._box.addLayout(line)
