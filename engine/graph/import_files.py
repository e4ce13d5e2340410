"""The files an import writes beside its canvas: each array as ``<canvas stem>.<block
id>.<hash12>.npy`` (named by its content), which of a canvas's files an earlier import wrote
(and so may be replaced), and how a message shows a path. Shared by the one-layer import
(:mod:`engine.graph.layer_canvas`), the merged canvas (:mod:`engine.graph.merged_canvas`) and
``import --all`` (:mod:`engine.graph.model_canvases`).
"""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

import numpy as np

from engine.base import names
from engine.base.errors import InvalidArgumentError
from engine.graph.canvas_file import load_canvas

CANVAS_SUFFIX = ".gbc.json"


def canvas_stem(canvas_path: str) -> str:
    """The canvas file's name without ``.gbc.json`` (or its last suffix): its arrays' prefix."""
    name = Path(canvas_path).name
    return name[: -len(CANVAS_SUFFIX)] if name.endswith(CANVAS_SUFFIX) else Path(name).stem


def npy_bytes(array: np.ndarray) -> bytes:
    """``array`` as the bytes of a C-order .npy file (no pickles)."""
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


#: The blocks whose values an import writes as .npy files, and the hex digits of the content
#: hash in those files' names.
ARRAY_IDS = ("filter", "input", "bias", "pointwise_filter")
DIGEST_CHARS = 12
#: Characters of a path a message shows.
PATH_CHARS = 120


def array_name(stem: str, node_id: str, data: bytes) -> str:
    """``<stem>.<node_id>.<hash12>.npy``: the file holding ``data`` (.npy bytes)."""
    return f"{stem}.{node_id}.{hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]}.npy"


def owned_arrays(canvas_path: Path) -> list[str]:
    """The array files an existing canvas names that an import of it wrote: its ``filter``,
    ``input`` and ``bias`` Tensor blocks' fill=file paths of the form
    ``<stem>.<id>.<hash12>.npy`` (or ``<stem>.<id>.npy``, from before content-addressed names);
    nothing when it is not a readable canvas."""
    try:
        canvas = load_canvas(canvas_path)
    except (InvalidArgumentError, OSError):
        return []
    stem = re.escape(canvas_stem(Path(canvas_path).name))
    owned = []
    for node_id in ARRAY_IDS:
        node = canvas.nodes.get(node_id)
        if node is None or node.type != "Tensor" or node.attrs.get("fill") != "file":
            continue
        path = node.attrs.get("path")
        pattern = rf"{stem}\.{node_id}(\.[0-9a-f]{{{DIGEST_CHARS}}})?\.npy"
        if isinstance(path, str) and re.fullmatch(pattern, path):
            owned.append(path)
    return owned


def shown_place(path: str | Path) -> str:
    """A path for a message: quoted, escaped and cut (:data:`PATH_CHARS`), so the reason after it
    stays on the line."""
    return names.shown(str(path), PATH_CHARS)
