"""The worker process: loads the target once, then calls it on each case it is sent.

Light on purpose (NumPy only): a worker starts fast and restarts fast after a crash. Messages:
the parent sends ``(seq, kwargs, memory, repeat)`` (None to stop); the worker answers
``(seq, kind, first, second)`` with kind ``ok`` (the result(s) as float64 arrays; ``second`` the
repeat's result or None), ``raised`` or ``unsupported`` (a one-line message), ``timeout`` or
``crashed`` (``--cmd`` only: the command's own timeout or death by a signal).

``--cmd`` protocol (see assets/guide/verify.md): per case ``COMMAND ARGS IN.npz OUT.npz``; IN
holds every argument under the convention's name (arrays in the case's dtype, bfloat16 stored
as float32; ints and int lists as int64 arrays; strings as 0-d unicode arrays; None left out)
plus ``op``, ``convention`` and ``dtype`` (strings); the command writes OUT.npz with key
``output``. Exit status 0 means done, :data:`EXIT_UNSUPPORTED` unsupported, anything else
raised (the last line of stderr is the message).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

EXIT_UNSUPPORTED = 3
#: Characters of a message kept.
MESSAGE_CHARS = 300


def prepared(kwargs: dict[str, Any], memory: str) -> dict[str, Any]:
    """Fresh copies of the arguments; ``noncontiguous``: strided views (every other element of
    a larger buffer); ``readonly``: arrays whose ``flags.writeable`` is False."""
    out = {}
    for k, v in kwargs.items():
        if isinstance(v, np.ndarray):
            if memory == "noncontiguous" and v.ndim and v.size:
                buf = np.zeros((*v.shape[:-1], 2 * v.shape[-1]), v.dtype)
                buf[..., ::2] = v
                v = buf[..., ::2]
            else:
                v = v.copy()
            if memory == "readonly":
                v.flags.writeable = False
        out[k] = v
    return out


def _line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


def _as_float(result: Any) -> np.ndarray:
    arr = np.asarray(result)
    if arr.dtype.kind not in "fiub" and arr.dtype.names is None and arr.dtype.kind != "V":
        raise TypeError(f"the function returned {type(result).__name__} of dtype {arr.dtype}, "
                        "not an array of numbers")
    return arr.astype(np.float64)


def load(spec: tuple) -> Any:
    """The callable of a ``("python", module, function, path)`` target."""
    _, module, function, path = spec
    sys.path[:0] = [p for p in path if p not in sys.path[: len(path)]]
    obj: Any = importlib.import_module(module)
    for part in function.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{module}:{function} is not callable")
    return obj


def call_python(fn: Any, kwargs: dict[str, Any], memory: str, repeat: bool) -> tuple:
    """One case in this process: ``(kind, first, second)``."""
    try:
        first = _as_float(fn(**prepared(kwargs, memory)))
        second = _as_float(fn(**prepared(kwargs, memory))) if repeat else None
    except NotImplementedError as err:
        return "unsupported", _line(f"NotImplementedError: {err}"), None
    except Exception as err:  # noqa: BLE001 - the implementation's error is a verdict
        return "raised", _line(f"{type(err).__name__}: {err}"), None
    return "ok", first, second


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


def call_command(argv: list[str], kwargs: dict[str, Any], meta: dict[str, str],
                 timeout: float, repeat: bool) -> tuple:
    """One case through ``argv IN.npz OUT.npz`` (twice with ``repeat``)."""
    results = []
    with tempfile.TemporaryDirectory(prefix="gradblocks-verify-") as tmp:
        src = os.path.join(tmp, "in.npz")
        np.savez(src, **npz_arguments(kwargs, meta))
        for k in range(2 if repeat else 1):
            dst = os.path.join(tmp, f"out{k}.npz")
            try:
                done = subprocess.run([*argv, src, dst], capture_output=True, timeout=timeout, check=False,
                                      stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                return "timeout", f"the command ran longer than {timeout:g} s", None
            except OSError as err:
                return "raised", _line(f"cannot run {argv[0]!r}: {err.strerror or err}"), None
            tail = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1]
            if done.returncode < 0:
                return "crashed", f"the command died of signal {-done.returncode}", None
            if done.returncode == EXIT_UNSUPPORTED:
                return "unsupported", _line(f"exit status 3: {tail}"), None
            if done.returncode:
                return "raised", _line(f"exit status {done.returncode}: {tail}"), None
            try:
                with np.load(dst, allow_pickle=False) as data:
                    results.append(_as_float(data["output"]))
            except Exception as err:  # noqa: BLE001 - any unreadable file
                return "raised", _line(f"OUT.npz has no readable 'output' array: {err}"), None
    return "ok", results[0], results[1] if repeat else None


def serve(conn) -> None:
    """The worker's loop: the target spec first, then cases."""
    spec = conn.recv()
    fn = None
    if spec[0] == "python":
        try:
            fn = load(spec)
        except BaseException as err:  # noqa: BLE001 - a broken module is a usage problem
            conn.send(("load_error", _line(f"{type(err).__name__}: {err}")))
            return
    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        seq, kwargs, memory, repeat, meta = msg
        if fn is not None:
            kind, first, second = call_python(fn, kwargs, memory, repeat)
        else:
            kind, first, second = call_command(spec[1], kwargs, meta, spec[2], repeat)
        conn.send((seq, kind, first, second))


if __name__ == "__main__":
    import socket
    from multiprocessing.connection import Connection

    _sock = socket.socket(fileno=int(sys.argv[1]))
    serve(Connection(_sock.detach()))
