"""Saving what the viewer shows: the tensor of the side acted on as .npy, the picture as .png.

Files are written beside their target and renamed into place (:mod:`engine.base.atomic`), so a
failed save never leaves half a file where the user's file was.
"""

from __future__ import annotations

import re

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from app import dialog_folders
from engine.base.atomic import write_atomically, write_bytes_atomically


def save_npy(path: str, tensor: np.ndarray) -> None:
    """Save ``tensor`` (``.npy`` added to a name without it, as ``np.save`` would); bfloat16 is
    saved exactly as float32 (.npy has no bfloat16). Raises OSError when the file cannot be
    written (the file there, if any, is then unchanged)."""
    a = tensor.astype(np.float32) if tensor.dtype.name == "bfloat16" else tensor
    if not str(path).lower().endswith(".npy"):
        path = f"{path}.npy"
    write_atomically(path, lambda f: np.save(f, a, allow_pickle=False))


def save_png(path: str, picture: QtGui.QPixmap) -> bool:
    """Save ``picture`` as a PNG; False when it cannot be encoded or written."""
    buf = QtCore.QBuffer()
    buf.open(QtCore.QIODevice.WriteOnly)
    if not picture.save(buf, "PNG"):
        return False
    try:
        write_bytes_atomically(path, bytes(buf.data()))
    except OSError:
        return False
    return True


#: Characters a suggested file name keeps from a block title (others become "_"), and its length.
_UNSAFE = re.compile(r'[\x00-\x1f\x7f/\\:*?"<>|]+')
STEM_LIMIT = 80


def file_stem(title: str) -> str:
    """A file name (without suffix) suggested for what ``title`` names: the block's title with
    characters that are awkward in file names replaced, "tensor" when nothing is left."""
    stem = _UNSAFE.sub("_", title.replace(" · ", " ")).strip(" ._")[:STEM_LIMIT].strip(" ._")
    return stem or "tensor"


def ask_save_npy(viewer, what: str, title: str = "") -> None:
    """Ask where to save the tensor ``what`` names ("left tensor" ...), suggesting a file
    named after ``title`` (the block's), and save it there; a failure is reported in a
    message box naming the file."""
    path, _ = QtWidgets.QFileDialog.getSaveFileName(
        viewer, f"Save {what}", dialog_folders.start("tensor", f"{file_stem(title)}.npy"),
        "NumPy array (*.npy)")
    if not path:
        return
    dialog_folders.remember("tensor", path)
    try:
        viewer.export_npy(path)
    except (OSError, ValueError) as e:
        QtWidgets.QMessageBox.warning(viewer, "Save tensor", f"Could not write {path}: {e}")


def ask_save_png(viewer, title: str = "") -> None:
    """Ask where to save the picture (named after ``title``) and save it there (a failure is
    reported)."""
    path, _ = QtWidgets.QFileDialog.getSaveFileName(
        viewer, "Save picture", dialog_folders.start("image", f"{file_stem(title)}.png"),
        "PNG image (*.png)")
    if not path:
        return
    dialog_folders.remember("image", path)
    if not viewer.export_png(path):
        QtWidgets.QMessageBox.warning(viewer, "Save picture", f"Could not write {path}.")
