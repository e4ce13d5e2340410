"""The Qt desktop block editor (the only package that imports PySide6, NodeGraphQt, pyqtgraph)."""

import engine  # noqa: F401  (first: its BLAS thread setting must precede NumPy's import)
