"""The 2-D ``Conv`` nodes of an ONNX model (needs the ``onnx`` package, the ``models`` extra).

``read_onnx(path)`` returns the importable layers and, by name, why each other conv-like node
cannot be imported (a 3-D conv, weights that are not initializers, SAME_* with dilations, ...).
ONNX semantics: weights [M, C / group, kH, kW]; ``pads`` = [top, left, bottom, right];
``auto_pad`` SAME_UPPER pads like TensorFlow's SAME (odd pad after), SAME_LOWER puts the odd pad
before (an empty ``auto_pad`` is NOTSET, as ONNX Runtime reads it); NCHW data.

Nothing in the file is trusted: every Conv attribute must have the type the ONNX spec gives it
(:data:`CONV_ATTRS`) and appear once; a weight tensor's dims must match the data it holds before
any array is made (so dims that lie, are negative or claim more bytes than the file has are a
refusal, not an allocation); external data is read only for the weights of a Conv node, only
from a regular file inside the model's folder (onnx's own checks) and only as many bytes as the
dims need. Input sizes of 0 or less are unknown sizes (older exporters wrote dynamic dims so).
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections import Counter

import numpy as np

from engine.base.names import escaped, shown
from engine.io.models.model_import import (
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
#: The attributes of ONNX Conv and their types (``AttributeProto.AttributeType`` names), as the
#: ONNX operator spec defines them.
CONV_ATTRS = {"auto_pad": "STRING", "dilations": "INTS", "group": "INT",
              "kernel_shape": "INTS", "pads": "INTS", "strides": "INTS"}
#: Where an AttributeProto of each of those types holds its value.
ATTR_FIELDS = {"INT": "i", "INTS": "ints", "STRING": "s"}
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
#: The keys of a tensor's external_data entries (onnx's ExternalDataInfo reads these).
EXTERNAL_KEYS = ("location", "offset", "length", "checksum", "basepath")
#: Protobuf cannot parse a message larger than this: a bigger file is no ONNX model.
MAX_MODEL_BYTES = 2**31 - 1
#: Element types weights may have (``TensorProto.DataType`` names), each with the repeated
#: field holding its elements when the tensor has no raw_data (one element per entry).
FLOAT_TYPES = {"FLOAT": "float_data", "DOUBLE": "double_data", "FLOAT16": "int32_data",
               "BFLOAT16": "int32_data", "FLOAT8E4M3FN": "int32_data",
               "FLOAT8E4M3FNUZ": "int32_data", "FLOAT8E5M2": "int32_data",
               "FLOAT8E5M2FNUZ": "int32_data"}


def _file_bytes(path: str) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_MODEL_BYTES` (checked before reading;
    opened without blocking, so a FIFO is refused, not waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        raise ModelImportError(f"{path}: cannot read the model ({err.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ModelImportError(f"{path}: not a regular file")
        if st.st_size > MAX_MODEL_BYTES:
            raise ModelImportError(f"{path}: not a readable ONNX model ({st.st_size} bytes, "
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
        raise ModelImportError(f"{path}: not a readable ONNX model ({type(err).__name__}: "
                               f"{escaped(detail, 200)})") from None
    if not model.graph.node:
        raise ModelImportError(f"{path}: not a readable ONNX model (no graph nodes)")
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


def _str(value: str | bytes) -> str:
    """A string field as text: protobuf gives the bytes of a field that is not UTF-8, here
    decoded as Python decodes such a command-line argument (surrogateescape), so that
    ``--layer NAME`` still finds it."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def _type_name(enum, value: int) -> str:
    try:
        return enum.Name(value)
    except ValueError:
        return f"type {value}"


def _attr_value(attr, kind: str):
    """The value of an attribute of the type ``kind``: an int, a tuple of ints or bytes."""
    value = getattr(attr, ATTR_FIELDS[kind])
    return tuple(value) if kind == "INTS" else value


def _attrs(onnx, node, name: str) -> dict:
    """The node's Conv attributes by name, each of the type ONNX gives it, each given once."""
    found: dict = {}
    seen: set[str] = set()
    unknown = []
    for attr in node.attribute:
        key = _str(attr.name)
        if key in seen:
            raise ModelImportError(f"layer {name!r}: attribute {key!r} is given more than "
                                   "once")
        seen.add(key)
        want = CONV_ATTRS.get(key)
        if want is None:
            unknown.append(key)
            continue
        if attr.ref_attr_name:
            raise ModelImportError(f"layer {name!r}: attribute {key!r} refers to a function "
                                   f"attribute {_str(attr.ref_attr_name)!r}, which only a "
                                   "function body may do")
        got = _type_name(onnx.AttributeProto.AttributeType, attr.type)
        if got != want:
            raise ModelImportError(f"layer {name!r}: attribute {key!r} has type {got}, "
                                   f"expected {want} (as ONNX Conv defines it)")
        found[key] = _attr_value(attr, want)
    if unknown:
        raise ModelImportError(f"layer {name!r}: unknown Conv attribute(s) "
                               f"{', '.join(map(repr, sorted(unknown)))}")
    return found


def _external(onnx, tensor, label: str, nbytes: int, base_dir: str) -> None:
    """Read the tensor's external data into raw_data: exactly ``nbytes`` (what its dims need),
    from a regular file inside ``base_dir`` (onnx refuses any other path)."""
    info: dict[str, str] = {}
    for entry in tensor.external_data:
        if entry.key not in EXTERNAL_KEYS:
            raise ModelImportError(f"{label}: unknown external data key {_str(entry.key)!r}")
        info[entry.key] = _str(entry.value)
    for key in ("offset", "length"):
        if key in info and not re.fullmatch(r"[0-9]{1,19}", info[key]):  # an int64
            raise ModelImportError(f"{label}: external data {key} {shown(info[key])} is not "
                                   "a number of bytes")
    if "length" in info and int(info["length"]) != nbytes:
        raise ModelImportError(f"{label}: external data of {int(info['length'])} bytes, but "
                               f"its dims need {nbytes} bytes")
    if "length" not in info:
        entry = tensor.external_data.add()
        entry.key, entry.value = "length", str(nbytes)
    try:
        onnx.external_data_helper.load_external_data_for_tensor(tensor, base_dir)
    except Exception as err:  # noqa: BLE001 - ValueError, ValidationError, OSError, ...
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ModelImportError(f"{label}: external data refused ({escaped(detail, 200)})"
                               ) from None


def _array(onnx, tensor, label: str, file_bytes: int, base_dir: str) -> np.ndarray:
    """The initializer as an array, once its dims are known to match its data (nothing is
    allocated from the dims alone)."""
    dims = list(tensor.dims)
    if any(d < 0 for d in dims):
        raise ModelImportError(f"{label}: negative dims {dims}")
    kind = _type_name(onnx.TensorProto.DataType, tensor.data_type)
    field = FLOAT_TYPES.get(kind)
    if field is None:
        raise ModelImportError(f"{label}: element type {kind} is not a float type (expected "
                               f"one of {', '.join(FLOAT_TYPES)})")
    if tensor.HasField("segment"):
        raise ModelImportError(f"{label}: a segment of a tensor cannot be imported")
    itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    count = math.prod(dims)
    nbytes = count * itemsize
    beyond = ""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        _external(onnx, tensor, label, nbytes, base_dir)
    elif nbytes > file_bytes:
        beyond = f", more than the whole file ({file_bytes} bytes)"
    if tensor.HasField("raw_data"):
        found = len(tensor.raw_data)
        if found != nbytes:
            raise ModelImportError(f"{label}: dims {dims} need {count} {kind} elements "
                                   f"({nbytes} bytes{beyond}), but its data has {found} bytes")
    else:
        found = len(getattr(tensor, field))
        if found != count:
            raise ModelImportError(f"{label}: dims {dims} need {count} {kind} elements "
                                   f"({nbytes} bytes{beyond}), but its {field} holds {found}")
    try:
        return onnx.numpy_helper.to_array(tensor)
    except Exception as err:  # noqa: BLE001 - a last line of defence: onnx's own conversion
        raise ModelImportError(f"{label}: unreadable ({type(err).__name__}: "
                               f"{escaped(str(err), 200)})") from None


def _rank_problem(w: np.ndarray) -> str:
    """Why weights of a rank other than 4 are no 2-D conv's."""
    if w.ndim < 3:
        return (f"weights of rank {w.ndim} (shape {list(w.shape)}) are no conv's weights "
                "[out, in / group, kH, kW]")
    return f"a {w.ndim - 2}-D conv (weights of rank {w.ndim}); only 2-D convs can be imported"


def _pads(name: str, a: dict):
    """(padding, top/bottom/left/right pads) from auto_pad and pads."""
    raw = a.get("auto_pad", b"NOTSET")
    try:
        auto_pad = raw.decode() if raw else "NOTSET"
    except UnicodeDecodeError:
        auto_pad = raw  # shown as bytes below
    if auto_pad not in AUTO_PADS:
        raise ModelImportError(f"layer {name!r}: unknown auto_pad {auto_pad!r} (expected one of "
                               f"{', '.join(AUTO_PADS)})")
    pads = a.get("pads", (0, 0, 0, 0))
    if len(pads) != 4:
        raise ModelImportError(f"layer {name!r}: pads {list(pads)} has {len(pads)} numbers, "
                               "expected 4 for a 2-D conv")
    if min(pads) < 0:
        raise ModelImportError(f"layer {name!r}: negative pads {list(pads)} (cropping) cannot "
                               "be imported")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        dilations = a.get("dilations", (1, 1))
        if tuple(dilations) != (1, 1):
            raise ModelImportError(
                f"layer {name!r}: auto_pad {auto_pad} with dilations {list(dilations)}: "
                "runtimes disagree on whether the padding counts the dilated kernel; "
                "re-export the model with explicit pads")
        return ("SAME" if auto_pad == "SAME_UPPER" else "SAME_LOWER"), (0, 0, 0, 0)
    if auto_pad == "VALID":
        return "VALID", (0, 0, 0, 0)
    tblr = (pads[0], pads[2], pads[1], pads[3])
    return ("EXPLICIT" if any(tblr) else "VALID"), tblr


def _layer(onnx, node, name: str, inits: dict, shapes: dict, file_bytes: int,
           base_dir: str) -> ConvLayer:
    if len(node.input) < 2 or node.input[1] not in inits:
        raise ModelImportError(f"layer {name!r}: its weights are not an initializer of the "
                               "model (computed weights cannot be imported)")
    a = _attrs(onnx, node, name)
    w = _array(onnx, inits[node.input[1]], f"layer {name!r}: weights {_str(node.input[1])!r}",
               file_bytes, base_dir)
    if w.ndim != 4:
        raise ModelImportError(f"layer {name!r}: {_rank_problem(w)}")
    w = float_weights(name, "weights", w)
    group = a.get("group", 1)
    strides, dilations = a.get("strides", (1, 1)), a.get("dilations", (1, 1))
    kernel = a.get("kernel_shape", w.shape[2:])
    for what, value in (("strides", strides), ("dilations", dilations),
                        ("kernel_shape", kernel)):
        if len(value) != 2:
            raise ModelImportError(f"layer {name!r}: {what} {list(value)} has {len(value)} "
                                   "numbers, expected 2 for a 2-D conv")
    if tuple(kernel) != tuple(w.shape[2:]):
        raise ModelImportError(f"layer {name!r}: kernel_shape {list(kernel)} does not match "
                               f"the weights' {list(w.shape[2:])}")
    padding, tblr = _pads(name, a)
    shape = shapes.get(node.input[0]) or []
    hw = tuple(shape[2:4]) if len(shape) == 4 and None not in shape[2:4] else None
    bias = None
    if len(node.input) > 2 and node.input[2]:
        if node.input[2] not in inits:
            raise ModelImportError(f"layer {name!r}: its bias is not an initializer")
        bias = float_weights(name, "bias", _array(
            onnx, inits[node.input[2]], f"layer {name!r}: bias {_str(node.input[2])!r}",
            file_bytes, base_dir))
    in_channels = w.shape[1] * group
    layer = ConvLayer(name=name, kernel=tuple(kernel), strides=tuple(strides),
                      dilations=tuple(dilations), padding=padding, pads=tblr, groups=group,
                      in_channels=in_channels, out_channels=w.shape[0], data_format="NCHW",
                      weights=from_oihw(w, group) if w.shape[0] % max(group, 1) == 0 else w,
                      bias=bias, input_hw=hw,
                      batch=shape[0] if len(shape) == 4 and shape[0] else None)
    check_layer(layer)
    return layer


def _once(node, name: str, defined: Counter) -> None:
    """Refuse weights or a bias that several initializers define (which one is meant?)."""
    for what, tensor in zip(("weights", "bias"), node.input[1:3], strict=False):
        if defined[tensor] > 1:
            raise ModelImportError(f"layer {name!r}: {what} {_str(tensor)!r}: "
                                   f"{defined[tensor]} initializers have this name (which one "
                                   "is meant?)")


def read_onnx(path: str) -> ModelLayers:
    """The model's Conv nodes (see :class:`~engine.io.models.model_import.ModelLayers`)."""
    onnx, model, file_bytes = _load(path)
    base_dir = os.path.dirname(os.path.abspath(path))
    inits = {t.name: t for t in model.graph.initializer}
    defined = Counter(t.name for t in model.graph.initializer)
    shapes = _shapes(model)
    found = ModelLayers([], {}, {})
    for k, node in enumerate(model.graph.node):
        name = _str(node.name or (node.output[0] if node.output else "")) or f"node {k}"
        op = repr(_str(node.op_type))[1:-1]
        if node.op_type in OTHER_CONV_OPS:
            found.refused[name] = f"layer {name!r}: op {op} cannot be imported (only ONNX Conv)"
        elif node.op_type == "Conv" and node.domain in ("", "ai.onnx"):
            try:
                _once(node, name, defined)
                found.layers.append(_layer(onnx, node, name, inits, shapes, file_bytes,
                                           base_dir))
            except ModelImportError as err:
                found.refused[name] = str(err)
        else:
            found.others[name] = (f"layer {name!r}: op {op} is not a conv (only Conv nodes "
                                  "can be imported)")
    return found
