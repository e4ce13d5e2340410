"""ONNX tensors as arrays, nothing trusted (needs the ``onnx`` package, the ``models`` extra).

:func:`tensor_array` makes an array of a TensorProto only once its dims are known to match the
data it holds (dims that lie, are negative or claim more bytes than the file has are a refusal,
not an allocation) and its size is within the memory limit; external data is read only from a
regular file inside the model's folder (onnx's own checks) and only as many bytes as the dims
need. Weights must be a float type (:data:`FLOAT_TYPES`); the inputs of a constant subgraph
(:mod:`engine.io.models.onnx_fold`) may be any number type (:data:`NUMBER_TYPES`).

:func:`read_weights_npz` reads ``--weights FILE.npz``: one array per graph input, keyed by the
input's name, each member read by the strict .npy reader (:func:`engine.io.npy.read_stream`).
"""

from __future__ import annotations

import math
import os
import re
import stat
import zipfile
import zlib

import numpy as np

from engine.base.errors import InvalidArgumentError
from engine.base.memory_limit import DEFAULT_MEMORY_LIMIT, gib
from engine.base.names import escaped, shown
from engine.io import npy
from engine.io.models.model_import import ModelImportError

#: The keys of a tensor's external_data entries (onnx's ExternalDataInfo reads these).
EXTERNAL_KEYS = ("location", "offset", "length", "checksum", "basepath")
#: Element types weights may have (``TensorProto.DataType`` names), each with the repeated
#: field holding its elements when the tensor has no raw_data (one element per entry).
FLOAT_TYPES = {"FLOAT": "float_data", "DOUBLE": "double_data", "FLOAT16": "int32_data",
               "BFLOAT16": "int32_data", "FLOAT8E4M3FN": "int32_data",
               "FLOAT8E4M3FNUZ": "int32_data", "FLOAT8E5M2": "int32_data",
               "FLOAT8E5M2FNUZ": "int32_data"}
#: Element types the inputs of a constant subgraph may have (shapes are INT64, masks BOOL...).
NUMBER_TYPES = {**FLOAT_TYPES, "INT64": "int64_data", "INT32": "int32_data",
                "INT16": "int32_data", "INT8": "int32_data", "UINT8": "int32_data",
                "UINT16": "int32_data", "BOOL": "int32_data", "UINT32": "uint64_data",
                "UINT64": "uint64_data"}
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, OSError, EOFError,
              NotImplementedError, ValueError)


def text(value: str | bytes) -> str:
    """A string field as text: protobuf gives the bytes of a field that is not UTF-8, here
    decoded as Python decodes such a command-line argument (surrogateescape), so that
    ``--layer NAME`` still finds it."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def type_name(enum, value: int) -> str:
    try:
        return enum.Name(value)
    except ValueError:
        return f"type {value}"


def _external(onnx, tensor, label: str, nbytes: int, base_dir: str) -> None:
    """Read the tensor's external data into raw_data: exactly ``nbytes`` (what its dims need),
    from a regular file inside ``base_dir`` (onnx refuses any other path)."""
    info: dict[str, str] = {}
    for entry in tensor.external_data:
        if entry.key not in EXTERNAL_KEYS:
            raise ModelImportError(f"{label}: unknown external data key {text(entry.key)!r}")
        info[entry.key] = text(entry.value)
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


def tensor_array(onnx, tensor, label: str, file_bytes: int, base_dir: str,
                 types: dict[str, str] = FLOAT_TYPES,
                 limit: int = DEFAULT_MEMORY_LIMIT) -> np.ndarray:
    """The tensor as an array, once its dims are known to match its data and its size to be
    within ``limit`` (nothing is allocated from the dims alone); its element type one of
    ``types``."""
    dims = list(tensor.dims)
    if any(d < 0 for d in dims):
        raise ModelImportError(f"{label}: negative dims {dims}")
    kind = type_name(onnx.TensorProto.DataType, tensor.data_type)
    field = types.get(kind)
    if field is None:
        what = "a float type" if types is FLOAT_TYPES else "a number type"
        raise ModelImportError(f"{label}: element type {kind} is not {what} (expected "
                               f"one of {', '.join(types)})")
    if tensor.HasField("segment"):
        raise ModelImportError(f"{label}: a segment of a tensor cannot be imported")
    itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    count = math.prod(dims)
    nbytes = count * itemsize
    too_big = (f"{label}: dims {dims} need {gib(nbytes)}, more than the memory limit "
               f"({gib(limit)}): not read")
    beyond = ""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        _external(onnx, tensor, label, nbytes, base_dir)  # onnx checks the file's length
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
    if nbytes > limit:
        raise ModelImportError(too_big)
    try:
        return onnx.numpy_helper.to_array(tensor)
    except Exception as err:  # noqa: BLE001 - a last line of defence: onnx's own conversion
        raise ModelImportError(f"{label}: unreadable ({type(err).__name__}: "
                               f"{escaped(str(err), 200)})") from None


def read_weights_npz(path: str, limit: int = DEFAULT_MEMORY_LIMIT) -> dict[str, np.ndarray]:
    """``--weights FILE.npz``: key (a graph input's name) -> array, every member a .npy array
    read strictly, together at most ``limit`` bytes."""
    where = f"--weights {shown(path)}"
    out: dict[str, np.ndarray] = {}
    left = limit
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the open
            raise ModelImportError(f"{where}: not a regular file")
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                label = f"{where}: member {shown(info.filename)}"
                if not info.filename.endswith(".npy"):
                    raise ModelImportError(f"{label} is not a .npy array (an .npz holds .npy "
                                           "arrays only)")
                key = info.filename[: -len(".npy")]
                if key in out:
                    raise ModelImportError(f"{label} appears twice")
                with z.open(info) as f:
                    out[key] = npy.read_stream(label, f, info.file_size, left)
                left -= out[key].nbytes
    except ModelImportError:
        raise
    except InvalidArgumentError as err:
        raise ModelImportError(str(err)) from None
    except ZIP_ERRORS as err:
        raise ModelImportError(f"{where}: not a readable .npz file ({type(err).__name__}: "
                               f"{escaped(str(err), 200)})") from None
    if not out:
        raise ModelImportError(f"{where}: holds no arrays")
    return out
