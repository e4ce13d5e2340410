"""The canvas model and its file format (``.gbc.json``, version 1).

::

    {"format": "gradblocks.canvas", "version": 1,
     "nodes": [{"id": "x", "type": "Tensor", "title": "x", "pos": [0, 0],
                "attrs": {"shape": [1, 5, 5, 2], "dtype": "float32"}}, ...],
     "edges": [{"src": ["x", "output"], "dst": ["grad", "input"]}, ...]}

Node ids are stable across save and load. Attributes left out take their defaults. Saving is
atomic (a temporary file, then replace) and deterministic (sorted keys, 2-space indent, trailing
newline). Loading validates everything and reports every problem at once with its JSON path;
it never executes code.
"""

from __future__ import annotations

import copy
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blocks.registry import REGISTRY, get_spec
from engine.errors import InvalidArgumentError

FORMAT = "gradblocks.canvas"
VERSION = 1
SUFFIX = ".gbc.json"

PortRef = tuple[str, str]


class CanvasError(InvalidArgumentError):
    """An invalid canvas: ``problems`` lists ``(json_path, message)``, all of them."""

    def __init__(self, problems: list[tuple[str, str]], source: str | None = None):
        self.problems = problems
        self.source = source
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


@dataclass
class Canvas:
    """Nodes (in insertion order) and edges. At most one edge enters an input port."""

    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)

    # -- editing ---------------------------------------------------------------------------
    def new_id(self, type_id: str) -> str:
        """A fresh id ``<type in lower case>_<k>`` with the smallest unused ``k``."""
        stem = re.sub(r"[^a-z0-9]+", "_", type_id.lower()).strip("_") or "node"
        k = 1
        while f"{stem}_{k}" in self.nodes:
            k += 1
        return f"{stem}_{k}"

    def add_node(self, type_id: str, pos: tuple[float, float] = (0.0, 0.0),
                 attrs: dict[str, Any] | None = None, id: str | None = None,
                 title: str | None = None) -> Node:
        """Add a block of a known type; ``attrs`` are validated against its spec."""
        spec = get_spec(type_id)
        node_id = id or self.new_id(type_id)
        if node_id in self.nodes:
            raise InvalidArgumentError(f"node id {node_id!r} is already on the canvas")
        node = Node(node_id, type_id, title or node_id, (float(pos[0]), float(pos[1])), {})
        for name, value in (attrs or {}).items():
            node.attrs[name] = spec.attr(name).validate(value)
        self.nodes[node_id] = node
        return node

    def remove_node(self, node_id: str) -> None:
        """Remove a node and every edge touching it."""
        self._node(node_id)
        del self.nodes[node_id]
        self.edges = [e for e in self.edges if node_id not in (e.src[0], e.dst[0])]

    def connect(self, src: PortRef, dst: PortRef) -> Edge:
        """Wire output ``src`` to input ``dst``, replacing any edge already into ``dst``."""
        src, dst = (str(src[0]), str(src[1])), (str(dst[0]), str(dst[1]))
        if src[1] not in get_spec(self._node(src[0]).type).output_names():
            raise InvalidArgumentError(f"{src[0]} has no output port {src[1]!r}")
        if dst[1] not in get_spec(self._node(dst[0]).type).input_names():
            raise InvalidArgumentError(f"{dst[0]} has no input port {dst[1]!r}")
        if src[0] == dst[0] or dst[0] in self.upstream(src[0]):
            raise InvalidArgumentError(f"connecting {src[0]}.{src[1]} to {dst[0]}.{dst[1]} "
                                       "would make a cycle")
        self.disconnect(dst)
        edge = Edge(src, dst)
        self.edges.append(edge)
        return edge

    def disconnect(self, dst: PortRef) -> Edge | None:
        """Remove the edge into input ``dst``; returns it (None if there was none)."""
        dst = (str(dst[0]), str(dst[1]))
        for e in self.edges:
            if e.dst == dst:
                self.edges.remove(e)
                return e
        return None

    def set_attr(self, node_id: str, name: str, value: Any) -> None:
        """Set a validated attribute value (an AttrError names the attribute otherwise)."""
        node = self._node(node_id)
        node.attrs[name] = get_spec(node.type).attr(name).validate(value)

    def _node(self, node_id: str) -> Node:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise InvalidArgumentError(f"no node {node_id!r} on the canvas") from None

    # -- queries -----------------------------------------------------------------------------
    def inputs_of(self, node_id: str) -> dict[str, PortRef]:
        """``{input port: (src node, src port)}`` of the connected inputs of a node."""
        return {e.dst[1]: e.src for e in self.edges if e.dst[0] == node_id}

    def upstream(self, node_id: str) -> set[str]:
        """Every node ``node_id`` depends on (transitively)."""
        seen: set[str] = set()
        stack = [node_id]
        while stack:
            for e in self.edges:
                if e.dst[0] == stack[-1] and e.src[0] not in seen:
                    seen.add(e.src[0])
                    stack.append(e.src[0])
                    break
            else:
                stack.pop()
        return seen

    def copy(self) -> Canvas:
        return copy.deepcopy(self)

    # -- JSON --------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """The v1 document (attrs as set on each node)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "nodes": [{"id": n.id, "type": n.type, "title": n.title, "pos": list(n.pos),
                       "attrs": copy.deepcopy(n.attrs)} for n in self.nodes.values()],
            "edges": [{"src": list(e.src), "dst": list(e.dst)} for e in self.edges],
        }

    @classmethod
    def from_json(cls, data: Any, source: str | None = None) -> Canvas:
        """Validate a v1 document; a :class:`CanvasError` lists every problem."""
        problems: list[tuple[str, str]] = []
        canvas = _parse(data, problems)
        if problems:
            raise CanvasError(problems, source)
        return canvas


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _parse(data: Any, problems: list[tuple[str, str]]) -> Canvas:
    canvas = Canvas()
    if not isinstance(data, dict):
        problems.append(("$", f"expected a JSON object, got {type(data).__name__}"))
        return canvas
    if data.get("format") != FORMAT:
        problems.append(("$.format", f"expected {FORMAT!r}, got {data.get('format')!r}"))
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        problems.append(("$.version", f"expected an integer, got {version!r}"))
    elif version > VERSION:
        problems.append(("$.version", (f"version {version} is newer than this GradBlocks "
                                      f"supports ({VERSION}): update GradBlocks")))
    elif version < 1:
        problems.append(("$.version", f"unknown version {version}"))
    for key in sorted(set(data) - {"format", "version", "nodes", "edges"}):
        problems.append((f"$.{key}", "unknown key"))
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
    return canvas


def _parse_node(canvas: Canvas, raw: Any, path: str, problems: list) -> None:
    if not isinstance(raw, dict):
        problems.append((path, "expected an object"))
        return
    for key in sorted(set(raw) - {"id", "type", "title", "pos", "attrs"}):
        problems.append((f"{path}.{key}", "unknown key"))
    node_id, type_id = raw.get("id"), raw.get("type")
    ok = True
    if not isinstance(node_id, str) or not node_id:
        problems.append((f"{path}.id", f"expected a non-empty string, got {node_id!r}"))
        ok = False
    elif node_id in canvas.nodes:
        problems.append((f"{path}.id", f"duplicate node id {node_id!r}"))
        ok = False
    if type_id not in REGISTRY:
        problems.append((f"{path}.type", (f"unknown block type {type_id!r} (known: "
                                         f"{', '.join(sorted(REGISTRY))})")))
        ok = False
    title = raw.get("title", node_id)
    if not isinstance(title, str):
        problems.append((f"{path}.title", f"expected a string, got {title!r}"))
        title = node_id
    pos = raw.get("pos", [0, 0])
    if not (isinstance(pos, list) and len(pos) == 2 and all(_is_num(v) for v in pos)):
        problems.append((f"{path}.pos", f"expected [x, y] numbers, got {pos!r}"))
        pos = [0, 0]
    attrs = raw.get("attrs", {})
    if not isinstance(attrs, dict):
        problems.append((f"{path}.attrs", "expected an object"))
        attrs = {}
    if not ok:
        return
    spec = REGISTRY[type_id]
    _, attr_problems = spec.resolve_attrs(attrs)
    for err in attr_problems:
        problems.append((f"{path}.attrs.{err.attr}", err.message))
    bad = {err.attr for err in attr_problems}
    canvas.nodes[node_id] = Node(node_id, type_id, title, (float(pos[0]), float(pos[1])),
                                 {k: spec.attr(k).validate(v) for k, v in attrs.items()
                                  if k not in bad})


def _port_ref(raw: Any) -> PortRef | None:
    if isinstance(raw, list) and len(raw) == 2 and all(isinstance(v, str) for v in raw):
        return raw[0], raw[1]
    return None


def _parse_edge(canvas: Canvas, raw: Any, path: str, problems: list) -> None:
    if not isinstance(raw, dict):
        problems.append((path, "expected an object"))
        return
    refs = {}
    for end, ports in (("src", "output_names"), ("dst", "input_names")):
        ref = _port_ref(raw.get(end))
        if ref is None:
            problems.append((f"{path}.{end}", (f"expected [node_id, port], got "
                                              f"{raw.get(end)!r}")))
            continue
        node = canvas.nodes.get(ref[0])
        if node is None:
            problems.append((f"{path}.{end}", f"no node {ref[0]!r}"))
            continue
        names = getattr(REGISTRY[node.type], ports)()
        if ref[1] not in names:
            kind = "output" if end == "src" else "input"
            problems.append((f"{path}.{end}", (f"{node.type} {ref[0]!r} has no {kind} port "
                                              f"{ref[1]!r} (it has {', '.join(names) or 'none'})")))
            continue
        refs[end] = ref
    if len(refs) < 2:
        return
    if any(e.dst == refs["dst"] for e in canvas.edges):
        problems.append((f"{path}.dst", (f"input {refs['dst'][0]}.{refs['dst'][1]} already has "
                                        "an edge: an input takes one wire")))
        return
    canvas.edges.append(Edge(refs["src"], refs["dst"]))


def _cycle_nodes(canvas: Canvas) -> list[str]:
    """One node of each cycle (empty when the graph is acyclic)."""
    indegree = {n: 0 for n in canvas.nodes}
    for e in canvas.edges:
        indegree[e.dst[0]] += 1
    ready = [n for n, d in indegree.items() if d == 0]
    while ready:
        n = ready.pop()
        for e in canvas.edges:
            if e.src[0] == n:
                indegree[e.dst[0]] -= 1
                if indegree[e.dst[0]] == 0:
                    ready.append(e.dst[0])
    left = [n for n, d in indegree.items() if d > 0]
    return left[:1]


def dumps(canvas: Canvas) -> str:
    """The canonical text of a canvas: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(canvas.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def save_canvas(canvas: Canvas, path: str | os.PathLike) -> None:
    """Write atomically: a temporary file in the same folder, flushed, then renamed over."""
    path = Path(path)
    text = dumps(canvas)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_canvas(path: str | os.PathLike) -> Canvas:
    """Read and validate a canvas file; a :class:`CanvasError` names the file and problems."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CanvasError([("$", "no such file")], str(path)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise CanvasError([("$", f"cannot read the file: {err}")], str(path)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise CanvasError([("$", (f"not JSON: {err.msg} at line {err.lineno} column "
                                 f"{err.colno}"))], str(path)) from None
    return Canvas.from_json(data, str(path))
