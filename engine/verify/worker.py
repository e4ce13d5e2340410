"""The worker process: loads the target once, then calls it on each case it is sent, or, as a
*zygote*, forks pristine copies of itself that do.

Light on purpose (NumPy, the socket and :mod:`engine.verify.sandbox`; ``subprocess`` and
``tempfile`` load for ``--cmd`` targets alone). Started as ``python -m engine.verify.worker FD
MEMORY_MB`` (its socket, its ``RLIMIT_AS``), the leader of its own session; each forked child
starts a session of its own. Messages: the parent sends the target spec first; the process answers
``("ready", forkable)`` or ``("load_error", message)``. ``forkable`` is True on Linux when
loading the target started no thread (a fork copies only the calling thread: a target with
its own threads is never forked). Then it serves, until None or the end of the connection:

- ``(seq, kwargs, memory, repeat, meta)``: one case; the answer is ``(seq, kind, first,
  second)`` with kind ``ok`` (the result(s) as float64 arrays; ``second`` the repeat's result or
  None), ``raised`` or ``unsupported`` (a one-line message), ``timeout`` or ``crashed``
  (``--cmd`` only: the command's own timeout or death by a signal);
- ``("fork",)`` (zygote only, never sent a case): a child that has loaded the target and run
  no case, serving cases on a new socket; the answer is ``("forked", pid)`` followed by the
  parent's end of that socket (``SCM_RIGHTS``). Forking takes milliseconds where a new
  interpreter takes ~0.3-1 s, which is what a crash or a timeout costs;
- ``("reap", pid)``: wait for a forked child to end (killing it after :data:`REAP_WAIT` s);
  the answer is ``("reaped", status)`` in :attr:`subprocess.Popen.returncode` terms.

``--cmd`` protocol (see assets/guide/verify.md): per case ``COMMAND ARGS IN.npz OUT.npz``; IN
holds every argument under the convention's name (arrays in the case's dtype, bfloat16 stored
as float32; ints and int lists as int64 arrays; strings as 0-d unicode arrays; None left out)
plus ``op``, ``convention`` and ``dtype`` (strings); the command writes OUT.npz with key
``output``. Exit status 0 means done, :data:`EXIT_UNSUPPORTED` unsupported, anything else
raised (the last line of stderr is the message). The command runs in a process group of its own
with ``TMPDIR`` the case's folder (:func:`engine.verify.sandbox.run_command`).
"""

from __future__ import annotations

import copy
import importlib
import os
import signal
import sys
import time
from typing import Any

import numpy as np

from engine.base.names import escaped
from engine.verify import sandbox
from engine.verify.case_io import MESSAGE_CHARS, as_float, npz_arguments

EXIT_UNSUPPORTED = 3
#: Seconds a reaped child may take to end before it is killed.
REAP_WAIT = 1.0


def prepared(kwargs: dict[str, Any], memory: str) -> dict[str, Any]:
    """Fresh copies of the arguments (lists and tuples too, so a target changing them is judged
    on what it returned); ``noncontiguous``: strided views (every other element of a larger
    buffer); ``readonly``: arrays whose ``flags.writeable`` is False."""
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
        elif not isinstance(v, (str, int, float, type(None))):
            v = copy.deepcopy(v)
        out[k] = v
    return out


def _line(text: str) -> str:
    """The implementation's text as one line of at most :data:`MESSAGE_CHARS` characters,
    control characters escaped (:func:`engine.base.names.escaped`)."""
    return escaped(" ".join(str(text).split()), MESSAGE_CHARS)


def load(spec: tuple) -> Any:
    """The callable of a ``("python", module, function, path)`` target."""
    _, module, function, path = spec
    sys.path[:] = list(dict.fromkeys([*path, *sys.path]))  # --path first, before the cwd
    obj: Any = importlib.import_module(module)
    for part in function.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{module}:{function} is not callable")
    return obj


def call_python(fn: Any, kwargs: dict[str, Any], memory: str, repeat: bool) -> tuple:
    """One case in this process: ``(kind, first, second)``. ``SystemExit`` and
    ``KeyboardInterrupt`` raised by the target are ``raised`` too (a real Ctrl-C,
    :class:`~engine.verify.sandbox.Interrupted`, is not caught)."""
    try:
        first = as_float(fn(**prepared(kwargs, memory)))
        second = as_float(fn(**prepared(kwargs, memory))) if repeat else None
    except NotImplementedError as err:
        return "unsupported", _line(f"NotImplementedError: {err}"), None
    except sandbox.Interrupted:
        raise
    except (Exception, SystemExit, KeyboardInterrupt) as err:  # noqa: BLE001 - a verdict
        return "raised", _line(f"{type(err).__name__}: {err}"), None
    return "ok", first, second


def call_command(argv: list[str], kwargs: dict[str, Any], meta: dict[str, str],
                 timeout: float, repeat: bool) -> tuple:
    """One case through ``argv IN.npz OUT.npz`` (twice with ``repeat``), in a temporary folder
    (the command's ``TMPDIR``; see :func:`engine.verify.sandbox.run_command`)."""
    import tempfile

    results = []
    with tempfile.TemporaryDirectory(prefix="gradblocks-verify-") as tmp:
        src = os.path.join(tmp, "in.npz")
        members: dict[str, Any] = npz_arguments(kwargs, meta)  # Any: np.savez's ** takes arrays
        np.savez(src, **members)
        for k in range(2 if repeat else 1):
            dst = os.path.join(tmp, f"out{k}.npz")
            try:
                code, tail = sandbox.run_command([*argv, src, dst], tmp, timeout)
            except OSError as err:
                return "raised", _line(f"cannot run {argv[0]!r}: {err.strerror or err}"), None
            if code is None:
                return "timeout", f"the command ran longer than {timeout:g} s", None
            if code < 0:
                return "crashed", f"the command died of signal {-code}", None
            if code == EXIT_UNSUPPORTED:
                return "unsupported", _line(f"exit status 3: {tail}"), None
            if code:
                return "raised", _line(f"exit status {code}: {tail}"), None
            try:
                with np.load(dst, allow_pickle=False) as data:
                    results.append(as_float(data["output"]))
            except Exception as err:  # noqa: BLE001 - any unreadable file
                return "raised", _line(f"OUT.npz has no readable 'output' array: {err}"), None
    return "ok", results[0], results[1] if repeat else None


def _threads() -> int:
    """Threads of this process (Linux), or -1 where that cannot be told."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def serve(conn) -> None:
    """The process's loop: the target spec first, then cases or zygote requests."""
    spec = conn.recv()
    fn = None
    threads = _threads()
    if spec[0] == "python":
        try:
            fn = load(spec)
        except BaseException as err:  # noqa: BLE001 - a broken module is a usage problem
            conn.send(("load_error", _line(f"{type(err).__name__}: {err}")))
            return
    forkable = (sys.platform.startswith("linux") and hasattr(os, "fork")
                and threads > 0 and _threads() <= threads)
    conn.send(("ready", forkable))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        if msg[0] == "fork" and forkable:
            _fork(conn, spec, fn)
        elif msg[0] == "reap":
            conn.send(("reaped", _reap(msg[1])))
        else:
            _serve_case(conn, msg, spec, fn)


def _serve_case(conn, msg: tuple, spec: tuple, fn: Any) -> None:
    seq, kwargs, memory, repeat, meta = msg
    if fn is not None:
        kind, first, second = call_python(fn, kwargs, memory, repeat)
    elif spec[0] == "serve":  # --cmd-serve: engine.verify.serve
        from engine.verify.serve import call_serve

        kind, first, second = call_serve(spec[1], kwargs, meta, spec[2], repeat)
    else:
        kind, first, second = call_command(spec[1], kwargs, meta, spec[2], repeat)
    conn.send((seq, kind, first, second))


def _fork(conn, spec: tuple, fn: Any) -> None:
    """A child serving cases on a new socket; its pid and the socket's other end go back."""
    import socket
    from multiprocessing.connection import Connection
    from multiprocessing.reduction import send_handle

    mine, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the child: only its own end stays open, so the parent sees its death
        code = 0
        try:
            os.setsid()  # a session of its own: killed with all it starts (engine.verify.sandbox)
            mine.close()
            conn.close()
            child = Connection(theirs.detach())
            if spec[0] == "serve":  # --cmd-serve: its process starts with the worker
                from engine.verify.serve import prestart

                prestart(spec[1])
            while True:
                try:
                    msg = child.recv()
                except (EOFError, OSError):
                    break
                if msg is None:
                    break
                _serve_case(child, msg, spec, fn)
        except BaseException:  # noqa: BLE001 - end the child, never return into the zygote
            code = 1
        finally:
            if "engine.verify.serve" in sys.modules:  # os._exit runs no atexit: end it here
                sys.modules["engine.verify.serve"].close()
            os._exit(code)
    theirs.close()
    conn.send(("forked", pid))
    send_handle(conn, mine.fileno(), 0)
    mine.close()


def _reap(pid: int) -> int:
    """The exit status of a forked child (negative: the signal), killing it after
    :data:`REAP_WAIT` seconds."""
    deadline = time.monotonic() + REAP_WAIT
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        time.sleep(0.002)


if __name__ == "__main__":
    import socket
    from multiprocessing.connection import Connection

    _sock = socket.socket(fileno=int(sys.argv[1]))
    sandbox.limit_memory(int(sys.argv[2]))
    serve(Connection(_sock.detach()))
