"""The canvas file format (``.gbc.json``, version 2): the document's records (:class:`Node`,
:class:`Edge`) and reading a document into them, every problem listed with its JSON path.

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
defaults. Reading validates everything and reports every problem at once with its JSON path; it
never executes code. The graph-wide check (no cycle) is the model's
(:mod:`engine.graph.canvas`), the file's bytes :mod:`engine.graph.canvas_file`'s.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from blocks.registry import REGISTRY
from engine.base.errors import InvalidArgumentError
from engine.base.names import id_problem, shown, text_problem
from engine.graph import annotations as items  # `annotations` is the __future__ feature
from engine.graph.annotations import Frame, Note
from engine.io import strict_json

FORMAT = "gradblocks.canvas"
VERSION = 2
#: The format versions this GradBlocks reads (older ones are migrated in memory).
READS = (1, 2)
#: ``format`` of a copied group of blocks (the clipboard): nodes and edges as in a canvas file.
FRAGMENT_FORMAT = "gradblocks.fragment"
#: A block position is at most this far from the origin on either axis (scene units): beyond,
#: the view can no longer place, hit-test or fit blocks.
MAX_COORD = 1e9

PortRef = tuple[str, str]
Problems = list[tuple[str, str]]


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


@dataclass
class BlockGraph:
    """The blocks and wires a document holds, each checked on its own (ids unique, types and
    ports known, one wire per input), in the document's order. ``items``: whether frames and
    notes are still to be read (version 2, and the document was read past its header)."""

    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    items: bool = False


def block_position(pos: Any) -> tuple[float, float]:
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


def shifted_positions(tables: Iterable[tuple[str, Mapping[str, Node | Frame | Note]]],
                      offset: Any, problems: Problems) -> dict[str, tuple[float, float]]:
    """Each item's ``pos`` moved by ``offset`` (a :func:`block_position` itself), by id; an
    item pushed out of bounds is a problem at ``$.<table>[i].pos``."""
    dx, dy = block_position(offset)
    spots = {}
    for key, table in tables:
        for i, item in enumerate(table.values()):
            try:
                spots[item.id] = block_position((item.pos[0] + dx, item.pos[1] + dy))
            except InvalidArgumentError as err:
                where = f"pasted at an offset of {shown([dx, dy])}"
                problems.append((f"$.{key}[{i}].pos", f"{where}: {err}"))
    return spots


def fragment_of(document: dict, ids: Collection[str]) -> dict:
    """The blocks, frames and notes ``ids`` of a canvas ``document`` and the edges between
    those blocks, as a fragment (``format`` :data:`FRAGMENT_FORMAT`)."""
    return {
        "format": FRAGMENT_FORMAT,
        "version": VERSION,
        "nodes": [n for n in document["nodes"] if n["id"] in ids],
        "edges": [e for e in document["edges"] if e["src"][0] in ids and e["dst"][0] in ids],
        "frames": [f for f in document["frames"] if f["id"] in ids],
        "notes": [n for n in document["notes"] if n["id"] in ids],
    }


NODE_KEYS = ("id", "type", "title", "pos", "attrs")
_NODE_KEYS = frozenset(NODE_KEYS)
_EDGE_KEYS = frozenset(("src", "dst"))


def read_graph(data: Any, problems: Problems) -> BlockGraph:
    """The header, blocks and wires of a version 1 or 2 document; every problem is appended to
    ``problems`` (what is read is kept without its bad values, so later records are checked
    against it)."""
    graph = BlockGraph()
    if not isinstance(data, dict):
        problems.append(("$", f"expected a JSON object, got {type(data).__name__}"))
        return graph
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
        return graph  # its fields may mean something else: report only the version
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
        _read_node(graph.nodes, raw, f"$.nodes[{i}]", problems)
    wired: set[PortRef] = set()
    for i, raw in enumerate(edges):
        edge = _read_edge(graph.nodes, wired, raw, f"$.edges[{i}]", problems)
        if edge is not None:
            graph.edges.append(edge)
    graph.items = version >= 2
    return graph


def _read_node(nodes: dict[str, Node], raw: Any, path: str, problems: Problems) -> None:
    """A block into ``nodes`` (kept, without its bad values, when its id and type are sound)."""
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
    elif node_id in nodes:
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
        pos = block_position(raw.get("pos", [0, 0]))
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
    nodes[node_id] = Node(node_id, type_id, title, pos,
                                 {k: resolved[k] for k in attrs if k not in bad})


def _port_ref(raw: Any) -> PortRef | None:
    """``[node_id, port]`` as a PortRef, or None when it is not two strings."""
    if type(raw) is list and len(raw) == 2 and type(raw[0]) is str and type(raw[1]) is str:
        return raw[0], raw[1]  # the common case, cheaply (big files)
    if isinstance(raw, list) and len(raw) == 2 and all(isinstance(v, str) for v in raw):
        return raw[0], raw[1]
    return None


def _read_edge(nodes: dict[str, Node], wired: set[PortRef], raw: Any, path: str,
               problems: Problems) -> Edge | None:
    """A wire between two blocks of ``nodes`` into an input not yet ``wired`` (then added to
    it), or None with its problems appended."""
    if not isinstance(raw, dict):
        problems.append((path, "expected an object"))
        return None
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
        node = nodes.get(ref[0])
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
        return None
    if refs["dst"] in wired:
        problems.append((f"{path}.dst", (f"input {refs['dst'][0]}.{refs['dst'][1]} already has "
                                        "an edge: an input takes one wire")))
        return None
    wired.add(refs["dst"])
    return Edge(refs["src"], refs["dst"])



def read_items(data: dict, node_ids: Iterable[str],
               problems: Problems) -> tuple[dict[str, Frame], dict[str, Note]]:
    """The frames and notes of a version 2 document (both lists optional), by id; their ids
    unique across them and the blocks ``node_ids``."""
    taken = set(node_ids)
    frames: dict[str, Frame] = {}
    notes: dict[str, Note] = {}
    # each table takes the kind parse_item returns for it
    tables: tuple[tuple[str, str, dict[str, Any]], ...] = (
        ("frames", "frame", frames), ("notes", "note", notes))
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
    return frames, notes


def attr_places(data: Any, node_ids: Container[str]) -> dict[str, tuple[str, str]]:
    """JSON path -> (node id, attribute) of every attribute of every block read."""
    nodes = data.get("nodes") if isinstance(data, dict) else None
    places = {}
    for i, raw in enumerate(nodes if isinstance(nodes, list) else ()):
        node_id = raw.get("id") if isinstance(raw, dict) else None
        if not isinstance(node_id, str) or node_id not in node_ids:
            continue
        attrs = raw.get("attrs")
        for key in attrs if isinstance(attrs, dict) else ():
            places[strict_json.key_path(f"$.nodes[{i}].attrs", str(key))] = (node_id, str(key))
    return places
