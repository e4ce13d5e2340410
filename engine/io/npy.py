"""Strict .npy input: the header checked on its own, the data read exactly, never with pickle.

:func:`read_header` validates everything that can be known without the data: the magic and
version (1.0, 2.0, 3.0), a header of at most :data:`MAX_HEADER_BYTES` that is a dict literal
with exactly ``descr``, ``fortran_order`` (a bool) and ``shape`` (a tuple of non-negative ints,
never bools), a number dtype, and a data length equal to the file size minus the header. Float
dtypes (float16, float32, float64) are taken as they are; integer dtypes are taken when every
value converts exactly to the block's dtype, which :func:`read_array` checks as it reads. Object,
structured/void, complex, bool, datetime, timedelta, string and extended-precision arrays are
refused naming their dtype. A 0-d array (a scalar) becomes shape ``[1]``, as a literal scalar
does. :func:`read_array` reads the header again and then exactly the data length, no more.
Every problem is an :class:`~engine.base.errors.InvalidArgumentError` whose message starts with
``path``. :func:`read_stream` reads an .npz member the same way, with the caller's label and a
memory limit checked against the header before the data is allocated.
"""

from __future__ import annotations

import ast
import math
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Literal

import numpy as np

from engine.base.array_limits import shape_problem
from engine.base.dtypes import dtype_name, to_dtype
from engine.base.errors import InvalidArgumentError
from engine.base.memory_limit import gib
from engine.base.names import shown

MAGIC = b"\x93NUMPY"
#: Longest header accepted (NumPy's own default ``max_header_size``).
MAX_HEADER_BYTES = 10_000
#: Integer values converted and checked at a time (bounds the temporaries of the check).
CHUNK = 1 << 20
_INT64_MAX = 2**63 - 1
_REFUSED_KINDS = {"O": "object", "V": "structured or void", "c": "complex", "b": "bool",
                  "M": "datetime", "m": "timedelta", "U": "string", "S": "bytes"}


@dataclass(frozen=True)
class NpyHeader:
    """What a .npy header says: the array's shape and dtype, its order and where data starts.
    ``shape`` is the tensor's shape (a 0-d array's is ``(1,)``)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    data_offset: int

    @property
    def data_bytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _label(path: str) -> str:
    return f"path {path!r}"


def _fail(label: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{label}: {message}", argument="path")


def _open(path: str) -> tuple[int, int]:
    """A read-only descriptor of the regular file ``path`` and its size."""
    label = _label(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise _fail(label, "no such .npy file") from None
    except (OSError, ValueError) as err:
        raise _fail(label, f"cannot read the file: {getattr(err, 'strerror', None) or err}") \
            from None
    try:
        st = os.fstat(fd)
    except OSError as err:
        os.close(fd)
        raise _fail(label, f"cannot read the file: {err.strerror or err}") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _fail(label, "is not a regular file (a folder, FIFO, socket or device): not read")
    return fd, st.st_size


def _read_exactly(fd: int, count: int) -> bytes:
    chunks, got = [], 0
    while got < count:
        chunk = os.read(fd, min(count - got, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _describe(dtype: np.dtype) -> str:
    return str(dtype) if dtype.fields is None else f"structured {dtype.descr}"


def number_dtype(label: str, dtype: np.dtype) -> np.dtype:
    """``dtype`` when a .npy input may hold it (see the module docstring), else an error."""
    if dtype.kind == "f" and dtype.itemsize in (2, 4, 8) or dtype.kind in "iu":
        return dtype
    kind = _REFUSED_KINDS.get(dtype.kind, "unsupported")
    if dtype.kind == "f":
        kind = "extended-precision float"
    raise _fail(label, f"holds {kind} values ({_describe(dtype)}): a .npy input must hold "
                      f"float16, float32 or float64 values, or integers")


def _parse_header(label: str, text: str) -> tuple[np.dtype, bool, tuple[int, ...]]:
    try:
        d = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise _fail(label, f"the .npy header is not a Python literal: {shown(text)}") from None
    if not isinstance(d, dict) or set(d) != {"descr", "fortran_order", "shape"}:
        raise _fail(label, "the .npy header must be a dict with exactly the keys descr, "
                          f"fortran_order and shape, got {shown(d)}")
    descr, fortran, shape = d["descr"], d["fortran_order"], d["shape"]
    if not isinstance(descr, str):
        raise _fail(label, f"holds structured values (descr {shown(descr)}): a .npy input must "
                          f"hold float16, float32 or float64 values, or integers")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError, SyntaxError):
        raise _fail(label, f"the .npy header's descr {shown(descr)} is not a dtype") from None
    if not isinstance(fortran, bool):
        raise _fail(label, f"the .npy header's fortran_order must be True or False, got "
                          f"{shown(fortran)}")
    if not isinstance(shape, tuple) or not all(type(v) is int for v in shape):
        raise _fail(label, f"the .npy header's shape must be a tuple of integers, got "
                          f"{shown(shape)}")
    for v in shape:
        if not 0 <= v <= _INT64_MAX:
            raise _fail(label, f"the .npy header's shape {shown(shape)}: every entry must be "
                              f">= 0 and <= {_INT64_MAX}, got {shown(v)}")
    return number_dtype(label, dtype), fortran, shape


def _header(label: str, read: Callable[[int], bytes], size: int) -> NpyHeader:
    """The header of a .npy stream of ``size`` bytes read through ``read(count)``."""
    head = read(min(size, 12))
    if len(head) < 10 or head[:6] != MAGIC:
        raise _fail(label, "is not a .npy file (no \\x93NUMPY magic)")
    version = (head[6], head[7])
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise _fail(label, f".npy format version {version[0]}.{version[1]} is not 1.0, 2.0 or "
                          f"3.0")
    width = 2 if version == (1, 0) else 4
    if len(head) < 8 + width:
        raise _fail(label, "the .npy header is truncated")
    length = int.from_bytes(head[8 : 8 + width], "little")
    if length > MAX_HEADER_BYTES:
        raise _fail(label, f"the .npy header has {length} bytes, more than {MAX_HEADER_BYTES}")
    offset = 8 + width + length
    raw = head[8 + width :] + read(offset - len(head))
    if len(raw) < length:
        raise _fail(label, "the .npy header is truncated")
    try:
        text = raw.decode("utf-8" if version == (3, 0) else "latin1")
    except UnicodeDecodeError:
        raise _fail(label, "the .npy header is not UTF-8 text") from None
    dtype, fortran, shape = _parse_header(label, text)
    problem = shape_problem(shape, dtype.itemsize)
    if problem is not None:
        raise _fail(label, f"the .npy header's {problem}")
    header = NpyHeader(shape or (1,), dtype, fortran, offset)
    if size - offset != header.data_bytes:
        raise _fail(label, (f"{list(shape)} {dtype} needs {header.data_bytes} bytes of data but "
                           f"the file has {size - offset} after its header"
                           + (" (truncated)" if size - offset < header.data_bytes else "")))
    return header


def read_header(path: str) -> NpyHeader:
    """The validated header of the .npy file ``path`` (the data is not read)."""
    label = _label(path)
    fd, size = _open(path)
    try:
        return _header(label, lambda n: _read_exactly(fd, n), size)
    except OSError as err:
        raise _fail(label, f"cannot read the file: {err.strerror or err}") from None
    finally:
        os.close(fd)


def read_workspace(header: NpyHeader, dtype: str) -> int:
    """Bytes :func:`read_array` needs besides its result: the file's values when they must be
    converted, plus the chunk temporaries of the integer check."""
    if header.dtype == to_dtype(dtype) and header.dtype.isnative and not header.fortran_order:
        return 0
    check = min(math.prod(header.shape), CHUNK) * 48 if header.dtype.kind in "iu" else 0
    return header.data_bytes + check


def _data(label: str, readinto: Callable[[memoryview], int | None],
          header: NpyHeader) -> np.ndarray:
    """The header's data, flat in file order, read exactly (no more than its length)."""
    data = np.empty(math.prod(header.shape), header.dtype)
    view = data.data.cast("B")
    got = 0
    while got < len(view):
        n = readinto(view[got:])
        if not n:
            raise _fail(label, f"the file ended after {got} of {len(view)} bytes of data (did it "
                               "change since it was checked?)")
        got += n
    return data


def read_array(path: str, dtype: str) -> np.ndarray:
    """The array of the .npy file ``path`` as a C-contiguous array of ``dtype`` (a float name);
    integers must convert exactly (the first that does not is named)."""
    target, label = to_dtype(dtype), _label(path)
    fd, size = _open(path)
    try:
        header = _header(label, lambda n: _read_exactly(fd, n), size)
        with os.fdopen(fd, "rb", buffering=0, closefd=False) as f:
            data = _data(label, f.readinto, header)
    except OSError as err:
        raise _fail(label, f"cannot read the file: {err.strerror or err}") from None
    finally:
        os.close(fd)
    if header.dtype.kind in "iu":
        _check_exact(label, data, header, target)
    order: Literal["C", "F"] = "F" if header.fortran_order else "C"
    values = data.reshape(header.shape, order=order)
    if values.dtype == target and values.flags.c_contiguous:
        return values
    out = np.empty(header.shape, target)
    with np.errstate(over="ignore", invalid="ignore"):
        np.copyto(out, values, casting="unsafe")
    return out


def read_stream_header(label: str, f: IO[bytes], size: int) -> NpyHeader:
    """The validated header of a .npy stream of ``size`` bytes (an .npz member), read from
    ``f``'s current position; problems start with ``label``."""
    return _header(label, _reader(f), size)


def read_stream(label: str, f: IO[bytes], size: int, limit: int) -> np.ndarray:
    """The array of a .npy stream of ``size`` bytes (an .npz member), as stored (dtype and
    shape; a 0-d array is shape ``[1]``), its header checked as :func:`read_header` checks a
    file's and its data at most ``limit`` bytes before anything is allocated. Problems start
    with ``label``."""
    header = read_stream_header(label, f, size)
    if header.data_bytes > limit:
        raise _fail(label, f"{list(header.shape)} {header.dtype} needs "
                           f"{gib(header.data_bytes)}, more than the memory limit leaves "
                           f"({gib(limit)}): not read")
    # a zip member (ZipExtFile, a BufferedIOBase) has readinto; typeshed's ZipFile.open
    # returns IO[bytes], which does not declare it
    data = _data(label, f.readinto, header)  # type: ignore[attr-defined]
    return data.reshape(header.shape, order="F" if header.fortran_order else "C")


def _reader(f: IO[bytes]) -> Callable[[int], bytes]:
    """``read(count)`` of ``f`` returning fewer bytes only at its end."""
    def read(count: int) -> bytes:
        chunks, got = [], 0
        while got < count:
            chunk = f.read(min(count - got, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    return read


def check_values(path: str, dtype: str) -> NpyHeader:
    """The header of the .npy file ``path`` once every rule :func:`read_array` applies holds:
    the header's, and for integers the exact conversion of every value to ``dtype`` (read
    :data:`CHUNK` values at a time, nothing kept), so that a file ``check`` accepts is read by
    ``run``."""
    target, label = to_dtype(dtype), _label(path)
    fd, size = _open(path)
    try:
        header = _header(label, lambda n: _read_exactly(fd, n), size)
        if header.dtype.kind in "iu":
            n = math.prod(header.shape)
            with os.fdopen(fd, "rb", buffering=0, closefd=False) as f:
                for lo in range(0, n, CHUNK):
                    part = NpyHeader((min(CHUNK, n - lo),), header.dtype, False, 0)
                    _check_exact(label, _data(label, f.readinto, part), header, target, lo)
    except OSError as err:
        raise _fail(label, f"cannot read the file: {err.strerror or err}") from None
    finally:
        os.close(fd)
    return header


def _check_exact(label: str, flat: np.ndarray, header: NpyHeader, target: np.dtype,
                 start: int = 0) -> None:
    """Every integer of ``flat`` (file order, from element ``start``) converts exactly to
    ``target``."""
    signed = flat.dtype.kind == "i"
    wide, limit = (np.int64, 2.0**63) if signed else (np.uint64, 2.0**64)
    for lo in range(0, flat.size, CHUNK):
        v = flat[lo : lo + CHUNK]
        with np.errstate(over="ignore", invalid="ignore"):
            back = v.astype(target).astype(np.float64)
            fits = (back >= (-limit if signed else 0)) & (back < limit)
            ok = fits & (np.where(fits, back, 0).astype(wide) == v.astype(wide))
        if not ok.all():
            i = lo + int(np.argmin(ok))
            where = np.unravel_index(start + i, header.shape, order="F" if header.fortran_order else "C")
            raise _fail(label, f"value {int(flat[i])} at index {[int(k) for k in where]} does not "
                              f"convert exactly to {dtype_name(target)} (integers in a .npy "
                              f"input must be exactly representable in the block's dtype)")
