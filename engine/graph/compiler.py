"""Canvas -> Plan: validation, topological order and shape/dtype inference before anything runs.

Every node's attributes are validated, every input must be wired, and each block's ``infer``
rule predicts the shape and dtype of its outputs from its inputs' predictions (the same rules
the kernels check, :mod:`engine.shapes.conv`). Problems are attributed to a node and, where it
applies, an attribute or input port: ``grad.strides: strides [2, 1, 1, 1]: ...``. A node fed by a
node with a problem is reported as waiting for it. Nodes without problems become the plan's
steps, each with a cache key built from its type, its attributes and its inputs' keys.

Messages name blocks by their label (:mod:`engine.graph.labels`: the title, ``title (id)`` when two
blocks share it); :class:`NodeError` keeps the node id as data for machines. A block that names
a result (:attr:`blocks.spec.BlockSpec.result_name`) must use a valid name
(:func:`engine.graph.result_names.result_name_problem`) no other block on the canvas uses: the
second block with a name, in canvas order, gets the error, naming the first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blocks.gradcheck import RUN_TIME_WARNINGS
from blocks.registry import get_spec
from blocks.spec import AttrError, BlockSpec, PortSpec, TensorSpec, read_paths, resolve_paths
from engine.base.errors import InvalidArgumentError
from engine.base.memory_limit import DEFAULT_MEMORY_LIMIT  # a run needing more is refused
from engine.base.names import escaped, shown
from engine.graph.budget import Budget, gib, nbytes
from engine.graph.canvas import Canvas
from engine.graph.labels import block_labels
from engine.graph.result_names import result_name_problem

PortKey = tuple[str, str]


def place(label: str, attr: str | None = None) -> str:
    """How every message names a block, or one of its attributes or input ports:
    ``label.attr`` (``dW.strides``), the block by its label (:mod:`engine.graph.labels`: the
    title, ``title (id)`` when two blocks share it). The compiler, the canvas loader's messages
    (:func:`engine.graph.report.canvas_error_lines`) and the app all use this one form; the
    label :func:`escaped` (a title may hold a bidi override)."""
    return f"{escaped(label)}.{attr}" if attr else escaped(label)


@dataclass(frozen=True)
class NodeError:
    """A problem of one node, optionally of one attribute or input port; ``label`` is how a
    person reads the node (its title, see :mod:`engine.graph.labels`), ``node_id`` is for
    machines."""

    node_id: str
    attr: str | None
    message: str
    label: str = ""

    def __str__(self) -> str:
        return f"{place(self.label or self.node_id, self.attr)}: {self.message}"


@dataclass(frozen=True)
class Step:
    """One block call: resolved attributes, wired inputs ``{port: (node, port)}``, cache key."""

    node_id: str
    spec: BlockSpec
    attrs: dict[str, Any]
    inputs: dict[str, PortKey]
    key: str


@dataclass
class Plan:
    """Steps in topological order, the inferred type of every output port, and the problems."""

    steps: list[Step] = field(default_factory=list)
    specs: dict[PortKey, TensorSpec] = field(default_factory=dict)
    errors: dict[str, list[NodeError]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    #: The estimated peak memory of running the steps (outputs kept plus workspace), bytes.
    peak_bytes: int = 0
    #: node id -> label, how messages name the block (:mod:`engine.graph.labels`).
    labels: dict[str, str] = field(default_factory=dict)
    #: Notes on steps that will run but should be looked at first (a GradCheck estimated to
    #: take more than a minute): they do not stop a run (``ok`` ignores them).
    warnings: dict[str, list[NodeError]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    def add_error(self, node_id: str, attr: str | None, message: str) -> None:
        self.errors.setdefault(node_id, []).append(
            NodeError(node_id, attr, message, self.label(node_id)))

    def add_warning(self, node_id: str, attr: str | None, message: str) -> None:
        self.warnings.setdefault(node_id, []).append(
            NodeError(node_id, attr, message, self.label(node_id)))

    def label(self, node_id: str) -> str:
        """How a person reads ``node_id``: its label, or the id of a node the plan does not
        know."""
        return self.labels.get(node_id, node_id)


def topological_order(canvas: Canvas) -> list[str]:
    """Node ids so that every edge goes forward; among the nodes ready at a time, the first in
    canvas order comes first. Nodes on a cycle (only possible in a hand-built canvas) come
    last. O((nodes + edges) log nodes): a heap of ready nodes keyed by canvas position."""
    rank = {n: i for i, n in enumerate(canvas.nodes)}
    indegree = dict.fromkeys(canvas.nodes, 0)
    out: dict[str, list[str]] = {n: [] for n in canvas.nodes}
    for e in canvas.edges:
        indegree[e.dst[0]] += 1
        out[e.src[0]].append(e.dst[0])
    ready = [rank[n] for n, d in indegree.items() if d == 0]  # already a heap: ascending
    names = list(canvas.nodes)
    order: list[str] = []
    while ready:
        n = names[heapq.heappop(ready)]
        order.append(n)
        for m in out[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                heapq.heappush(ready, rank[m])
    if len(order) < len(names):
        placed = set(order)
        order += [n for n in names if n not in placed]
    return order


def _file_signature(spec: BlockSpec, attrs: dict) -> list:
    """Modification time and size of every file a node reads (so an edited file reruns)."""
    sig = []
    for path in read_paths(spec, attrs):
        try:
            st = Path(path).stat()
            sig.append([path, st.st_mtime_ns, st.st_size])
        except OSError:
            sig.append([path, None, None])
    return sig


#: ``json.dumps(doc, sort_keys=True, default=str)``, with the encoder made once.
_key_text = json.JSONEncoder(sort_keys=True, default=str).encode


def _cache_key(spec: BlockSpec, attrs: dict, input_keys: dict[str, str]) -> str:
    """Hash of type, active attributes, inputs' keys and read files."""
    active = {k: v for k, v in attrs.items() if spec.attr(k).is_active(attrs)}
    doc = {"type": spec.type_id, "attrs": active, "inputs": input_keys,
           "files": _file_signature(spec, attrs)}
    return hashlib.sha256(_key_text(doc).encode()).hexdigest()[:24]


def compile_canvas(canvas: Canvas, base_dir: str | Path | None = None,
                   memory_limit: int = DEFAULT_MEMORY_LIMIT) -> Plan:
    """Validate ``canvas`` and infer every output; never raises for a user's mistake.

    The steps together fit ``memory_limit`` (a positive number of bytes, ValueError otherwise):
    a step that would pass it is a problem of its node (:class:`engine.graph.budget.Budget`)."""
    budget = Budget(memory_limit)
    plan = Plan(order=topological_order(canvas), labels=block_labels(canvas))
    owners = _result_name_owners(canvas)
    keys: dict[str, str] = {}
    for node_id in plan.order:
        node = canvas.nodes[node_id]
        spec = get_spec(node.type)
        attrs, problems = spec.resolve_attrs(node.attrs)
        attrs = resolve_paths(spec, attrs, base_dir)
        for err in problems:
            plan.add_error(node_id, err.attr, err.message)
        if spec.result_name and not any(e.attr == spec.result_name for e in problems):
            _check_result_name(plan, node_id, spec.result_name, attrs[spec.result_name], owners)
        wired = canvas.inputs_of(node_id)
        input_specs: dict[str, TensorSpec] = {}
        for port in spec.input_names():
            src = wired.get(port)
            if src is None:
                plan.add_error(node_id, port, f"{port} is not connected")
            elif src[0] in plan.errors or src not in plan.specs:
                plan.add_error(node_id, port, f"{port} waits for {plan.label(src[0])}, "
                                              "which has a problem")
            else:
                input_specs[port] = plan.specs[src]
        if node_id in plan.errors:
            continue
        try:
            outputs = spec.infer(attrs, input_specs)
        except AttrError as err:
            plan.add_error(node_id, err.attr, err.message)
            continue
        except InvalidArgumentError as err:
            plan.add_error(node_id, None, str(err))
            continue
        plan.specs.update({(node_id, port): outputs[port] for port in spec.output_names()})
        if not _fits(plan, node_id, spec, attrs, input_specs, outputs, budget):
            continue
        rule = RUN_TIME_WARNINGS.get(spec.type_id)
        warning = rule(attrs, input_specs) if rule is not None else None
        if warning is not None:
            plan.add_warning(node_id, *warning)
        input_keys = {p: f"{keys[src[0]]}:{src[1]}" for p, src in wired.items()}
        keys[node_id] = _cache_key(spec, attrs, input_keys)
        plan.steps.append(Step(node_id, spec, attrs, wired, keys[node_id]))  # wired: a new dict
    plan.peak_bytes = budget.peak
    _name_axes_from_consumers(canvas, plan)
    return plan


def _result_name_owners(canvas: Canvas) -> dict[str, str]:
    """Result name -> the first node (in canvas order) that uses it."""
    owners: dict[str, str] = {}
    for node_id, node in canvas.nodes.items():
        attr = get_spec(node.type).result_name
        value = node.attrs.get(attr, get_spec(node.type).attr(attr).default) if attr else None
        if isinstance(value, str):
            owners.setdefault(value, node_id)
    return owners


def _check_result_name(plan: Plan, node_id: str, attr: str, name: str,
                       owners: dict[str, str]) -> None:
    """A problem of ``node_id``'s ``attr`` when ``name`` is no valid result name or an earlier
    block already uses it."""
    problem = result_name_problem(name, attr)
    if problem:
        plan.add_error(node_id, attr, problem)
    elif owners.get(name, node_id) != node_id:
        plan.add_error(node_id, attr, (
            f"{attr} {shown(name)} is already used by {plan.label(owners[name])}: results are "
            f"stored by name, so each must be unique on the canvas"))


def _fits(plan: Plan, node_id: str, spec: BlockSpec, attrs: dict,
          input_specs: dict[str, TensorSpec], outputs: dict[str, TensorSpec],
          budget: Budget) -> bool:
    """Charge one step to the budget; add the node's problem and return False when an output
    alone, or the run at this step, would pass the limit."""
    sizes = {port: nbytes(outputs[port]) for port in spec.output_names()}
    for port, size in sizes.items():
        if size > budget.limit:
            ts = outputs[port]
            plan.add_error(node_id, spec.size_attr(attrs), (
                f"output {port} {list(ts.shape)} {ts.dtype} would need {gib(size)}, more "
                f"than the memory limit {gib(budget.limit)}"))
            return False
    try:
        workspace = spec.workspace(attrs, input_specs, outputs)
    except InvalidArgumentError as err:  # e.g. a file that changed since infer read it
        plan.add_error(node_id, getattr(err, "attr", None) or err.argument, str(err))
        return False
    problem = budget.charge(plan.label(node_id), {} if spec.passthrough else sizes, workspace)
    if problem is not None:
        plan.add_error(node_id, None, problem)
        return False
    return True


def _name_axes_from_consumers(canvas: Canvas, plan: Plan) -> None:
    """Give an output without axis names (a Tensor source, say) the names its consumer's input
    port expects: N, H, W, C into an NHWC conv input, kh, kw, in, out into a filter."""
    steps = {s.node_id: s for s in plan.steps}
    ports: dict[tuple[str, str], PortSpec] = {}  # (block type, input) -> its port spec
    for e in canvas.edges:
        src, dst = plan.specs.get(e.src), steps.get(e.dst[0])
        if src is None or src.axes is not None or dst is None:
            continue
        port = ports.get((dst.spec.type_id, e.dst[1]))
        if port is None:
            port = next(p for p in dst.spec.inputs if p.name == e.dst[1])
            ports[(dst.spec.type_id, e.dst[1])] = port
        if port.axes is not None:
            axes = port.axes(dst.attrs)
            if len(axes) == len(src.shape):
                plan.specs[e.src] = dataclasses.replace(src, axes=axes)
