"""The editor of a file path attribute: the path relative to the canvas file, with a browse
button choosing a .npy file, or a PNG/JPEG image while the block's fill is ``image``."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6 import QtWidgets

from app import dialog_folders
from app.attr_editor_base import LineEditor

#: A path editor's file dialog for a Tensor fill: (dialog_folders kind, what to choose, the
#: dialog's file filter); .npy files for any other fill.
PATH_CHOICES = {"image": ("image", "a PNG or JPEG image",
                          "Images (*.png *.jpg *.jpeg);;All files (*)")}
NPY_CHOICE = ("tensor", "a .npy file", "NumPy arrays (*.npy);;All files (*)")


class PathEditor(LineEditor):
    """A file path (relative to the canvas file) with a browse button: .npy files, or PNG/JPEG
    images while the block's fill is ``image``."""

    def __init__(self, spec, parent=None, base_dir=None):
        super().__init__(spec, parent, "file.npy (relative to the canvas)")
        self.base_dir = base_dir
        self.kind, what, self.filter = NPY_CHOICE
        self.browse_button = browse = QtWidgets.QToolButton(self)
        browse.setText("…")
        browse.setToolTip(f"Choose {what}")
        browse.clicked.connect(self.browse)
        self.lay.addWidget(browse)

    def set_context(self, attrs: dict) -> None:
        self.kind, what, self.filter = PATH_CHOICES.get(str(attrs.get("fill")), NPY_CHOICE)
        self.browse_button.setToolTip(f"Choose {what}")
        self.edit.setPlaceholderText(
            "image.png (relative to the canvas)" if self.kind == "image"
            else "file.npy (relative to the canvas)")

    def browse(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self, f"Choose {self.spec.name}", dialog_folders.start(self.kind), self.filter)
        if path:
            dialog_folders.remember(self.kind, path)
            self._show(self.relative(path))
            self.committed.emit()

    def relative(self, path: str) -> str:
        base = self.base_dir() if callable(self.base_dir) else None
        if base is None:
            return path
        try:
            rel = os.path.relpath(path, base)
        except ValueError:
            return path
        return path if rel.startswith("..") else Path(rel).as_posix()
