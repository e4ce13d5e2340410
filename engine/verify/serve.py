"""``--cmd-serve "COMMAND ARGS"``: one long-lived process per worker answers every case (see
assets/guide/verify.md, "--cmd-serve").

Protocol: per case the worker makes a folder ``IN`` holding one ``NAME.npy`` per argument
(the members ``--cmd``'s IN.npz has: :func:`engine.verify.case_io.npz_arguments`) and writes the
line ``IN OUT`` (two absolute paths without white space, one space between) to the process's
stdin; the process writes ``OUT`` (an .npy of the output) and answers one line on stdout:
``ok``, ``unsupported MESSAGE`` or ``error MESSAGE``. Any other line, or more than one line, is
a protocol error. The process is started on the first case, in its own session (process
group), and its whole group is killed and it is started again on the next case after it ends
(``crashed``), answers wrongly (``crashed``) or takes longer than :data:`ANSWER_SHARE` of the
case timeout (``timeout``); at the worker's end the group is killed too, and on Linux the
process is killed when its worker dies. Its stderr goes to a file; the last line is quoted
when it ends.
"""

from __future__ import annotations

import atexit
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from engine.base.errors import InvalidArgumentError
from engine.base.names import escaped, shown
from engine.verify import sandbox
from engine.verify.case_io import MESSAGE_CHARS, as_float, npz_arguments

#: Share of the case timeout the process gets to answer; the rest is for killing it and
#: answering ``timeout`` before the sweep's own case timeout ends the worker.
ANSWER_SHARE = 0.9
#: Bytes of an answer line read at most (a longer line is a protocol error).
LINE_BYTES = 65536
PR_SET_PDEATHSIG = 1


def _line(text: str) -> str:
    return escaped(" ".join(text.split()), MESSAGE_CHARS)


def _die_with_parent():
    """A ``preexec_fn`` killing the child when this process dies (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl
            os._exit(1)

    return preexec


# preexec_fn is safe here: a worker process runs one thread
class Server:
    """The long-lived process of one worker (started on the first :meth:`ask`)."""

    def __init__(self, argv: list[str]):
        self.argv = argv
        self.root = tempfile.mkdtemp(prefix="gradblocks-serve-")
        self.proc: subprocess.Popen | None = None
        self.buffer = b""
        self.cases = 0

    def start(self) -> None:
        err = open(os.path.join(self.root, "stderr"), "ab")  # noqa: SIM115 - the child's
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, bufsize=0,
                                         process_group=0,
                                         preexec_fn=_die_with_parent())  # noqa: PLW1509
        finally:
            err.close()
        self.buffer = b""

    def kill(self) -> int | None:
        """Kill the process's group; its exit status (None if it was not running)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        sandbox.kill_group(proc.pid)  # returns once nothing of the group runs
        code = proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        return code

    def _stderr_tail(self) -> str:
        try:
            with open(os.path.join(self.root, "stderr"), "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
                lines = f.read().decode("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return f": {lines[-1]}" if lines else ""

    def _ended(self, what: str) -> tuple[str, str]:
        tail = self._stderr_tail()
        code = self.kill()
        how = f"died of signal {-code}" if code is not None and code < 0 else \
            f"ended with exit status {code}"
        return "crashed", _line(f"the serve process {how} {what}{tail}")

    def _read_line(self, seconds: float) -> bytes | None:
        """The next line (without its newline), b"" at the end of the output, None after
        ``seconds``."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + seconds
        while b"\n" not in self.buffer and len(self.buffer) <= LINE_BYTES:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, LINE_BYTES)
            if not chunk:
                return b""
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def ask(self, in_dir: str, out: str, seconds: float) -> tuple[str, str]:
        """One request: ``("ok", "")`` or a verdict kind and its one-line message."""
        if self.proc is None or self.proc.poll() is not None:
            self.kill()
            try:
                self.start()
            except OSError as err:
                return "raised", _line(f"cannot run {self.argv[0]!r}: {err.strerror or err}")
        assert self.proc is not None and self.proc.stdin is not None
        with open(os.path.join(self.root, "stderr"), "ab") as f:
            f.truncate(0)  # the child appends: its next line starts the file again
        try:
            self.proc.stdin.write(f"{in_dir} {out}\n".encode())
        except OSError:
            return self._ended("before reading the case")
        line = self._read_line(seconds)
        if line is None:
            self.kill()
            return "timeout", f"the serve process gave no answer within {seconds:g} s"
        if line == b"" and not self.buffer:
            return self._ended("before answering")
        text = line.decode("utf-8", "replace").rstrip("\r")
        word, _, message = text.partition(" ")
        if self.buffer or word not in ("ok", "unsupported", "error") or (
                word == "ok" and message):
            self.kill()
            what = "more than one line" if self.buffer and word in ("ok", "unsupported",
                                                                    "error") else repr(text)
            return "crashed", _line(f"the serve process answered {what}: expected one line, "
                                    "ok, unsupported MESSAGE or error MESSAGE")
        if word == "ok":
            return "ok", ""
        return ("unsupported" if word == "unsupported" else "raised"), _line(message)

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()  # a well-behaved process ends at the end of stdin
            except OSError:
                pass
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


_server: Server | None = None


def _this_server(argv: list[str]) -> Server:
    global _server
    if _server is None:
        _server = Server(argv)
        atexit.register(close)
    return _server


def prestart(argv: list[str]) -> None:
    """Start this worker's process before its first case (so its start-up overlaps the
    sweep's); a command that cannot start is reported on the first case."""
    server = _this_server(argv)
    if server.proc is None:
        try:
            server.start()
        except OSError:
            pass


def call_serve(argv: list[str], kwargs: dict[str, Any], meta: dict[str, str], timeout: float,
               repeat: bool) -> tuple:
    """One case through this worker's serve process (twice with ``repeat``): ``(kind, first,
    second)`` as :func:`engine.verify.worker.call_command` gives."""
    server = _this_server(argv)
    server.cases += 1
    case_dir = os.path.join(server.root, f"case{server.cases}")
    os.mkdir(case_dir)
    try:
        for name, value in npz_arguments(kwargs, meta).items():
            np.save(os.path.join(case_dir, f"{name}.npy"), value)
        results = []
        for k in range(2 if repeat else 1):
            out = os.path.join(server.root, f"out{server.cases}-{k}.npy")
            try:
                kind, message = server.ask(case_dir, out, timeout * ANSWER_SHARE)
                if kind != "ok":
                    return kind, message, None
                results.append(as_float(np.load(out, allow_pickle=False)))
            except Exception as err:  # noqa: BLE001 - any unreadable file
                return "raised", _line(f"the serve process answered ok but OUT is not a "
                                       f"readable .npy of numbers: {err}"), None
            finally:
                if os.path.exists(out):
                    os.remove(out)
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)
    return "ok", results[0], results[1] if repeat else None


def close() -> None:
    """End this worker's serve process (its whole group) and remove its folder."""
    global _server
    if _server is not None:
        _server.close()
        _server = None


def serve_spec(cmd_serve: Any, timeout: float) -> tuple[tuple, str]:
    """The runner's ``("serve", argv, timeout)`` target of ``--cmd-serve`` and its text; a
    command that does not split into words, or a temporary folder whose path has white space
    (the case paths go on one line), is an :class:`InvalidArgumentError`."""
    import shlex

    try:
        argv = shlex.split(cmd_serve) if isinstance(cmd_serve, str) else []
    except ValueError as err:
        raise InvalidArgumentError(f"--cmd-serve {shown(cmd_serve)}: {err}", "cmd_serve") \
            from None
    if not argv:
        raise InvalidArgumentError(f"--cmd-serve {shown(cmd_serve)}: expected a command and "
                                   "its arguments", "cmd_serve")
    tmp = tempfile.gettempdir()
    if any(ch.isspace() for ch in tmp):
        raise InvalidArgumentError(f"--cmd-serve: the temporary folder {shown(tmp)} has white "
                                   "space in its path; set TMPDIR to one without", "cmd_serve")
    return ("serve", argv, timeout), cmd_serve
