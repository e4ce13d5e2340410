"""Whether a file the command line is asked to write can be written, before anything runs.

``target_problem(target, protected)`` says why ``target`` must not or cannot be written: it is
one of the ``protected`` files (the canvas being read, the files it reads, a model being
imported) by any path to it (relative, absolute, a symlink or a hard link: same device and
inode), it exists and is not a regular file (a folder, a FIFO, a device such as /dev/null, a
socket: never replaced by a regular file), its folder does not exist, or its name or path is
longer than the system allows. None when it can be tried; a failure at write time (disk full,
no permission) is still possible.

``canvas_reads(canvas, base_dir)`` is the one definition of the files a canvas reads: every
node's active, non-empty ``path`` attribute (a Tensor's fill=file .npy or fill=image picture),
made absolute against the canvas file's folder as the compiler does; ``canvas_protected`` puts
them, and the canvas file, in the form ``target_problem`` takes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from blocks.registry import REGISTRY
from blocks.spec import read_paths, resolve_paths
from engine.base.atomic import not_regular
from engine.graph.canvas import Canvas
from engine.graph.labels import block_labels

#: Used when the system does not say (os.pathconf is POSIX only).
DEFAULT_NAME_MAX = 255
DEFAULT_PATH_MAX = 4096


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return int(os.pathconf(folder, name))
    except (AttributeError, OSError, ValueError):
        return default


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def canvas_reads(canvas: Canvas, base_dir: str | os.PathLike) -> dict[str, str]:
    """``{absolute path: node id}`` of every file ``canvas`` reads (see the module docstring),
    in canvas order."""
    found: dict[str, str] = {}
    for node in canvas.nodes.values():
        spec = REGISTRY.get(node.type) if isinstance(node.type, str) else None
        if spec is None or not any(a.kind == "path" for a in spec.attrs):
            continue
        attrs, _problems = spec.resolve_attrs(node.attrs)
        attrs = resolve_paths(spec, attrs, base_dir)
        for path in read_paths(spec, attrs):
            found.setdefault(path, node.id)
    return found


def canvas_protected(canvas_path: str, canvas: Canvas | None = None) -> dict[str, str]:
    """The canvas file and (given the loaded ``canvas``) every file it reads, as
    ``{path: what it is}`` for :func:`target_problem` (a read file names its block by label)."""
    protected = {canvas_path: "the canvas being read"}
    if canvas is not None:
        base, labels = Path(canvas_path).resolve().parent, block_labels(canvas)
        for path, node_id in canvas_reads(canvas, base).items():
            label = labels.get(node_id, node_id)  # a title: printable (engine.base.names)
            protected.setdefault(path, f"a file the canvas reads (block {label!r})")
    return protected


def target_problem(target: str, protected: tuple[str, ...] | Mapping[str, str] = ()
                   ) -> str | None:
    """Why ``target`` cannot be written (see the module docstring), or None. ``protected`` maps
    each protected path to what it is (``"the canvas being read"``); a plain tuple of paths is
    ``the canvas being read``."""
    path = Path(target)
    if not target or target.endswith(("/", os.sep)):
        return "is not a file name"
    folder = path.parent
    try:
        encoded = os.fsencode(target)
    except (UnicodeError, ValueError):
        return "cannot be encoded as a file name"
    if b"\x00" in encoded:
        return "contains a NUL character"
    if len(encoded) >= _limit(folder, "PC_PATH_MAX", DEFAULT_PATH_MAX):
        return f"is longer ({len(encoded)} bytes) than this system allows for a path"
    if len(os.fsencode(path.name)) > _limit(folder, "PC_NAME_MAX", DEFAULT_NAME_MAX):
        return (f"has a file name of {len(os.fsencode(path.name))} bytes, longer than this "
                "system allows")
    if not folder.is_dir():
        return "cannot be written: its folder does not exist"
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"cannot be checked: {err.strerror or err}"
    if os.path.isdir(target):
        return "is a folder"
    kind = not_regular(target)
    if kind:
        return f"is {kind}, not a regular file: refusing to replace it"
    if not isinstance(protected, Mapping):
        protected = dict.fromkeys(protected, "the canvas being read")
    for other, what in protected.items():
        try:
            if _same_file(st, os.stat(other)):
                return f"is {what}: refusing to overwrite it"
        except (OSError, ValueError):
            continue
    return None
