"""The Qt desktop block editor (the only package that imports PySide6, NodeGraphQt, pyqtgraph)."""

from app._none_refcount import keep_none_alive

keep_none_alive()
