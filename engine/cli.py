"""The ``gradblocks`` command: ``check``, ``run`` and ``export`` a canvas headless, or open the app.

Exit status: 0 success, 1 a block failed at run time, 2 an invalid canvas or usage. Errors go to
stderr as one message naming the file, node and attribute; a user's mistake never shows a
traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

from engine.canvas import CanvasError, load_canvas
from engine.compiler import DEFAULT_MEMORY_LIMIT, Plan
from engine.dtypes import DTYPES, dtype_name
from engine.executor import Executor
from engine.export import export_script
from engine.memory import gib_to_bytes
from engine.tensor_stats import format_value, tensor_stats

SUBCOMMANDS = ("check", "run", "export")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="gradblocks",
        description="Check, run or export a GradBlocks canvas (.gbc.json). Without a "
                    "subcommand, opens the desktop app (optionally on CANVAS).")
    sub = ap.add_subparsers(dest="command", required=True)
    for name, help_text in (("check", "validate and print every output's shape and dtype"),
                            ("run", "run the canvas and print a table of results"),
                            ("export", "write the canvas as a standalone Python script")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("canvas", help="a .gbc.json canvas file")
        p.add_argument("--memory-limit-gib", dest="memory_limit", type=_limit, metavar="GIB",
                       default=str(Fraction(DEFAULT_MEMORY_LIMIT, 2**30)),
                       help="refuse a run that would need more memory than this: every output "
                            "is kept, plus the running block's workspace (default 2)")
        if name == "run":
            p.add_argument("--out", help="write every output to this .npz as <node_id>.<port>")
        if name == "export":
            p.add_argument("-o", "--output", required=True, help="the script to write")
    return ap


def _limit(text: str) -> int:
    """``--memory-limit-gib`` as bytes: a positive number (not NaN or infinite)."""
    try:
        return gib_to_bytes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _err(message: str) -> None:
    print(f"gradblocks: {message}", file=sys.stderr)


def _compile(path: str, executor: Executor) -> Plan | None:
    """Load and compile; print every problem and return None if there is any."""
    try:
        canvas = load_canvas(path)
    except CanvasError as err:
        _err(str(err))
        return None
    plan = executor.compile(canvas, Path(path).resolve().parent)
    if plan.errors:
        errors = [e for errs in plan.errors.values() for e in errs]
        _err(f"{path}: {len(errors)} problem(s):\n  " + "\n  ".join(str(e) for e in errors))
        return None
    return plan


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def _stats(a: np.ndarray) -> tuple[str, str, str]:
    """min, max, mean over the finite values (as the app's viewer shows them), as text."""
    s = tensor_stats(a)
    return format_value(s.min), format_value(s.max), format_value(s.mean)


def cmd_check(path: str, executor: Executor) -> int:
    plan = _compile(path, executor)
    if plan is None:
        return 2
    rows = [["node", "type", "port", "shape", "dtype"]]
    for step in plan.steps:
        for port in step.spec.output_names():
            ts = plan.specs[(step.node_id, port)]
            rows.append([step.node_id, step.spec.type_id, port, str(list(ts.shape)), ts.dtype])
    print(_table(rows))
    print(f"{path}: ok, {len(plan.steps)} block(s)")
    return 0


def _npz_safe(value: np.ndarray) -> np.ndarray:
    """.npz has no bfloat16: such arrays are stored exactly as float32."""
    value = np.asarray(value)
    return value.astype(np.float32) if value.dtype == DTYPES["bfloat16"] else value


def cmd_run(path: str, executor: Executor, out: str | None) -> int:
    plan = _compile(path, executor)
    if plan is None:
        return 2
    result = executor.run(plan)
    rows = [["node", "type", "port", "shape", "dtype", "min", "max", "mean", "ms"]]
    for step in plan.steps:
        for port in step.spec.output_names():
            value = result.outputs.get((step.node_id, port))
            if value is None:
                continue
            ms = f"{1e3 * result.times.get(step.node_id, 0.0):.2f}"
            rows.append([step.node_id, step.spec.type_id, port, str(list(np.shape(value))),
                         dtype_name(np.asarray(value).dtype), *_stats(value), ms])
    print(_table(rows))
    if out:
        try:
            np.savez(out, **{f"{n}.{p}": _npz_safe(v) for (n, p), v in result.outputs.items()})
        except OSError as err:
            _err(f"cannot write {out}: {err}")
            return 2
        print(f"wrote {len(result.outputs)} output(s) to {out}")
    if result.errors:
        _err(f"{path}: {len(result.errors)} block(s) failed:\n  "
             + "\n  ".join(f"{n}: {m}" for n, m in result.errors.items()))
        return 1
    return 0


def cmd_export(path: str, executor: Executor, output: str) -> int:
    plan = _compile(path, executor)
    if plan is None:
        return 2
    try:
        Path(output).write_text(export_script(plan, Path(path).name), encoding="utf-8")
    except OSError as err:
        _err(f"cannot write {output}: {err}")
        return 2
    print(f"wrote {output}: {len(plan.steps)} block(s)")
    return 0


def _no_screen() -> bool:
    """On Linux, neither an X11 nor a Wayland display nor an explicit Qt platform is set."""
    env = os.environ
    return (sys.platform.startswith("linux") and not env.get("QT_QPA_PLATFORM")
            and not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"))


def open_app(argv: list[str]) -> int:
    """Start the desktop app (imported lazily: the engine never imports Qt)."""
    if _no_screen():
        _err("no screen to open the app on (DISPLAY and WAYLAND_DISPLAY are not set). Use "
             "`gradblocks check|run|export CANVAS` headless, or set QT_QPA_PLATFORM=offscreen "
             "with --screenshot.")
        return 2
    try:
        from app.main_window import main as app_main
    except ImportError as err:
        _err(f"the desktop app cannot start: {err}")
        return 2
    return int(app_main(argv) or 0)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help")):
        return open_app(argv)
    try:
        opts = _parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    executor = Executor(memory_limit=opts.memory_limit)
    try:
        if opts.command == "check":
            return cmd_check(opts.canvas, executor)
        if opts.command == "run":
            return cmd_run(opts.canvas, executor, opts.out)
        return cmd_export(opts.canvas, executor, opts.output)
    except KeyboardInterrupt:
        _err("interrupted")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
