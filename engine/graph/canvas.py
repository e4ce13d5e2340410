"""The canvas model and its file format (``.gbc.json``, version 2).

::

    {"format": "gradblocks.canvas", "version": 2,
     "nodes": [{"id": "x", "type": "Tensor", "title": "x", "pos": [0, 0],
                "attrs": {"shape": [1, 5, 5, 2], "dtype": "float32"}}, ...],
     "edges": [{"src": ["x", "output"], "dst": ["grad", "input"]}, ...],
     "frames": [{"id": "frame_1", "title": "Inputs", "colour": "#3465a4", "pos": [-40, -40],
                 "size": [400, 260]}, ...],
     "notes": [{"id": "note_1", "text": "plain text", "colour": "#fce94f", "pos": [0, 300],
                "size": [220, 120]}, ...]}

Version 1 files (no frames or notes) still load (migrated in memory); saving always writes
version 2; a newer version is refused with a message saying to update GradBlocks. Frames and
notes (:mod:`engine.graph.annotations`) carry no computation.

Node ids are stable across save and load and follow :mod:`engine.base.names` (1-64 characters from
``A-Z a-z 0-9 _ -``); titles are at most 200 printable characters. Attributes left out take their
defaults. Saving is atomic (a temporary file, then replace) and deterministic (sorted keys,
2-space indent, trailing newline). Loading validates everything and reports every problem at
once with its JSON path; it never executes code, never follows a FIFO or device, refuses files
over a size cap before reading them, and reads any bytes into a :class:`CanvasError` at worst.
Graph operations are linear: edges are indexed by their endpoints and order and cycles come
from :mod:`graphlib`.
"""

from __future__ import annotations

import copy
import graphlib
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from blocks.registry import REGISTRY, get_spec
from engine.base.atomic import write_bytes_atomically
from engine.base.errors import InvalidArgumentError
from engine.base.names import MAX_TITLE, id_problem, shown, text_problem
from engine.graph import annotations as items  # `annotations` is the __future__ feature
from engine.graph.annotations import Frame, Note
from engine.io import strict_json

FORMAT = "gradblocks.canvas"
VERSION = 2
#: The format versions this GradBlocks reads (older ones are migrated in memory).
READS = (1, 2)
#: ``format`` of a copied group of blocks (the clipboard): nodes and edges as in a canvas file.
FRAGMENT_FORMAT = "gradblocks.fragment"
SUFFIX = ".gbc.json"
#: Canvas files larger than this are refused before reading (``load_canvas(max_bytes=...)``).
MAX_FILE_BYTES = 256 * 2**20
#: A block position is at most this far from the origin on either axis (scene units): beyond,
#: the view can no longer place, hit-test or fit blocks.
MAX_COORD = 1e9

PortRef = tuple[str, str]


class CanvasError(InvalidArgumentError):
    """An invalid canvas: ``problems`` lists ``(json_path, message)``, all of them.

    ``places`` maps the JSON path of a block attribute's problem to ``(node_id, attr)``, and
    ``canvas`` is what was read (blocks without their bad values), so messages can name the
    block as the compiler does (:func:`engine.graph.report.canvas_error_lines`)."""

    def __init__(self, problems: list[tuple[str, str]], source: str | None = None,
                 canvas: Canvas | None = None,
                 places: dict[str, tuple[str, str]] | None = None):
        self.problems = problems
        self.source = source
        self.canvas = canvas
        self.places = places or {}
        head = f"{source}: " if source else ""
        lines = [f"{path}: {msg}" for path, msg in problems]
        super().__init__(head + f"{len(problems)} problem(s) in the canvas:\n  "
                         + "\n  ".join(lines))


@dataclass
class Node:
    """A block on the canvas: stable ``id``, block ``type``, ``title``, ``pos`` and ``attrs``
    (only the attributes set on it; the rest take the spec's defaults)."""

    id: str
    type: str
    title: str
    pos: tuple[float, float] = (0.0, 0.0)
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Edge:
    """A wire from an output port ``src`` to an input port ``dst``, each ``(node_id, port)``."""

    src: PortRef
    dst: PortRef


class Canvas:
    """Nodes (in insertion order), edges, frames and notes. At most one edge enters an input
    port; ids are unique across nodes, frames and notes.

    ``edges`` lists the edges in the order they were made; they are indexed by input port and by
    node, so every query is proportional to its answer. Change the canvas through its methods.
    """

    def __init__(self, nodes: dict[str, Node] | None = None, edges: list[Edge] | None = None,
                 frames: dict[str, Frame] | None = None, notes: dict[str, Note] | None = None):
        self.nodes: dict[str, Node] = dict(nodes or {})
        self.frames: dict[str, Frame] = dict(frames or {})
        self.notes: dict[str, Note] = dict(notes or {})
        self._by_dst: dict[PortRef, Edge] = {}
        self._into: dict[str, dict[str, Edge]] = {}
        self._out_of: dict[str, dict[PortRef, Edge]] = {}
        for e in edges or []:
            self._add_edge(e)

    @property
    def edges(self) -> list[Edge]:
        """Every edge, in the order they were made (a new list: change it with the methods)."""
        return list(self._by_dst.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Canvas):
            return NotImplemented
        return (self.nodes == other.nodes and self.edges == other.edges
                and self.frames == other.frames and self.notes == other.notes)

    def __repr__(self) -> str:
        return (f"Canvas({len(self.nodes)} nodes, {len(self._by_dst)} edges, "
                f"{len(self.frames)} frames, {len(self.notes)} notes)")

    def _add_edge(self, e: Edge) -> None:
        self._by_dst[e.dst] = e
        self._into.setdefault(e.dst[0], {})[e.dst[1]] = e
        self._out_of.setdefault(e.src[0], {})[e.dst] = e

    def _drop_edge(self, e: Edge) -> None:
        del self._by_dst[e.dst]
        del self._into[e.dst[0]][e.dst[1]]
        del self._out_of[e.src[0]][e.dst]

    # -- editing ---------------------------------------------------------------------------
    def new_id(self, type_id: str) -> str:
        """A fresh id ``<type in lower case>_<k>`` with the smallest unused ``k`` (unused by
        nodes, frames and notes)."""
        stem = re.sub(r"[^a-z0-9]+", "_", type_id.lower()).strip("_")[:50] or "node"
        k = 1
        while self.has_id(f"{stem}_{k}"):
            k += 1
        return f"{stem}_{k}"

    def has_id(self, item_id: str) -> bool:
        """Whether a node, frame or note has ``item_id``."""
        return item_id in self.nodes or item_id in self.frames or item_id in self.notes

    def add_node(self, type_id: str, pos: tuple[float, float] = (0.0, 0.0),
                 attrs: dict[str, Any] | None = None, id: str | None = None,
                 title: str | None = None) -> Node:
        """Add a block of a known type; id, title, position and ``attrs`` are validated."""
        spec = get_spec(type_id)
        node_id = self._fresh(id or None, type_id)
        title = node_id if title is None else title
        problem = text_problem(title)
        if problem:
            raise InvalidArgumentError(problem, argument="title")
        node = Node(node_id, type_id, title, _position(pos), {})
        for name, value in (attrs or {}).items():
            node.attrs[name] = spec.attr(name).validate(value)
        if spec.result_name and spec.result_name not in node.attrs:
            default = spec.attr(spec.result_name).default
            name = self.unused_result_name(default)
            if name != default:  # a second Output is "result 2", not a duplicate "result"
                node.attrs[spec.result_name] = name
        self.nodes[node_id] = node
        return node

    def result_names(self) -> set[str]:
        """The result names (an Output's ``name``, :attr:`BlockSpec.result_name`) in use."""
        used = set()
        for node in self.nodes.values():
            spec = get_spec(node.type)
            if spec.result_name:
                used.add(node.attrs.get(spec.result_name, spec.attr(spec.result_name).default))
        return used

    def unused_result_name(self, base: str) -> str:
        """``base`` when no block uses it as its result name, else ``base 2``, ``base 3``...
        (a trailing number of ``base`` counted on), the first that is free."""
        used = self.result_names()
        if base not in used:
            return base
        match = re.fullmatch(r"(.*\S) (\d+)", base)
        stem, k = (match.group(1), int(match.group(2))) if match else (base, 1)
        stem = stem[:MAX_TITLE - 12]
        while f"{stem} {k}" in used or k == 1:
            k += 1
        return f"{stem} {k}"

    def remove_node(self, node_id: str) -> None:
        """Remove a node and every edge touching it."""
        self._node(node_id)
        for e in list(self._into.get(node_id, {}).values()):
            self._drop_edge(e)
        for e in list(self._out_of.get(node_id, {}).values()):
            self._drop_edge(e)
        self._into.pop(node_id, None)
        self._out_of.pop(node_id, None)
        del self.nodes[node_id]

    def connect(self, src: PortRef, dst: PortRef) -> Edge:
        """Wire output ``src`` to input ``dst``, replacing any edge already into ``dst``."""
        src, dst = (str(src[0]), str(src[1])), (str(dst[0]), str(dst[1]))
        if src[1] not in get_spec(self._node(src[0]).type).output_names():
            raise InvalidArgumentError(f"{src[0]} has no output port {src[1]!r}")
        if dst[1] not in get_spec(self._node(dst[0]).type).input_names():
            raise InvalidArgumentError(f"{dst[0]} has no input port {dst[1]!r}")
        if self._would_cycle(src[0], dst[0]):
            raise InvalidArgumentError(f"connecting {src[0]}.{src[1]} to {dst[0]}.{dst[1]} "
                                       "would make a cycle")
        self.disconnect(dst)
        edge = Edge(src, dst)
        self._add_edge(edge)
        return edge

    def disconnect(self, dst: PortRef) -> Edge | None:
        """Remove the edge into input ``dst``; returns it (None if there was none)."""
        edge = self._by_dst.get((str(dst[0]), str(dst[1])))
        if edge is not None:
            self._drop_edge(edge)
        return edge

    def set_attr(self, node_id: str, name: str, value: Any) -> None:
        """Set a validated attribute value (an AttrError names the attribute otherwise)."""
        node = self._node(node_id)
        node.attrs[name] = get_spec(node.type).attr(name).validate(value)

    def set_title(self, node_id: str, title: str) -> None:
        """Rename a block (its id stays); the title follows
        :func:`engine.base.names.text_problem`."""
        node = self._node(node_id)
        problem = text_problem(title)
        if problem:
            raise InvalidArgumentError(problem, argument="title")
        node.title = title

    def move(self, node_id: str, pos: tuple[float, float]) -> None:
        """Put a block at ``pos`` (two finite numbers)."""
        self._node(node_id).pos = _position(pos)

    # -- frames and notes ------------------------------------------------------------------
    def add_frame(self, pos: tuple[float, float], size: tuple[float, float] = items.FRAME_SIZE,
                  title: str = "Frame", colour: str = items.FRAME_COLOUR,
                  id: str | None = None) -> Frame:
        """Add a frame (all fields validated; a fresh ``frame_<k>`` id unless given)."""
        frame = Frame(self._fresh(id, "frame"), items.title(title),
                      items.colour(colour), items.position(pos),
                      items.size(size))
        self.frames[frame.id] = frame
        return frame

    def add_note(self, pos: tuple[float, float], text: str = "",
                 size: tuple[float, float] = items.NOTE_SIZE,
                 colour: str = items.NOTE_COLOUR, id: str | None = None) -> Note:
        """Add a note of plain ``text`` (all fields validated; a fresh ``note_<k>`` id unless
        given)."""
        note = Note(self._fresh(id, "note"), items.note_text(text),
                    items.colour(colour), items.position(pos),
                    items.size(size))
        self.notes[note.id] = note
        return note

    def remove_item(self, item_id: str) -> None:
        """Remove a frame or note (the blocks a frame holds stay)."""
        self._item(item_id)
        self.frames.pop(item_id, None)
        self.notes.pop(item_id, None)

    def move_item(self, item_id: str, pos: tuple[float, float]) -> None:
        """Put a frame or note's top-left corner at ``pos``."""
        self._item(item_id).pos = items.position(pos)

    def resize_item(self, item_id: str, size: tuple[float, float]) -> None:
        """Give a frame or note ``size`` [width, height]."""
        self._item(item_id).size = items.size(size)

    def recolour_item(self, item_id: str, colour: str) -> None:
        """Give a frame or note a ``#rrggbb`` colour."""
        self._item(item_id).colour = items.colour(colour)

    def retitle_frame(self, frame_id: str, title: str) -> None:
        """Rename a frame (the title rule of blocks)."""
        if frame_id not in self.frames:
            raise InvalidArgumentError(f"no frame {shown(frame_id)} on the canvas")
        self.frames[frame_id].title = items.title(title)

    def set_note_text(self, note_id: str, text: str) -> None:
        """Replace a note's plain text (:func:`engine.graph.annotations.note_text_problem`)."""
        if note_id not in self.notes:
            raise InvalidArgumentError(f"no note {shown(note_id)} on the canvas")
        self.notes[note_id].text = items.note_text(text)

    def _item(self, item_id: str) -> Frame | Note:
        item = (self.frames.get(item_id) or self.notes.get(item_id)
                if isinstance(item_id, str) else None)
        if item is None:
            raise InvalidArgumentError(f"no frame or note {shown(item_id)} on the canvas")
        return item

    def _fresh(self, item_id: str | None, stem: str) -> str:
        """``item_id`` checked (valid and unused), or a fresh ``<stem>_<k>``."""
        if item_id is None:
            return self.new_id(stem)
        problem = id_problem(item_id)
        if problem:
            raise InvalidArgumentError(problem, argument="id")
        if self.has_id(item_id):
            raise InvalidArgumentError(f"id {item_id!r} is already on the canvas",
                                       argument="id")
        return item_id
    def fragment(self, ids: Any) -> dict:
        """The blocks, frames and notes ``ids`` and the edges between the blocks as a fragment
        (the canvas file format with ``format`` :data:`FRAGMENT_FORMAT`), what :meth:`paste`
        takes."""
        ids = set(ids)
        data = self.to_json()
        return {
            "format": FRAGMENT_FORMAT,
            "version": VERSION,
            "nodes": [n for n in data["nodes"] if n["id"] in ids],
            "edges": [e for e in data["edges"] if e["src"][0] in ids and e["dst"][0] in ids],
            "frames": [f for f in data["frames"] if f["id"] in ids],
            "notes": [n for n in data["notes"] if n["id"] in ids],
        }

    def paste(self, fragment: Any, offset: tuple[float, float] = (0.0, 0.0),
              source: str | None = None) -> list[str]:
        """Add a fragment's blocks, frames and notes shifted by ``offset``, with fresh ids and
        its inner edges rewired to them; returns the new ids (blocks, then frames, then notes,
        each in the fragment's order).

        The fragment is validated by the canvas file loader (:func:`parse_fragment`); any
        problem raises a :class:`CanvasError` naming its JSON path and leaves the canvas as it
        was (``source`` names where the fragment came from in that error). A block keeps its
        title unless the title was its old id (it then takes the new id); a result name
        (an Output's ``name``) already in use gets the next free one ("dy 2").
        """
        part = parse_fragment(fragment, source)
        dx, dy = _position(offset)
        problems, spots = [], {}
        tables: tuple[tuple[str, Mapping[str, Node | Frame | Note]], ...] = (
            ("nodes", part.nodes), ("frames", part.frames), ("notes", part.notes))
        for key, table in tables:
            for i, item in enumerate(table.values()):
                try:
                    spots[item.id] = _position((item.pos[0] + dx, item.pos[1] + dy))
                except InvalidArgumentError as err:
                    where = f"pasted at an offset of {shown([dx, dy])}"
                    problems.append((f"$.{key}[{i}].pos", f"{where}: {err}"))
        if problems:
            raise CanvasError(problems, source)
        fresh: dict[str, str] = {}
        for node in part.nodes.values():
            new_id = self.new_id(node.type)
            title = new_id if node.title == node.id else node.title
            attrs = dict(node.attrs)
            named = get_spec(node.type).result_name
            if named and isinstance(attrs.get(named), str):
                attrs[named] = self.unused_result_name(attrs[named])
            self.add_node(node.type, spots[node.id], attrs, id=new_id, title=title)
            fresh[node.id] = new_id
        for e in part.edges:
            self.connect((fresh[e.src[0]], e.src[1]), (fresh[e.dst[0]], e.dst[1]))
        for frame in part.frames.values():
            fresh[frame.id] = self.add_frame(spots[frame.id], frame.size, frame.title,
                                             frame.colour).id
        for note in part.notes.values():
            fresh[note.id] = self.add_note(spots[note.id], note.text, note.size,
                                           note.colour).id
        return list(fresh.values())

    def _node(self, node_id: str) -> Node:
        try:
            return self.nodes[node_id]
        except (KeyError, TypeError):
            raise InvalidArgumentError(f"no node {shown(node_id)} on the canvas") from None

    # -- queries -----------------------------------------------------------------------------
    def inputs_of(self, node_id: str) -> dict[str, PortRef]:
        """``{input port: (src node, src port)}`` of the connected inputs of a node."""
        return {port: e.src for port, e in self._into.get(node_id, {}).items()}

    def _would_cycle(self, src: str, dst: str) -> bool:
        """Whether an edge ``src -> dst`` closes a cycle (``dst`` already reaches ``src``).

        Searches from both ends at once, one node per side in turn, and stops when either side
        runs out: the cost is at most twice the smaller side, so a chain wired front to back or
        back to front stays linear."""
        if src == dst:
            return True
        up, down = {src}, {dst}
        up_stack, down_stack = [src], [dst]
        while up_stack and down_stack:
            for e in self._into.get(up_stack.pop(), {}).values():
                if e.src[0] in down:
                    return True
                if e.src[0] not in up:
                    up.add(e.src[0])
                    up_stack.append(e.src[0])
            for e in self._out_of.get(down_stack.pop(), {}).values():
                if e.dst[0] in up:
                    return True
                if e.dst[0] not in down:
                    down.add(e.dst[0])
                    down_stack.append(e.dst[0])
        return False

    def upstream(self, node_id: str) -> set[str]:
        """Every node ``node_id`` depends on (transitively)."""
        seen: set[str] = set()
        stack = [node_id]
        while stack:
            for e in self._into.get(stack.pop(), {}).values():
                if e.src[0] not in seen:
                    seen.add(e.src[0])
                    stack.append(e.src[0])
        return seen

    def copy(self) -> Canvas:
        return copy.deepcopy(self)

    # -- JSON --------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """The version 2 document (attrs as set on each node)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "nodes": [{"id": n.id, "type": n.type, "title": n.title, "pos": list(n.pos),
                       "attrs": copy.deepcopy(n.attrs)} for n in self.nodes.values()],
            "edges": [{"src": list(e.src), "dst": list(e.dst)} for e in self.edges],
            "frames": [items.frame_json(f) for f in self.frames.values()],
            "notes": [items.note_json(n) for n in self.notes.values()],
        }

    @classmethod
    def from_json(cls, data: Any, source: str | None = None) -> Canvas:
        """Validate a version 1 or 2 document; a :class:`CanvasError` lists every problem."""
        problems: list[tuple[str, str]] = []
        canvas = _parse(data, problems)
        if problems:
            raise CanvasError(problems, source, canvas, _attr_places(data, canvas))
        return canvas


def _attr_places(data: Any, canvas: Canvas) -> dict[str, tuple[str, str]]:
    """JSON path -> (node id, attribute) of every attribute of every block read."""
    nodes = data.get("nodes") if isinstance(data, dict) else None
    places = {}
    for i, raw in enumerate(nodes if isinstance(nodes, list) else ()):
        node_id = raw.get("id") if isinstance(raw, dict) else None
        if not isinstance(node_id, str) or node_id not in canvas.nodes:
            continue
        attrs = raw.get("attrs")
        for key in attrs if isinstance(attrs, dict) else ():
            places[strict_json.key_path(f"$.nodes[{i}].attrs", str(key))] = (node_id, str(key))
    return places


def _position(pos: Any) -> tuple[float, float]:
    """``pos`` as two finite floats within :data:`MAX_COORD`, or an error naming it."""
    if type(pos) in (list, tuple) and len(pos) == 2:  # the common case, cheaply (big files)
        x, y = pos
        if type(x) is float and type(y) is float and -MAX_COORD <= x <= MAX_COORD \
                and -MAX_COORD <= y <= MAX_COORD:
            return x, y
    if isinstance(pos, (list, tuple)) and len(pos) == 2 and all(map(items.is_finite, pos)):
        x, y = float(pos[0]), float(pos[1])
        if abs(x) <= MAX_COORD and abs(y) <= MAX_COORD:
            return x, y
        raise InvalidArgumentError(f"pos must lie within {MAX_COORD:g} of the origin on each "
                                   f"axis, got {shown(pos)}", argument="pos")
    raise InvalidArgumentError(f"pos must be [x, y] finite numbers, got {shown(pos)}",
                               argument="pos")


def _parse(data: Any, problems: list[tuple[str, str]]) -> Canvas:
    canvas = Canvas()
    if not isinstance(data, dict):
        problems.append(("$", f"expected a JSON object, got {type(data).__name__}"))
        return canvas
    if data.get("format") != FORMAT:
        problems.append(("$.format", f"expected {FORMAT!r}, got {shown(data.get('format'))}"))
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        problems.append(("$.version", f"expected an integer, got {shown(version)}"))
        version = VERSION
    elif version > VERSION:
        problems.append(("$.version", (f"this canvas was written by a newer GradBlocks "
                                      f"(format {shown(version)}); this version reads formats "
                                      f"{READS[0]}-{READS[-1]}: update GradBlocks")))
        return canvas  # its fields may mean something else: report only the version
    elif version < 1:
        problems.append(("$.version", f"unknown version {version}: versions start at 1"))
        version = VERSION  # the rest is still checked, as the current version
    keys = {"format", "version", "nodes", "edges"} | ({"frames", "notes"} if version >= 2
                                                     else set())
    for key in sorted(set(data) - keys):
        problems.append((strict_json.key_path("$", key),
                         "unknown key" + (" (frames and notes need version 2)"
                                          if key in ("frames", "notes") else "")))
    nodes, edges = data.get("nodes", []), data.get("edges", [])
    if not isinstance(nodes, list):
        problems.append(("$.nodes", "expected a list"))
        nodes = []
    if not isinstance(edges, list):
        problems.append(("$.edges", "expected a list"))
        edges = []
    for i, raw in enumerate(nodes):
        _parse_node(canvas, raw, f"$.nodes[{i}]", problems)
    for i, raw in enumerate(edges):
        _parse_edge(canvas, raw, f"$.edges[{i}]", problems)
    for cycle_node in _cycle_nodes(canvas):
        problems.append(("$.edges", f"cycle through node {cycle_node!r}"))
    if version >= 2:
        _parse_items(canvas, data, problems)
    return canvas


def _parse_items(canvas: Canvas, data: dict, problems: list) -> None:
    """The frames and notes of a version 2 document (both lists optional)."""
    taken = set(canvas.nodes)
    # each table takes the kind parse_item returns for it
    tables: tuple[tuple[str, str, dict[str, Any]], ...] = (
        ("frames", "frame", canvas.frames), ("notes", "note", canvas.notes))
    for key, kind, table in tables:
        raw_items = data.get(key, [])
        if not isinstance(raw_items, list):
            problems.append((f"$.{key}", "expected a list"))
            continue
        for i, raw in enumerate(raw_items):
            item = items.parse_item(kind, raw, f"$.{key}[{i}]", taken, problems)
            if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                taken.add(raw["id"])
            if item is not None:
                table[item.id] = item
def parse_fragment(data: Any, source: str | None = None) -> Canvas:
    """The blocks and edges of a fragment, validated exactly as a canvas file's (a whole canvas
    document is a fragment too); a :class:`CanvasError` lists every problem with its JSON path.

    A fragment is ``{"format": "gradblocks.fragment", "nodes": [...], "edges": [...]}``
    (``version`` optional, as in a file); it needs at least one node, and its edges may only
    join its own nodes.
    """
    problems: list[tuple[str, str]] = []
    if not isinstance(data, dict):
        raise CanvasError([("$", f"expected a JSON object, got {type(data).__name__}")], source)
    if data.get("format") == FORMAT:
        canvas = _parse(data, problems)
    else:
        if data.get("format") != FRAGMENT_FORMAT:
            problems.append(("$.format", (f"expected {FRAGMENT_FORMAT!r} (or {FORMAT!r}), got "
                                          f"{shown(data.get('format'))}")))
        # the file loader checks everything else; the fragment's version defaults to ours
        canvas = _parse({**data, "format": FORMAT, "version": data.get("version", VERSION)},
                        problems)
    if not problems and not (canvas.nodes or canvas.frames or canvas.notes):
        problems.append(("$.nodes", "no blocks, frames or notes to paste"))
    if problems:
        raise CanvasError(problems, source)
    return canvas


NODE_KEYS = ("id", "type", "title", "pos", "attrs")
_NODE_KEYS = frozenset(NODE_KEYS)
_EDGE_KEYS = frozenset(("src", "dst"))


def _parse_node(canvas: Canvas, raw: Any, path: str, problems: list) -> None:
    if not isinstance(raw, dict):
        problems.append((path, "expected an object"))
        return
    if not raw.keys() <= _NODE_KEYS:
        for key in sorted(raw.keys() - _NODE_KEYS):
            problems.append((strict_json.key_path(path, key), "unknown key"))
    node_id, type_id = raw.get("id"), raw.get("type")
    ok = True
    problem = id_problem(node_id)
    if problem:
        problems.append((f"{path}.id", problem))
        ok = False
    elif node_id in canvas.nodes:
        problems.append((f"{path}.id", f"duplicate node id {node_id!r}"))
        ok = False
    if not isinstance(type_id, str) or type_id not in REGISTRY:
        problems.append((f"{path}.type", (f"unknown block type {shown(type_id)} (known: "
                                         f"{', '.join(sorted(REGISTRY))})")))
        ok = False
    title = raw.get("title", node_id)
    problem = text_problem(title)
    if problem:
        problems.append((f"{path}.title", problem))
        title = node_id
    try:
        pos = _position(raw.get("pos", [0, 0]))
    except InvalidArgumentError as err:
        problems.append((f"{path}.pos", str(err)))
        pos = (0.0, 0.0)
    attrs = raw.get("attrs", {})
    if not isinstance(attrs, dict):
        problems.append((f"{path}.attrs", "expected an object"))
        attrs = {}
    if not ok:
        return
    # all three checked above (a bad title was replaced by the id)
    assert isinstance(node_id, str) and isinstance(type_id, str) and isinstance(title, str)
    spec = REGISTRY[type_id]
    resolved, attr_problems = spec.resolve_attrs(attrs)
    for attr_err in attr_problems:
        problems.append((strict_json.key_path(f"{path}.attrs", str(attr_err.attr)),
                         attr_err.message))
    bad = {attr_err.attr for attr_err in attr_problems}
    # kept (without its bad values) so that later duplicates and edges are checked against it
    canvas.nodes[node_id] = Node(node_id, type_id, title, pos,
                                 {k: resolved[k] for k in attrs if k not in bad})


def _port_ref(raw: Any) -> PortRef | None:
    if type(raw) is list and len(raw) == 2 and type(raw[0]) is str and type(raw[1]) is str:
        return raw[0], raw[1]  # the common case, cheaply (big files)
    if isinstance(raw, list) and len(raw) == 2 and all(isinstance(v, str) for v in raw):
        return raw[0], raw[1]
    return None


def _parse_edge(canvas: Canvas, raw: Any, path: str, problems: list) -> None:
    if not isinstance(raw, dict):
        problems.append((path, "expected an object"))
        return
    if not raw.keys() <= _EDGE_KEYS:
        for key in sorted(raw.keys() - _EDGE_KEYS):
            problems.append((strict_json.key_path(path, key), "unknown key"))
    refs = {}
    for end, ports in (("src", "output_names"), ("dst", "input_names")):
        ref = _port_ref(raw.get(end))
        if ref is None:
            problems.append((f"{path}.{end}", (f"expected [node_id, port], got "
                                              f"{shown(raw.get(end))}")))
            continue
        node = canvas.nodes.get(ref[0])
        if node is None:
            problems.append((f"{path}.{end}", f"no node {shown(ref[0])}"))
            continue
        names = getattr(REGISTRY[node.type], ports)()
        if ref[1] not in names:
            kind = "output" if end == "src" else "input"
            problems.append((f"{path}.{end}", (f"{node.type} {ref[0]!r} has no {kind} port "
                                              f"{shown(ref[1])} (it has "
                                              f"{', '.join(names) or 'none'})")))
            continue
        refs[end] = ref
    if len(refs) < 2:
        return
    if refs["dst"] in canvas._by_dst:
        problems.append((f"{path}.dst", (f"input {refs['dst'][0]}.{refs['dst'][1]} already has "
                                        "an edge: an input takes one wire")))
        return
    canvas._add_edge(Edge(refs["src"], refs["dst"]))


def _cycle_nodes(canvas: Canvas) -> list[str]:
    """One node of a cycle (empty when the graph is acyclic): :mod:`graphlib` names it, once
    a linear pass over the edge index (:func:`_acyclic`) has found that there is one."""
    if _acyclic(canvas):
        return []
    sorter = graphlib.TopologicalSorter({n: () for n in canvas.nodes})
    for e in canvas.edges:
        sorter.add(e.dst[0], e.src[0])
    try:
        sorter.prepare()
    except graphlib.CycleError as err:
        return [err.args[1][0]]
    return []


def _acyclic(canvas: Canvas) -> bool:
    """Whether the canvas's edges make no cycle (Kahn's algorithm: every node is reached by
    taking away nodes without incoming edges), in O(nodes + edges)."""
    into, out_of = canvas._into, canvas._out_of
    indegree = {n: len(into.get(n, ())) for n in canvas.nodes}
    ready = [n for n, d in indegree.items() if d == 0]
    done = 0
    while ready:
        done += 1
        for dst_node, _port in out_of.get(ready.pop(), ()):
            indegree[dst_node] -= 1
            if not indegree[dst_node]:
                ready.append(dst_node)
    return done == len(indegree)


def dumps(canvas: Canvas) -> str:
    """The canonical text of a canvas: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(canvas.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def save_canvas(canvas: Canvas, path: str | os.PathLike) -> bytes:
    """Write atomically: a temporary file in the same folder, flushed, then renamed over
    (:func:`engine.base.atomic.write_atomically`); returns the bytes written."""
    data = dumps(canvas).encode("utf-8")
    write_bytes_atomically(path, data)
    return data


def load_canvas(path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES) -> Canvas:
    """Read and validate a canvas file; a :class:`CanvasError` names the file and problems.

    Only a regular file is read (a FIFO, device or folder is refused without reading), and only
    when it has at most ``max_bytes`` bytes. A UTF-8 byte-order mark is skipped.
    """
    source = str(path)
    text = _decode(_read_regular(path, max_bytes, source), source)
    data, problems = strict_json.loads(text)
    if problems:
        raise CanvasError(problems, source)
    return Canvas.from_json(data, source)


def _read_regular(path: str | os.PathLike[str], max_bytes: int, source: str) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes, or a CanvasError."""
    def refuse(message: str) -> CanvasError:
        return CanvasError([("$", message)], source)

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        if os.path.islink(path):
            raise refuse(f"a symbolic link to {shown(os.readlink(path))}, which does not "
                         "exist") from None
        raise refuse("no such file") from None
    except IsADirectoryError:
        raise refuse("is a folder, not a canvas file") from None
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        raise refuse(f"cannot read the file: {getattr(err, 'strerror', None) or err}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise refuse("is a folder, not a canvas file")
        if not stat.S_ISREG(st.st_mode):
            raise refuse("is not a regular file (a FIFO, socket or device): not read")
        if st.st_size > max_bytes:
            raise refuse(f"the file has {st.st_size} bytes, more than the limit of {max_bytes}")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while we read
                raise refuse(f"the file has more than the limit of {max_bytes} bytes")
        return b"".join(chunks)
    except OSError as err:
        raise refuse(f"cannot read the file: {err.strerror or err}") from None
    finally:
        os.close(fd)


def _decode(data: bytes, source: str) -> str:
    """UTF-8 text (a leading byte-order mark skipped), or a CanvasError naming the byte."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        where = f"not UTF-8 text: byte 0x{data[err.start]:02x} at offset {err.start}"
        raise CanvasError([("$", where)], source) from None
