"""A case's arguments and result as they cross a process boundary, shared by the worker
(:mod:`engine.verify.worker`: ``--cmd``'s IN.npz), the ``--cmd-serve`` loop
(:mod:`engine.verify.serve`: its IN folder) and the pool (:mod:`engine.verify.runner`: the
worker's reply): the arguments as .npz members, a result as float64, a reply read back (only
arrays and plain values unpickled), and how long a message may be. Imports NumPy and nothing of
the verifier, so each of them (and the reproduction folder, :mod:`engine.verify.repro`) takes
it without importing the others.
"""

from __future__ import annotations

import io
import pickle
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

#: Characters of a message kept.
MESSAGE_CHARS = 300
#: What a case's reply may be built of when unpickled (NumPy arrays; plain values need none).
_REPLY_GLOBALS = {("numpy._core.multiarray", "_reconstruct"),
                  ("numpy.core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
                  ("numpy", "dtype")}
#: The kinds of a case's outcome.
KINDS = ("ok", "raised", "unsupported", "crashed", "timeout")


def as_float(result: Any) -> np.ndarray:
    """A result as a float64 array; TypeError when it is not an array of numbers."""
    arr = np.asarray(result)
    if arr.dtype.kind not in "fiub" and arr.dtype.names is None and arr.dtype.kind != "V":
        raise TypeError(f"the function returned {type(result).__name__} of dtype {arr.dtype}, "
                        "not an array of numbers")
    return arr.astype(np.float64)


def npz_arguments(kwargs: dict[str, Any], meta: dict[str, str]) -> dict[str, np.ndarray]:
    """The arguments as .npz members (see the module docstring)."""
    out: dict[str, np.ndarray] = {k: np.asarray(v) for k, v in meta.items()}
    for k, v in kwargs.items():
        if v is None:
            continue
        if isinstance(v, np.ndarray):
            out[k] = v if v.dtype.kind == "f" and v.dtype.itemsize != 2 or v.dtype == np.float16 \
                else v.astype(np.float32)
        elif isinstance(v, str):
            out[k] = np.asarray(v)
        else:
            out[k] = np.asarray(v, np.int64)
    return out


class MalformedReply(Exception):
    """A worker's reply that is not a well-formed result."""


class _ReplyUnpickler(pickle.Unpickler):
    """An unpickler of NumPy arrays and plain values only (:data:`_REPLY_GLOBALS`)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _REPLY_GLOBALS:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a reply")
        return super().find_class(module, name)


def _is_result(a: Any) -> bool:
    """A float64 array (what a result is sent as: :func:`as_float`)."""
    return type(a) is np.ndarray and a.dtype == np.float64


def read_reply(conn: Connection, seq: int) -> tuple[str, Any, Any]:
    """The ``(kind, first, second)`` of the reply to case ``seq``; :class:`MalformedReply` when the
    bytes are not one (EOFError/OSError: the worker died)."""
    data = conn.recv_bytes()
    try:
        msg = _ReplyUnpickler(io.BytesIO(data)).load()
    except Exception as err:  # noqa: BLE001 - whatever the bytes make unpickling raise
        raise MalformedReply(f"{type(err).__name__}: {err}") from None
    if type(msg) is not tuple or len(msg) != 4 or msg[0] != seq or msg[1] not in KINDS:
        raise MalformedReply(f"not (case {seq}, kind, first, second)")
    _, kind, first, second = msg
    if kind == "ok" and not (_is_result(first) and (second is None or _is_result(second))):
        raise MalformedReply("the result is not float64 arrays")
    if kind != "ok" and type(first) is not str:
        raise MalformedReply("the message is not a string")
    return kind, first, second
