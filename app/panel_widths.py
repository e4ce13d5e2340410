"""The side panels' widths: a usable minimum, the width the user gave them back after the
window was made smaller and larger again, and no saved layout that squeezes them.

- Each side panel (the block palette, the Attributes panel) keeps :data:`MIN_WIDTHS`; what its
  content needs beyond that it reaches with a horizontal scrollbar (the panels' own).
- A smaller window squeezes the panels (down to their minimum); when it grows again each panel
  gets back the width it had before (the width the layout gave it, or the user by dragging a
  panel's edge), as far as the room allows.
- A saved layout (QSettings ``window/state``) in which a shown side panel is narrower than its
  minimum (an older version saved what a small window left) is not restored: the default
  layout is used.
"""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

#: dock object name -> the narrowest it gets (pixels).
MIN_WIDTHS = {"dock_blocks": 150, "dock_attributes": 220}


class PanelWidths(QtCore.QObject):
    """Watches ``window`` (a QMainWindow) and its side docks ``docks``."""

    def __init__(self, window: QtWidgets.QMainWindow, docks: list[QtWidgets.QDockWidget]):
        super().__init__(window)
        self.window, self.docks = window, docks
        self.wanted: dict[str, int] = {}
        self._width = window.width()
        self._timer = QtCore.QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self._settle)
        window.installEventFilter(self)

    def set_minimums(self, on: bool = True) -> None:
        for dock in self.docks:
            dock.setMinimumWidth(MIN_WIDTHS[dock.objectName()] if on else 0)

    def _side(self) -> list[QtWidgets.QDockWidget]:
        return [d for d in self.docks if d.isVisible() and not d.isFloating()]

    def squeezed(self) -> bool:
        """Whether a shown side panel is narrower than its minimum."""
        return any(d.width() < MIN_WIDTHS[d.objectName()] for d in self._side())

    def remember(self) -> None:
        """The panels' widths now are the ones to give back after a smaller window."""
        self.wanted = {d.objectName(): d.width() for d in self._side()}
        self._width = self.window.width()

    def eventFilter(self, obj, event) -> bool:
        kind = event.type()
        if obj is self.window and kind == QtCore.QEvent.MouseButtonRelease:
            QtCore.QTimer.singleShot(0, self.remember)  # a panel's edge dragged
        elif obj is self.window and kind == QtCore.QEvent.Resize:
            self._timer.start()  # once the layout has settled
        return False

    def _settle(self) -> None:
        grew = self.window.width() > self._width
        self._width = self.window.width()
        if not grew:
            return
        side = [d for d in self._side() if d.width() < self.wanted.get(d.objectName(), 0)]
        if side:
            self.window.resizeDocks(side, [self.wanted[d.objectName()] for d in side],
                                    QtCore.Qt.Horizontal)
