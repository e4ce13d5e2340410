"""Conv layers from bare weight files (``.safetensors``, ``.npz``), whose attributes come from
``--attrs`` since the files carry none.

Every 3-, 4- or 5-D float tensor is a 1-, 2- or 3-D conv layer, named by its key without a
``.weight`` / ``.kernel`` suffix; the tensor ``<name>.bias`` is its bias. ``--attrs`` is
space-separated ``key=value`` words, the same for every layer of the file
(:mod:`engine.io.models.weights_attrs` reads them):

    strides=2,2  dilations=1,1  padding=SAME|VALID  pads=T,B,L,R (padding EXPLICIT)
    groups=N  weights=OIHW|HWIO  data_format=NCHW|NHWC

``strides`` / ``dilations`` take one number per spatial dim or one for every dim; ``pads`` two
per dim, before then after (1-D: L,R; 3-D: front,back,top,bottom,left,right). A count that does
not fit a layer's rank refuses that layer alone. ``weights`` is the tensor layout, rank-free:
OIHW (PyTorch's Conv1d / Conv2d / Conv3d: out, in / groups, then the kernel's W, H, W or D, H,
W; the default) or HWIO (TensorFlow / Keras: the kernel's dims, in / groups, out; a depthwise
4-D HWIO tensor is H, W, in, multiplier, a 3-D one W, in, multiplier; a grouped 5-D one is TF's
grouped Conv3D); OIW / OIDHW and WIO / DHWIO are accepted as their names. ``data_format``
(NCHW / NHWC, or NCW, NCDHW / NWC, NDHWC) is channels first or last, by default NCHW for OIHW
and NHWC for HWIO. A 1-D layer is the 2-D conv of height 1 computing it, as ONNX and Keras 1-D
convs import: kernel (1, k), strides (1, s), dilations (1, d), pads (0, 0, left, right), input
[N, C, 1, W] or [N, 1, W, C]. ``.safetensors`` needs the ``safetensors`` package (the
``models`` extra).

Nothing in a file is trusted: a safetensors header whose length passes the file, offsets beyond
it or a dtype it cannot hold (F4, F8_E8M0, ...) is named (BF16, F8_E4M3 and F8_E5M2 are widened
exactly to float32); an .npz member that is not a .npy array, whose header lies about its data
or claims terabytes is named, its header checked (:func:`engine.io.npy.read_stream_header`)
before anything is allocated. Only 3- to 5-D tensors and their biases are read, together at
most the memory limit, and a layer whose attributes do not fit its rank is refused before its
tensors are read. A tensor of another rank is not a layer: it is listed with its shape and the
dimensions the layout takes at 3, 4 and 5 dims.
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial

import numpy as np

from engine.base.errors import InvalidArgumentError
from engine.base.memory_limit import DEFAULT_MEMORY_LIMIT, gib
from engine.base.names import escaped, shown
from engine.io import npy, strict_json
from engine.io.models.model_import import (
    ConvLayer,
    ModelImportError,
    ModelLayers,
    check_layer,
    float_weights,
    from_oihw,
    need_module,
)
from engine.io.models.weights_attrs import Fitted, fit_attrs, parse_attrs, rank_problem

__all__ = ["parse_attrs", "read_weights"]

#: Tensor ranks that are conv weights: 1-D, 2-D and 3-D convs.
CONV_RANKS = (3, 4, 5)
_SUFFIXES = (".weight", ".kernel", "/kernel", ".weights")


#: safetensors dtypes NumPy reads (their names in the file -> NumPy's).
SAFETENSORS_DTYPES = {"F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8",
                      "U8": "uint8", "I16": "int16", "U16": "uint16", "I32": "int32",
                      "U32": "uint32", "I64": "int64", "U64": "uint64"}
#: safetensors float types NumPy lacks, read with ml_dtypes and widened to float32 (exactly:
#: float32 holds every value of each).
SAFETENSORS_WIDENED = {"BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
#: What zipfile raises on a damaged or unsupported archive or member.
ZIP_ERRORS = (OSError, EOFError, RuntimeError, NotImplementedError, ValueError, zlib.error,
              zipfile.BadZipFile)


@dataclass
class _Tensor:
    """One tensor of a weights file: its shape (None when unknown), the bytes reading it
    takes, why it cannot be read (None when it can) and how to read it."""

    shape: tuple[int, ...] | None
    nbytes: int
    problem: str | None
    read: Callable[[], np.ndarray] | None = None


def _safetensors(path: str, stack: ExitStack) -> dict[str, _Tensor]:
    st = need_module("safetensors", "a .safetensors file")
    try:
        with open(path, "rb") as f:
            head, size = f.read(8), os.fstat(f.fileno()).st_size
    except OSError as err:
        raise ModelImportError(f"{escaped(path)}: cannot read the file ({err.strerror or err})") from None
    if len(head) < 8:
        raise ModelImportError(f"{escaped(path)}: not a .safetensors file ({size} bytes, shorter than "
                               "its 8-byte header length)")
    length = int.from_bytes(head, "little")
    if length > size - 8:
        raise ModelImportError(f"{escaped(path)}: the safetensors header claims {length} bytes but the "
                               f"file has {size - 8} after the header length")
    try:
        tensors = stack.enter_context(st.safe_open(path, framework="numpy"))
        keys = tensors.keys()
        entries = {key: (tensors.get_slice(key).get_dtype(),
                         tuple(tensors.get_slice(key).get_shape()))
                   for key in keys}
    except Exception as err:  # noqa: BLE001 - safetensors raises its own SafetensorError
        raise ModelImportError(f"{escaped(path)}: not a readable .safetensors file ({err})") from None
    out = {}
    for key, (dtype, shape) in entries.items():
        numpy_dtype = SAFETENSORS_DTYPES.get(dtype)
        if dtype in SAFETENSORS_WIDENED:
            out[key] = _Tensor(shape, math.prod(shape) * 4, None,
                               partial(_widened, path, length, key, dtype, shape))
        elif numpy_dtype is None:
            lacks = " (a float type NumPy lacks)" if dtype.startswith(("F", "BF")) else ""
            out[key] = _Tensor(shape, 0, f"tensor {shown(key)} has dtype {shown(dtype)}{lacks}: "
                                         "conv weights must be F16, F32, F64, BF16, "
                                         "F8_E4M3 or F8_E5M2")
        else:
            out[key] = _Tensor(shape, math.prod(shape) * np.dtype(numpy_dtype).itemsize, None,
                               partial(tensors.get_tensor, key))
    return out


def _widened(path: str, header_length: int, key: str, dtype: str, shape: tuple[int, ...]
             ) -> np.ndarray:
    """Tensor ``key`` of a safetensors file in a float type NumPy lacks, as float32: its bytes
    found by the header's ``data_offsets`` (which safetensors has checked against the file)."""
    with open(path, "rb") as f:
        f.seek(8)
        header, problems = strict_json.loads(f.read(header_length).decode("utf-8"))
        begin, end = header[key]["data_offsets"] if not problems else (0, -1)
        import ml_dtypes  # slow to import: only for a file holding one of its types

        kind = np.dtype(getattr(ml_dtypes, SAFETENSORS_WIDENED[dtype]))
        if end - begin != math.prod(shape) * kind.itemsize:
            raise ModelImportError(f"{escaped(path)}: tensor {shown(key)}: its data offsets do not fit "
                                   f"its shape {list(shape)} and dtype {dtype}")
        f.seek(8 + header_length + begin)
        data = f.read(end - begin)
    return np.frombuffer(data, kind).reshape(shape).astype(np.float32)


def _npz_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, label: str, limit: int
                ) -> np.ndarray:
    with z.open(info) as f:
        return npy.read_stream(label, f, info.file_size, limit)


def _npz(path: str, stack: ExitStack, limit: int) -> dict[str, _Tensor]:
    """The .npy members of an .npz, their headers read (never their data)."""
    try:
        z = stack.enter_context(zipfile.ZipFile(path))
        infos = z.infolist()
    except ZIP_ERRORS as err:
        raise ModelImportError(f"{escaped(path)}: not a readable .npz file ({type(err).__name__}: "
                               f"{err})") from None
    out: dict[str, _Tensor] = {}
    for info in infos:
        name = info.filename
        key = name.removesuffix(".npy")
        label = f"member {shown(name)}"
        if key in out:
            raise ModelImportError(f"{escaped(path)}: {label} appears twice")
        if not name.endswith(".npy"):
            out[key] = _Tensor(None, 0, f"{label} is not a .npy array (an .npz holds .npy "
                                        "arrays only)")
            continue
        if info.file_size > limit:
            out[key] = _Tensor(None, 0, f"{label} is {gib(info.file_size)} uncompressed, "
                                        f"more than the memory limit ({gib(limit)})")
            continue
        try:
            with z.open(info) as f:
                header = npy.read_stream_header(label, f, info.file_size)
        except InvalidArgumentError as err:
            out[key] = _Tensor(None, 0, str(err))
            continue
        except ZIP_ERRORS as err:
            out[key] = _Tensor(None, 0, f"{label} cannot be read ({type(err).__name__}: {err})")
            continue
        out[key] = _Tensor(header.shape, header.data_bytes, None,
                           partial(_npz_member, z, info, label, limit))
    return out


class _Reading:
    """The tensors read so far, charged to the memory limit."""

    def __init__(self, limit: int):
        self.limit, self.used = limit, 0

    def read(self, key: str, tensor: _Tensor) -> np.ndarray:
        if tensor.problem is not None or tensor.read is None:
            raise ModelImportError(tensor.problem or f"tensor {shown(key)} cannot be read")
        if self.used + tensor.nbytes > self.limit:
            before = f" with the {gib(self.used)} read before it" if self.used else ""
            raise ModelImportError(f"tensor {shown(key)} of shape {list(tensor.shape or ())} "
                                   f"needs {gib(tensor.nbytes)}, more than the memory "
                                   f"limit ({gib(self.limit)}){before}: not read")
        try:
            array = tensor.read()
        except InvalidArgumentError as err:
            raise ModelImportError(str(err)) from None
        except Exception as err:  # noqa: BLE001 - safetensors and zipfile raise their own
            raise ModelImportError(f"tensor {shown(key)} cannot be read ({type(err).__name__}: "
                                   f"{err})") from None
        self.used += array.nbytes
        return array


def _stem(key: str) -> str:
    for suffix in _SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            return key[: -len(suffix)]
    return key


def read_weights(path: str, attrs: dict, memory_limit: int = DEFAULT_MEMORY_LIMIT
                 ) -> ModelLayers:
    """The 3-, 4- and 5-D tensors of ``path`` as 1-, 2- and 3-D conv layers with the
    ``--attrs`` attributes (:func:`parse_attrs`; read together, at most ``memory_limit``
    bytes)."""
    found = ModelLayers([], {}, {})
    layout = attrs.get("weights", "OIHW")
    reading = _Reading(memory_limit)
    with ExitStack() as stack:
        if path.lower().endswith(".safetensors"):
            tensors = _safetensors(path, stack)
        else:
            tensors = _npz(path, stack, memory_limit)
        for key, tensor in tensors.items():
            name = _stem(key)
            conv = tensor.shape is None or len(tensor.shape) in CONV_RANKS
            if key.endswith(".bias") and (tensor.shape is None or not conv):
                continue  # a bias: its layer reads it (and names its problem)
            if not conv:
                found.others.setdefault(name, (
                    f"tensor {shown(key)} {rank_problem(tensor.shape or (), layout)}: not conv "
                    f"weights (in {escaped(path)})"))
                continue
            try:
                found.layers.append(_layer(name, key, tensor, tensors, reading, attrs))
            except ModelImportError as err:
                text = str(err)
                said = text if text.startswith("layer ") else f"layer {shown(name)}: {text}"
                found.refused[name] = f"{said} (in {escaped(path)})"
    return found


def _layer(name: str, key: str, tensor: _Tensor, tensors: dict[str, _Tensor],
           reading: _Reading, attrs: dict) -> ConvLayer:
    """The conv layer of the tensor ``key`` (3, 4 or 5 dimensions: a 1-D conv as the 2-D conv
    of height 1 computing it, a 2-D or a 3-D conv) and its bias ``<name>.bias``, if any."""
    layout = attrs.get("weights", "OIHW")
    fmt = attrs.get("data_format", "NCHW" if layout == "OIHW" else "NHWC")
    groups = attrs.get("groups", 1)
    shape = tensor.shape if tensor.shape is not None else reading.read(key, tensor).shape
    fitted = fit_attrs(attrs, len(shape) - 2)  # before reading (the read raises: no shape)
    w = float_weights(name, "weights", reading.read(key, tensor))
    bias_tensor = tensors.get(f"{name}.bias")
    bias = None if bias_tensor is None else float_weights(
        name, "bias", reading.read(f"{name}.bias", bias_tensor))
    one_d = w.ndim == 3
    if one_d:  # a kernel row of height 1: OIW -> OI1W, WIO -> 1WIO
        w = w[:, :, None, :] if layout == "OIHW" else w[None]
        fitted = Fitted((1, *fitted.strides), (1, *fitted.dilations), fitted.padding,
                        (0, 0, *fitted.pads))
    if layout == "OIHW":
        in_channels, out = w.shape[1] * groups, w.shape[0]
        if out % groups:
            raise ModelImportError(f"layer {shown(name)}: groups {groups} does not divide "
                                   f"out_channels {out}")
        tf_w, kernel = from_oihw(w, groups), w.shape[2:]
    elif w.ndim == 4 and groups > 1 and groups == w.shape[2]:  # depthwise: H, W, in, mult
        in_channels, out = w.shape[2], w.shape[2] * w.shape[3]
        tf_w, kernel = w, w.shape[:2]
    else:
        in_channels, out = w.shape[-2] * groups, w.shape[-1]
        tf_w, kernel = w, w.shape[:-2]
    layer = ConvLayer(name=name, kernel=tuple(int(k) for k in kernel),
                      strides=fitted.strides, dilations=fitted.dilations,
                      padding=fitted.padding, pads=fitted.pads, groups=groups,
                      in_channels=int(in_channels), out_channels=int(out), data_format=fmt,
                      weights=np.ascontiguousarray(tf_w), bias=bias, conv1d=one_d)
    check_layer(layer)
    return layer
