"""``verify(fn, op=..., convention=...)`` and ``assert_conformant(...)``: the sweep from Python.

``fn`` is a callable, a ``"module:function"`` string, a framework name (``"tensorflow"``,
``"jax"``, ``"onnxruntime"``, ``"onnx.reference"``: :mod:`engine.verify.frameworks`), or None
with ``cmd="COMMAND ARGS"`` or ``cmd_serve=`` (:mod:`engine.verify.serve`). A
callable a worker process can import (a module-level function of an importable module) runs in
worker processes (``jobs`` of them; a crash or a hang is a verdict); any other callable (defined
in a notebook cell, a lambda, a closure) runs in this process, where a crash ends the process
and neither ``case_timeout`` nor ``memory`` holds it (a warning says so, once per sweep); its
``SystemExit`` and ``KeyboardInterrupt`` are ``raised`` verdicts, never an exit.
"""

from __future__ import annotations

import inspect
import math
import os
import shlex
import shutil
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

from engine.base.arguments import (
    bad,
    optional_callable,
    optional_event,
    optional_string,
    whole_number,
)
from engine.base.dtypes import to_dtype
from engine.base.errors import InvalidArgumentError
from engine.base.names import escaped, shown
from engine.verify.conventions import usage
from engine.verify.defaults import DEFAULT_CASES, DEFAULT_TIMEOUT, MAX_CASES, MAX_JOBS
from engine.verify.frameworks.registry import FRAMEWORKS, resolve
from engine.verify.report import VerifyReport
from engine.verify.sandbox import default_memory_mb
from engine.verify.serve import serve_spec
from engine.verify.support import parse_support
from engine.verify.sweep import sweep

__all__ = ["DEFAULT_CASES", "VerifyReport", "assert_conformant", "verify"]

#: Smallest ``memory`` (MB) accepted: below it the interpreter and NumPy cannot start.
MIN_MEMORY_MB = 64
#: The warning of a sweep that runs its callable in this process.
INPROCESS_WARNING = ("verify: {name} cannot be imported by a worker process, so it runs in this "
                     "process: a crash ends it, and no case timeout or memory limit holds it")


def _importable(fn: Callable) -> tuple[str, str] | None:
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return (module, qualname) if obj is fn else None


def command(cmd: Any) -> list[str]:
    """The argv of ``--cmd``, its command resolved (a name without a slash on ``PATH``);
    :class:`InvalidArgumentError` naming ``cmd`` when it cannot run."""
    try:
        argv = shlex.split(cmd) if isinstance(cmd, str) else []
    except ValueError as err:  # shlex: "No closing quotation", "No escaped character"
        raise InvalidArgumentError(f"--cmd {shown(cmd)}: {str(err).lower()}", "cmd") from None
    if not argv:
        raise InvalidArgumentError(f"--cmd {shown(cmd)}: expected a command and its "
                                   "arguments", "cmd")
    name = argv[0]
    if os.sep not in name and (os.altsep is None or os.altsep not in name):
        found = shutil.which(name)
        if found is None:
            raise InvalidArgumentError(f"--cmd: {shown(name)}: no such command on PATH", "cmd")
        return [found, *argv[1:]]
    if os.path.isdir(name):
        raise InvalidArgumentError(f"--cmd: {shown(name)} is a folder, not a program", "cmd")
    if not os.path.isfile(name):
        raise InvalidArgumentError(f"--cmd: {shown(name)}: no such file", "cmd")
    if not os.access(name, os.X_OK):
        raise InvalidArgumentError(f"--cmd: {shown(name)} is not executable", "cmd")
    return argv


def import_folder(path: Any) -> str:
    """The absolute folder of ``--path`` (default the current folder); raises
    :class:`InvalidArgumentError` naming ``path`` when it is no folder."""
    if path is None:
        return os.getcwd()
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise InvalidArgumentError(f"--path {shown(path)}: expected a folder", "path")
    folder = os.path.abspath(os.fspath(path))
    if not os.path.isdir(folder):
        what = "is a file, not a folder" if os.path.exists(folder) else "no such folder"
        raise InvalidArgumentError(f"--path {shown(os.fspath(path))}: {what}", "path")
    return folder


def module_file(module: str, folder: str) -> str | None:
    """The source file ``module`` is imported from in ``folder`` (``M.py`` or
    ``M/__init__.py``), found without importing it; None when it is not there."""
    base = os.path.join(folder, *module.split("."))
    return next((f for f in (base + ".py", os.path.join(base, "__init__.py"))
                 if os.path.isfile(f)), None)


def _own_files(target: str | None, cmd: str | None, folder: str) -> list[str]:
    """The implementation's files: TARGET's module file, or the files ``--cmd`` names."""
    if target:
        own = module_file(target.partition(":")[0], folder)
        return [own] if own else []
    try:
        words = shlex.split(cmd) if isinstance(cmd, str) else []
    except ValueError:
        return []
    return [w for w in words if os.path.isfile(w)]


def output_path(value: Any, option: str, target: str | None, path: Any, folder: bool,
                cmd: str | None = None) -> str:
    """``value`` of ``--json`` (a file) or ``--repro`` (``folder``) checked before a sweep: not
    empty, its parent folder there, never the implementation's own file (TARGET's module, a
    file ``cmd`` names) or an existing ``.py`` file in the ``--path`` folder, a folder for
    ``--repro``; raises :class:`InvalidArgumentError` naming ``option``."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{option} {shown(value)}: expected a "
                                   f"{'folder' if folder else 'file'} name", option)
    where = os.path.abspath(value)
    if not os.path.isdir(os.path.dirname(where)):
        raise InvalidArgumentError(f"{option} {escaped(value, 200)}: the folder "
                                   f"{escaped(os.path.dirname(where), 200)} does not exist",
                                   option)
    if folder:
        if os.path.exists(where) and not os.path.isdir(where):
            raise InvalidArgumentError(f"{option} {escaped(value, 200)} is a file, not a "
                                       "folder", option)
        return where
    if os.path.isdir(where):
        raise InvalidArgumentError(f"{option} {escaped(value, 200)} is a folder, not a file",
                                   option)
    imports = import_folder(path)
    real = os.path.realpath(where)
    if any(real == os.path.realpath(f) for f in _own_files(target, cmd, imports)) or (
            real.endswith(".py") and os.path.isfile(real)
            and os.path.dirname(real) == os.path.realpath(imports)):
        raise InvalidArgumentError(f"{option} {escaped(value, 200)}: refusing to overwrite a "
                                   "Python file of the implementation", option)
    return where


def target_spec(fn: Any, cmd: str | None, path: str | None,
                timeout: float) -> tuple[tuple, str]:
    """The runner's target (:mod:`engine.verify.runner`) and its text for the report."""
    if cmd is not None:
        if fn is not None:
            raise InvalidArgumentError("give a TARGET or --cmd, not both", "cmd")
        return ("cmd", command(cmd), timeout), cmd
    sys_path = [import_folder(path), *sys.path]
    if isinstance(fn, str):
        module, sep, function = fn.partition(":")
        if not sep or not module or not function or not all(
                p.isidentifier() for p in [*module.split("."), *function.split(".")]):
            raise InvalidArgumentError(f"target {shown(fn)}: expected MODULE:FUNCTION, e.g. "
                                       "myconv:conv2d_backprop_input", "target")
        return ("python", module, function, sys_path), fn
    if not callable(fn):
        raise InvalidArgumentError(f"fn must be a callable or 'MODULE:FUNCTION', got "
                                   f"{type(fn).__name__}", "fn")
    named = _importable(fn)
    if named is None:
        return ("inprocess", fn), getattr(fn, "__qualname__", "fn")
    return ("python", *named, sys_path), f"{named[0]}:{named[1]}"


def dtype_list(dtype: str | list[str] | tuple[str, ...]) -> list[str]:
    """The dtype names of ``dtype``: one name, a comma list or a list (tuple) of names."""
    if isinstance(dtype, str):
        names = dtype.split(",")
    elif isinstance(dtype, (list, tuple)):
        names = list(dtype)
    else:
        raise bad("dtype", "a dtype name such as 'float32', a comma list of them or a list of "
                  "them", dtype)
    for n in names:
        to_dtype(n)
    if not names:
        raise InvalidArgumentError("dtype: give at least one dtype", "dtype")
    return list(dict.fromkeys(names))


def verify(fn: Any = None, op: str = "", convention: str = "tf", *,
           dtype: str | list[str] = "float32", cases: int = DEFAULT_CASES, seed: int = 0,
           jobs: int = 1, case_timeout: float = DEFAULT_TIMEOUT, support: str | None = None,
           path: str | None = None, cmd: str | None = None, cmd_serve: str | None = None,
           memory: int | None = None,
           progress: Callable[[int, int], None] | None = None,
           cancel: threading.Event | None = None,
           max_failures: int | None = None) -> VerifyReport:
    """Sweep ``fn`` as ``op`` under ``convention`` (see :mod:`engine.verify`); returns the
    :class:`VerifyReport`. ``memory``: each worker process's address-space limit in MB (default
    half of the physical memory). Bad options raise :class:`InvalidArgumentError` naming them
    before any case runs; once
    ``cancel`` is set the sweep stops at once (a running case's worker is killed; a callable
    run in this process finishes its running case), stops its worker processes and raises
    :class:`engine.base.cancel.Cancelled`."""
    usage(convention, op)
    dtypes = dtype_list(dtype)
    whole_number("cases", cases, 1, MAX_CASES)
    whole_number("seed", seed, 0, 2**63 - 1)
    whole_number("jobs", jobs, 1, MAX_JOBS)
    if max_failures is not None:
        whole_number("max_failures", max_failures, 1, MAX_CASES)
    optional_string("support", support, "a SPEC string (e.g. 'strides<=2 padding=SAME,VALID')")
    optional_callable("progress", progress, "a callable progress(done, total)")
    optional_event("cancel", cancel)
    if isinstance(fn, str) and fn in FRAMEWORKS:  # a framework: its adapter for op
        fn, support = resolve(fn, op, convention, support)
    if isinstance(case_timeout, bool) or not isinstance(case_timeout, (int, float)) or not (
            math.isfinite(case_timeout) and case_timeout > 0):
        raise bad("case_timeout", "a positive number of seconds", case_timeout)
    memory_mb = default_memory_mb() if memory is None else whole_number(
        "memory", memory, MIN_MEMORY_MB, 2**40)
    spec = parse_support(support)
    dtypes_run = spec.dtypes(dtypes)
    if not dtypes_run:
        raise InvalidArgumentError(f"--support allows none of the dtypes {', '.join(dtypes)}",
                                   "support")
    if cmd_serve is not None:  # one long-lived process per worker: engine.verify.serve
        if fn is not None or cmd is not None:
            raise InvalidArgumentError("give one of a TARGET, --cmd or --cmd-serve", "cmd_serve")
        target, text = serve_spec(cmd_serve, float(case_timeout))
    else:
        target, text = target_spec(fn, cmd, path, float(case_timeout))
    if target[0] == "inprocess":
        warnings.warn(INPROCESS_WARNING.format(name=text), RuntimeWarning, stacklevel=2)
    if convention == "torch":
        spec.words.pop("layouts", None)  # torch arrays are always NCHW
    return sweep(target, op, convention, dtypes_run, cases, seed, jobs, float(case_timeout),
                 spec, progress, text, cancel, max_failures, memory_mb)


def assert_conformant(fn: Any = None, op: str = "", convention: str = "tf",
                      **options: Any) -> VerifyReport:
    """:func:`verify`, raising ``AssertionError`` (the diagnosis and the minimal case) when a
    case fails; returns the report when every case passes."""
    known = list(inspect.signature(verify).parameters)[3:]
    for name in options:
        if name not in known:
            raise InvalidArgumentError(f"{shown(name)}: assert_conformant has no such option (its "
                                       f"options: {', '.join(known)})", name)
    report = verify(fn, op, convention, **options)
    if not report.ok:
        m = report.minimal_failures[0]
        f = m.failure
        raise AssertionError(
            f"{report.target} is not conformant to {convention} {op}: {report.failed} of "
            f"{report.cases} case(s) failed; minimal {f.verdict.verdict} ({m.size} elements): "
            f"{f.verdict.message}\ndiagnosis: {m.diagnosis.id or '(no known mistake)'}: "
            f"{m.diagnosis.text}\nminimal case: {f.to_json()['case']}\n"
            f"reproduce: {report.reproduce(m)}")
    return report
