"""The 1-D, 2-D and 3-D ``Conv`` nodes of an ONNX model (needs the ``onnx`` package, the
``models`` extra).

``read_onnx(path)`` returns the importable layers and, by name, why each other conv-like node
cannot be imported (a 4-D conv, weights that are not initializers, SAME_* with dilations, ...).
ONNX semantics: weights [M, C / group, kH, kW]; ``pads`` = [top, left, bottom, right];
``auto_pad`` SAME_UPPER pads like TensorFlow's SAME (odd pad after), SAME_LOWER puts the odd pad
before (an empty ``auto_pad`` is NOTSET, as ONNX Runtime reads it); NCHW data. A 1-D node
(weights [M, C / group, k], data [N, C, W]) is the 2-D conv of height 1 that computes it, as
Keras Conv1D is (:func:`_lift_1d`); a 3-D node (weights [M, C / group, kD, kH, kW], ``pads`` =
[D, H, W begins, D, H, W ends]) is TensorFlow's Conv3D.

Nothing in the file is trusted: every Conv attribute must have the type the ONNX spec gives it
(:data:`CONV_ATTRS`) and appear once; a weight tensor's dims must match the data it holds before
any array is made (so dims that lie, are negative or claim more bytes than the file has are a
refusal, not an allocation); external data is read only for the weights of a Conv node, only
from a regular file inside the model's folder (onnx's own checks) and only as many bytes as the
dims need. Input sizes of 0 or less are unknown sizes (older exporters wrote dynamic dims so).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections import Counter

import numpy as np

from engine.base.names import article, escaped
from engine.io.models.model_import import (
    ConvLayer,
    ModelImportError,
    ModelLayers,
    check_layer,
    float_weights,
    from_oihw,
    need_module,
)
from engine.io.models.onnx_fold import Constants, quoted
from engine.io.models.onnx_tensors import FLOAT_TYPES, type_name
from engine.io.models.onnx_tensors import text as _str
from engine.io.models.onnx_transpose import TRANSPOSE_ATTRS, transposed_layer

#: Ops that look like a conv but are not ONNX's float Conv.
OTHER_CONV_OPS = ("ConvInteger", "QLinearConv", "DeformConv")
#: The attributes of ONNX Conv and their types (``AttributeProto.AttributeType`` names), as the
#: ONNX operator spec defines them.
CONV_ATTRS = {"auto_pad": "STRING", "dilations": "INTS", "group": "INT",
              "kernel_shape": "INTS", "pads": "INTS", "strides": "INTS"}
#: Where an AttributeProto of each of those types holds its value.
ATTR_FIELDS = {"INT": "i", "INTS": "ints", "STRING": "s"}
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
#: Protobuf cannot parse a message larger than this: a bigger file is no ONNX model.
MAX_MODEL_BYTES = 2**31 - 1


def _file_bytes(path: str) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_MODEL_BYTES` (checked before reading;
    opened without blocking, so a FIFO is refused, not waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        raise ModelImportError(f"{escaped(path)}: cannot read the model ({err.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ModelImportError(f"{escaped(path)}: not a regular file")
        if st.st_size > MAX_MODEL_BYTES:
            raise ModelImportError(f"{escaped(path)}: not a readable ONNX model ({st.st_size} bytes, "
                                   f"more than protobuf's limit of {MAX_MODEL_BYTES})")
        return f.read(MAX_MODEL_BYTES + 1)


def _load(path: str):
    """onnx, the model (external data not loaded: see :func:`_external`) and the file's size."""
    onnx = need_module("onnx", "an ONNX model")
    data = _file_bytes(path)
    try:
        model = onnx.load_model_from_string(data)
    except Exception as err:  # noqa: BLE001 - protobuf decode errors have no common base
        detail = str(err).splitlines()[0] if str(err) else "no detail"
        raise ModelImportError(f"{escaped(path)}: not a readable ONNX model ({type(err).__name__}: "
                               f"{escaped(detail, 200)})") from None
    if not model.graph.node:
        raise ModelImportError(f"{escaped(path)}: not a readable ONNX model (no graph nodes)")
    try:
        return onnx, onnx.shape_inference.infer_shapes(model), len(data)
    except Exception:  # noqa: BLE001 - shapes are a convenience: --input-size gives them
        return onnx, model, len(data)


def _shapes(model) -> dict[str, list[int | None]]:
    """Tensor name -> its dims, None where unknown (a dim_param, or a dim_value of 0 or less)."""
    shapes = {}
    for info in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        dims = info.type.tensor_type.shape.dim
        shapes[info.name] = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0
                             else None for d in dims]
    return shapes


def _attr_value(attr, kind: str):
    """The value of an attribute of the type ``kind``: an int, a tuple of ints or bytes."""
    value = getattr(attr, ATTR_FIELDS[kind])
    return tuple(value) if kind == "INTS" else value


def _attrs(onnx, node, name: str, spec: dict[str, str] = CONV_ATTRS, op: str = "Conv") -> dict:
    """The node's attributes by name, each of the type ONNX gives it in ``spec``, each given
    once."""
    found: dict = {}
    seen: set[str] = set()
    unknown = []
    for attr in node.attribute:
        key = _str(attr.name)
        if key in seen:
            raise ModelImportError(f"layer {name!r}: attribute {key!r} is given more than "
                                   "once")
        seen.add(key)
        want = spec.get(key)
        if want is None:
            unknown.append(key)
            continue
        if attr.ref_attr_name:
            raise ModelImportError(f"layer {name!r}: attribute {key!r} refers to a function "
                                   f"attribute {_str(attr.ref_attr_name)!r}, which only a "
                                   "function body may do")
        got = type_name(onnx.AttributeProto.AttributeType, attr.type)
        if got != want:
            raise ModelImportError(f"layer {name!r}: attribute {key!r} has type {got}, "
                                   f"expected {want} (as ONNX {op} defines it)")
        found[key] = _attr_value(attr, want)
    if unknown:
        raise ModelImportError(f"layer {name!r}: unknown {op} attribute(s) "
                               f"{', '.join(map(repr, sorted(unknown)))}")
    return found


def _rank_problem(w: np.ndarray, what: str = "conv") -> str:
    """Why weights of a rank other than 3, 4 or 5 are no 1-D, 2-D or 3-D conv's."""
    if w.ndim < 3:
        layout = "[out, in / group, kH, kW]" if what == "conv" else "[in, out / group, kH, kW]"
        return (f"weights of rank {w.ndim} (shape {list(w.shape)}) are no {what}'s weights "
                f"{layout}")
    return (f"{article(f'{w.ndim - 2}-D')} {what} (weights of rank {w.ndim}); only 1-D, 2-D and "
            "3-D convs can be imported")


#: The attributes of a 1-D node with one number per axis, and what a 2-D conv of height 1 has
#: for the row axis.
ROW_VALUES = {"strides": 1, "dilations": 1, "kernel_shape": 1, "output_padding": 0,
              "output_shape": 1}


def _lift_1d(name: str, a: dict, w: np.ndarray) -> tuple[dict, np.ndarray]:
    """A 1-D node's attributes and weights as the 2-D conv of height 1 computing it: one row
    added to the kernel, strides (1, s), dilations (1, d), pads [0, begin, 0, end]."""
    lifted = dict(a)
    for key, row in ROW_VALUES.items():
        if key in a:
            if len(a[key]) != 1:
                raise ModelImportError(f"layer {name!r}: {key} {list(a[key])} has "
                                       f"{len(a[key])} numbers, expected 1 for a 1-D conv")
            lifted[key] = (row, a[key][0])
    if "pads" in a:
        if len(a["pads"]) != 2:
            raise ModelImportError(f"layer {name!r}: pads {list(a['pads'])} has "
                                   f"{len(a['pads'])} numbers, expected 2 for a 1-D conv")
        lifted["pads"] = (0, a["pads"][0], 0, a["pads"][1])
    return lifted, w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])


def _auto_pad(name: str, a: dict) -> str:
    raw = a.get("auto_pad", b"NOTSET")
    try:
        auto_pad = raw.decode() if raw else "NOTSET"
    except UnicodeDecodeError:
        auto_pad = raw  # shown as bytes below
    if auto_pad not in AUTO_PADS:
        raise ModelImportError(f"layer {name!r}: unknown auto_pad {auto_pad!r} (expected one of "
                               f"{', '.join(AUTO_PADS)})")
    return auto_pad


def _pads(name: str, a: dict, rank: int):
    """(padding, pads: (before, after) per axis, top/bottom/left/right for a 2-D conv) from
    auto_pad and pads."""
    auto_pad = _auto_pad(name, a)
    pads = a.get("pads", (0,) * 2 * rank)
    if len(pads) != 2 * rank:
        raise ModelImportError(f"layer {name!r}: pads {list(pads)} has {len(pads)} numbers, "
                               f"expected {2 * rank} for a {rank}-D conv")
    if min(pads) < 0:
        raise ModelImportError(f"layer {name!r}: negative pads {list(pads)} (cropping) cannot "
                               "be imported")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        dilations = a.get("dilations", (1,) * rank)
        if tuple(dilations) != (1,) * rank:
            raise ModelImportError(
                f"layer {name!r}: auto_pad {auto_pad} with dilations {list(dilations)}: "
                "runtimes disagree on whether the padding counts the dilated kernel; "
                "re-export the model with explicit pads")
        return ("SAME" if auto_pad == "SAME_UPPER" else "SAME_LOWER"), (0,) * 2 * rank
    if auto_pad == "VALID":
        return "VALID", (0,) * 2 * rank
    tblr = tuple(p for i in range(rank) for p in (pads[i], pads[rank + i]))
    return ("EXPLICIT" if any(tblr) else "VALID"), tblr


def _arrays(consts: Constants, node, name: str, what: str = "conv"):
    """The node's weights (rank 3, 4 or 5, float) and bias (float or None), wherever the graph keeps
    them (:class:`~engine.io.models.onnx_fold.Constants`); runtime inputs are named with the
    ``--weights`` keys that supply them."""
    if len(node.input) < 2 or not node.input[1]:
        raise ModelImportError(f"layer {name!r}: the node has no weights input")
    tensors = [("weights", node.input[1])]
    if len(node.input) > 2 and node.input[2]:
        tensors.append(("bias", node.input[2]))
    parts, keys = [], []
    for kind, tensor in tensors:
        runtime = consts.runtime_inputs(tensor)
        verb = "are" if kind == "weights" else "is"
        keys += [k for k in runtime if k not in keys]
        if runtime == [tensor] and not consts.is_constant_source(tensor):
            parts.append(f"its {kind} {_str(tensor)!r} {verb} a runtime input of the graph")
        elif runtime:
            parts.append(f"its {kind} {_str(tensor)!r} {verb} computed from the runtime "
                         f"input(s) {quoted(runtime)} of the graph")
    if keys:
        raise ModelImportError(f"layer {name!r}: {' and '.join(parts)} (no initializer, nothing "
                               f"constant computes them): give them with --weights FILE.npz, "
                               f"{'key' if len(keys) == 1 else 'keys'} {quoted(keys)} (one "
                               "array per graph input, keyed by its name)")
    w = consts.value(tensors[0][1], f"layer {name!r}: weights {_str(tensors[0][1])!r}",
                     FLOAT_TYPES)
    if w.ndim not in (3, 4, 5):
        raise ModelImportError(f"layer {name!r}: {_rank_problem(w, what)}")
    w = float_weights(name, "weights", w)
    bias = None
    if len(tensors) > 1:
        bias = float_weights(name, "bias", consts.value(
            tensors[1][1], f"layer {name!r}: bias {_str(tensors[1][1])!r}", FLOAT_TYPES))
    return w, bias


def _window(name: str, a: dict, w: np.ndarray):
    """(group, strides, dilations, kernel) of a 2-D or 3-D conv node, checked against its
    weights."""
    rank = w.ndim - 2
    group = a.get("group", 1)
    strides, dilations = a.get("strides", (1,) * rank), a.get("dilations", (1,) * rank)
    kernel = a.get("kernel_shape", w.shape[2:])
    for what, value in (("strides", strides), ("dilations", dilations),
                        ("kernel_shape", kernel)):
        if len(value) != rank:
            raise ModelImportError(f"layer {name!r}: {what} {list(value)} has {len(value)} "
                                   f"numbers, expected {rank} for a {rank}-D conv")
    if tuple(kernel) != tuple(w.shape[2:]):
        raise ModelImportError(f"layer {name!r}: kernel_shape {list(kernel)} does not match "
                               f"the weights' {list(w.shape[2:])}")
    return group, tuple(strides), tuple(dilations), tuple(kernel)


def _input_shape(node, shapes: dict, rank: int) -> tuple[tuple[int, ...] | None, int | None]:
    """The node's input sizes (a 1-D node's as height 1 and its width) and batch, where the
    graph says them."""
    shape = shapes.get(node.input[0]) if node.input else None
    shape = shape or []
    if rank == 1 and len(shape) == 3:
        shape = [shape[0], shape[1], 1, shape[2]]
        rank = 2
    sizes = shape[2:]
    hw = tuple(sizes) if len(shape) == rank + 2 and None not in sizes else None
    return hw, (shape[0] if len(shape) == rank + 2 and shape[0] else None)


def _layer(onnx, node, name: str, consts: Constants, shapes: dict) -> ConvLayer:
    a = _attrs(onnx, node, name)
    w, bias = _arrays(consts, node, name)
    hw, batch = _input_shape(node, shapes, w.ndim - 2)
    one_d = w.ndim == 3
    if one_d:
        a, w = _lift_1d(name, a, w)
    group, strides, dilations, kernel = _window(name, a, w)
    padding, tblr = _pads(name, a, w.ndim - 2)
    in_channels = w.shape[1] * group
    layer = ConvLayer(name=name, kernel=kernel, strides=strides,
                      dilations=dilations, padding=padding, pads=tblr, groups=group,
                      in_channels=in_channels, out_channels=w.shape[0], data_format="NCHW",
                      weights=from_oihw(w, group) if w.shape[0] % max(group, 1) == 0 else w,
                      bias=bias, input_hw=hw, batch=batch, conv1d=one_d)
    check_layer(layer)
    return layer


def _transposed(onnx, node, name: str, consts: Constants, shapes: dict) -> ConvLayer:
    a = _attrs(onnx, node, name, TRANSPOSE_ATTRS, "ConvTranspose")
    w, bias = _arrays(consts, node, name, "transposed conv")
    hw, batch = _input_shape(node, shapes, w.ndim - 2)
    one_d = w.ndim == 3
    if one_d:
        a, w = _lift_1d(name, a, w)
    group, strides, dilations, kernel = _window(name, a, w)
    layer = transposed_layer(name, a, _auto_pad(name, a), w, bias, group, strides, dilations,
                             kernel, hw, batch)
    return dataclasses.replace(layer, conv1d=True) if one_d else layer


def _once(node, name: str, defined: Counter) -> None:
    """Refuse weights or a bias that several initializers define (which one is meant?)."""
    for what, tensor in zip(("weights", "bias"), node.input[1:3], strict=False):
        if defined[tensor] > 1:
            raise ModelImportError(f"layer {name!r}: {what} {_str(tensor)!r}: "
                                   f"{defined[tensor]} initializers have this name (which one "
                                   "is meant?)")


def _supplied(model, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ``--weights`` arrays, each keyed by a graph input and shaped as it is declared."""
    inputs = {i.name: i for i in model.graph.input}
    for key, array in weights.items():
        if key not in inputs:
            names = ", ".join(escaped(n, 40) for n in list(inputs)[:20]) or "none"
            raise ModelImportError(f"--weights: key {key!r} is not an input of the graph "
                                   f"(inputs: {names})")
        dims = inputs[key].type.tensor_type.shape.dim
        want = [d.dim_value if d.HasField("dim_value") else None for d in dims]
        if want and (len(want) != array.ndim or any(
                v is not None and v != n for v, n in zip(want, array.shape, strict=False))):
            raise ModelImportError(f"--weights: key {key!r} has shape {list(array.shape)}, but "
                                   f"the graph declares the input {key!r} as {want}")
    return dict(weights)


#: Element-wise ONNX ops that, as the only consumer of a conv's output, are its activation: the
#: import says the model applies it after the conv (the canvas computes the conv alone).
ACTIVATIONS = frozenset({"Relu", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish",
                         "Tanh", "Elu", "Selu", "Celu", "Softplus", "Softsign", "Mish", "Gelu",
                         "Clip", "ThresholdedRelu", "Swish"})


def _consumers(model) -> dict[str, str]:
    """Output name -> the op type of its only consumer (outputs read by several nodes, or by
    none, or that are graph outputs, are left out)."""
    readers: dict[str, list[str]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(_str(node.op_type))
    outputs = {o.name for o in model.graph.output}
    return {name: ops[0] for name, ops in readers.items()
            if len(ops) == 1 and name not in outputs}


def read_onnx(path: str, weights: dict[str, np.ndarray] | None = None) -> ModelLayers:
    """The model's Conv and ConvTranspose nodes (see
    :class:`~engine.io.models.model_import.ModelLayers`); ``weights`` (``--weights``) gives
    graph inputs by name."""
    onnx, model, file_bytes = _load(path)
    base_dir = os.path.dirname(os.path.abspath(path))
    consts = Constants(onnx, model, file_bytes, base_dir, _supplied(model, weights or {}))
    defined = Counter(t.name for t in model.graph.initializer)
    shapes = _shapes(model)
    found = ModelLayers([], {}, {})
    after = _consumers(model)
    for k, node in enumerate(model.graph.node):
        name = _str(node.name or (node.output[0] if node.output else "")) or f"node {k}"
        op = repr(_str(node.op_type))[1:-1]
        ours = node.domain in ("", "ai.onnx")
        if node.op_type in OTHER_CONV_OPS:
            found.refused[name] = (f"layer {name!r}: op {op} cannot be imported (only ONNX Conv "
                                   "and ConvTranspose)")
        elif node.op_type in ("Conv", "ConvTranspose") and ours:
            read = _layer if node.op_type == "Conv" else _transposed
            try:
                _once(node, name, defined)
                layer = read(onnx, node, name, consts, shapes)
                follows = after.get(node.output[0]) if node.output else None
                found.layers.append(dataclasses.replace(layer, activation=follows)
                                    if follows in ACTIVATIONS else layer)
            except ModelImportError as err:
                found.refused[name] = str(err)
        else:
            found.others[name] = (f"layer {name!r}: op {op} is not a conv (only Conv and "
                                  "ConvTranspose nodes can be imported)")
    return found
