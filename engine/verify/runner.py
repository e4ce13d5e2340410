"""Running a target on cases in worker processes (:mod:`engine.verify.worker`), so a segfault
(``crashed``) or a hang (``timeout``) ends one case, not the sweep.

A pool starts one fresh interpreter, which loads the target. Where it can (Linux, a target that
starts no thread on import) that process is a *zygote*: it runs no case itself and forks the
workers, each a pristine copy with the target loaded, in milliseconds. One standby worker is
kept ready (forked while the others work), so a worker that dies or runs past the case timeout
is replaced at once. Elsewhere the first interpreter is the first worker and a fresh
interpreter, started in the background after the first replacement, is the standby.

A target is ``("python", module, function, sys_path)``, ``("cmd", argv, timeout)`` or, for a
callable no worker can import (one defined in a notebook), ``("inprocess", fn)``: then cases
run in this process, without crash or timeout protection.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import recv_handle
from typing import Any

from engine.base import cancel
from engine.base.errors import InvalidArgumentError
from engine.verify import worker
from engine.verify.defaults import DEFAULT_TIMEOUT

#: Seconds a worker may take to start and import the target.
START_TIMEOUT = 60.0
#: Seconds between looks at the cancel event while cases run (so Cancel does not wait for a
#: hanging case's timeout).
CANCEL_POLL_S = 0.1


@dataclass(frozen=True)
class Outcome:
    """What one call gave: kind ``ok``, ``raised``, ``unsupported``, ``crashed`` or
    ``timeout``; ``first``/``second`` the result arrays (``ok``) or ``first`` a message."""

    kind: str
    first: Any
    second: Any = None


class TargetError(InvalidArgumentError):
    """The target cannot be loaded (a usage error: exit 2)."""


def _engine_root() -> str:
    """The folder holding the ``engine`` package (on the worker's PYTHONPATH)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(worker.__file__))))


class _Worker:
    """One process serving cases: ``python -m engine.verify.worker FD`` (a fresh interpreter,
    like multiprocessing's spawn but without re-running the caller's main script, which a
    script without an ``if __name__ == "__main__"`` guard would not survive) or a child the
    zygote forked (``zygote`` set). Talks over a socket pair with
    :class:`multiprocessing.connection.Connection` framing."""

    def __init__(self, conn: Connection, pid: int, proc: subprocess.Popen | None = None,
                 zygote: _Worker | None = None):
        self.conn, self.pid, self.proc, self.zygote = conn, pid, proc, zygote
        self.job: tuple | None = None  # (seq, deadline)
        self.forkable = False
        self.pending_forks = 0  # forks asked of this zygote and not yet received
        self.forked: list[_Worker] = []  # forks received and not yet taken

    @classmethod
    def spawn(cls, spec: tuple) -> _Worker:
        """A fresh interpreter loading ``spec`` (call :meth:`ready` before use)."""
        mine, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [_engine_root(), *filter(None, [env.get("PYTHONPATH")])])
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "engine.verify.worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        w = cls(Connection(mine.detach()), proc.pid, proc)
        w.conn.send(spec)
        return w

    def ready(self) -> _Worker:
        if not self.conn.poll(START_TIMEOUT):
            self.stop(kill=True)
            raise TargetError(f"the target did not load within {START_TIMEOUT:g} s")
        try:
            kind, message = self.conn.recv()
        except (EOFError, OSError):
            self.stop(kill=True)
            raise TargetError("the target's worker process died while loading it "
                              f"({_describe(self.end())})") from None
        if kind == "load_error":
            self.stop()
            raise TargetError(f"cannot load the target: {message}")
        self.forkable = bool(message)
        return self

    def ask_fork(self) -> None:
        """Ask this zygote for a worker (received by :meth:`take_fork`)."""
        self.conn.send(("fork",))
        self.pending_forks += 1

    def _receive_fork(self) -> _Worker:
        self.pending_forks -= 1
        if not self.conn.poll(START_TIMEOUT):
            raise TargetError(f"the worker zygote did not fork within {START_TIMEOUT:g} s")
        try:
            _, pid = self.conn.recv()
            fd = recv_handle(self.conn)
        except (EOFError, OSError):
            raise TargetError("the worker zygote died "
                              f"({_describe(self.end())})") from None
        return _Worker(Connection(fd), pid, zygote=self)

    def take_fork(self) -> _Worker:
        """The worker of the oldest :meth:`ask_fork` not taken yet."""
        return self.forked.pop(0) if self.forked else self._receive_fork()

    def reap(self, pid: int) -> int:
        """Wait for a forked child to end; its status (negative: the signal)."""
        while self.pending_forks:  # the zygote answers in order
            self.forked.append(self._receive_fork())
        try:
            self.conn.send(("reap", pid))
            return int(self.conn.recv()[1])
        except (EOFError, OSError, ValueError):
            return 0  # the zygote is gone; so is the child (it saw the end of its socket)

    def end(self) -> int | None:
        """Wait for this process to end (up to a second); its status, None when running."""
        if self.zygote is not None:
            return self.zygote.reap(self.pid)
        assert self.proc is not None
        try:
            return self.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, kill: bool = False) -> None:
        if not kill:
            try:
                self.conn.send(None)
            except (OSError, ValueError):
                kill = True
        if kill:
            self.kill()
        if self.end() is None:
            self.kill()
            if self.proc is not None:
                self.proc.wait()
        self.conn.close()

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
        else:
            try:
                os.kill(self.pid, signal.SIGKILL)  # not reaped yet: the pid is still ours
            except ProcessLookupError:
                pass


def _describe(code: int | None) -> str:
    """How a worker ended: ``killed by signal 11 (SIGSEGV)`` or ``exit status 1``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "?"
        return f"killed by signal {-code} ({name})"
    return f"exit status {code}"


class Pool:
    """``jobs`` workers running one target with a per-case ``timeout`` (seconds), plus one
    standby (see the module docstring)."""

    def __init__(self, spec: tuple, jobs: int = 1, timeout: float = DEFAULT_TIMEOUT):
        self.spec, self.jobs, self.timeout = spec, max(1, jobs), timeout
        self.inprocess = spec[0] == "inprocess"
        self.workers: list[_Worker] = []
        self.zygote: _Worker | None = None
        self.standby: _Worker | None = None
        #: Worker processes started to replace dead or hung ones.
        self.replaced = 0

    def __enter__(self) -> Pool:  # noqa: PYI034
        if self.inprocess:
            return self
        first = _Worker.spawn(self.spec).ready()
        if first.forkable:
            self.zygote = first
            for _ in range(self.jobs + 1):
                first.ask_fork()
            self.workers = [first.take_fork() for _ in range(self.jobs)]
        else:
            self.workers = [first]
            try:
                self.workers += [_Worker.spawn(self.spec).ready() for _ in range(self.jobs - 1)]
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc) -> None:
        for w in [*self.workers, *filter(None, [self.standby])]:
            w.stop(kill=w.job is not None)
        self.workers, self.standby = [], None
        if self.zygote is not None:
            while self.zygote.pending_forks or self.zygote.forked:
                self.zygote.take_fork().stop()
            self.zygote.stop()
            self.zygote = None

    def _replace(self, w: _Worker) -> str:
        """Kill ``w``, put the standby in its place, start the next standby; how ``w`` ended."""
        w.kill()
        if self.zygote is not None:
            new = self.zygote.take_fork()
            death = _describe(w.end())
            self.zygote.ask_fork()  # the next standby, forked while this one works
        else:
            new = (self.standby or _Worker.spawn(self.spec)).ready()
            self.standby = _Worker.spawn(self.spec)  # loads in the background
            death = _describe(w.end())
        w.conn.close()
        self.workers[self.workers.index(w)] = new
        self.replaced += 1
        return death

    def run(self, jobs: Iterable[tuple[Any, dict, str, bool, dict]],
            skip: Callable[[Any], bool] = lambda key: False) -> Iterator[tuple[Any, Outcome]]:
        """``(key, outcome)`` for each ``(key, kwargs, memory, repeat, meta)``, in completion
        order; ``skip(key)`` is asked just before a job is sent (a class that timed out twice).
        Inside a set :func:`engine.base.cancel.scope` it raises
        :class:`~engine.base.cancel.Cancelled` within :data:`CANCEL_POLL_S` even while a case
        runs (in-process cases: after the running one)."""
        if self.inprocess:
            fn = self.spec[1]
            for key, kwargs, memory, repeat, _meta in jobs:
                if not skip(key):
                    yield key, Outcome(*worker.call_python(fn, kwargs, memory, repeat))
            return
        pending = iter(jobs)
        keys: dict[int, Any] = {}
        seq = 0
        exhausted = False
        while True:
            for w in self.workers:
                while w.job is None and not exhausted:
                    item = next(pending, None)
                    if item is None:
                        exhausted = True
                        break
                    key, kwargs, memory, repeat, meta = item
                    if skip(key):
                        continue
                    seq += 1
                    keys[seq] = key
                    try:
                        w.conn.send((seq, kwargs, memory, repeat, meta))
                    except OSError:
                        pass  # the worker died: its end of file says so below
                    w.job = (seq, time.monotonic() + self.timeout * (2 if repeat else 1))
            busy = [w for w in self.workers if w.job is not None]
            if not busy:
                return
            cancel.checkpoint()  # Cancelled: the sweep's `with Pool` kills the busy workers
            wait_for = max(0.0, min(w.job[1] for w in busy) - time.monotonic())
            ready = wait([w.conn for w in busy], min(wait_for, CANCEL_POLL_S))
            for w in busy:
                seq_w = w.job[0]
                if w.conn in ready:
                    try:
                        got_seq, kind, first, second = w.conn.recv()
                    except (EOFError, OSError):
                        w.job = None
                        death = self._replace(w)
                        yield keys.pop(seq_w), Outcome(
                            "crashed", f"the worker process died: {death}")
                        continue
                    w.job = None
                    yield keys.pop(got_seq), Outcome(kind, first, second)
                elif time.monotonic() >= w.job[1]:
                    w.job = None
                    self._replace(w)
                    yield keys.pop(seq_w), Outcome(
                        "timeout", f"no result within {self.timeout:g} s")
