"""Several conv layers of a model in one canvas: a frame per layer (the app's File > Import
Layer… with several layers chosen, "one canvas, a frame per layer").

Each layer's blocks are the blocks of its own import (:func:`engine.graph.layer_canvas.
build_canvas`: same types, attributes and seeds, so the same results; titles start with the
layer's escaped name), with ids made unique by a prefix from the layer's name: ``<prefix>__<id>`` (``conv1__forward``, ``conv1__grad_filter``...), the prefix
the name with every character outside ``A-Z a-z 0-9 _ -`` as ``_``, cut to
:data:`PREFIX_CHARS`, ``_2``, ``_3``... when two layers make the same one. Each layer's blocks
and notes lie in their own region, inside a frame ``<prefix>__frame`` titled by the layer's name
(escaped, :func:`engine.base.names.escaped`) and op; the regions are laid out in a grid of
ceil(sqrt(n)) columns, in the order given. Every layer takes the model's input size; ``batch``
and ``layout`` apply to all.

Arrays are written as a single import writes them, beside the canvas's real file:
``<canvas stem>.<block id>.<hash12>.npy`` (:func:`engine.graph.import_files.array_name`); the
canvas and all its arrays are one set, all or nothing (:func:`engine.base.atomic.
write_file_set`), written only if ``gradblocks check`` accepts the whole canvas
(:func:`engine.graph.layer_canvas.check_imported`), never over the model (``protected``) or a
file that is not a regular file. Re-writing the canvas removes only the arrays the previous
one named that an import wrote (:func:`owned_arrays`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.base.atomic import Member, resolve_target, write_file_set
from engine.base.errors import InvalidArgumentError
from engine.base.names import MAX_TITLE, escaped
from engine.graph import import_files
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import dumps, load_canvas
from engine.graph.import_files import (
    ARRAY_IDS,
    DIGEST_CHARS,
    array_name,
    canvas_stem,
    npy_bytes,
    shown_place,
)
from engine.graph.layer_canvas import TITLE_NAME_CHARS, build_canvas, check_imported, plan_layer
from engine.graph.separable_canvas import layer_arrays
from engine.graph.targets import target_problem
from engine.io.models.model_import import ConvLayer, ModelImportError, TfConv

#: Between a layer's prefix and a block id of its import.
SEPARATOR = "__"
#: Characters of a layer's name an id prefix keeps (the longest id of an import,
#: ``pointwise_filter_sizes``, and the separator stay within the 64 characters of an id).
PREFIX_CHARS = 40
#: A generous bound on a block's drawn size in the app (scene units; a title longer than the
#: width is elided): the room a layer's frame leaves for each block.
BLOCK_BOX = (300.0, 180.0)
#: Room around a layer's blocks inside its frame, above them for the frame's title bar, and
#: between two frames.
FRAME_MARGIN = 40.0
FRAME_TITLE_ROOM = 40.0
FRAME_GAP = 120.0


@dataclass(frozen=True)
class MergedLayer:
    """One layer in the merged canvas: its frame and its blocks' ids (import id -> id)."""

    name: str
    frame: str
    ids: dict[str, str]
    conv: TfConv
    output_shape: tuple[int, ...]


@dataclass(frozen=True)
class MergedImport:
    """What :func:`write_merged_canvas` wrote."""

    canvas: Canvas
    layers: list[MergedLayer]
    files: list[str]  # every file written, the canvas last


def id_prefixes(names: Sequence[str]) -> list[str]:
    """A distinct id prefix per layer name (see the module docstring)."""
    taken: set[str] = set()
    out = []
    for name in names:
        base = re.sub(r"[^A-Za-z0-9_-]", "_", escaped(name, PREFIX_CHARS)) or "layer"
        prefix, k = base, 1
        while prefix in taken:
            k += 1
            prefix = f"{base[: PREFIX_CHARS - len(str(k)) - 1]}_{k}"
        taken.add(prefix)
        out.append(prefix)
    return out


def block_id(prefix: str, import_id: str) -> str:
    """The merged canvas's id of a layer's block (or note) ``import_id``."""
    return f"{prefix}{SEPARATOR}{import_id}"


def frame_title(layer: ConvLayer) -> str:
    """The layer's name, escaped and cut, and its op."""
    return escaped(f"{escaped(layer.name, TITLE_NAME_CHARS)} ({layer.op})", MAX_TITLE)


def _extent(part: Canvas) -> tuple[float, float]:
    """Width and height of a layer canvas's blocks and notes, from its origin (its blocks
    start at (0, 0))."""
    right = [x + BLOCK_BOX[0] for x, _ in (n.pos for n in part.nodes.values())]
    bottom = [y + BLOCK_BOX[1] for _, y in (n.pos for n in part.nodes.values())]
    right += [n.pos[0] + n.size[0] for n in part.notes.values()]
    bottom += [n.pos[1] + n.size[1] for n in part.notes.values()]
    return max(right), max(bottom)


def _place(merged: Canvas, part: Canvas, prefix: str, name: str,
           origin: tuple[float, float]) -> dict[str, str]:
    """Copy ``part``'s blocks, edges and notes into ``merged`` at ``origin``, ids prefixed,
    titles starting with ``name`` (the layer's, escaped: the labels of the run table stay
    apart)."""
    ids = {node_id: block_id(prefix, node_id) for node_id in [*part.nodes, *part.notes]}
    ox, oy = origin
    for node in part.nodes.values():
        title = node.title if node.title.startswith(name) else f"{name} {node.title}"
        merged.add_node(node.type, (node.pos[0] + ox, node.pos[1] + oy), node.attrs,
                        id=ids[node.id], title=escaped(title, MAX_TITLE))
    for e in part.edges:
        merged.connect((ids[e.src[0]], e.src[1]), (ids[e.dst[0]], e.dst[1]))
    for note in part.notes.values():
        merged.add_note((note.pos[0] + ox, note.pos[1] + oy), note.text, note.size,
                        note.colour, id=ids[note.id])
    return ids


def build_merged(planned: Sequence[tuple[ConvLayer, TfConv, tuple[int, ...]]],
                 paths: Sequence[dict[str, str]]) -> tuple[Canvas, list[MergedLayer]]:
    """The merged canvas of ``planned`` layers (layer, its TF op, its output shape), each
    layer's arrays at ``paths[i]`` (import id -> .npy path relative to the canvas)."""
    prefixes = id_prefixes([layer.name for layer, _, _ in planned])
    parts = [build_canvas(layer, conv, shape, p)
             for (layer, conv, shape), p in zip(planned, paths, strict=True)]
    columns = max(1, math.ceil(math.sqrt(len(parts))))
    sizes = [_extent(part) for part in parts]
    cell_w = max(w for w, _ in sizes) + 2 * FRAME_MARGIN + FRAME_GAP
    row_h = [max(h for _, h in sizes[r:r + columns]) + 2 * FRAME_MARGIN + FRAME_TITLE_ROOM
             + FRAME_GAP for r in range(0, len(parts), columns)]
    merged, layers = Canvas(), []
    for i, (part, prefix, (layer, conv, shape)) in enumerate(zip(parts, prefixes, planned,
                                                                 strict=True)):
        fx, fy = (i % columns) * cell_w, sum(row_h[: i // columns])
        ids = _place(merged, part, prefix, escaped(layer.name, TITLE_NAME_CHARS),
                     (fx + FRAME_MARGIN, fy + FRAME_MARGIN + FRAME_TITLE_ROOM))
        w, h = sizes[i]
        frame = merged.add_frame((fx, fy), (w + 2 * FRAME_MARGIN,
                                            h + 2 * FRAME_MARGIN + FRAME_TITLE_ROOM),
                                 frame_title(layer), id=block_id(prefix, "frame"))
        layers.append(MergedLayer(layer.name, frame.id, ids, conv, tuple(shape)))
    return merged, layers


def owned_arrays(canvas_path: Path) -> list[str]:
    """The array files an existing canvas names that an import wrote: a single import's
    (:func:`engine.graph.import_files.owned_arrays`) and a merged one's (a Tensor block
    ``<prefix>__filter``, ``__input``, ``__bias`` or ``__pointwise_filter`` with fill=file path
    ``<stem>.<its id>.<hash12>.npy``); nothing when it is not a readable canvas."""
    owned = import_files.owned_arrays(canvas_path)
    try:
        canvas = load_canvas(canvas_path)
    except (InvalidArgumentError, OSError):
        return owned
    stem = re.escape(canvas_stem(Path(canvas_path).name))
    roles = "|".join(ARRAY_IDS)
    for node in canvas.nodes.values():
        path = node.attrs.get("path")
        if (node.type != "Tensor" or node.attrs.get("fill") != "file"
                or not isinstance(path, str)
                or not re.fullmatch(rf".+{SEPARATOR}({roles})", node.id)):
            continue
        if re.fullmatch(rf"{stem}\.{re.escape(node.id)}\.[0-9a-f]{{{DIGEST_CHARS}}}\.npy", path):
            owned.append(path)
    return owned


def _arrays(layer: ConvLayer) -> dict[str, np.ndarray]:
    """The arrays a layer's import writes, by import id (no ``input``: the input is random)."""
    return layer_arrays(layer)


def write_merged_canvas(layers: Sequence[ConvLayer], canvas_path: str, *, batch: int = 1,
                        layout: str | None = None, protected: tuple[str, ...] = ()
                        ) -> MergedImport:
    """Check every layer (as its own import would, one line naming the first that fails), then
    write the merged canvas and its arrays as one set (see the module docstring)."""
    if not layers:
        raise ModelImportError("no conv layer chosen: choose at least one")
    planned = [(layer, *plan_layer(layer, None, batch, layout)) for layer in layers]
    keep = dict.fromkeys(protected, "the model being read")
    problem = target_problem(canvas_path, keep)
    if problem:
        raise ModelImportError(f"{shown_place(canvas_path)} {problem}")
    real = resolve_target(canvas_path)  # the arrays go beside the real canvas file
    stem = canvas_stem(real.name)
    prefixes = id_prefixes([layer.name for layer in layers])
    data: dict[str, bytes] = {}  # file name -> .npy bytes
    paths: list[dict[str, str]] = []
    node_files: dict[str, str] = {}  # merged block id -> file name
    for layer, prefix in zip(layers, prefixes, strict=True):
        named = {}
        for import_id, array in _arrays(layer).items():
            merged_id = block_id(prefix, import_id)
            blob = npy_bytes(array)
            named[import_id] = node_files[merged_id] = array_name(stem, merged_id, blob)
            data[named[import_id]] = blob
        paths.append(named)
    for name in data:
        problem = target_problem(str(real.parent / name), keep)
        if problem:
            raise ModelImportError(f"{shown_place(real.parent / name)} {problem}")
    try:
        canvas, merged = build_merged(planned, paths)
    except InvalidArgumentError as err:
        raise ModelImportError(f"{shown_place(canvas_path)}: {err}") from None
    text = dumps(canvas).encode("utf-8")
    members = [Member.of_bytes(name, d) for name, d in data.items()]
    files = write_file_set(
        canvas_path, lambda f: f.write(text), members, owned_arrays, keep=list(keep),
        check=lambda temps: check_imported(canvas, {k: temps[n] for k, n in node_files.items()},
                                           real.parent, canvas_path))
    return MergedImport(canvas, merged, [*map(str, files[:-1]), canvas_path])
