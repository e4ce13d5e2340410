"""Each layer's input shape in a Keras model config, found by walking the model from its inputs
through the layers in between (:mod:`engine.io.models.keras_shapes`), without Keras.

What the configs say (both formats, ``.keras`` and ``.h5``):

* an ``InputLayer``'s shape: ``batch_shape`` (Keras 3) or ``batch_input_shape`` (Keras 2), a
  list with the batch first, maybe wrapped as Keras 3 serializes tuples,
  ``{"class_name": "__tuple__", "config": {"value": [...]}}``;
* a functional model's edges, per layer ``inbound_nodes``: Keras 3 writes one object per call,
  ``{"args": [...], "kwargs": {...}}`` whose keras tensors ``{"class_name":
  "__keras_tensor__", "config": {"shape": [...], "keras_history": [layer, node, tensor]}}``
  carry their shapes; Keras 2 writes one list per call of ``[layer, node, tensor, kwargs]``,
  no shapes;
* a Sequential model's layers in order, maybe with a ``build_config.input_shape``.

A shape the file states (a keras tensor's, a build_config's) is taken as stated; otherwise it is
the producing layer's output shape. A layer called more than once gets its first call's input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.base.names import shown
from engine.io.models.keras_shapes import Shape, ShapeStop, output_shape

MODEL_CLASSES = ("Sequential", "Functional", "Model")
#: How deep a node's arguments are searched for keras tensors (Add takes a list of them).
MAX_ARG_DEPTH = 4
#: What :func:`layer_inputs` says of a layer with several inputs (never a conv layer).
SEVERAL = "it takes several inputs"
#: Nested models inside models, at most (each level is walked on its own).
MAX_MODEL_DEPTH = 32


def plain(value: object) -> object:
    """A config value with Keras 3's tuple wrappers taken off (lists of lists stay)."""
    if isinstance(value, dict) and value.get("class_name") == "__tuple__":
        inner = value.get("config")
        value = inner.get("value") if isinstance(inner, dict) else None
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def as_shape(value: object) -> Shape | None:
    """A shape (batch first, sizes >= 0 or None), or None when ``value`` is not one."""
    value = plain(value)
    if isinstance(value, list) and len(value) >= 2 and all(
            v is None or (type(v) is int and v >= 0) for v in value):
        return tuple(value)
    return None


def _input_layer_shape(entry: dict) -> Shape | None:
    config = entry.get("config")
    config = config if isinstance(config, dict) else {}
    for key in ("batch_shape", "batch_input_shape"):
        shape = as_shape(config.get(key))
        if shape is not None:
            return shape
    return None


def _stated(entry: dict) -> Shape | None:
    """The input shape a layer's own config states (Keras 2 ``batch_input_shape`` on a first
    layer, Keras 3 ``build_config.input_shape``)."""
    build = entry.get("build_config")
    shape = as_shape(build.get("input_shape")) if isinstance(build, dict) else None
    return shape or _input_layer_shape(entry)


@dataclass(frozen=True)
class _Tensor:
    layer: str
    node: int
    shape: Shape | None  # as the file states it (Keras 3)


def _tensors(value: object, depth: int = 0) -> list[_Tensor] | None:
    """The keras tensors in a node's arguments, in order (None: something else was found)."""
    if isinstance(value, dict) and value.get("class_name") == "__keras_tensor__":
        config = value.get("config")
        history = config.get("keras_history") if isinstance(config, dict) else None
        if (not isinstance(config, dict) or not isinstance(history, list) or len(history) != 3 or not isinstance(history[0], str)
                or type(history[1]) is not int or history[1] < 0 or history[2] != 0):
            return None
        return [_Tensor(history[0], history[1], as_shape(config.get("shape")))]
    if isinstance(value, list) and depth < MAX_ARG_DEPTH:
        found: list[_Tensor] = []
        for item in value:
            inner = _tensors(item, depth + 1)
            if inner is None:
                return None
            found += inner
        return found
    return []  # a plain argument (a number, a string...)


def _node_inputs(node: object) -> list[_Tensor] | None:
    """A call's input tensors: Keras 3 ``{"args": [...]}`` or Keras 2 ``[[name, node, tensor,
    kwargs], ...]``; None when the node is neither."""
    if isinstance(node, dict):
        return _tensors(node.get("args", []))
    if isinstance(node, list):
        out = []
        for item in node:
            if (not isinstance(item, list) or len(item) < 3 or not isinstance(item[0], str)
                    or type(item[1]) is not int or item[1] < 0 or item[2] != 0):
                return None
            out.append(_Tensor(item[0], item[1], None))
        return out
    return None


@dataclass
class _Walk:
    """One model's layer list; ``inputs`` maps id(entry) -> its input shape or why unknown."""

    layers: list
    depth: int = 0
    inputs: dict[int, Shape | str] = field(default_factory=dict)
    _by_name: dict[str, dict] = field(default_factory=dict)
    _out: dict[tuple[str, int], Shape | str] = field(default_factory=dict)
    _inner: dict[int, _Walk] = field(default_factory=dict)

    def run(self, config: dict) -> None:
        entries = [e for e in self.layers if isinstance(e, dict)]
        self._by_name = {}
        for e in entries:
            name = _name(e)
            if name is not None:
                self._by_name.setdefault(name, e)
        if any(e.get("inbound_nodes") for e in entries):
            for e in entries:
                self._inputs_of(e)
        else:
            self._sequential(entries)
        for e in entries:  # nested models: their own walk, for their layers' inputs
            if e.get("class_name") in MODEL_CLASSES:
                self._nested(e)

    def _nested(self, entry: dict) -> _Walk | None:
        if id(entry) in self._inner:
            return self._inner[id(entry)]
        config = entry.get("config")
        layers = config.get("layers") if isinstance(config, dict) else None
        if (not isinstance(config, dict) or not isinstance(layers, list)
                or self.depth >= MAX_MODEL_DEPTH):
            return None
        inner = _Walk(layers, self.depth + 1)
        self._inner[id(entry)] = inner
        inner.run(config)
        self.inputs.update(inner.inputs)
        return inner

    def _sequential(self, entries: list[dict]) -> None:
        current: Shape | str = "the model states no input shape"
        for e in entries:
            stated = _stated(e)
            current = stated or current
            if e.get("class_name") == "InputLayer":
                continue
            self.inputs[id(e)] = current
            if isinstance(current, tuple):
                current = self._apply(e, [current])

    def _inputs_of(self, entry: dict) -> Shape | str:
        """The first call's input shape of ``entry`` (computed on an explicit stack, so deep
        models do not reach Python's recursion limit)."""
        key = id(entry)
        if key in self.inputs:
            return self.inputs[key]
        if entry.get("class_name") == "InputLayer":
            return "an input layer"
        nodes = entry.get("inbound_nodes")
        tensors = _node_inputs(nodes[0]) if isinstance(nodes, list) and nodes else None
        if not tensors:
            self.inputs[key] = (f"its inbound_nodes {shown(nodes, 60)} name no input it "
                                "can be traced to")
            return self.inputs[key]
        shapes: list[Shape] = []
        for t in tensors:
            shape = t.shape if t.shape is not None else self._output(t.layer, t.node)
            if isinstance(shape, str):
                self.inputs[key] = shape
                return shape
            shapes.append(shape)
        self.inputs[key] = shapes[0] if len(shapes) == 1 else SEVERAL
        return self.inputs[key]

    def _output(self, name: str, node: int) -> Shape | str:
        """The output shape of call ``node`` of layer ``name``."""
        stack = [(name, node)]
        while stack:
            key = stack[-1]
            if key in self._out:
                stack.pop()
                continue
            entry = self._by_name.get(key[0])
            if entry is None:
                self._out[key] = f"the walk reached {shown(key[0])}, a layer the model lacks"
                continue
            needed = self._needs(entry, key[1])
            pending = [n for n in needed if n not in self._out]
            if pending:
                if any(n in stack for n in pending):
                    self._out[key] = f"layer {shown(key[0])} feeds itself"
                    continue
                stack += pending
                continue
            self._out[key] = self._compute(entry, key[1])
        return self._out[(name, node)]

    def _needs(self, entry: dict, node: int) -> list[tuple[str, int]]:
        nodes = entry.get("inbound_nodes")
        if entry.get("class_name") == "InputLayer" or not isinstance(nodes, list) or \
                node >= len(nodes):
            return []
        tensors = _node_inputs(nodes[node]) or []
        return [(t.layer, t.node) for t in tensors if t.shape is None]

    def _compute(self, entry: dict, node: int) -> Shape | str:
        name = _name(entry) or "?"
        if entry.get("class_name") == "InputLayer":
            shape = _input_layer_shape(entry)
            return shape or f"input layer {shown(name)} states no shape"
        nodes = entry.get("inbound_nodes")
        tensors = _node_inputs(nodes[node]) if isinstance(nodes, list) and \
            node < len(nodes) else None
        if not tensors:
            return f"layer {shown(name)} has no call {node} the walk can trace"
        shapes = []
        for t in tensors:
            in_shape = t.shape if t.shape is not None else self._out[(t.layer, t.node)]
            if isinstance(in_shape, str):
                return in_shape
            shapes.append(in_shape)
        if node == 0:
            self.inputs.setdefault(id(entry), shapes[0] if len(shapes) == 1 else SEVERAL)
        return self._apply(entry, shapes)

    def _apply(self, entry: dict, shapes: list[Shape]) -> Shape | str:
        kind = entry.get("class_name")
        name = _name(entry) or "?"
        config = entry.get("config")
        config = config if isinstance(config, dict) else {}
        if kind in MODEL_CLASSES:
            inner = self._nested(entry)
            outs = plain(config.get("output_layers"))
            if inner is not None and isinstance(outs, list) and outs:
                first = outs[0] if isinstance(outs[0], list) else outs
                if len(first) >= 2 and isinstance(first[0], str) and type(first[1]) is int:
                    return inner._output(first[0], first[1])
            return f"the walk stopped at model {shown(name)}: its output is not traceable"
        try:
            return output_shape(str(kind), config, shapes)
        except ShapeStop as why:
            return f"the walk stopped at layer {shown(name)} ({shown(kind, 60)}): {why}"


def _name(entry: dict) -> str | None:
    config = entry.get("config")
    name = config.get("name") if isinstance(config, dict) else None
    name = entry.get("name") if name is None else name
    return name if isinstance(name, str) else None


def layer_inputs(model_config: dict) -> dict[int, Shape | str]:
    """id(layer entry) -> the layer's input shape (:data:`SEVERAL` for a layer with several
    inputs), or a sentence saying why the walk cannot tell, for every layer of the model and
    of the models nested in it."""
    config = model_config.get("config")
    layers = config.get("layers") if isinstance(config, dict) else None
    if not isinstance(config, dict) or not isinstance(layers, list):
        return {}
    walk = _Walk(layers)
    walk.run(config)
    return walk.inputs
