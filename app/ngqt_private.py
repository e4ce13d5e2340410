"""Every use of NodeGraphQt's private names, in one place (NodeGraphQt 0.6.44, pinned in
pyproject.toml: a release may rename any of them).

NodeGraphQt has no public API for what these do; each function says what it reads or
replaces. :data:`PRIVATE_NAMES` lists every private attribute used here, by owner class;
``tests/test_app_ngqt_private.py`` names each one and checks that it exists, so an upgrade that
renames one fails there first. No other module of ``app`` touches a NodeGraphQt name that
starts with an underscore.
"""

from __future__ import annotations

from NodeGraphQt.qgraphics.node_backdrop import BackdropNodeItem
from NodeGraphQt.qgraphics.node_base import NodeItem
from PySide6 import QtWidgets

#: (owner class, attribute) of every private name this module relies on.
PRIVATE_NAMES: tuple[tuple[str, str], ...] = (
    ("NodeGraph", "_on_node_data_dropped"),
    ("NodeGraph", "_on_node_name_changed"),
    ("NodeGraph", "_on_search_triggered"),
    ("NodeGraph", "_on_node_backdrop_updated"),
    ("NodeViewer", "_cursor_text"),
    ("NodeViewer", "_LIVE_PIPE"),
    ("NodeViewer", "_start_port"),
    ("NodeViewer", "_detached_port"),
    ("NodeItem", "_text_item"),
    ("NodeItem", "_tooltip_disable"),
    ("NodeItem", "_calc_size_horizontal"),
    ("BackdropNodeItem", "_sizer"),
)


def release_view_handlers(graph) -> None:
    """Disconnect the NodeGraph's own slots for drops, title edits, the tab search and
    backdrop resizes from its viewer's signals, so the caller's handlers replace them (the
    graph has no public API to remove its own slots)."""
    v = graph.viewer()
    v.data_dropped.disconnect(graph._on_node_data_dropped)
    v.node_name_changed.disconnect(graph._on_node_name_changed)
    v.search_triggered.disconnect(graph._on_search_triggered)
    v.node_backdrop_updated.disconnect(graph._on_node_backdrop_updated)


def modifier_hint(viewer) -> QtWidgets.QGraphicsTextItem | None:
    """The text item the viewer shows beside the cursor while Ctrl / Shift / Alt is held
    ("CTRL: Deselect Nodes"; hidden by its keyReleaseEvent)."""
    return getattr(viewer, "_cursor_text", None)


def dragged_wire_start(viewer):
    """The port a new wire is being dragged from, or None: no wire is being dragged, or the
    drag pulled an existing wire off a port (releasing it disconnects). The viewer keeps the
    live wire in ``_LIVE_PIPE`` (visible while dragging), its start in ``_start_port`` and a
    pulled-off wire's port in ``_detached_port``. Read only."""
    live = getattr(viewer, "_LIVE_PIPE", None)
    start = getattr(viewer, "_start_port", None)
    if live is None or not live.isVisible() or start is None:
        return None
    if getattr(viewer, "_detached_port", None) is not None:
        return None
    return start


def backdrop_handle_size(item: BackdropNodeItem) -> float:
    """The size of a backdrop's resize handle (its minimum size is measured to the handle)."""
    return item._sizer.size


class HookedNodeItem(NodeItem):
    """NodeGraphQt's node item with public hooks for what it does only in private methods:
    the title item (``title_item``, replaceable with ``set_title_item``), the width
    (``node_size(width, height)``, given NodeGraphQt's own size), the text colours
    (``texts_coloured``, after NodeGraphQt set them) and its rich-text tooltip,
    which :meth:`_tooltip_disable` puts back on every ``draw_node`` unless
    ``keep_own_tooltip`` is True."""

    keep_own_tooltip = False

    @property
    def title_item(self):
        return self._text_item

    def set_title_item(self, item) -> None:
        """Replace the title item (before the node is in a scene: nothing else refers to the
        old one then)."""
        self._text_item.setParentItem(None)
        self._text_item = item

    def node_size(self, width: float, height: float) -> tuple[float, float]:
        return width, height

    def _tooltip_disable(self, state):
        if not self.keep_own_tooltip:
            super()._tooltip_disable(state)

    def _calc_size_horizontal(self):
        return self.node_size(*super()._calc_size_horizontal())

    def texts_coloured(self) -> None:
        """Called after every ``draw_node`` gave the title and the port labels the node's text
        colour (NodeGraphQt's ``_set_text_color``): a subclass colours some differently."""

    def _set_text_color(self, color):
        super()._set_text_color(color)
        self.texts_coloured()
