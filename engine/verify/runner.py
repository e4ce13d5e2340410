"""Running a target on cases in worker processes (:mod:`engine.verify.worker`), so a segfault
(``crashed``) or a hang (``timeout``) ends one case, not the sweep.

A pool starts one fresh interpreter, which loads the target. Where it can (Linux, a target that
starts no thread on import) that process is a *zygote*: it runs no case itself and forks the
workers, each a pristine copy with the target loaded, in milliseconds. One standby worker is
kept ready (forked while the others work), so a worker that dies or runs past the case timeout
is replaced at once. Elsewhere the first interpreter is the first worker and a fresh
interpreter, started in the background after the first replacement, is the standby.

A target is ``("python", module, function, sys_path)``, ``("cmd", argv, timeout)``,
``("serve", argv, timeout)`` (:mod:`engine.verify.serve`) or, for a callable no worker can
import (one defined in a notebook), ``("inprocess", fn)``: then cases run in this process,
without crash, timeout or memory protection. The pool's ``memory`` is every worker's
``RLIMIT_AS`` in MB.

The sandbox (:mod:`engine.verify.sandbox`): every worker leads its own session and is killed
with everything it started (:func:`~engine.verify.sandbox.kill_session`) when it is replaced
and when the pool ends, Cancel included; workers' stdout and stderr are discarded (a target
cannot block on them or fill the terminal); their ``TMPDIR`` is one folder per pool, removed
with whatever is left in it when the pool ends. A reply that is not a well-formed result (bytes
that do not unpickle into one, or unpickle only through objects other than NumPy arrays) is a
``crashed`` case and its worker is replaced. A zygote that died or does not answer within
:data:`ZYGOTE_WAIT` s when a worker is needed is killed and replaced; the sweep goes on.
"""

from __future__ import annotations

import itertools
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import recv_handle
from typing import Any

from engine.base import cancel
from engine.base.errors import InvalidArgumentError
from engine.base.names import escaped
from engine.verify import case_io, sandbox, worker
from engine.verify.defaults import DEFAULT_TIMEOUT

#: Seconds a worker may take to start and import the target.
START_TIMEOUT = 60.0
#: Seconds between looks at the cancel event while cases run (so Cancel does not wait for a
#: hanging case's timeout).
CANCEL_POLL_S = 0.1
#: Seconds the zygote may take to answer a fork or a reap before it counts as lost.
ZYGOTE_WAIT = 1.0
#: Seconds a ``--cmd`` worker gets past the case timeout, so its own timeout (which kills the
#: command's process group and removes the case's folder) comes first.
CMD_GRACE = 1.0
@dataclass(frozen=True)
class Outcome:
    """What one call gave: kind ``ok``, ``raised``, ``unsupported``, ``crashed`` or
    ``timeout``; ``first``/``second`` the result arrays (``ok``) or ``first`` a message."""

    kind: str
    first: Any
    second: Any = None


class TargetError(InvalidArgumentError):
    """The target cannot be loaded (a usage error: exit 2)."""


class _ZygoteLost(Exception):
    """The zygote died or did not answer within :data:`ZYGOTE_WAIT` s."""


def _engine_root() -> str:
    """The folder holding the ``engine`` package (on the worker's PYTHONPATH)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(worker.__file__))))


class _Worker:
    """One process serving cases: ``python -m engine.verify.worker FD MEMORY_MB`` (a fresh
    interpreter, like multiprocessing's spawn but without re-running the caller's main script,
    which a script without an ``if __name__ == "__main__"`` guard would not survive) or a child
    the zygote forked (``zygote`` set). Talks over a socket pair with
    :class:`multiprocessing.connection.Connection` framing. Each leads its own session."""

    def __init__(self, conn: Connection, pid: int, proc: subprocess.Popen | None = None,
                 zygote: _Worker | None = None):
        self.conn, self.pid, self.proc, self.zygote = conn, pid, proc, zygote
        self.job: tuple | None = None  # (seq, deadline)
        self.forkable = False
        self.pending_forks = 0  # forks asked of this zygote and not yet received
        self.forked: list[_Worker] = []  # forks received and not yet taken
        self.lost = False  # a zygote that died or stopped answering

    @classmethod
    def spawn(cls, spec: tuple, memory: int, tmpdir: str) -> _Worker:
        """A fresh interpreter loading ``spec`` with an address space of ``memory`` MB and
        ``TMPDIR`` ``tmpdir`` (call :meth:`ready` before use)."""
        mine, theirs = socket.socketpair()
        env = dict(os.environ, TMPDIR=tmpdir)
        env["PYTHONPATH"] = os.pathsep.join(
            [_engine_root(), *filter(None, [env.get("PYTHONPATH")])])
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "engine.verify.worker", str(theirs.fileno()),
                 str(memory)], pass_fds=(theirs.fileno(),), env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        finally:
            theirs.close()
        w = cls(Connection(mine.detach()), proc.pid, proc)
        w.conn.send(spec)
        return w

    def ready(self) -> _Worker:
        if not self.conn.poll(START_TIMEOUT):
            self.stop()
            raise TargetError(f"the target did not load within {START_TIMEOUT:g} s")
        try:
            kind, message = self.conn.recv()
        except (EOFError, OSError):
            self.stop()
            raise TargetError("the target's worker process died while loading it "
                              f"({_describe(self.end())})") from None
        except Exception as err:  # noqa: BLE001 - bytes the target wrote to the socket
            self.stop()
            raise TargetError("the target's worker process sent a malformed message while "
                              f"loading it ({type(err).__name__})") from None
        if kind == "load_error":
            self.stop()
            raise TargetError(f"cannot load the target: {message}")
        self.forkable = bool(message)
        return self

    def ask_fork(self) -> None:
        """Ask this zygote for a worker (received by :meth:`take_fork`)."""
        try:
            self.conn.send(("fork",))
        except (OSError, ValueError):
            pass  # the zygote is gone: receiving the fork says so
        self.pending_forks += 1

    def _receive_fork(self) -> _Worker:
        self.pending_forks -= 1
        try:
            if self.lost or not self.conn.poll(ZYGOTE_WAIT):
                raise _ZygoteLost
            _, pid = self.conn.recv()
            fd = recv_handle(self.conn)
        except (_ZygoteLost, EOFError, OSError, ValueError, TypeError, pickle.UnpicklingError):
            self.lost = True
            raise _ZygoteLost from None
        return _Worker(Connection(fd), pid, zygote=self)

    def take_fork(self) -> _Worker:
        """The worker of the oldest :meth:`ask_fork` not taken yet (:class:`_ZygoteLost`)."""
        return self.forked.pop(0) if self.forked else self._receive_fork()

    def reap(self, pid: int) -> int | None:
        """Wait for a forked child to end; its status (negative: the signal), None when this
        zygote is lost."""
        try:
            while self.pending_forks:  # the zygote answers in order
                self.forked.append(self._receive_fork())
            if self.lost:
                return None
            self.conn.send(("reap", pid))
            if not self.conn.poll(ZYGOTE_WAIT + worker.REAP_WAIT):
                self.lost = True
                return None
            return int(self.conn.recv()[1])
        except (_ZygoteLost, EOFError, OSError, ValueError, TypeError, pickle.UnpicklingError):
            self.lost = True
            return None

    def end(self) -> int | None:
        """Wait for this process to end (up to a second); its status, None when unknown."""
        if self.zygote is not None:
            return self.zygote.reap(self.pid)
        assert self.proc is not None
        try:
            return self.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        """Kill this process and its session, reap it, close its socket."""
        self.kill()
        if self.end() is None and self.proc is not None:
            self.proc.wait()
        self.conn.close()

    def running(self) -> bool:
        """Whether the process still runs (see :func:`engine.verify.sandbox.running`)."""
        if self.proc is not None:
            return self.proc.poll() is None
        return sandbox.running(self.pid)

    def kill(self) -> None:
        """SIGKILL this process and everything in its session (not reaped yet: the pid is
        still ours)."""
        sandbox.kill_session(self.pid)


def _describe(code: int | None) -> str:
    """How a worker ended: ``killed by signal 11 (SIGSEGV)`` or ``exit status 1``."""
    if code is None:
        return "exit status unknown"
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

    def __init__(self, spec: tuple, jobs: int = 1, timeout: float = DEFAULT_TIMEOUT,
                 memory: int | None = None):
        self.spec, self.jobs, self.timeout = spec, max(1, jobs), timeout
        self.inprocess = spec[0] == "inprocess"
        self.memory = sandbox.default_memory_mb() if memory is None else memory
        self.grace = CMD_GRACE if spec[0] == "cmd" else 0.0
        self.workers: list[_Worker] = []
        self.zygote: _Worker | None = None
        self.standby: _Worker | None = None
        self.tmpdir = ""

    def _spawn(self) -> _Worker:
        return _Worker.spawn(self.spec, self.memory, self.tmpdir)

    def __enter__(self) -> Pool:  # noqa: PYI034
        if self.inprocess:
            return self
        self.tmpdir = tempfile.mkdtemp(prefix="gradblocks-verify-")
        try:
            first = self._spawn().ready()
            if first.forkable:
                self.zygote = first
                for _ in range(self.jobs + 1):
                    first.ask_fork()
                self.workers = [self._fork() for _ in range(self.jobs)]
            else:
                self.workers = [first]
                self.workers += [self._spawn().ready() for _ in range(self.jobs - 1)]
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for w in [*self.workers, *filter(None, [self.standby])]:
            w.stop()
        self.workers, self.standby = [], None
        if self.zygote is not None:
            self._drop_zygote()
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = ""

    def _drop_zygote(self) -> None:
        """Stop the zygote's forks not taken yet, then the zygote."""
        z, self.zygote = self.zygote, None
        assert z is not None
        try:
            while z.pending_forks or z.forked:
                z.take_fork().stop()
        except _ZygoteLost:
            pass  # forks it made and did not send see their socket's end and exit
        z.stop()

    def _fork(self) -> _Worker:
        """A forked worker; a lost zygote is replaced by a new one first (its standby asked)."""
        assert self.zygote is not None
        try:
            return self.zygote.take_fork()
        except _ZygoteLost:
            self._drop_zygote()
        z = self._spawn().ready()
        if not z.forkable:
            z.stop()
            raise TargetError("the replacement of the lost worker zygote cannot fork")
        self.zygote = z
        z.ask_fork()
        return z.take_fork()

    def _replace(self, w: _Worker) -> str:
        """Kill ``w``, put the standby in its place, start the next standby; how ``w`` ended."""
        w.kill()
        if self.zygote is not None:
            new = self._fork()
            death = _describe(w.end())
            self.zygote.ask_fork()  # the next standby, forked while this one works
        else:
            new = (self.standby or self._spawn()).ready()
            self.standby = self._spawn()  # loads in the background
            death = _describe(w.end())
        w.conn.close()
        self.workers[self.workers.index(w)] = new
        return death

    def _run_inprocess(self, jobs: Iterable[tuple[Any, dict, str, bool, dict]],
                       skip: Callable[[Any], bool]) -> Iterator[tuple[Any, Outcome]]:
        fn = self.spec[1]
        with sandbox.real_interrupts():
            for key, kwargs, memory, repeat, _meta in jobs:
                if not skip(key):
                    yield key, Outcome(*worker.call_python(fn, kwargs, memory, repeat))

    def run(self, jobs: Iterable[tuple[Any, dict, str, bool, dict]],
            skip: Callable[[Any], bool] = lambda key: False) -> Iterator[tuple[Any, Outcome]]:
        """``(key, outcome)`` for each ``(key, kwargs, memory, repeat, meta)``, in completion
        order; ``skip(key)`` is asked just before a job is sent (a class that timed out twice).
        Inside a set :func:`engine.base.cancel.scope` it raises
        :class:`~engine.base.cancel.Cancelled` within :data:`CANCEL_POLL_S` even while a case
        runs (in-process cases: after the running one)."""
        if self.inprocess:
            yield from self._run_inprocess(jobs, skip)
            return
        pending = iter(jobs)
        keys: dict[int, Any] = {}
        seqs = itertools.count(1)
        exhausted = False
        while True:
            exhausted = exhausted or self._send(pending, keys, seqs, skip)
            busy = [w for w in self.workers if w.job is not None]
            if not busy:
                return
            cancel.checkpoint()  # Cancelled: the sweep's `with Pool` kills the busy workers
            wait_for = max(0.0, min(w.job[1] for w in busy if w.job is not None)
                           - time.monotonic())
            ready = wait([w.conn for w in busy], min(wait_for, CANCEL_POLL_S))
            for w in busy:
                done = self._collect(w, w.conn in ready)
                if done is not None:
                    yield keys.pop(done[0]), done[1]

    def _send(self, pending: Iterator[tuple[Any, dict, str, bool, dict]], keys: dict[int, Any],
              seqs: Iterator[int], skip: Callable[[Any], bool]) -> bool:
        """Give each idle worker the next job not skipped (its number from ``seqs``, its key
        in ``keys``, its deadline in ``w.job``); returns whether ``pending`` ran out."""
        for w in self.workers:
            while w.job is None:
                item = next(pending, None)
                if item is None:
                    return True
                key, kwargs, memory, repeat, meta = item
                if skip(key):
                    continue
                seq = next(seqs)
                keys[seq] = key
                try:
                    w.conn.send((seq, kwargs, memory, repeat, meta))
                except OSError:
                    pass  # the worker died: its end of file says so below
                w.job = (seq, time.monotonic() + self.timeout * (2 if repeat else 1)
                         + self.grace)
        return False

    def _collect(self, w: _Worker, replied: bool) -> tuple[int, Outcome] | None:
        """The busy worker ``w``'s case number and outcome if it has one: its reply, or
        ``timeout`` past its deadline, or ``crashed`` when it died (it is then replaced);
        None while it still works."""
        job = w.job
        assert job is not None  # busy
        seq = job[0]
        if replied:
            w.job = None
            try:
                kind, first, second = case_io.read_reply(w.conn, seq)
            except (EOFError, OSError):
                death = self._replace(w)
                return seq, Outcome("crashed", f"the worker process died: {death}")
            except case_io.MalformedReply as err:
                self._replace(w)
                return seq, Outcome("crashed",
                                    escaped(f"the worker sent a malformed reply: {err}",
                                            case_io.MESSAGE_CHARS))
            return seq, Outcome(kind, first, second)
        if time.monotonic() >= job[1]:
            w.job = None
            self._replace(w)
            return seq, Outcome("timeout", f"no result within {self.timeout:g} s")
        if not w.running():
            w.job = None
            death = self._replace(w)
            return seq, Outcome("crashed", f"the worker process died: {death}")
        return None
