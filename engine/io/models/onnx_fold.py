"""A conv layer's weights and bias wherever an ONNX graph keeps them, folded by onnx's own
reference evaluator when a constant subgraph computes them.

:class:`Constants` resolves a tensor name to an array: ``--weights`` arrays first (graph inputs
supplied by the user), then initializers (graph inputs with an initializer included), then the
value of the subgraph that computes it (``ConstantOfShape``, ``Constant``, ``Reshape``,
``Cast``, ``Transpose``, ...), computed by ``onnx.reference.ReferenceEvaluator`` on a small
model made of only the nodes the tensor depends on. A tensor that depends on a graph input
without an initializer is a runtime input: :meth:`Constants.runtime_inputs` names them, and the
message says which ``--weights FILE.npz`` keys supply them.

Before the evaluator runs, the subgraph is checked (a one-line :class:`ModelImportError` naming
the layer otherwise): every node an op of :data:`FOLD_OPS` (side-effect free, deterministic,
work linear in its tensors' sizes) of the default domain, no graph, sparse or function
attributes, no cycle, at most :data:`MAX_FOLD_NODES` nodes; every leaf an initializer (read by
:func:`engine.io.models.onnx_tensors.tensor_array`: dims checked against the data, external data
only inside the model's folder) or a ``--weights`` array; and every intermediate's size known
from ``onnx.shape_inference`` (with data propagation, so ``ConstantOfShape`` of a constant shape
is known) or, for ``ConstantOfShape``, from its shape input, and all of them together within the
reader memory limit (:mod:`engine.base.memory_limit`). A subgraph that would allocate more is
refused before it runs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from engine.base.memory_limit import DEFAULT_MEMORY_LIMIT, gib
from engine.base.names import escaped
from engine.io.models.model_import import ModelImportError
from engine.io.models.onnx_tensors import NUMBER_TYPES, tensor_array, text, type_name

if TYPE_CHECKING:  # onnx is imported by the reader, only when a model is read
    from onnx import NodeProto

#: Ops a constant subgraph may hold: no side effects, no randomness, no subgraphs, and work
#: linear in the sizes of their inputs and outputs (no MatMul, Conv, ...).
FOLD_OPS = frozenset({
    "Constant", "ConstantOfShape", "Identity", "Reshape", "Cast", "CastLike", "Transpose",
    "Unsqueeze", "Squeeze", "Flatten", "Concat", "Split", "Slice", "Gather", "Expand", "Tile",
    "Shape", "Size", "Pad", "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Sqrt", "Reciprocal",
    "Pow", "Exp", "Log", "Min", "Max", "Sum", "Mean", "Clip", "Relu", "Sign", "Floor", "Ceil",
    "Round", "Where", "Equal", "Less", "Greater", "Not", "And", "Or", "DequantizeLinear",
})
#: The most nodes a folded subgraph may have.
MAX_FOLD_NODES = 10_000
#: Attribute types a folded node may carry (graphs, sparse tensors and type protos refused).
PLAIN_ATTRS = ("FLOAT", "INT", "STRING", "FLOATS", "INTS", "STRINGS", "TENSOR")


def quoted(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)


class Constants:
    """Tensor name -> array for one model (see the module docstring)."""

    def __init__(self, onnx, model, file_bytes: int, base_dir: str,
                 supplied: dict[str, np.ndarray] | None = None,
                 limit: int = DEFAULT_MEMORY_LIMIT):
        self.onnx, self.model, self.limit = onnx, model, limit
        self.file_bytes, self.base_dir = file_bytes, base_dir
        self.supplied = dict(supplied or {})
        graph = model.graph
        self.inits = {t.name: t for t in graph.initializer}
        self.inputs = {i.name for i in graph.input}
        self.producers: dict[str, NodeProto] = {}
        for node in graph.node:
            for out in node.output:
                if out:
                    self.producers.setdefault(out, node)

    def is_constant_source(self, name: str) -> bool:
        """``name`` is supplied, an initializer or computed by a node (not a bare input)."""
        return name in self.supplied or name in self.inits or name in self.producers

    def runtime_inputs(self, name: str) -> list[str]:
        """The graph inputs without initializer (and not supplied) that ``name`` depends on,
        through the nodes computing it (empty when it is constant)."""
        found: list[str] = []
        seen: set[str] = set()
        todo = [name]
        while todo and len(seen) <= MAX_FOLD_NODES:
            t = todo.pop()
            if not t or t in seen:
                continue
            seen.add(t)
            if t in self.supplied or t in self.inits:
                continue
            node = self.producers.get(t)
            if node is not None:
                todo.extend(node.input)
            elif t in self.inputs:
                found.append(t)
        return sorted(found)

    def value(self, name: str, label: str, leaf_types: dict[str, str] = NUMBER_TYPES
              ) -> np.ndarray:
        """The array of tensor ``name`` (``label`` starts every message)."""
        if name in self.supplied:
            return self.supplied[name]
        if name in self.inits:
            return tensor_array(self.onnx, self.inits[name], label, self.file_bytes,
                                self.base_dir, leaf_types, self.limit)
        if name in self.producers:
            return self._fold(name, label)
        if name in self.inputs:
            raise ModelImportError(f"{label} is a runtime input of the graph (no initializer): "
                                   f"give it with --weights FILE.npz, key {name!r}")
        raise ModelImportError(f"{label}: no node, initializer or input of the graph defines "
                               "it")

    # -- folding -----------------------------------------------------------------------------
    def _subgraph(self, name: str, label: str) -> tuple[list, list[str]]:
        """The nodes ``name`` depends on in a topological order, and its leaves."""
        order, leaves, state = [], [], {}  # state: 1 = on the path, 2 = done
        stack = [(self.producers[name], False)]
        while stack:
            node, expanded = stack.pop()
            key = id(node)
            if expanded:
                state[key] = 2
                order.append(node)
                continue
            if state.get(key) == 2:
                continue
            if state.get(key) == 1:
                raise ModelImportError(f"{label}: the graph computing it has a cycle (at "
                                       f"{escaped(text(node.output[0]), 80)!r})")
            if len(state) >= MAX_FOLD_NODES:
                raise ModelImportError(f"{label}: computed by more than {MAX_FOLD_NODES} "
                                       "nodes: not folded")
            self._check_node(node, label)
            state[key] = 1
            stack.append((node, True))
            for t in node.input:
                if not t:
                    continue
                producer = None if (t in self.supplied or t in self.inits) else \
                    self.producers.get(t)
                if producer is None:
                    if t not in leaves:
                        leaves.append(t)
                elif state.get(id(producer)) == 1:
                    raise ModelImportError(f"{label}: the graph computing it has a cycle (at "
                                           f"{escaped(text(t), 80)!r})")
                elif state.get(id(producer)) != 2:
                    stack.append((producer, False))
        return order, leaves

    def _check_node(self, node, label: str) -> None:
        op = escaped(text(node.op_type), 60)
        where = f"{label}: computed by {op} node {escaped(text(node.name or node.output[0]), 80)!r}"
        if node.domain not in ("", "ai.onnx") or node.op_type not in FOLD_OPS:
            domain = f" of domain {escaped(text(node.domain), 60)!r}" if node.domain else ""
            raise ModelImportError(f"{where}{domain}, an op the import does not fold (it folds "
                                   "side-effect-free ops: Constant, ConstantOfShape, Identity, "
                                   "Reshape, Cast, Transpose, Unsqueeze, ...)")
        for attr in node.attribute:
            kind = type_name(self.onnx.AttributeProto.AttributeType, attr.type)
            if attr.ref_attr_name or kind not in PLAIN_ATTRS:
                raise ModelImportError(f"{where}: attribute {escaped(text(attr.name), 60)!r} of "
                                       f"type {kind} cannot be folded")

    def _clean_node(self, node, label: str):
        """A copy of ``node`` whose tensor attributes are read strictly (no external data)."""
        onnx = self.onnx
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        for attr in copy.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                array = tensor_array(onnx, attr.t, f"{label}: {text(node.op_type)} attribute "
                                     f"{text(attr.name)!r}", self.file_bytes, self.base_dir,
                                     NUMBER_TYPES, self.limit)
                attr.t.CopyFrom(onnx.numpy_helper.from_array(array, attr.t.name))
        return copy

    def _fold(self, name: str, label: str) -> np.ndarray:
        """Run the subgraph computing ``name`` at once when every intermediate's size is known
        from its constant inputs; else node by node, each node's output sizes known from its
        computed inputs before it runs. Either way nothing runs past the memory limit."""
        order, leaves = self._subgraph(name, label)
        runtime = [t for t in leaves if t not in self.supplied and t not in self.inits]
        if runtime:
            raise ModelImportError(f"{label} is computed from the runtime input(s) "
                                   f"{quoted(runtime)} of the graph (no initializer): give "
                                   f"them with --weights FILE.npz, "
                                   f"{'key' if len(runtime) == 1 else 'keys'} {quoted(runtime)}")
        values = {t: self.value(t, f"{label}: input {escaped(text(t), 80)!r}") for t in leaves}
        used = sum(a.nbytes for a in values.values())
        nodes = [self._clean_node(n, label) for n in order]
        sizes = self._sizes(nodes, values, [name])
        if all(nbytes is not None for nbytes, _ in sizes):
            self._within_limit(sizes, used, label)
            return self._run(nodes, values, [name], label)[0]
        for node in nodes:  # some size depends on values: one node at a time
            outs = [o for o in node.output if o]
            used = self._within_limit(self._sizes([node], values, outs), used, label)
            values.update(zip(outs, self._run([node], values, outs, label), strict=True))
        return values[name]

    def _model(self, nodes: list, values: dict[str, np.ndarray], outputs: list[str], label: str):
        """A model of ``nodes`` alone, their inputs from ``values`` as initializers."""
        onnx = self.onnx
        needed = {t for n in nodes for t in n.input if t} - {o for n in nodes for o in n.output}
        inits = [onnx.numpy_helper.from_array(np.asarray(values[t]), t) for t in sorted(needed)]
        outs = [onnx.helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
                for o in outputs]
        graph = onnx.helper.make_graph(nodes, "fold", [], outs, initializer=inits)
        opsets = [o for o in self.model.opset_import if o.domain in ("", "ai.onnx")]
        if not opsets:
            raise ModelImportError(f"{label}: the model imports no ONNX opset, so its nodes "
                                   "cannot be evaluated")
        small = onnx.helper.make_model(graph, opset_imports=[
            onnx.helper.make_opsetid("", opsets[0].version)])
        small.ir_version = max(self.model.ir_version, 3)
        return small

    def _run(self, nodes: list, values: dict[str, np.ndarray], outputs: list[str],
             label: str) -> list[np.ndarray]:
        """``outputs`` of ``nodes`` by onnx's reference evaluator."""
        try:
            from onnx.reference import ReferenceEvaluator

            results = ReferenceEvaluator(self._model(nodes, values, outputs, label)).run(None, {})
        except ModelImportError:
            raise
        except Exception as err:  # noqa: BLE001 - the evaluator raises anything
            detail = str(err).splitlines()[0] if str(err) else "no detail"
            raise ModelImportError(f"{label}: onnx's reference evaluator could not compute it "
                                   f"({type(err).__name__}: {escaped(detail, 200)})") from None
        for out, result in zip(outputs, results, strict=True):
            if not isinstance(result, np.ndarray):
                raise ModelImportError(f"{label}: {escaped(text(out), 80)!r} is a "
                                       f"{type(result).__name__}, not a tensor")
        return list(results)

    def _sizes(self, nodes: list, values: dict[str, np.ndarray], outputs: list[str]
               ) -> list[tuple[int | None, str]]:
        """(bytes or None when unknown, description) of every output of ``nodes``, by
        ``onnx.shape_inference`` with data propagation on their model (nothing runs)."""
        try:
            small = self._model(nodes, values, outputs, "")
            inferred = self.onnx.shape_inference.infer_shapes(small, strict_mode=False,
                                                              data_prop=True)
            infos = {i.name: i for i in [*inferred.graph.value_info, *inferred.graph.output]}
        except Exception:  # noqa: BLE001 - unknown sizes are refused by the caller
            infos = {}
        return [(self._size(infos.get(out), node, values),
                 f"{escaped(text(out), 80)!r} (op {escaped(text(node.op_type), 60)})")
                for node in nodes for out in node.output if out]

    def _within_limit(self, sizes: list[tuple[int | None, str]], used: int, label: str) -> int:
        """``used`` plus ``sizes``, refused when a size is unknown or the sum passes the limit
        (before anything of them runs)."""
        total, biggest = used, (0, "")
        for nbytes, what in sizes:
            if nbytes is None:
                raise ModelImportError(f"{label}: the size of {what} cannot be told before "
                                       "computing it: not folded")
            total += nbytes
            biggest = max(biggest, (nbytes, what))
            if total > self.limit:
                raise ModelImportError(
                    f"{label}: computing it would need {gib(total)} or more ({biggest[1]} "
                    f"alone is {gib(biggest[0])}), more than the memory limit "
                    f"({gib(self.limit)}): refused before running")
        return total

    def _size(self, info, node, arrays: dict[str, np.ndarray]) -> int | None:
        """Bytes of one intermediate: from its inferred type and shape, or for ConstantOfShape
        from its shape input and value; None when unknown."""
        onnx = self.onnx
        if info is not None and info.type.HasField("tensor_type"):
            tt = info.type.tensor_type
            dims = tt.shape.dim if tt.HasField("shape") else None
            if dims is not None and all(d.HasField("dim_value") for d in dims):
                itemsize = _itemsize(onnx, tt.elem_type)
                if itemsize is not None:
                    return math.prod(d.dim_value for d in dims) * itemsize
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in arrays:
            shape = np.asarray(arrays[node.input[0]])
            if shape.ndim == 1 and shape.dtype.kind in "iu" and (shape >= 0).all():
                return math.prod(int(v) for v in shape) * 8  # at most 8 bytes an element
        return None


def _itemsize(onnx, elem_type: int) -> int | None:
    """Bytes of one element of ``elem_type`` (None for strings and unknown types)."""
    try:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    except Exception:  # noqa: BLE001 - an unknown type number
        return None
    return None if dtype.kind in "OUS" else dtype.itemsize
