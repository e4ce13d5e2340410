"""Conv layers from bare weight files (``.safetensors``, ``.npz``), whose attributes come from
``--attrs`` since the files carry none.

Every 4-D float tensor is a layer, named by its key without a ``.weight`` / ``.kernel`` suffix;
the tensor ``<name>.bias`` is its bias. ``--attrs`` is space-separated ``key=value`` words:

    strides=2,2  dilations=1,1  padding=SAME|VALID  pads=T,B,L,R (padding EXPLICIT)
    groups=N  weights=OIHW|HWIO  data_format=NCHW|NHWC

``weights`` is the tensor layout: OIHW (PyTorch, the default) or HWIO (TensorFlow / Keras; a
depthwise HWIO tensor is H, W, in, multiplier). ``data_format`` defaults to NCHW for OIHW and
NHWC for HWIO. ``.safetensors`` needs the ``safetensors`` package (the ``models`` extra).

Nothing in a file is trusted: a safetensors header whose length passes the file, offsets beyond
it or a dtype it cannot hold (F4, F8_E8M0, ...) is named (BF16, F8_E4M3 and F8_E5M2 are widened
exactly to float32); an .npz member that is not a .npy array, whose header lies about its data or claims terabytes is named, its header checked
(:func:`engine.io.npy.read_stream_header`) before anything is allocated. Only 4-D tensors and their
biases are read, together at most the memory limit. A tensor of another rank is not a layer: it
is listed with its shape and the 4 dimensions the layout expects.
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

ATTR_KEYS = ("strides", "dilations", "padding", "pads", "groups", "weights", "data_format")
_SUFFIXES = (".weight", ".kernel", "/kernel", ".weights")


def parse_attrs(text: str) -> dict:
    """``--attrs`` as a dict (one-line error naming the bad word)."""
    out: dict = {}
    for word in text.split():
        key, eq, value = word.partition("=")
        if not eq or key not in ATTR_KEYS:
            raise ModelImportError(f"--attrs: {word!r} is not key=value with key one of "
                                   f"{', '.join(ATTR_KEYS)}")
        if key in ("strides", "dilations", "pads", "groups"):
            try:
                nums = tuple(int(v) for v in value.split(","))
            except ValueError:
                raise ModelImportError(f"--attrs: {key}={value!r} is not a list of integers"
                                       ) from None
            n = {"strides": 2, "dilations": 2, "pads": 4, "groups": 1}[key]
            if len(nums) != n or min(nums) < (0 if key == "pads" else 1):
                raise ModelImportError(f"--attrs: {key}={escaped(value)} needs {n} "
                                       f"{'non-negative' if key == 'pads' else 'positive'} "
                                       "integer(s)")
            out[key] = nums[0] if key == "groups" else nums
        else:
            value = value.upper()
            choices = {"padding": ("SAME", "VALID", "EXPLICIT"), "weights": ("OIHW", "HWIO"),
                       "data_format": ("NCHW", "NHWC")}[key]
            if value not in choices:
                raise ModelImportError(f"--attrs: {key}={escaped(value)} is not one of "
                                       f"{', '.join(choices)}")
            out[key] = value
    if out.get("padding") == "EXPLICIT" and "pads" not in out:
        raise ModelImportError("--attrs: padding=EXPLICIT needs pads=T,B,L,R")
    return out


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
#: The dimensions a layer's weights have, by ``weights=`` layout.
LAYOUT_DIMS = {"OIHW": "out, in / groups, H, W", "HWIO": "H, W, in / groups, out"}


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
    """The 4-D tensors of ``path`` as conv layers with the ``--attrs`` attributes (read
    together, at most ``memory_limit`` bytes)."""
    found = ModelLayers([], {}, {})
    layout = attrs.get("weights", "OIHW")
    fmt = attrs.get("data_format", "NCHW" if layout == "OIHW" else "NHWC")
    groups = attrs.get("groups", 1)
    padding = attrs.get("padding", "EXPLICIT" if "pads" in attrs else "VALID")
    pads = attrs.get("pads", (0, 0, 0, 0)) if padding == "EXPLICIT" else (0, 0, 0, 0)
    reading = _Reading(memory_limit)
    with ExitStack() as stack:
        if path.lower().endswith(".safetensors"):
            tensors = _safetensors(path, stack)
        else:
            tensors = _npz(path, stack, memory_limit)
        for key, tensor in tensors.items():
            name = _stem(key)
            if key.endswith(".bias") and (tensor.shape is None or len(tensor.shape) != 4):
                continue  # a bias: its layer reads it (and names its problem)
            if tensor.shape is not None and len(tensor.shape) != 4:
                found.others.setdefault(name, (
                    f"tensor {shown(key)} has shape {list(tensor.shape)}, expected 4 dimensions "
                    f"({LAYOUT_DIMS[layout]} with weights={layout}): not conv weights "
                    f"(in {escaped(path)})"))
                continue
            try:
                found.layers.append(_layer(name, key, tensor, tensors, reading, attrs, layout,
                                           fmt, groups, padding, pads))
            except ModelImportError as err:
                text = str(err)
                said = text if text.startswith("layer ") else f"layer {shown(name)}: {text}"
                found.refused[name] = f"{said} (in {escaped(path)})"
    return found


def _layer(name: str, key: str, tensor: _Tensor, tensors: dict[str, _Tensor],
           reading: _Reading, attrs: dict, layout: str, fmt: str, groups: int, padding: str,
           pads: tuple[int, int, int, int]) -> ConvLayer:
    """The conv layer of the 4-D tensor ``key`` and its bias ``<name>.bias``, if any."""
    w = float_weights(name, "weights", reading.read(key, tensor))
    bias_tensor = tensors.get(f"{name}.bias")
    bias = None if bias_tensor is None else float_weights(
        name, "bias", reading.read(f"{name}.bias", bias_tensor))
    if layout == "OIHW":
        in_channels, out = w.shape[1] * groups, w.shape[0]
        if out % groups:
            raise ModelImportError(f"layer {shown(name)}: groups {groups} does not divide "
                                   f"out_channels {out}")
        tf_w, kernel = from_oihw(w, groups), w.shape[2:]
    else:
        depthwise = groups > 1 and groups == w.shape[2]
        in_channels = w.shape[2] if depthwise else w.shape[2] * groups
        out = w.shape[2] * w.shape[3] if depthwise else w.shape[3]
        tf_w, kernel = w, w.shape[:2]
    layer = ConvLayer(name=name, kernel=(int(kernel[0]), int(kernel[1])),
                      strides=attrs.get("strides", (1, 1)),
                      dilations=attrs.get("dilations", (1, 1)), padding=padding,
                      pads=pads, groups=groups, in_channels=int(in_channels),
                      out_channels=int(out), data_format=fmt,
                      weights=np.ascontiguousarray(tf_w), bias=bias)
    check_layer(layer)
    return layer
