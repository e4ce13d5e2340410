"""Canary for NodeGraphQt's private names: every one app/ngqt_private.py relies on, named here
and checked to exist on a live graph, viewer, node item and backdrop item, so an upgrade that
renames one fails here before it fails in the app."""

from __future__ import annotations

import pathlib
import re

import pytest

pytest.importorskip("PySide6")

import NodeGraphQt
from NodeGraphQt.qgraphics.node_backdrop import BackdropNodeItem
from NodeGraphQt.qgraphics.node_base import NodeItem

from app import ngqt_private

RELIED_ON = {
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
}


def test_the_module_lists_exactly_the_names_named_here():
    assert set(ngqt_private.PRIVATE_NAMES) == RELIED_ON


def test_every_private_name_exists_on_a_live_object(qapp):
    graph = NodeGraphQt.NodeGraph()
    owners = {"NodeGraph": graph, "NodeViewer": graph.viewer(), "NodeItem": NodeItem(),
              "BackdropNodeItem": BackdropNodeItem()}
    missing = [f"{owner}.{name}" for owner, name in sorted(RELIED_ON)
               if not hasattr(owners[owner], name)]
    assert not missing, f"NodeGraphQt {NodeGraphQt.__version__} lacks {missing}"
    assert isinstance(ngqt_private.backdrop_handle_size(owners["BackdropNodeItem"]), float | int)
    assert ngqt_private.dragged_wire_start(graph.viewer()) is None  # no wire being dragged


def test_no_other_app_module_touches_a_private_nodegraphqt_name():
    """The names above appear in app/ only in ngqt_private.py."""
    app_dir = pathlib.Path(ngqt_private.__file__).parent
    found = []
    for path in sorted(app_dir.rglob("*.py")):
        if path.name == "ngqt_private.py":
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{path.name}: {name}" for _owner, name in RELIED_ON
                  if re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text)]
    assert not found
