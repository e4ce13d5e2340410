"""The work behind Run > Verify an implementation... (:mod:`app.verify_dialog`), off the GUI
thread.

- :class:`FunctionLister`: the top-level callables of a Python file, listed by a separate
  Python process (``QProcess``) that imports the file from its folder, as ``--path DIR`` does:
  the file's code runs there, never in the app, and a crash or a hang on import ends only that
  process (after :data:`engine.verify.runner.START_TIMEOUT` seconds).
- :class:`VerifyThread`: one sweep (:func:`engine.verify.api.verify`) on a ``QThread``; the
  implementation itself runs in the sweep's worker processes. Cancel sets an event the sweep
  checks after each case (:mod:`engine.verify.sweep`), which then stops its workers.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from pathlib import Path

from PySide6 import QtCore

import engine
from engine.base.cancel import Cancelled
from engine.base.errors import InvalidArgumentError
from engine.base.names import escaped
from engine.verify.runner import START_TIMEOUT

#: The line of the lister's output that carries its answer (a module may print too).
MARKER = "GRADBLOCKS-FUNCTIONS "
#: Characters of an error line shown.
LINE_CHARS = 300
#: Progress updates per sweep at most (plus the last one).
PROGRESS_STEPS = 500

_LIST_SCRIPT = r"""
import importlib, inspect, json, os, sys
folder, name, expected = sys.argv[1:4]
sys.path.insert(0, folder)
def answer(d):
    sys.__stdout__.write("\n" + MARKER + json.dumps(d) + "\n")
    sys.__stdout__.flush()
sys.stdout = sys.stderr
try:
    module = importlib.import_module(name)
except BaseException as err:
    answer({"error": f"{type(err).__name__}: {err}"})
    raise SystemExit(0)
where = getattr(module, "__file__", None) or ""
if not where or os.path.realpath(where) != os.path.realpath(expected):
    answer({"error": f"the module name {name!r} is taken by "
                     f"{where or 'a built-in module'}: rename the file"})
    raise SystemExit(0)
names = [k for k, v in vars(module).items()
         if not k.startswith("_") and callable(v) and not inspect.isclass(v)
         and getattr(v, "__module__", name) == name]
answer({"functions": names})
""".replace("MARKER", repr(MARKER))


def one_line(text: str) -> str:
    """``text`` as one printable line of at most :data:`LINE_CHARS` characters."""
    return escaped(" ".join(str(text).split()), LINE_CHARS)


def module_of(path: str) -> tuple[str, str]:
    """``(folder, module name)`` of a Python file; raises :class:`InvalidArgumentError` with
    one line when it cannot be imported by name."""
    p = Path(path).expanduser()
    if not path.strip():
        raise InvalidArgumentError("choose a Python file (.py)", "file")
    if p.suffix != ".py":
        raise InvalidArgumentError(f"{escaped(p.name, 80)}: expected a Python file (.py)",
                                   "file")
    if not p.is_file():
        raise InvalidArgumentError(f"{escaped(str(p), 200)}: no such file", "file")
    if not p.stem.isidentifier():
        raise InvalidArgumentError(
            f"{escaped(p.name, 80)}: the file name is not a Python module name (letters, "
            "digits and _, not starting with a digit): rename it", "file")
    return str(p.resolve().parent), p.stem


def _environment() -> QtCore.QProcessEnvironment:
    """The lister's environment: the app's, with the folder holding ``engine`` on PYTHONPATH
    (as the sweep's workers have it)."""
    env = QtCore.QProcessEnvironment.systemEnvironment()
    root = str(Path(engine.__file__).resolve().parent.parent)
    rest = os.environ.get("PYTHONPATH")
    env.insert("PYTHONPATH", os.pathsep.join([root, rest] if rest else [root]))
    return env


class FunctionLister(QtCore.QObject):
    """Lists a file's top-level callables in a separate process; emits ``listed(names)`` or
    ``failed(line)``."""

    listed = QtCore.Signal(list)
    failed = QtCore.Signal(str)

    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self._process: QtCore.QProcess | None = None
        self._name = ""
        self._timer = QtCore.QTimer(self, singleShot=True, interval=int(START_TIMEOUT * 1000))
        self._timer.timeout.connect(self._timed_out)

    @property
    def running(self) -> bool:
        return self._process is not None

    def start(self, path: str) -> bool:
        """Start listing ``path``; False (and ``failed``) when it is no importable file."""
        self.stop()
        try:
            folder, name = module_of(path)
        except InvalidArgumentError as err:
            self.failed.emit(str(err))
            return False
        self._name = Path(path).name
        proc = QtCore.QProcess(self)
        proc.setProcessEnvironment(_environment())
        proc.finished.connect(self._finished)
        proc.errorOccurred.connect(self._error)
        self._process = proc
        self._timer.start()
        # -P: no current folder first on sys.path (the lister's own imports stay the stdlib's)
        proc.start(sys.executable, ["-P", "-c", _LIST_SCRIPT, folder, name,
                                    str(Path(path).expanduser().resolve())])
        return True

    def stop(self) -> None:
        """End a listing still running (its process is killed and reaped)."""
        proc, self._process = self._process, None
        self._timer.stop()
        if proc is not None:
            proc.blockSignals(True)
            proc.kill()
            proc.waitForFinished(1000)
            proc.deleteLater()

    def _timed_out(self) -> None:
        self.stop()
        self.failed.emit(f"cannot load {escaped(self._name, 80)}: it did not finish importing "
                         f"within {START_TIMEOUT:g} s")

    def _error(self, error: QtCore.QProcess.ProcessError) -> None:
        if error == QtCore.QProcess.FailedToStart:
            self.stop()
            self.failed.emit(f"cannot start Python ({sys.executable}) to load the file")

    def _finished(self, code: int, status: QtCore.QProcess.ExitStatus) -> None:
        proc = self._process
        if proc is None:
            return
        out = bytes(proc.readAllStandardOutput()).decode("utf-8", "replace")
        err = bytes(proc.readAllStandardError()).decode("utf-8", "replace").strip()
        self.stop()
        answers = [line[len(MARKER):] for line in out.splitlines() if line.startswith(MARKER)]
        name = escaped(self._name, 80)
        if not answers:
            how = ("crashed" if status == QtCore.QProcess.CrashExit
                   else f"ended with exit status {code}")
            tail = err.splitlines()[-1] if err else ""
            self.failed.emit(one_line(f"cannot load {name}: its import {how}"
                                      + (f": {tail}" if tail else "")))
            return
        answer = json.loads(answers[-1])
        if "error" in answer:
            self.failed.emit(one_line(f"cannot load {name}: {answer['error']}"))
        else:
            self.listed.emit([str(n) for n in answer["functions"]])


class VerifyThread(QtCore.QThread):
    """One sweep: ``verify(**options)``; ``done`` carries the report, ``failed`` one line,
    ``cancelled`` says it stopped on :meth:`cancel`."""

    progress = QtCore.Signal(int, int)  # cases done, cases asked
    done = QtCore.Signal(object)  # engine.verify.report.VerifyReport
    failed = QtCore.Signal(str)
    cancelled = QtCore.Signal()

    def __init__(self, options: dict):
        super().__init__()
        self.options = options
        self._cancel = threading.Event()
        self._shown = 0

    def cancel(self) -> None:
        """Stop the sweep now (its workers are stopped, a running case's killed)."""
        self._cancel.set()

    @property
    def cancelling(self) -> bool:
        return self._cancel.is_set()

    def _progress(self, done: int, total: int) -> None:
        if done >= total or done - self._shown >= max(1, total // PROGRESS_STEPS):
            self._shown = done
            self.progress.emit(done, total)

    def run(self) -> None:
        from engine.verify.api import verify

        try:
            report = verify(**self.options, progress=self._progress, cancel=self._cancel)
        except Cancelled:
            self.cancelled.emit()
            return
        except InvalidArgumentError as err:
            self.failed.emit(one_line(str(err)))
            return
        except Exception as err:  # noqa: BLE001 - a bug: one line here, the trace on stderr
            traceback.print_exc()
            self.failed.emit(one_line(f"verify stopped: {type(err).__name__}: {err}"))
            return
        self.done.emit(report)
