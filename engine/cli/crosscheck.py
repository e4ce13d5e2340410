"""``gradblocks crosscheck CANVAS [--with tensorflow,pytorch,jax] [--python [FW=]PATH] [--json]``.

Runs the canvas, then each framework's exported script (:mod:`engine.export.crosscheck`), and prints
one row per output and framework: max abs and relative error, the tolerance, agree, and a
known framework defect where one shows. Frameworks whose module the chosen Python cannot
import are listed as skipped. ``--python PATH`` runs the scripts with another interpreter (a
venv with the frameworks), ``--python tensorflow=PATH`` for one framework (repeatable); GRADBLOCKS_TF_PYTHON, GRADBLOCKS_TORCH_PYTHON and
GRADBLOCKS_JAX_PYTHON set the default per framework.

With ``--json``, exactly one object on stdout::

    {"frameworks": {NAME: "ran" | "skipped: REASON" | "failed: REASON"},
     "rows": [{"output": "NODE.PORT", "framework": NAME, "max_abs_error": X,
               "max_rel_error": Y, "agree": BOOL, "known_defect": null | TEXT,
               "error": null | TEXT}]}

(NaN and infinities as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``). Exit status:
0 every row agrees; 1 a row disagrees (a known defect included) or a framework failed, or a
block failed in GradBlocks; 2 usage (an unknown framework, an invalid canvas).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
from fractions import Fraction
from pathlib import Path

from engine.cli.common import (
    Subparsers,
    compile_file,
    memory_limit_argument,
    print_error,
    say,
    shown_path,
)
from engine.export.crosscheck import (
    FRAMEWORKS,
    Report,
    crosscheck,
    env_pythons,
    status_lines,
    table_lines,
)
from engine.graph.compiler import DEFAULT_MEMORY_LIMIT, place
from engine.graph.executor import Executor

#: The subcommand this module adds, and what it is doing (for the line that says memory ran
#: out).
COMMANDS = {"crosscheck": "cross-checking"}


def _frameworks(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FRAMEWORKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown framework {', '.join(map(repr, unknown)) or '(none given)'} (choose from "
            f"{', '.join(FRAMEWORKS)}, comma-separated)")
    return list(dict.fromkeys(names))


def _python(text: str) -> tuple[str | None, str]:
    name, sep, path = text.partition("=")
    framework, path = (name, path) if sep and name in FRAMEWORKS else (None, text)
    if not (os.path.isfile(path) or shutil.which(path)):
        raise argparse.ArgumentTypeError(f"no Python interpreter at {path!r}")
    return framework, path


def add_parser(sub: Subparsers) -> None:
    """Add the ``crosscheck`` subcommand to ``gradblocks``' subparsers."""
    p = sub.add_parser("crosscheck", help="compare every output with TensorFlow, PyTorch and "
                                          "JAX running the exported scripts")
    p.add_argument("canvas", help="a .gbc.json canvas file")
    p.add_argument("--with", dest="frameworks", type=_frameworks, default=list(FRAMEWORKS),
                   metavar="FW[,FW...]",
                   help=f"frameworks to compare with (default {','.join(FRAMEWORKS)})")
    p.add_argument("--python", dest="pythons", type=_python, action="append", default=[],
                   metavar="[FW=]PATH",
                   help="the Python that runs the scripts (default: this one); FW=PATH for "
                        "one framework; repeatable")
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    p.add_argument("--memory-limit-gib", dest="memory_limit", type=memory_limit_argument,
                   metavar="GIB",
                   default=str(Fraction(DEFAULT_MEMORY_LIMIT, 2**30)),
                   help="GradBlocks's own run's memory limit (default 2)")


def run(opts: argparse.Namespace, executor: Executor) -> int:
    return cmd_crosscheck(opts, executor)


def _number(v: float | None) -> float | str | None:
    if v is None or math.isfinite(v):
        return v
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


def as_json(report: Report) -> str:
    rows = []
    for row in report.rows:
        data = row.as_json()
        data["max_abs_error"] = _number(data["max_abs_error"])
        data["max_rel_error"] = _number(data["max_rel_error"])
        rows.append(data)
    return json.dumps({"frameworks": report.frameworks, "rows": rows}, ensure_ascii=True)


def as_text(report: Report) -> str:
    """The table, one row per output and framework, then each framework's status."""
    return "\n".join(table_lines(report) + status_lines(report))


def cmd_crosscheck(opts: argparse.Namespace, executor: Executor) -> int:
    compiled = compile_file(opts.canvas, executor)
    if compiled is None:
        return 2
    canvas, plan = compiled
    result = executor.run(plan)
    titles = {node_id: node.title for node_id, node in canvas.nodes.items()}
    given = dict(opts.pythons)  # a plain --python PATH overrides the environment's too
    pythons = {**({} if None in given else env_pythons()), **given}
    report = crosscheck(plan, result.outputs, opts.frameworks, pythons,
                        Path(opts.canvas).name, titles)
    if opts.json:
        say(as_json(report))
    else:
        say(as_text(report))
    if result.errors:
        print_error(f"{shown_path(opts.canvas)}: {len(result.errors)} block(s) failed:",
                    [f"{place(plan.label(n))}: {m}" for n, m in result.errors.items()])
        return 1
    return 0 if report.ok else 1
