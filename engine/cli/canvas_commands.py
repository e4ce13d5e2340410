"""``gradblocks check|run|export CANVAS``: the subcommands that take a canvas and nothing else.

``check`` prints every output's shape and dtype, ``run`` a table of results (``--out`` writes
them to a .npz file, under :mod:`engine.graph.result_names`' keys), ``export`` a standalone
script (``--to`` a framework: :mod:`engine.export.frameworks`). Both print the plan's warnings
(a GradCheck estimated to run over a minute) on stderr, ``run`` before it starts; on a terminal,
``run`` draws a long block's progress on one stderr line (:mod:`engine.cli.progress`).
"""

from __future__ import annotations

import argparse
import os
import sys
from fractions import Fraction
from pathlib import Path
from typing import TextIO

from engine.base.atomic import Member
from engine.base.names import escaped
from engine.cli.common import (
    Subparsers,
    check_target,
    compile_file,
    memory_limit_argument,
    print_error,
    say,
    shown_path,
    write_target,
)
from engine.cli.progress import StepProgress
from engine.export.to_numpy import export_script
from engine.graph.canvas import Canvas
from engine.graph.compiler import DEFAULT_MEMORY_LIMIT, Plan, place
from engine.graph.executor import Executor
from engine.graph.report import check_rows, run_rows, text_table
from engine.graph.result_names import result_keys
from engine.graph.targets import canvas_protected
from engine.io.npz import write_npz

#: ``export --to`` choices (numpy: :mod:`engine.export.to_numpy`; the rest:
#: :mod:`engine.export.frameworks`).
EXPORT_TARGETS = ("numpy", "tensorflow", "pytorch", "jax")
#: The subcommands this module adds, and what each is doing (for the line that says memory ran
#: out).
COMMANDS = {"check": "checking", "run": "running", "export": "exporting"}


def add_parser(sub: Subparsers) -> None:
    """Add ``check``, ``run`` and ``export`` to ``gradblocks``' subparsers."""
    for name, help_text in (("check", "validate and print every output's shape and dtype"),
                            ("run", "run the canvas and print a table of results"),
                            ("export", "write the canvas as a standalone Python script")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("canvas", help="a .gbc.json canvas file")
        p.add_argument("--memory-limit-gib", dest="memory_limit", type=memory_limit_argument,
                       metavar="GIB",
                       default=str(Fraction(DEFAULT_MEMORY_LIMIT, 2**30)),
                       help="refuse a run that would need more memory than this: every output "
                            "is kept, plus the running block's workspace (default 2)")
        if name == "run":
            p.add_argument("--out", help="write the results to this .npz file (exactly this "
                                         "path, replaced atomically): each Output block's "
                                         "value under its name; without Output blocks, every "
                                         "output under <title>.<port> (<title> for a block "
                                         "with one output)")
        if name == "export":
            p.add_argument("-o", "--output", required=True,
                           help="the script to write (replaced atomically)")
            p.add_argument("--to", default="numpy", choices=EXPORT_TARGETS,
                           help="numpy (default: engine.kernels), or a script using "
                                "TensorFlow's, PyTorch's or JAX's own ops, with the source "
                                "values in SCRIPT.sources.<hash>.npz next to it (named by "
                                "its content; the script is written last)")


def run(opts: argparse.Namespace, executor: Executor) -> int:
    """Run the parsed ``check``, ``run`` or ``export``."""
    if opts.command == "check":
        return cmd_check(opts.canvas, executor)
    if opts.command == "run":
        return cmd_run(opts.canvas, executor, opts.out)
    return cmd_export(opts.canvas, executor, opts.output, opts.to)


def cmd_check(path: str, executor: Executor) -> int:
    compiled = compile_file(path, executor)
    if compiled is None:
        return 2
    plan = compiled[1]
    say(text_table(check_rows(plan)))
    say(f"{escaped(path)}: ok, {len(plan.steps)} block(s)")
    _warn(path, plan)
    return 0


def _warn(path: str, plan: Plan) -> None:
    """The plan's warnings (a GradCheck's cost, :data:`blocks.gradcheck.RUN_TIME_WARNINGS`),
    one line each after a head line, as ``check`` and ``run`` print them."""
    warnings = [w for ws in plan.warnings.values() for w in ws]
    if warnings:
        print_error(f"{shown_path(path)}: {len(warnings)} warning(s):", [str(w) for w in warnings])


def _isatty(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (False when it was replaced or is closed)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):  # replaced, or closed
        return False


def cmd_run(path: str, executor: Executor, out: str | None) -> int:
    if out is not None and not check_target(out, path):
        return 2
    compiled = compile_file(path, executor)
    if compiled is None:
        return 2
    canvas, plan = compiled
    if out is not None and not check_target(out, path, canvas):
        return 2
    _warn(path, plan)  # before the run: a long one says so first
    types = {step.node_id: step.spec.type_id for step in plan.steps}
    with StepProgress(sys.stderr, lambda n: f"{plan.label(n)} ({types[n]})") as report:
        on_terminal = _isatty(sys.stderr)
        result = executor.run(plan, step_progress=report if on_terminal else None)
    say(text_table(run_rows(plan, result)))
    status = 0
    if out is not None:
        keys = result_keys(plan.steps, plan.labels)
        arrays = {key: result.outputs[ref] for ref, key in keys.items()
                  if ref in result.outputs}
        if write_target(out, lambda f: write_npz(f, arrays)):
            say(f"wrote {len(arrays)} output(s) to {escaped(out)}")
        else:
            status = 1
    if result.errors:
        print_error(f"{shown_path(path)}: {len(result.errors)} block(s) failed:",
                    [f"{place(plan.label(n))}: {m}" for n, m in result.errors.items()])
        status = 1
    return status


def cmd_export(path: str, executor: Executor, output: str, to: str = "numpy") -> int:
    if not check_target(output, path):
        return 2
    compiled = compile_file(path, executor)
    if compiled is None:
        return 2
    canvas, plan = compiled
    if not check_target(output, path, canvas):
        return 2
    titles = {node_id: node.title for node_id, node in canvas.nodes.items()}
    if to != "numpy":
        return _export_framework(path, canvas, plan, titles, output, to)
    script = export_script(plan, Path(path).name, titles).encode("utf-8")
    if not write_target(output, lambda f: f.write(script)):
        return 1
    say(f"wrote {escaped(output)}: {len(plan.steps)} block(s)")
    return 0


def _export_framework(path: str, canvas: Canvas, plan: Plan, titles: dict, output: str,
                      to: str) -> int:
    """``export --to tensorflow|pytorch|jax``: the script and its companion source values,
    written as one set beside the real script (:func:`engine.base.atomic.write_file_set`): the
    companion's name carries a hash of the values and is written into the script."""
    from engine.base.atomic import resolve_target
    from engine.export.frameworks import ExportRefused, export_framework_script, owned_companions

    try:
        real = resolve_target(output)
        exported = export_framework_script(plan, to, Path(path).name, titles, real.name)
    except ExportRefused as err:
        print_error(f"{shown_path(path)}: cannot export to {to}: {err}")
        return 2
    except OSError as err:
        print_error(f"{shown_path(repr(output))} cannot be written: {err.strerror or err}")
        return 2
    companion = os.path.abspath(real.parent / exported.companion)
    if not check_target(companion, path, canvas):
        return 2
    script = exported.script.encode("utf-8")
    member = Member(exported.companion, lambda f: write_npz(f, exported.sources))
    if not write_target(output, lambda f: f.write(script), [member], owned_companions,
                        keep=list(canvas_protected(path, canvas))):
        return 1
    say(f"wrote {escaped(output)} and {escaped(companion)}: {len(plan.steps)} block(s), {to}")
    return 0
