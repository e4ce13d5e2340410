"""What holds user code in: each worker process leads its own session, so everything it
starts can be killed with it; a memory ceiling; commands run with their output in files.

- :func:`kill_session`: SIGKILL a worker and everything in its session (its process group, and
  on Linux every process whose session id is the worker's pid: a ``--cmd`` child sits in a
  process group of its own inside the worker's session). A descendant that calls ``setsid``
  itself escapes; nothing else does.
- :func:`limit_memory`: ``RLIMIT_AS`` of this process (inherited by its forks and commands).
- :func:`run_command`: one command in its own process group, stdout discarded and stderr in a
  file (never a pipe, so a grandchild holding it open cannot make the run wait), with a
  timeout; the group is killed when the command ends, so nothing it left behind keeps running.
- :func:`running`: whether a worker still runs, even when its socket does not say.
- :class:`Interrupted`: the ``KeyboardInterrupt`` of a real Ctrl-C while an in-process target
  runs (a target's own ``KeyboardInterrupt`` is a verdict; this one stops the sweep).

Light on purpose: a worker imports it (the standard library only, ``subprocess`` on use).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

#: Bytes of a command's stderr kept for its message.
STDERR_TAIL = 4096


class Interrupted(KeyboardInterrupt):
    """Ctrl-C pressed while an in-process target ran."""


@contextlib.contextmanager
def real_interrupts() -> Iterator[None]:
    """Within: Ctrl-C raises :class:`Interrupted` (in the main thread, while Python's own
    SIGINT handler is the one installed; elsewhere nothing changes)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return

    def interrupted(signum, frame):
        raise Interrupted

    signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def default_memory_mb() -> int:
    """Half of the physical memory, in MB (4096 where it cannot be told)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 4096
    return max(1, total // 2 // 2**20)


def limit_memory(mb: int) -> None:
    """Cap this process's address space at ``mb`` MB (a no-op where ``resource`` is missing)."""
    try:
        import resource
    except ImportError:
        return
    limit = mb * 2**20
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


#: Seconds a kill waits for the processes it killed to be gone: SIGKILL takes effect when each
#: is next scheduled, which on a loaded machine is not at once.
KILL_WAIT_S = 5.0
_PGRP, _SESSION = 2, 3  # fields of /proc/PID/stat after the command: state ppid pgrp session


def _members(ident: int, field: int) -> list[int]:
    """Pids still running (not zombies) whose process group (``field`` :data:`_PGRP`) or
    session (:data:`_SESSION`) is ``ident`` (Linux ``/proc``; empty elsewhere)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 3 and int(fields[field]) == ident and fields[0] not in (b"Z", b"X"):
            found.append(int(name))
    return found


def _await_gone(ident: int, field: int) -> None:
    """Wait (at most :data:`KILL_WAIT_S`) until no member of that group or session runs."""
    import time

    deadline = time.monotonic() + KILL_WAIT_S
    while _members(ident, field) and time.monotonic() < deadline:
        time.sleep(0.001)


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs (not a zombie), from Linux ``/proc``; True where that
    cannot be told. A dead worker's socket can stay open (a child it forked holds it), so its
    end of file alone does not tell its death."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def kill_group(pgid: int) -> None:
    """SIGKILL every process of process group ``pgid`` (none left: nothing happens) and wait
    until none of them runs (the leader, when it is the caller's child, stays a zombie until
    reaped)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    _await_gone(pgid, _PGRP)


def kill_session(pid: int) -> None:
    """SIGKILL ``pid`` (a session leader: a worker) and every process of its session, and wait
    until none of them runs. Call it before ``pid`` is reaped, so the pid cannot have been
    reused."""
    kill_group(pid)
    for member in _members(pid, _SESSION):
        try:
            os.kill(member, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    _await_gone(pid, _SESSION)


def run_command(argv: list[str], folder: str, timeout: float) -> tuple[int | None, str]:
    """Run ``argv`` with ``TMPDIR`` set to ``folder`` in a process group of its own; its
    exit status (negative: the signal; None: still running after ``timeout`` s, then killed)
    and the last line of its stderr. Raises :class:`OSError` when it cannot start."""
    import subprocess

    err_path = os.path.join(folder, "stderr.txt")
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, env={**os.environ, "TMPDIR": folder},
                                process_group=0)
    try:
        code: int | None = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        kill_group(proc.pid)  # the command if it still runs, and whatever it left behind
        proc.wait()
    with open(err_path, "rb") as err:
        err.seek(max(0, os.path.getsize(err_path) - STDERR_TAIL))
        tail = err.read().decode("utf-8", "replace").strip().splitlines()
    return code, tail[-1] if tail else ""
