"""The ``gradblocks`` command: ``check``, ``run``, ``export`` (``--to`` a framework:
:mod:`engine.export_frameworks`), ``explain`` (one output element of a conv block,
:mod:`engine.cli_explain`) or ``crosscheck`` (against the frameworks:
:mod:`engine.cli_crosscheck`) a canvas headless, draw a conv block's ``geometry``
(:mod:`engine.cli_geometry`), ``import`` a model's conv layer as a canvas
(:mod:`engine.cli_import`), or open the app.

Exit status: 0 success; 1 a block failed at run time or an output could not be written; 2 an
invalid canvas or usage (a bad option value, an output path that cannot work such as a folder, a
missing folder, a name too long, or the canvas itself). Errors go to stderr, one line per
problem (at most :data:`MAX_PROBLEMS`, each cut to :data:`MAX_LINE` characters), naming the
file, node and attribute; a user's mistake never shows a traceback, and no text (a path with odd
bytes, say) can make printing fail.

``run --out`` and ``export -o`` write exactly the path given, atomically
(:mod:`engine.atomic`): an interrupted or failed write leaves the previous file as it was.
``--out`` stores results under the keys of :mod:`engine.result_names` (the Output blocks' names,
or every output under its block's title), the same keys an exported script saves.

Tables and messages name blocks by title (:mod:`engine.labels`); the tables' last column is the
node id, for commands and files that take ids. When a canvas has check blocks (a spec with a
``verdict`` port: Compare, GradCheck, AdjointCheck), ``run``'s table has a verdict column: PASS or
FAIL on each such block's verdict row.

SIGTERM unwinds like Ctrl+C (temporary files removed) and exits 143.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import NoReturn, TextIO

from engine import accel
from engine.atomic import write_atomically
from engine.canvas import Canvas, CanvasError, load_canvas
from engine.compiler import DEFAULT_MEMORY_LIMIT, Plan
from engine.executor import Executor
from engine.export import export_script
from engine.memory import gib_to_bytes
from engine.npz import write_npz
from engine.report import check_rows, problem_lines, run_rows, text_table
from engine.result_names import result_keys
from engine.targets import target_problem

#: ``export --to`` choices (numpy: :mod:`engine.export`; the rest:
#: :mod:`engine.export_frameworks`).
EXPORT_TARGETS = ("numpy", "tensorflow", "pytorch", "jax")
SUBCOMMANDS = ("check", "run", "export", "explain", "crosscheck", "geometry", "import")
#: Problems listed per error message, and characters per line.
MAX_PROBLEMS = 20
MAX_LINE = 300


def _say(text: str, stream: TextIO | None = None) -> None:
    """Print ``text``; characters the stream cannot encode are shown as backslash escapes."""
    stream = stream or sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    print(text.encode(encoding, "backslashreplace").decode(encoding, "replace"), file=stream)


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 3] + "..."


def _path(path: str, limit: int = 120) -> str:
    """A path for an error message: cut in the middle when long, so the message after it
    survives."""
    return path if len(path) <= limit else f"{path[: limit // 2 - 3]}...{path[-(limit // 2):]}"


def _err(head: str, problems: Sequence[str] = ()) -> None:
    """``gradblocks: head`` then one indented line per problem (at most MAX_PROBLEMS)."""
    lines = [_cut(f"gradblocks: {head}")]
    lines += [_cut(f"  {p}") for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        lines.append(f"  ... and {len(problems) - MAX_PROBLEMS} more")
    _say("\n".join(lines), sys.stderr)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``gradblocks run: error: ... (see --help)``."""

    def error(self, message: str) -> NoReturn:
        _say(_cut(f"{self.prog}: error: {message} (see {self.prog} --help)"), sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(
        prog="gradblocks",
        description="Check, run or export a GradBlocks canvas (.gbc.json). Without a "
                    "subcommand, opens the desktop app (optionally on CANVAS).")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)
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
                                "values in SCRIPT.sources.npz next to it")
    # these import this module: loaded once it is complete
    from engine import cli_crosscheck, cli_explain, cli_geometry, cli_import

    cli_explain.add_parser(sub)
    cli_crosscheck.add_parser(sub)
    cli_geometry.add_parser(sub)
    cli_import.add_parser(sub)  # a model's conv layer as a canvas
    return ap


def _limit(text: str) -> int:
    """``--memory-limit-gib`` as bytes: a positive number (not NaN or infinite)."""
    try:
        return gib_to_bytes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _compile(path: str, executor: Executor) -> tuple[Canvas, Plan] | None:
    """Load and compile; print every problem and return None if there is any."""
    try:
        canvas = load_canvas(path)
    except CanvasError as err:
        _err(f"{_path(path)}: {len(err.problems)} problem(s) in the canvas:",
             [f"{where}: {message}" for where, message in err.problems])
        return None
    plan = executor.compile(canvas, Path(path).resolve().parent)
    if plan.errors:
        errors = problem_lines(plan)
        _err(f"{_path(path)}: {len(errors)} problem(s):", errors)
        return None
    return canvas, plan


#: The table printer (engine.report), under the name engine.cli_explain imports.
_table = text_table


def cmd_check(path: str, executor: Executor) -> int:
    compiled = _compile(path, executor)
    if compiled is None:
        return 2
    plan = compiled[1]
    _say(text_table(check_rows(plan)))
    _say(f"{path}: ok, {len(plan.steps)} block(s)")
    return 0


def _check_target(target: str, canvas_path: str) -> bool:
    """Print why ``target`` cannot be written and return False, or return True."""
    problem = target_problem(target, (canvas_path,))
    if problem:
        _err(f"{_path(repr(target))} {problem}")
    return not problem


def _write(target: str, write) -> bool:
    """Write ``target`` atomically; print why not and return False when that fails."""
    try:
        write_atomically(target, write)
    except OSError as err:
        _err(f"cannot write {_path(repr(target))}: {err.strerror or err} (the previous file, "
             "if any, is unchanged)")
        return False
    return True


def cmd_run(path: str, executor: Executor, out: str | None) -> int:
    if out is not None and not _check_target(out, path):
        return 2
    compiled = _compile(path, executor)
    if compiled is None:
        return 2
    plan = compiled[1]
    result = executor.run(plan)
    _say(text_table(run_rows(plan, result)))
    status = 0
    if out is not None:
        keys = result_keys(plan.steps, plan.labels)
        arrays = {key: result.outputs[ref] for ref, key in keys.items()
                  if ref in result.outputs}
        if _write(out, lambda f: write_npz(f, arrays)):
            _say(f"wrote {len(arrays)} output(s) to {out}")
        else:
            status = 1
    if result.errors:
        _err(f"{_path(path)}: {len(result.errors)} block(s) failed:",
             [f"{plan.label(n)}: {m}" for n, m in result.errors.items()])
        status = 1
    return status


def cmd_export(path: str, executor: Executor, output: str, to: str = "numpy") -> int:
    if not _check_target(output, path):
        return 2
    compiled = _compile(path, executor)
    if compiled is None:
        return 2
    canvas, plan = compiled
    titles = {node_id: node.title for node_id, node in canvas.nodes.items()}
    if to != "numpy":
        return _export_framework(path, plan, titles, output, to)
    script = export_script(plan, Path(path).name, titles).encode("utf-8")
    if not _write(output, lambda f: f.write(script)):
        return 1
    _say(f"wrote {output}: {len(plan.steps)} block(s)")
    return 0


def _export_framework(path: str, plan: Plan, titles: dict, output: str, to: str) -> int:
    """``export --to tensorflow|pytorch|jax``: the script and its companion source values."""
    from engine.export_frameworks import ExportRefused, export_framework_script, sources_path

    try:
        exported = export_framework_script(plan, to, Path(path).name, titles)
    except ExportRefused as err:
        _err(f"{_path(path)}: cannot export to {to}: {err}")
        return 2
    companion = str(sources_path(output))
    if not _check_target(companion, path):
        return 2
    script = exported.script.encode("utf-8")
    if not (_write(companion, lambda f: write_npz(f, exported.sources))
            and _write(output, lambda f: f.write(script))):
        return 1
    _say(f"wrote {output} and {companion}: {len(plan.steps)} block(s), {to}")
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
        from app.startup import main as app_main
    except ImportError as err:
        _err(f"the desktop app cannot start: {err}")
        return 2
    return int(app_main(argv) or 0)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so that files being written are cleaned up."""


def _raise_terminated(_signum, _frame) -> NoReturn:
    # The signal can land inside a constructor (a ZipFile being opened for --out): the
    # half-built object's __del__ then fails while the program unwinds, and Python would print
    # its traceback. The program is ending and says so in one line; such messages are noise.
    sys.unraisablehook = _ignore_unraisable
    raise Terminated


def _ignore_unraisable(_unraisable) -> None:
    """An ``unraisablehook`` that prints nothing (installed once SIGTERM has arrived)."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help")):
        return open_app(argv)
    if argv[0] == "explain":
        from engine.cli_explain import protect_index

        argv = protect_index(argv)
    try:
        opts = _parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    accel.announce_compiles()  # a numba compile (cache miss) says so once on stderr
    # import has no --memory-limit-gib: it runs nothing
    executor = Executor(memory_limit=getattr(opts, "memory_limit", DEFAULT_MEMORY_LIMIT))
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main_thread else None
    try:
        if opts.command == "check":
            return cmd_check(opts.canvas, executor)
        if opts.command == "run":
            return cmd_run(opts.canvas, executor, opts.out)
        if opts.command == "explain":
            from engine.cli_explain import cmd_explain

            return cmd_explain(opts, executor)
        if opts.command == "crosscheck":
            from engine.cli_crosscheck import cmd_crosscheck

            return cmd_crosscheck(opts, executor)
        if opts.command == "geometry":
            from engine.cli_geometry import cmd_geometry

            return cmd_geometry(opts, executor)
        if opts.command == "import":
            from engine.cli_import import cmd_import

            return cmd_import(opts)
        return cmd_export(opts.canvas, executor, opts.output, opts.to)
    except KeyboardInterrupt as stop:
        terminated = isinstance(stop, Terminated)
        _err(f"{'terminated' if terminated else 'interrupted'} (files being written are left as "
             "they were)")
        return 143 if terminated else 130
    finally:
        if main_thread:  # None: a handler not set from Python, taken as the default
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


if __name__ == "__main__":
    raise SystemExit(main())
