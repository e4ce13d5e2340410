"""The canvas model: blocks (:class:`Node`), wires (:class:`Edge`), frames and notes, edited
through :class:`Canvas`'s methods, which validate what they are given and keep the graph
acyclic; a whole canvas to and from its JSON document (:meth:`Canvas.to_json`,
:meth:`Canvas.from_json`) and a copied group of blocks (:meth:`Canvas.fragment`,
:meth:`Canvas.paste`).

The document format and the reading of its records are :mod:`engine.graph.canvas_document`'s,
the files (atomic, deterministic saving; loading only regular files under a size cap)
:mod:`engine.graph.canvas_file`'s. Graph operations are linear: edges are indexed by their
endpoints and order and cycles come from :mod:`graphlib`.
"""

from __future__ import annotations

import copy
import graphlib
import re
from typing import Any

from blocks.registry import get_spec
from engine.base.errors import InvalidArgumentError
from engine.base.names import MAX_TITLE, counted, shown, text_problem
from engine.graph import annotations as items  # `annotations` is the __future__ feature
from engine.graph.annotations import Frame, Note
from engine.graph.canvas_document import (
    FORMAT,
    FRAGMENT_FORMAT,
    VERSION,
    Edge,
    Node,
    PortRef,
    Problems,
    attr_places,
    block_position,
    fragment_of,
    read_graph,
    read_items,
    shifted_positions,
)
from engine.graph.canvas_items import CanvasItems

__all__ = ["Canvas", "CanvasError", "Edge", "Node", "PortRef", "parse_fragment"]


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
        super().__init__(head + f"{counted(len(problems), 'problem')} in the canvas:\n  "
                         + "\n  ".join(lines))


class Canvas(CanvasItems):
    """Nodes (in insertion order), edges, frames and notes. At most one edge enters an input
    port; ids are unique across nodes, frames and notes.

    ``edges`` lists the edges in the order they were made; they are indexed by input port and by
    node, so every query is proportional to its answer. Change the canvas through its methods.
    """

    def __init__(self, nodes: dict[str, Node] | None = None, edges: list[Edge] | None = None,
                 frames: dict[str, Frame] | None = None, notes: dict[str, Note] | None = None):
        super().__init__(frames, notes)
        self.nodes: dict[str, Node] = dict(nodes or {})
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
    def has_id(self, item_id: str) -> bool:
        """Whether a node, frame or note has ``item_id``."""
        return item_id in self.nodes or super().has_id(item_id)

    def add_node(self, type_id: str, pos: tuple[float, float] = (0.0, 0.0),
                 attrs: dict[str, Any] | None = None, id: str | None = None,
                 title: str | None = None) -> Node:
        """Add a block of a known type; id, title, position and ``attrs`` are validated."""
        spec = get_spec(type_id)
        node_id = self.fresh_id(id or None, type_id)
        title = node_id if title is None else title
        problem = text_problem(title)
        if problem:
            raise InvalidArgumentError(problem, argument="title")
        node = Node(node_id, type_id, title, block_position(pos), {})
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
        self._node(node_id).pos = block_position(pos)

    def fragment(self, ids: Any) -> dict:
        """The blocks, frames and notes ``ids`` and the edges between the blocks as a fragment
        (the canvas file format with ``format`` :data:`FRAGMENT_FORMAT`), what :meth:`paste`
        takes."""
        return fragment_of(self.to_json(), set(ids))

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
        problems: Problems = []
        spots = shifted_positions((("nodes", part.nodes), ("frames", part.frames),
                                   ("notes", part.notes)), offset, problems)
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
        problems: Problems = []
        canvas = _parse(data, problems)
        if problems:
            raise CanvasError(problems, source, canvas, attr_places(data, canvas.nodes))
        return canvas


def _parse(data: Any, problems: Problems) -> Canvas:
    """A canvas of what a document holds (its bad values left out), every problem appended:
    the records' (:mod:`engine.graph.canvas_document`), then a cycle, then the frames' and
    notes'."""
    graph = read_graph(data, problems)
    canvas = Canvas(graph.nodes, graph.edges)
    for cycle_node in _cycle_nodes(canvas):
        problems.append(("$.edges", f"cycle through node {cycle_node!r}"))
    if graph.items:
        frames, notes = read_items(data, canvas.nodes, problems)
        canvas.frames.update(frames)
        canvas.notes.update(notes)
    return canvas


def parse_fragment(data: Any, source: str | None = None) -> Canvas:
    """The blocks and edges of a fragment, validated exactly as a canvas file's (a whole canvas
    document is a fragment too); a :class:`CanvasError` lists every problem with its JSON path.

    A fragment is ``{"format": "gradblocks.fragment", "nodes": [...], "edges": [...]}``
    (``version`` optional, as in a file); it needs at least one node, and its edges may only
    join its own nodes.
    """
    problems: Problems = []
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
