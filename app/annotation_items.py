"""How frames and notes are drawn: NodeGraphQt backdrop nodes.

A frame is NodeGraphQt's BackdropNode (title bar, tinted body, resize handle; dragging its title
bar drags the blocks it contains; a click in its body is a click on the canvas). A note is a backdrop whose item carries no blocks and paints its plain
text with ``QPainter.drawText`` (never as rich text or HTML) on a sticky-note background.
"""

from __future__ import annotations

import html

from NodeGraphQt import BackdropNode
from NodeGraphQt.constants import Z_VAL_BACKDROP, NodeEnum
from NodeGraphQt.qgraphics.node_backdrop import BackdropNodeItem
from PySide6 import QtCore, QtGui

from app.ngqt_private import backdrop_handle_size
from engine.graph.annotations import MIN_SIZE

IDENTIFIER = "gradblocks.decoration"
EMPTY_NOTE_HINT = "(empty note: double-click to write)"
#: Height of a frame's title bar as NodeGraphQt paints it (scene units): what the mouse holds.
TITLE_HEIGHT = 26.0


def rgb(colour: str) -> tuple[int, int, int]:
    """``#rrggbb`` as an (r, g, b) tuple."""
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def plain_tooltip(text: str) -> str:
    """A tooltip showing ``text`` as typed (Qt would read a tag in it as rich text)."""
    return f'<p style="white-space: pre-wrap">{html.escape(text[:500])}</p>'


def readable_text_colour(colour: str) -> tuple[int, int, int, int]:
    """Dark text on light colours, light text on dark ones."""
    r, g, b = rgb(colour)
    return (30, 30, 30, 255) if 0.299 * r + 0.587 * g + 0.114 * b > 140 else (
        240, 240, 240, 255)


def _allow_canvas_minimum(item: BackdropNodeItem) -> None:
    """The resize handle stops at the canvas's smallest size (NodeGraphQt's minimum is the
    handle's position, so the size is that plus the handle's size), so a drawn size is
    always a size the canvas accepts, and every size the canvas accepts is drawn as it is."""
    handle = backdrop_handle_size(item)
    item.minimum_size = (MIN_SIZE - handle, MIN_SIZE - handle)


class FrameItem(BackdropNodeItem):
    """NodeGraphQt's backdrop item, held by its title bar only.

    Only the title bar (:data:`TITLE_HEIGHT`) catches the mouse and selection rectangles: a
    click in the frame's body is a click on the canvas (it selects nothing and starts a
    selection rectangle), so Delete after it removes nothing. Pressing the title bar selects the
    frame alone; dragging it carries the blocks inside along without selecting them, so Delete
    after a drag removes only the frame. (NodeGraphQt's own item took the whole rectangle and
    selected every block inside it with the frame.)"""

    def __init__(self, name="frame", text="", parent=None):
        super().__init__(name, text, parent)
        _allow_canvas_minimum(self)
        self._carried: list = []  # the unselected blocks a title-bar drag moves along

    def shape(self) -> QtGui.QPainterPath:
        path = QtGui.QPainterPath()
        path.addRect(QtCore.QRectF(0.0, 0.0, self.width, TITLE_HEIGHT))
        return path

    def mousePressEvent(self, event):
        plain = event.modifiers() == QtCore.Qt.NoModifier
        if event.button() != QtCore.Qt.LeftButton or not plain:
            super().mousePressEvent(event)
            return
        if not self.isSelected():
            for item in self.scene().selectedItems():
                item.setSelected(False)
            self.setSelected(True)
        self._carried = [n for n in self.get_nodes(False) if not n.isSelected()]
        event.accept()

    def mouseMoveEvent(self, event):
        before = self.pos()
        super().mouseMoveEvent(event)
        delta = self.pos() - before
        if self._carried and not delta.isNull():
            for node in self._carried:
                node.moveBy(delta.x(), delta.y())

    def mouseReleaseEvent(self, event):
        self._carried = []
        super().mouseReleaseEvent(event)


class NoteItem(BackdropNodeItem):
    """A sticky note: holds no blocks (moving it moves only itself), drawn above frames."""

    def __init__(self, name="note", text="", parent=None):
        super().__init__(name, text, parent)
        _allow_canvas_minimum(self)
        self.setZValue(Z_VAL_BACKDROP + 0.5)

    def get_nodes(self, inc_intersects=False):
        return []

    def calc_backdrop_size(self, nodes=None):
        return {"pos": list(self.xy_pos), "width": self._width, "height": self._height}

    def paint(self, painter, option, widget):
        painter.save()
        rect = self.boundingRect().adjusted(1.0, 1.0, -1.0, -1.0)
        painter.setBrush(QtGui.QColor(*self.color[:3], 235))
        border = QtGui.QColor(*self.color[:3]).darker(150)
        width = 1.0
        if self.selected:
            border, width = QtGui.QColor(*NodeEnum.SELECTED_BORDER_COLOR.value), 2.0
        painter.setPen(QtGui.QPen(border, width))
        painter.drawRoundedRect(rect, 3.0, 3.0)
        text_rect = rect.adjusted(8.0, 6.0, -8.0, -6.0)
        font = painter.font()
        font.setPointSizeF(10.0)
        painter.setFont(font)
        text = self.backdrop_text
        colour = QtGui.QColor(*self.text_color)
        if not text:
            text = EMPTY_NOTE_HINT
            colour.setAlpha(130)
        painter.setPen(colour)
        # drawText shows the characters as they are: no HTML or rich text is interpreted
        painter.drawText(text_rect, QtCore.Qt.AlignLeft | QtCore.Qt.AlignTop
                         | QtCore.Qt.TextWordWrap | QtCore.Qt.TextExpandTabs, text)
        painter.restore()


class FrameNode(BackdropNode):
    """A frame on the canvas (``gradblocks.decoration.FrameNode``)."""

    __identifier__ = IDENTIFIER
    NODE_NAME = "Frame"

    def __init__(self):
        super().__init__(FrameItem)


class NoteNode(BackdropNode):
    """A note on the canvas (``gradblocks.decoration.NoteNode``)."""

    __identifier__ = IDENTIFIER
    NODE_NAME = "Note"

    def __init__(self):
        super().__init__(NoteItem)


def show(node, item, kind: str) -> None:
    """Make the NodeGraphQt ``node`` draw canvas ``item`` (a Frame or a Note).

    NodeGraphQt has no undo-free setters for these, so the view item and its model are set
    directly (our undo stack owns the history)."""
    view, model = node.view, node.model
    x, y = float(item.pos[0]), float(item.pos[1])
    if list(view.xy_pos) != [x, y]:
        view.xy_pos = [x, y]
        model.pos = [x, y]
    w, h = float(item.size[0]), float(item.size[1])
    if (view.width, view.height) != (w, h):
        view.width, view.height = w, h
        model.width, model.height = w, h
    colour = (*rgb(item.colour), 255)
    if tuple(view.color) != colour:
        view.color = colour
        model.color = colour
        view.text_color = readable_text_colour(item.colour)
        model.text_color = view.text_color
    if kind == "frame":
        if view.name != item.title:
            view.name = item.title  # its setter sets a tooltip Qt may read as HTML: replaced
            model.name = item.title
            view.setToolTip(plain_tooltip(item.title))
    elif view.backdrop_text != item.text:
        view.backdrop_text = item.text
        view.setToolTip(plain_tooltip(item.text))
    view.update()
