"""The Tensor block a dropped file becomes: a .npy array read as it is (fill=file), a PNG or
JPEG image (fill=image); the path stored relative to the canvas when the file lies below it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from engine.base.dtypes import DTYPES, dtype_name
from engine.base.errors import InvalidArgumentError
from engine.io import image_source

#: Suffixes of the images a dropped file becomes a Tensor block (fill=image) for.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
TENSOR_SUFFIXES = (".npy", *IMAGE_SUFFIXES)


def _stored_path(path: Path, base_dir: Path | None) -> str:
    """``path`` relative to ``base_dir`` when the file lies below it, else as it is."""
    stored = str(path)
    if base_dir is not None:
        try:
            stored = Path(os.path.relpath(path, base_dir)).as_posix()
            if stored.startswith(".."):
                stored = str(path)
        except ValueError:  # another drive on Windows
            stored = str(path)
    return stored


def dropped_tensor_attrs(path: Path, base_dir: Path | None) -> tuple[dict, str | None]:
    """Attributes of a Tensor block reading a dropped .npy (fill=file) or PNG/JPEG image
    (fill=image) and a warning, if any."""
    if str(path).lower().endswith(IMAGE_SUFFIXES):
        return image_tensor_attrs(path, base_dir)
    return npy_tensor_attrs(path, base_dir)


def image_tensor_attrs(path: Path, base_dir: Path | None) -> tuple[dict, str | None]:
    """Attributes of a Tensor block reading the image ``path`` (fill=image): gray for a gray
    image, else rgb; the path stored as for .npy files. A header that cannot be read is a
    warning (the block shows the error on its path)."""
    attrs: dict = {"fill": "image", "path": _stored_path(path, base_dir)}
    try:
        header = image_source.read_header(str(path))
    except InvalidArgumentError as exc:
        return attrs, f"{path.name}: {exc}"
    attrs["color"] = "gray" if header.mode in image_source.GRAY_MODES else "rgb"
    return attrs, None


def npy_tensor_attrs(path: Path, base_dir: Path | None) -> tuple[dict, str | None]:
    """Attributes of a Tensor block reading ``path`` (fill=file) and a warning, if any.

    The path is stored relative to ``base_dir`` when the file lies below it; the dtype comes from
    the .npy header (read without unpickling).
    """
    stored = _stored_path(path, base_dir)
    attrs: dict = {"fill": "file", "path": stored}
    warning = None
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        return attrs, f"{path.name}: cannot read the .npy header: {exc}"
    name = dtype_name(arr.dtype)
    if name in DTYPES:
        attrs["dtype"] = name
    else:
        warning = f"{path.name}: dtype {name} is not one of {', '.join(DTYPES)}"
    return attrs, warning

