"""``gradblocks verify TARGET --op OP --convention {tf,torch} [--cmd "COMMAND ARGS"]
[--dtype float32,...] [--cases N] [--seed S] [--jobs N] [--case-timeout S] [--json FILE]
[--repro DIR] [--path DIR] [--support SPEC] [--memory MB] [--max-failures N | --fail-fast]``:
sweep an implementation against the exact reference (:mod:`engine.verify`). With ``--cmd`` and
``--json`` or ``--repro``, each failure group's IN.npz is written into the ``--repro`` folder
(else the JSON file's) and its reproduction names it.

Exit status: 0 every case passed (unsupported ones aside); 1 a case failed, or a file could not
be written; 2 a usage error (one line, before any case runs: a bad option, a target that cannot
be loaded). TARGET is always imported by worker processes, never run in this process.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import TYPE_CHECKING

from engine.base.atomic import write_atomically
from engine.base.errors import InvalidArgumentError
from engine.base.names import article
from engine.cli.common import Subparsers, print_error, say, shown_path
from engine.verify.defaults import CONVENTIONS, DEFAULT_CASES, DEFAULT_TIMEOUT, OPS

if TYPE_CHECKING:  # the verifier runs no canvas: the executor run() is given goes unused
    from engine.graph.executor import Executor
    from engine.verify.report import VerifyReport

#: The subcommand this module adds, and what it is doing (for the line that says memory ran
#: out).
COMMANDS = {"verify": "verifying"}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def add_parser(sub: Subparsers) -> None:
    """Add the ``verify`` subcommand to ``gradblocks``' subparsers."""
    ops = sorted({op for group in OPS.values() for op in group})
    p = sub.add_parser(
        "verify", help="check a conv or conv-gradient implementation against the exact "
                       "reference, shrink each failure and say what is wrong")
    p.add_argument("target", nargs="?", metavar="TARGET",
                   help="MODULE:FUNCTION (imported with --path, default the current folder, "
                        "first on sys.path), or a framework: tensorflow, jax, onnxruntime, "
                        "onnx.reference (tf convention); leave out with --cmd")
    p.add_argument("--op", required=True, choices=ops, metavar="OP",
                   help=f"the op: tf {', '.join(OPS['tf'])}; torch {', '.join(OPS['torch'])}")
    p.add_argument("--convention", choices=CONVENTIONS, help="required unless TARGET is a "
                                                             "framework (tf)")
    p.add_argument("--cmd", metavar='"COMMAND ARGS"',
                   help="run COMMAND ARGS IN.npz OUT.npz per case instead of a Python function "
                        "(gradblocks guide verify: the protocol)")
    p.add_argument("--cmd-serve", metavar='"COMMAND ARGS"',
                   help="one long-lived COMMAND ARGS per worker answering a case per stdin line "
                        "(gradblocks guide verify: the protocol)")
    p.add_argument("--dtype", default="float32",
                   help="comma-separated dtypes: float16, bfloat16, float32, float64 "
                        "(default float32)")
    p.add_argument("--cases", type=_positive_int, default=DEFAULT_CASES, metavar="N",
                   help=f"cases tried, the edge-class catalogue included (default "
                        f"{DEFAULT_CASES})")
    p.add_argument("--seed", type=_seed, default=0, metavar="S")
    p.add_argument("--jobs", type=_positive_int, default=1, metavar="N",
                   help="worker processes (default 1)")
    p.add_argument("--case-timeout", type=_seconds, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"seconds one case may take (default {DEFAULT_TIMEOUT:g})")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--max-failures", type=_positive_int, metavar="N",
                      help="stop the search after N failing cases (default: search on)")
    stop.add_argument("--fail-fast", action="store_const", const=1, dest="max_failures",
                      help="--max-failures 1")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON (atomically)")
    p.add_argument("--repro", metavar="DIR",
                   help="write a canvas and a pytest file for each minimal failure")
    p.add_argument("--path", metavar="DIR", help="the folder TARGET's module is imported from")
    p.add_argument("--memory", type=_positive_int, metavar="MB",
                   help="address-space limit of each worker process, in MB (default: half of "
                        "the physical memory)")
    p.add_argument("--support", metavar="SPEC",
                   help='what the implementation supports, e.g. "strides<=2 dilations=1 '
                        'groups=1 layouts=NHWC dtypes=float32 padding=SAME,VALID"')


def run(opts: argparse.Namespace, _executor: Executor) -> int:
    return cmd_verify(opts)


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty() and (done % 50 == 0 or done == total):
        sys.stderr.write(f"\r{done}/{total} cases")
        sys.stderr.flush()
        if done == total:
            sys.stderr.write("\n")


def _usage_problem(opts: argparse.Namespace) -> str | None:
    """What is wrong with the target, convention and op given, or None (a framework target
    without --convention takes tf's)."""
    if [opts.target, opts.cmd, opts.cmd_serve].count(None) != 2:
        return ("verify: give one of a TARGET (MODULE:FUNCTION), --cmd \"COMMAND ARGS\" or "
                "--cmd-serve \"COMMAND ARGS\"")
    if opts.convention is None:
        from engine.verify.frameworks.registry import FRAMEWORKS

        if opts.target not in FRAMEWORKS:
            return "verify: --convention is required (tf or torch) unless TARGET is a framework"
        opts.convention = "tf"
    if opts.convention == "torch" and opts.op not in OPS["torch"] or \
            opts.convention == "tf" and opts.op not in OPS["tf"]:
        return (f"verify: --op {opts.op} is not {article(opts.convention)} op (one of "
                f"{', '.join(OPS[opts.convention])})")
    return None


def _sweep(opts: argparse.Namespace) -> VerifyReport:
    """The sweep the options ask for, once its output paths are checked (InvalidArgumentError
    for a bad option or target)."""
    # the reference kernels: loaded for a sweep only
    from engine.verify.api import output_path, verify

    for option, value, folder in (("--json", opts.json, False), ("--repro", opts.repro, True)):
        if value is not None:
            output_path(value, option, opts.target, opts.path, folder, opts.cmd)
    return verify(opts.target, opts.op, opts.convention, dtype=opts.dtype, cases=opts.cases,
                  seed=opts.seed, jobs=opts.jobs, case_timeout=opts.case_timeout,
                  support=opts.support, path=opts.path, cmd=opts.cmd, cmd_serve=opts.cmd_serve,
                  memory=opts.memory, progress=_progress, max_failures=opts.max_failures)


def _write_inputs(opts: argparse.Namespace, report: VerifyReport) -> bool:
    """A failed --cmd or --cmd-serve sweep's inputs beside its --json or in its --repro folder
    (named by each group's reproduction); False, said, when they cannot be written."""
    if report.spec_kind == "cmd" and not report.ok and opts.repro:
        report.inputs_folder = os.path.abspath(opts.repro)  # write_repro writes each IN.npz
    elif report.spec_kind in ("cmd", "serve") and not report.ok and (opts.json or opts.repro):
        folder = os.path.abspath(opts.repro) if opts.repro else \
            os.path.dirname(os.path.abspath(opts.json))
        try:  # each group's inputs, named by its reproduction
            os.makedirs(folder, exist_ok=True)
            report.write_inputs(folder)
        except (OSError, ValueError) as err:
            _cannot_write(folder, "the inputs", err)
            return False
    return True


def _cannot_write(place: str, what: str, err: OSError | ValueError) -> None:
    """Say that ``what`` could not be written at ``place``, with the OS's reason."""
    print_error(f"{shown_path(place)}: cannot write {what}: "
                f"{getattr(err, 'strerror', None) or err}")


def _write_json(path: str, report: VerifyReport) -> bool:
    """The report as JSON at ``path``, atomically; False, said, when it cannot be written."""
    text = report.json_text().encode("utf-8")
    try:
        write_atomically(path, lambda f: f.write(text))
    except (OSError, ValueError) as err:
        _cannot_write(path, "the report", err)
        return False
    return True


def _write_repro(folder: str, report: VerifyReport) -> bool:
    """The reproduction folder of the minimal failures, its files listed; False, said, when it
    cannot be written."""
    from engine.verify.repro import write_repro

    try:
        files = write_repro(report, folder)
    except (OSError, ValueError) as err:
        _cannot_write(folder, "the reproduction", err)
        return False
    say("reproduction: " + ", ".join(files))
    return True


def cmd_verify(opts: argparse.Namespace) -> int:
    """The ``verify`` subcommand; returns the exit status."""
    problem = _usage_problem(opts)
    if problem:
        print_error(problem)
        return 2
    try:
        report = _sweep(opts)
    except InvalidArgumentError as err:
        print_error(f"verify: {err}")
        return 2
    status = 0 if report.ok else 1
    if not _write_inputs(opts, report):
        status = 1
    say(str(report))
    if opts.json and not _write_json(opts.json, report):
        status = 1
    if opts.repro and report.minimal_failures and not _write_repro(opts.repro, report):
        return 1
    return status
