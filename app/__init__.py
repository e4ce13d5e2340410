"""The Qt desktop block editor (the only package that imports PySide6, NodeGraphQt, pyqtgraph)."""
