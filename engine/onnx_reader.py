"""The 2-D ``Conv`` nodes of an ONNX model (needs the ``onnx`` package, the ``models`` extra).

``read_onnx(path)`` returns the importable layers and, by name, why each other conv-like node
cannot be imported (a 3-D conv, weights that are not initializers, SAME_* with dilations, ...).
ONNX semantics: weights [M, C / group, kH, kW]; ``pads`` = [top, left, bottom, right];
``auto_pad`` SAME_UPPER pads like TensorFlow's SAME (odd pad after), SAME_LOWER puts the odd pad
before; NCHW data.
"""

from __future__ import annotations

from engine.model_import import (
    ConvLayer,
    ModelImportError,
    ModelLayers,
    check_layer,
    float_weights,
    from_oihw,
    need_module,
)

#: Ops that look like a conv but are not ONNX's float Conv.
OTHER_CONV_OPS = ("ConvTranspose", "ConvInteger", "QLinearConv", "DeformConv")


def _load(path: str):
    onnx = need_module("onnx", "an ONNX model")
    try:
        model = onnx.load(path)
    except Exception as err:  # noqa: BLE001 - protobuf decode errors have no common base
        raise ModelImportError(f"{path}: not a readable ONNX model ({type(err).__name__}: "
                               f"{str(err).splitlines()[0] if str(err) else 'no detail'})"
                               ) from None
    if not model.graph.node:
        raise ModelImportError(f"{path}: not a readable ONNX model (no graph nodes)")
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - shapes are a convenience: --input-size gives them
        return onnx, model
    return onnx, model


def _shapes(model) -> dict[str, list[int | None]]:
    shapes = {}
    for info in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        dims = info.type.tensor_type.shape.dim
        shapes[info.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return shapes


def _attrs(onnx, node) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _layer(onnx, node, name: str, inits: dict, shapes: dict) -> ConvLayer:
    if len(node.input) < 2 or node.input[1] not in inits:
        raise ModelImportError(f"layer {name!r}: its weights are not an initializer of the "
                               "model (computed weights cannot be imported)")
    w = onnx.numpy_helper.to_array(inits[node.input[1]])
    if w.ndim != 4:
        raise ModelImportError(f"layer {name!r}: a {w.ndim - 2}-D conv (weights of rank "
                               f"{w.ndim}); only 2-D convs can be imported")
    w = float_weights(name, "weights", w)
    a = _attrs(onnx, node)
    known = {"group", "strides", "dilations", "pads", "auto_pad", "kernel_shape"}
    if set(a) - known:
        raise ModelImportError(f"layer {name!r}: unknown Conv attribute(s) "
                               f"{', '.join(sorted(set(a) - known))}")
    group = int(a.get("group", 1))
    strides = tuple(int(v) for v in a.get("strides", (1, 1)))
    dilations = tuple(int(v) for v in a.get("dilations", (1, 1)))
    pads = tuple(int(v) for v in a.get("pads", (0, 0, 0, 0)))
    kernel = tuple(int(v) for v in a.get("kernel_shape", w.shape[2:]))
    auto_pad = _text(a.get("auto_pad", "NOTSET"))
    for what, value, n in (("strides", strides, 2), ("dilations", dilations, 2),
                           ("pads", pads, 4), ("kernel_shape", kernel, 2)):
        if len(value) != n:
            raise ModelImportError(f"layer {name!r}: {what} {list(value)} has {len(value)} "
                                   f"numbers, expected {n} for a 2-D conv")
    if kernel != tuple(w.shape[2:]):
        raise ModelImportError(f"layer {name!r}: kernel_shape {list(kernel)} does not match "
                               f"the weights' {list(w.shape[2:])}")
    if min(pads) < 0:
        raise ModelImportError(f"layer {name!r}: negative pads {list(pads)} (cropping) cannot "
                               "be imported")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if dilations != (1, 1):
            raise ModelImportError(
                f"layer {name!r}: auto_pad {auto_pad} with dilations {list(dilations)}: "
                "runtimes disagree on whether the padding counts the dilated kernel; "
                "re-export the model with explicit pads")
        padding = "SAME" if auto_pad == "SAME_UPPER" else "SAME_LOWER"
        tblr = (0, 0, 0, 0)
    elif auto_pad == "VALID":
        padding, tblr = "VALID", (0, 0, 0, 0)
    elif auto_pad == "NOTSET":
        tblr = (pads[0], pads[2], pads[1], pads[3])
        padding = "EXPLICIT" if any(tblr) else "VALID"
    else:
        raise ModelImportError(f"layer {name!r}: unknown auto_pad {auto_pad!r}")
    shape = shapes.get(node.input[0]) or []
    hw = tuple(shape[2:4]) if len(shape) == 4 and None not in shape[2:4] else None
    bias = None
    if len(node.input) > 2 and node.input[2]:
        if node.input[2] not in inits:
            raise ModelImportError(f"layer {name!r}: its bias is not an initializer")
        bias = float_weights(name, "bias", onnx.numpy_helper.to_array(inits[node.input[2]]))
    in_channels = w.shape[1] * group
    layer = ConvLayer(name=name, kernel=kernel, strides=strides, dilations=dilations,
                      padding=padding, pads=tblr, groups=group, in_channels=in_channels,
                      out_channels=w.shape[0], data_format="NCHW",
                      weights=from_oihw(w, group) if w.shape[0] % max(group, 1) == 0 else w,
                      bias=bias, input_hw=hw,
                      batch=shape[0] if len(shape) == 4 and shape[0] else None)
    check_layer(layer)
    return layer


def read_onnx(path: str) -> ModelLayers:
    """The model's Conv nodes (see :class:`~engine.model_import.ModelLayers`)."""
    onnx, model = _load(path)
    inits = {t.name: t for t in model.graph.initializer}
    shapes = _shapes(model)
    found = ModelLayers([], {}, {})
    for k, node in enumerate(model.graph.node):
        name = node.name or (node.output[0] if node.output else f"node {k}")
        if node.op_type in OTHER_CONV_OPS:
            found.refused[name] = (f"layer {name!r}: op {node.op_type} cannot be imported "
                                   "(only ONNX Conv)")
        elif node.op_type == "Conv" and node.domain in ("", "ai.onnx"):
            try:
                found.layers.append(_layer(onnx, node, name, inits, shapes))
            except ModelImportError as err:
                found.refused[name] = str(err)
        else:
            found.others[name] = (f"layer {name!r}: op {node.op_type} is not a conv "
                                  "(only Conv nodes can be imported)")
    return found
