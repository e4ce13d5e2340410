"""Running a target on cases in worker processes (:mod:`engine.verify.worker`), so a segfault
(``crashed``) or a hang (``timeout``) ends one case, not the sweep.

Workers are fresh interpreters (:class:`_Worker`), reused across cases, and replaced when one
dies or runs past the case timeout. A target is
``("python", module, function, sys_path)``, ``("cmd", argv, timeout)`` or, for a callable no
worker can import (one defined in a notebook), ``("inprocess", fn)``: then cases run in this
process, without crash or timeout protection.
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
from typing import Any

from engine.base.errors import InvalidArgumentError
from engine.verify import worker

DEFAULT_TIMEOUT = 10.0
#: Seconds a worker may take to start and import the target.
START_TIMEOUT = 60.0


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
    """``python -m engine.verify.worker FD``: a fresh interpreter (like multiprocessing's spawn,
    but without re-running the caller's main script, which a script without an ``if __name__ ==
    "__main__"`` guard would not survive), talking over a socket pair with
    :class:`multiprocessing.connection.Connection` framing."""

    def __init__(self, spec: tuple):
        mine, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [_engine_root(), *filter(None, [env.get("PYTHONPATH")])])
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "engine.verify.worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.conn = Connection(mine.detach())
        self.job: tuple | None = None  # (seq, deadline)
        self.conn.send(spec)

    def exitcode(self) -> int | None:
        return self.proc.poll()

    def ready(self) -> None:
        if not self.conn.poll(START_TIMEOUT):
            self.stop(kill=True)
            raise TargetError(f"the target did not load within {START_TIMEOUT:g} s")
        try:
            kind, message = self.conn.recv()
        except (EOFError, OSError):
            self.stop(kill=True)
            raise TargetError("the target's worker process died while loading it "
                              f"({_death(self.proc)})") from None
        if kind == "load_error":
            self.stop()
            raise TargetError(f"cannot load the target: {message}")

    def stop(self, kill: bool = False) -> None:
        if not kill:
            try:
                self.conn.send(None)
            except (OSError, ValueError):
                kill = True
        if kill:
            self.proc.kill()
        try:
            self.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.conn.close()


def _death(proc: subprocess.Popen) -> str:
    """How a worker ended: ``signal 11 (SIGSEGV)`` or ``exit status 1``."""
    try:
        code = proc.wait(1.0)
    except subprocess.TimeoutExpired:
        return "still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "?"
        return f"killed by signal {-code} ({name})"
    return f"exit status {code}"


class Pool:
    """``jobs`` workers running one target with a per-case ``timeout`` (seconds)."""

    def __init__(self, spec: tuple, jobs: int = 1, timeout: float = DEFAULT_TIMEOUT):
        self.spec, self.jobs, self.timeout = spec, max(1, jobs), timeout
        self.inprocess = spec[0] == "inprocess"
        self.workers: list[_Worker] = []

    def __enter__(self) -> Pool:  # noqa: PYI034
        if not self.inprocess:
            for _ in range(self.jobs):
                self.workers.append(self._start())
        return self

    def __exit__(self, *exc) -> None:
        for w in self.workers:
            w.stop()
        self.workers = []

    def _start(self) -> _Worker:
        w = _Worker(self.spec)
        w.ready()
        return w

    def _replace(self, w: _Worker) -> None:
        w.stop(kill=True)
        self.workers[self.workers.index(w)] = self._start()

    def run(self, jobs: Iterable[tuple[Any, dict, str, bool, dict]],
            skip: Callable[[Any], bool] = lambda key: False) -> Iterator[tuple[Any, Outcome]]:
        """``(key, outcome)`` for each ``(key, kwargs, memory, repeat, meta)``, in completion
        order; ``skip(key)`` is asked just before a job is sent (a class that timed out twice)."""
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
                    w.conn.send((seq, kwargs, memory, repeat, meta))
                    w.job = (seq, time.monotonic() + self.timeout * (2 if repeat else 1))
            busy = [w for w in self.workers if w.job is not None]
            if not busy:
                return
            wait_for = max(0.0, min(w.job[1] for w in busy) - time.monotonic())
            ready = wait([w.conn for w in busy], wait_for)
            for w in busy:
                seq_w = w.job[0]
                if w.conn in ready:
                    try:
                        got_seq, kind, first, second = w.conn.recv()
                    except (EOFError, OSError):
                        death = _death(w.proc)
                        w.job = None
                        self._replace(w)
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
