"""How a block is drawn: NodeGraphQt's node item with titles that stay readable.

NodeGraphQt hides a node's title and port labels once the node is under 70 screen pixels wide,
so narrow blocks lost their text at zoom levels where wide blocks kept it, and a long title made
its block as wide as the title. Here every block is at least :data:`MIN_WIDTH` wide, titles
wider than :data:`MAX_TITLE_WIDTH` are elided with "…" (the full title is in the tooltip and
in the editor a double-click opens), and text is hidden only when titles would be under
:data:`HIDE_TEXT_PX` pixels tall on screen, the same zoom for every block.

A block keeps its size whether it is valid, invalid or stale: its output labels keep the room
of the last shape the plan knew (``reserved_output_width``, set by
:mod:`app.node_decorations`), a stale result greys them (:meth:`BlockItem.set_outputs_greyed`)
rather than adding words, and its bottom row always holds the run badge
(:meth:`BlockItem.badge_top`), shown or not, so a badge lies inside its block and never on a
neighbour.
"""

from __future__ import annotations

from NodeGraphQt.qgraphics.node_abstract import AbstractNodeItem
from NodeGraphQt.qgraphics.node_text_item import NodeTextItem
from PySide6 import QtCore, QtGui

from app.ngqt_private import HookedNodeItem

#: The narrowest block (scene units; NodeGraphQt's default node width).
MIN_WIDTH = 160.0
#: Titles wider than this (scene units) are elided.
MAX_TITLE_WIDTH = 240.0
#: Text is hidden when titles would be smaller than this on screen (pixels).
HIDE_TEXT_PX = 4.0
#: The run badge's font, relative to the title's (never under 6.5 pt).
BADGE_SCALE = 0.8
#: Room above the badge's row (scene units).
BADGE_PAD = 2.0
#: The colour of a stale result's output labels.
GREYED_TEXT = QtGui.QColor(140, 140, 140)


def elided_title(title: str, font: QtGui.QFont, width: float = MAX_TITLE_WIDTH) -> str:
    """``title`` as shown on a block: cut to ``width`` with a trailing "…" when longer."""
    metrics = QtGui.QFontMetricsF(font)
    return metrics.elidedText(title, QtCore.Qt.ElideRight, width)


class TitleItem(NodeTextItem):
    """The title: shows the elided name; editing (double-click) starts from the full name."""

    def set_editable(self, value=False):
        node = self.parentItem()
        if node is not None and isinstance(node, BlockItem):
            text = node.name if value else elided_title(node.name, self.font())
            if self.toPlainText() != text:
                self.setPlainText(text)
        super().set_editable(value)


class BlockItem(HookedNodeItem):
    """A block's node item: minimum width, elided title, zoom-based text hiding, and the
    tooltip the node decorations set (NodeGraphQt's own rich-text one, the title unescaped and
    the type id, is not put back on every relayout)."""

    keep_own_tooltip = True
    #: The width the output labels take (scene units), at least: their widest in any state.
    reserved_output_width = 0.0
    #: Whether the output labels are greyed (the last result is stale).
    outputs_greyed = False

    def __init__(self, name="node", parent=None):
        super().__init__(name, parent)
        self.set_title_item(TitleItem(self.name, self))

    def set_outputs_greyed(self, greyed: bool) -> None:
        self.outputs_greyed = greyed
        self.texts_coloured()

    def texts_coloured(self) -> None:
        colour = GREYED_TEXT if self.outputs_greyed else QtGui.QColor(*self.text_color)
        for text in self._output_items.values():
            text.setDefaultTextColor(colour)

    def badge_font(self) -> QtGui.QFont:
        font = QtGui.QFont(self.title_item.font())
        font.setPointSizeF(max(6.5, font.pointSizeF() * BADGE_SCALE))
        return font

    def badge_row(self) -> float:
        """The height of the badge's row at the bottom of the block."""
        return QtGui.QFontMetricsF(self.badge_font()).height() + BADGE_PAD

    def badge_top(self) -> float:
        """Where the badge's row starts (item coordinates)."""
        return self.height - self.badge_row()

    @AbstractNodeItem.name.setter
    def name(self, name=""):
        AbstractNodeItem.name.fset(self, name)
        shown = elided_title(name, self.title_item.font())
        if self.title_item.toPlainText() == shown:
            return
        self.title_item.setPlainText(shown)
        if self.scene():
            self.draw_node()  # the width follows the title
        self.update()

    def node_size(self, width: float, height: float) -> tuple[float, float]:
        """NodeGraphQt's size with the output labels as wide as ``reserved_output_width``
        (its width is the port's + max(title, input labels + output labels)), at least
        :data:`MIN_WIDTH`, and the badge's row."""
        outs = [t.boundingRect().width() for p, t in self._output_items.items()
                if p.isVisible() and t.isVisible()]
        if outs and self.reserved_output_width > max(outs) and not self._widgets:
            ins = [t.boundingRect().width() for p, t in self._input_items.items()
                   if p.isVisible() and t.isVisible()]
            title, inputs = self.title_item.boundingRect().width(), max(ins, default=0.0)
            width += (max(title, inputs + self.reserved_output_width)
                      - max(title, inputs + max(outs)))
        return max(width, MIN_WIDTH), height + self.badge_row()

    def auto_switch_mode(self):
        """Hide the texts when titles would be under :data:`HIDE_TEXT_PX` on screen (instead
        of NodeGraphQt's rule, under 70 px of node width, which hit narrow blocks first)."""
        viewer = self.viewer()
        if viewer is None:
            return
        scale = viewer.transform().m11()
        px = QtGui.QFontInfo(self.title_item.font()).pixelSize() * scale
        self.set_proxy_mode(px < HIDE_TEXT_PX)
