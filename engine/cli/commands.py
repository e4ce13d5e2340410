"""The ``gradblocks`` command: ``check``, ``run``, ``export`` (``--to`` a framework:
:mod:`engine.export.frameworks`), ``explain`` (one output element of a conv block,
:mod:`engine.cli.explain`) or ``crosscheck`` (against the frameworks:
:mod:`engine.cli.crosscheck`) a canvas headless, draw a conv block's ``geometry``
(:mod:`engine.cli.geometry`), ``import`` a model's conv layer as a canvas
(:mod:`engine.cli.import_model`), ``verify`` an implementation against the reference
(:mod:`engine.cli.verify`), print a page of the User Guide (``guide``:
:mod:`engine.cli.guide`), or open the app.

Exit status: 0 success; 1 a block failed at run time or an output could not be written; 2 an
invalid canvas or usage (a bad option value, an output path that cannot work such as a folder, a
missing folder, a name too long, or the canvas itself). Errors go to stderr, one line per
problem (at most :data:`MAX_PROBLEMS`, each cut to :data:`MAX_LINE` characters), naming the
file, node and attribute; a user's mistake never shows a traceback, and no text (a path with odd
bytes, say) can make printing fail.

``run --out`` and ``export -o`` write exactly the path given, atomically
(:mod:`engine.base.atomic`): an interrupted or failed write leaves the previous file as it was.
``--out`` stores results under the keys of :mod:`engine.graph.result_names` (the Output blocks'
names, or every output under its block's title), the same keys an exported script saves.

Tables and messages name blocks by title (:mod:`engine.graph.labels`); the tables' last column is
the node id, for commands and files that take ids. When a canvas has check blocks (a spec with a
``verdict`` port: Compare, GradCheck, AdjointCheck), ``run``'s table has a verdict column: PASS or
FAIL on each such block's verdict row.

``check`` and ``run`` print the plan's warnings (a GradCheck estimated to run over a minute,
:func:`blocks.gradcheck.cost_warning`) on stderr, ``run`` before it starts; on a terminal,
``run`` draws a long block's progress on one stderr line (:mod:`engine.cli.progress`).

Ctrl+C at any moment prints one line (``gradblocks: interrupted``) and exits 130: while
gradblocks starts (its modules load, the arguments are parsed, the app is built) at once, since
nothing has been written; during a subcommand by unwinding (temporary files removed). SIGTERM
unwinds like Ctrl+C and exits 143. Running out of memory prints one line and exits 1.
"""

from __future__ import annotations

import _signal  # the C module under `signal`, loaded with the interpreter: no import time
import os
import sys

#: Exit statuses after Ctrl+C (SIGINT) and SIGTERM: 128 + the signal's number, as a shell shows
#: a process that the signal ended.
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


def _quit_now(_signum, _frame) -> None:
    """SIGINT where nothing is being written (gradblocks starting, or its work done): one line
    and exit 130 at once. A KeyboardInterrupt raised while modules load can land in the import
    machinery's callbacks, which print it as "Exception ignored" with a traceback and go on."""
    try:
        os.write(2, b"gradblocks: interrupted\n")
    finally:
        os._exit(EXIT_INTERRUPTED)


def _set_sigint(handler):
    """Make ``handler`` SIGINT's and return the previous handler (None: there was none set from
    Python); nothing is changed, and "unchanged" returned, outside the main thread or where
    SIGINT is ignored (``nohup``, a background job)."""
    try:
        if _signal.getsignal(_signal.SIGINT) == _signal.SIG_IGN:
            return "unchanged"
        return _signal.signal(_signal.SIGINT, handler)
    except ValueError:  # not the main thread
        return "unchanged"


def _restore_sigint(previous) -> None:
    """Undo :func:`_set_sigint` (which returned ``previous``)."""
    if previous != "unchanged":
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL if previous is None else previous)


# before the imports below, which take most of the start-up (main() takes SIGINT over after)
_SIGINT_BEFORE_IMPORTS = _set_sigint(_quit_now)

import _thread
import argparse
import gc
import signal
import threading
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import NoReturn, TextIO

from engine.base.atomic import Member, write_atomically, write_file_set
from engine.base.names import escaped
from engine.cli.progress import StepProgress
from engine.export.to_numpy import export_script
from engine.graph.budget import gib_to_bytes
from engine.graph.canvas import Canvas, CanvasError, load_canvas
from engine.graph.compiler import DEFAULT_MEMORY_LIMIT, Plan, place
from engine.graph.executor import Executor
from engine.graph.report import (
    attribute_problems_only,
    canvas_error_lines,
    check_rows,
    problem_lines,
    run_rows,
    text_table,
)
from engine.graph.result_names import result_keys
from engine.graph.targets import canvas_protected, target_problem
from engine.io.npz import write_npz
from engine.kernels import accel

#: ``export --to`` choices (numpy: :mod:`engine.export.to_numpy`; the rest:
#: :mod:`engine.export.frameworks`).
EXPORT_TARGETS = ("numpy", "tensorflow", "pytorch", "jax")
SUBCOMMANDS = ("check", "run", "export", "explain", "crosscheck", "geometry", "import", "guide",
               "verify")
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
    """A path for a message, :func:`escaped`: cut in the middle when long, so the message after
    it survives."""
    path = escaped(path)
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
        # argparse builds the message, quoting some values with repr and others not
        # ("unrecognized arguments: ..."): escaped here, where it becomes ours
        _say(_cut(f"{self.prog}: error: {escaped(message)} (see {self.prog} --help)"),
             sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(
        prog="gradblocks",
        description="Check, run or export a GradBlocks canvas (.gbc.json), or open the "
                    "desktop app (see below).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="the desktop app (no subcommand):\n"
               "  gradblocks [CANVAS] [--run] [--select ID] [--screenshot PNG]\n"
               "  gradblocks                      open the app on an empty canvas\n"
               "  gradblocks CANVAS               open the app on CANVAS (.gbc.json)\n"
               "  gradblocks CANVAS --run         ... and run it once opened\n"
               "  gradblocks CANVAS --select ID   ... and select the block ID\n"
               "  gradblocks CANVAS --run --screenshot PNG\n"
               "                                  save a picture of the window to PNG and\n"
               "                                  exit (no screen needed with\n"
               "                                  QT_QPA_PLATFORM=offscreen)\n"
               "gradblocks SUBCOMMAND --help describes a subcommand; gradblocks guide app\n"
               "prints the app's page of the User Guide.")
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
                                "values in SCRIPT.sources.<hash>.npz next to it (named by "
                                "its content; the script is written last)")
    # these import this module: loaded once it is complete
    from engine.cli import crosscheck, explain, geometry, import_model, verify

    explain.add_parser(sub)
    crosscheck.add_parser(sub)
    geometry.add_parser(sub)
    import_model.add_parser(sub)  # a model's conv layer as a canvas
    verify.add_parser(sub)  # an implementation against the reference
    p = sub.add_parser("guide", help="print a page of the User Guide (without TOPIC: list "
                                     "the pages)")
    p.add_argument("topic", nargs="?", metavar="TOPIC", action=_GuideAction,
                   help="a page, e.g. cli or app (gradblocks guide lists them)")
    return ap


def _limit(text: str) -> int:
    """``--memory-limit-gib`` as bytes: a positive number (not NaN or infinite)."""
    try:
        return gib_to_bytes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


class _GuideAction(argparse.Action):
    """``guide [TOPIC]`` prints and exits while parsing, as ``--help`` does: it needs no canvas
    and runs nothing. An unknown topic is a usage error naming the topics (exit 2)."""

    def __call__(self, parser, namespace, values, option_string=None) -> NoReturn:
        from engine.base.errors import InvalidArgumentError
        from engine.cli.guide import find_topic

        if values is None:
            parser.exit(cmd_guide(None))
        try:
            topic = find_topic(values)
        except InvalidArgumentError as err:
            parser.error(str(err))
        parser.exit(cmd_guide(topic))


def cmd_guide(topic: str | None) -> int:
    """Print the User Guide's page ``topic`` as written (Markdown), or without one every topic
    with its page's title (:mod:`engine.cli.guide`)."""
    import contextlib

    from engine.cli import guide

    names = (topic,) if topic else guide.topics()
    try:
        pages = {name: guide.page_path(name).read_text(encoding="utf-8") for name in names}
    except OSError as err:
        _err(f"cannot read the User Guide: {err.strerror or err} ({_path(str(guide.GUIDE_DIR))})")
        return 1
    if not pages:
        _err(f"the User Guide is not installed (no pages in {_path(str(guide.GUIDE_DIR))})")
        return 1
    if topic:
        text = pages[topic].rstrip("\n")
    else:
        width = max(len(name) for name in pages) + 2
        rows = [f"{name:<{width}}{guide.title(page)}" for name, page in pages.items()]
        rows.append("gradblocks guide TOPIC prints a page; the app shows them under Help > "
                    "User Guide.")
        text = "\n".join(rows)
    try:
        _say(text)
        sys.stdout.flush()
    except OSError as err:  # a full disk: one line, no traceback; a closed pipe (| head): quiet
        with contextlib.suppress(OSError, ValueError):  # nothing left to flush at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if not isinstance(err, BrokenPipeError):
            _err(f"cannot write the guide: {err.strerror or err}")
        return 1
    return 0


def _compile(path: str, executor: Executor) -> tuple[Canvas, Plan] | None:
    """Load and compile; print every problem and return None if there is any.

    Loading and compiling build many objects and no reference cycles: Python's cyclic garbage
    collector, which would walk them again and again while they pile up, is paused meanwhile
    (50,000 Transposes: 4.0 s -> 3.0 s), and what exists then is frozen out of its later walks
    (``gc.freeze``: the run would pay the walks otherwise; :func:`main` called in-process
    unfreezes it on return)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _load_and_compile(path, executor)
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def _load_and_compile(path: str, executor: Executor) -> tuple[Canvas, Plan] | None:
    try:
        canvas = load_canvas(path)
    except CanvasError as err:
        plan = None
        if attribute_problems_only(err):  # the rest of the file is sound: list its problems too
            plan = executor.compile(err.canvas, Path(path).resolve().parent)
        lines = canvas_error_lines(err, plan)
        _err(f"{_path(path)}: {len(lines)} problem(s) in the canvas:", lines)
        return None
    plan = executor.compile(canvas, Path(path).resolve().parent)
    if plan.errors:
        errors = problem_lines(plan)
        _err(f"{_path(path)}: {len(errors)} problem(s):", errors)
        return None
    return canvas, plan


#: The table printer (engine.graph.report), under the name engine.cli.explain imports.
_table = text_table


def cmd_check(path: str, executor: Executor) -> int:
    compiled = _compile(path, executor)
    if compiled is None:
        return 2
    plan = compiled[1]
    _say(text_table(check_rows(plan)))
    _say(f"{escaped(path)}: ok, {len(plan.steps)} block(s)")
    _warn(path, plan)
    return 0


def _warn(path: str, plan: Plan) -> None:
    """The plan's warnings (a GradCheck's cost, :data:`blocks.gradcheck.RUN_TIME_WARNINGS`),
    one line each after a head line, as ``check`` and ``run`` print them."""
    warnings = [w for ws in plan.warnings.values() for w in ws]
    if warnings:
        _err(f"{_path(path)}: {len(warnings)} warning(s):", [str(w) for w in warnings])


def _check_target(target: str, canvas_path: str, canvas: Canvas | None = None) -> bool:
    """Print why ``target`` cannot be written and return False, or return True: never the
    canvas file nor (given the loaded ``canvas``) a file it reads (:mod:`engine.graph.targets`)."""
    problem = target_problem(target, canvas_protected(canvas_path, canvas))
    if problem:
        _err(f"{_path(repr(target))} {problem}")
    return not problem


def _write(target: str, write, members: Sequence[Member] = (), owned_before=None,
           keep: Sequence[str] = ()) -> bool:
    """Write ``target`` atomically, with its ``members`` all or nothing
    (:func:`engine.base.atomic.write_file_set`); print why not and return False when that fails."""
    try:
        if members:
            write_file_set(target, write, members, owned_before or (lambda _main: ()), keep)
        else:
            write_atomically(target, write)
    except OSError as err:
        _err(f"cannot write {_path(repr(target))}: {err.strerror or err} (the previous "
             f"{'files' if members else 'file'}, if any, {'are' if members else 'is'} "
             "unchanged)")
        return False
    return True


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):  # replaced, or closed
        return False


def cmd_run(path: str, executor: Executor, out: str | None) -> int:
    if out is not None and not _check_target(out, path):
        return 2
    compiled = _compile(path, executor)
    if compiled is None:
        return 2
    canvas, plan = compiled
    if out is not None and not _check_target(out, path, canvas):
        return 2
    _warn(path, plan)  # before the run: a long one says so first
    types = {step.node_id: step.spec.type_id for step in plan.steps}
    with StepProgress(sys.stderr, lambda n: f"{plan.label(n)} ({types[n]})") as report:
        on_terminal = _isatty(sys.stderr)
        result = executor.run(plan, step_progress=report if on_terminal else None)
    _say(text_table(run_rows(plan, result)))
    status = 0
    if out is not None:
        keys = result_keys(plan.steps, plan.labels)
        arrays = {key: result.outputs[ref] for ref, key in keys.items()
                  if ref in result.outputs}
        if _write(out, lambda f: write_npz(f, arrays)):
            _say(f"wrote {len(arrays)} output(s) to {escaped(out)}")
        else:
            status = 1
    if result.errors:
        _err(f"{_path(path)}: {len(result.errors)} block(s) failed:",
             [f"{place(plan.label(n))}: {m}" for n, m in result.errors.items()])
        status = 1
    return status


def cmd_export(path: str, executor: Executor, output: str, to: str = "numpy") -> int:
    if not _check_target(output, path):
        return 2
    compiled = _compile(path, executor)
    if compiled is None:
        return 2
    canvas, plan = compiled
    if not _check_target(output, path, canvas):
        return 2
    titles = {node_id: node.title for node_id, node in canvas.nodes.items()}
    if to != "numpy":
        return _export_framework(path, canvas, plan, titles, output, to)
    script = export_script(plan, Path(path).name, titles).encode("utf-8")
    if not _write(output, lambda f: f.write(script)):
        return 1
    _say(f"wrote {escaped(output)}: {len(plan.steps)} block(s)")
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
        _err(f"{_path(path)}: cannot export to {to}: {err}")
        return 2
    except OSError as err:
        _err(f"{_path(repr(output))} cannot be written: {err.strerror or err}")
        return 2
    companion = os.path.abspath(real.parent / exported.companion)
    if not _check_target(companion, path, canvas):
        return 2
    script = exported.script.encode("utf-8")
    member = Member(exported.companion, lambda f: write_npz(f, exported.sources))
    if not _write(output, lambda f: f.write(script), [member], owned_companions,
                  keep=list(canvas_protected(path, canvas))):
        return 1
    _say(f"wrote {escaped(output)} and {escaped(companion)}: {len(plan.steps)} block(s), {to}")
    return 0


def _no_screen() -> bool:
    """On Linux, neither an X11 nor a Wayland display nor an explicit Qt platform is set."""
    env = os.environ
    return (sys.platform.startswith("linux") and not env.get("QT_QPA_PLATFORM")
            and not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"))


def _unknown_command(word: str) -> str:
    """The one line for a first argument that is neither a subcommand nor an option nor a canvas
    path (a bare word that names no file), naming the nearest subcommand; '' otherwise."""
    if word in SUBCOMMANDS or word.startswith("-") or os.sep in word or "." in word \
            or os.path.exists(word):
        return ""
    import difflib

    near = difflib.get_close_matches(word, SUBCOMMANDS, n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else f" (one of {', '.join(SUBCOMMANDS)})"
    return f"unknown command {escaped(repr(word), 80)}{hint}"


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


def _raise_interrupted(_signum, _frame) -> NoReturn:
    """SIGINT during a subcommand: a KeyboardInterrupt where the program is, so that files being
    written are cleaned up."""
    sys.unraisablehook = _after_signal
    raise KeyboardInterrupt


def _raise_terminated(_signum, _frame) -> NoReturn:
    # The signal can land inside a constructor (a ZipFile being opened for --out): the
    # half-built object's __del__ then fails while the program unwinds, and Python would print
    # its traceback. The program is ending and says so in one line; such messages are noise.
    sys.unraisablehook = _after_signal
    raise Terminated


#: Seconds after which an interrupt that Python dropped is delivered again (_after_signal).
REDELIVER_AFTER = 0.01


def _after_signal(unraisable) -> None:
    """The ``unraisablehook`` once SIGINT or SIGTERM has arrived: it prints nothing. An interrupt
    that landed in a ``__del__`` or a callback (the import machinery's, as a subcommand loads a
    module), which Python reports and drops, is delivered again a moment later, once this hook
    has returned (delivered now, its handler would raise inside the hook), so that the command
    still stops."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        signum = signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else signal.SIGINT
        again = threading.Timer(REDELIVER_AFTER, _thread.interrupt_main, (signum,))
        again.daemon = True
        again.start()


#: What each subcommand is doing, for the one line that says memory ran out.
DOING = {"check": "checking", "run": "running", "export": "exporting", "explain": "explaining",
         "crosscheck": "cross-checking", "geometry": "drawing the geometry of",
         "import": "importing", "guide": "printing the guide", "verify": "verifying"}


def main(argv: list[str] | None = None) -> int:
    """``gradblocks ARGV`` (default: the command line); returns the exit status. Ctrl+C, SIGTERM,
    running out of memory and a closed stdout each end it with one line at most (module
    docstring). Called as the program (``argv`` None), Ctrl+C stays handled until the process
    ends; called with ``argv`` (tests, tools), the previous handlers are restored on return."""
    previous = _set_sigint(_quit_now)
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    finally:
        if argv is None:
            _flush_stdout()  # a late Ctrl+C exits at once: nothing left unwritten
        else:
            _restore_sigint(previous)
            gc.unfreeze()  # what _compile froze is the caller's to collect again


def _main(argv: list[str]) -> int:
    """Parse ``argv`` and run its subcommand, or open the app. SIGINT exits at once until the
    subcommand starts, then unwinds it (:func:`_raise_interrupted`)."""
    doing = "starting the app"
    sigterm = None
    try:
        if argv and argv[0] == "help":  # gradblocks help [SUBCOMMAND]: the --help text
            argv = [*argv[1:2], "--help"]
        if argv and _unknown_command(argv[0]):
            _err(_unknown_command(argv[0]))
            return 2
        if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help")):
            return open_app(argv)
        if argv[0] == "guide" and len([a for a in argv[1:] if a not in ("-h", "--help")]) > 1:
            extra = " ".join(repr(a) if not a.startswith("-") else a for a in argv[2:])
            _err(f"guide takes one TOPIC; got more after {argv[1]!r}: {escaped(extra, 120)}")
            return 2
        doing = "starting"
        if argv[0] == "explain":
            from engine.cli.explain import protect_index

            argv = protect_index(argv)
        try:
            opts = _parser().parse_args(argv)
        except SystemExit as exit_:
            return int(exit_.code or 0)
        target = getattr(opts, "canvas", None) or getattr(opts, "model", None)
        doing = DOING.get(opts.command, f"running {opts.command}")
        doing += f" {_path(repr(target))}" if target else ""
        if getattr(opts, "out", None) or getattr(opts, "output", None):
            doing += " (files being written are left as they were)"
        accel.announce_compiles()  # a numba compile (cache miss) says so once on stderr
        # import has no --memory-limit-gib: it runs nothing
        executor = Executor(memory_limit=getattr(opts, "memory_limit", DEFAULT_MEMORY_LIMIT))
        if threading.current_thread() is threading.main_thread():
            sigterm = (signal.signal(signal.SIGTERM, _raise_terminated),)
        _set_sigint(_raise_interrupted)
        return _dispatch(opts, executor)
    except KeyboardInterrupt as stop:
        status = EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
    except MemoryError:
        status = 1
    except BrokenPipeError:  # stdout's reader stopped early (| head): say nothing more
        _flush_stdout()
        return 1
    finally:
        _set_sigint(_quit_now)  # nothing more to clean up
        if sigterm:  # None: a handler not set from Python, taken as the default
            signal.signal(signal.SIGTERM, signal.SIG_DFL if sigterm[0] is None else sigterm[0])
    # here the failed command's frames, and the memory they held, are released
    if status == 1:
        _err(f"out of memory while {doing}")
    else:
        _err(f"{'terminated' if status == EXIT_TERMINATED else 'interrupted'} (files being "
             "written are left as they were)")
    return status


def _dispatch(opts: argparse.Namespace, executor: Executor) -> int:
    """Run the parsed subcommand."""
    if opts.command == "check":
        return cmd_check(opts.canvas, executor)
    if opts.command == "run":
        return cmd_run(opts.canvas, executor, opts.out)
    if opts.command == "explain":
        from engine.cli.explain import cmd_explain

        return cmd_explain(opts, executor)
    if opts.command == "crosscheck":
        from engine.cli.crosscheck import cmd_crosscheck

        return cmd_crosscheck(opts, executor)
    if opts.command == "geometry":
        from engine.cli.geometry import cmd_geometry

        return cmd_geometry(opts, executor)
    if opts.command == "import":
        from engine.cli.import_model import cmd_import

        return cmd_import(opts)
    if opts.command == "verify":
        from engine.cli.verify import cmd_verify

        return cmd_verify(opts)
    return cmd_export(opts.canvas, executor, opts.output, opts.to)


def _flush_stdout() -> None:
    """Flush stdout; if its reader has gone, send the rest (and Python's flush at exit) to
    /dev/null instead of failing."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass


#: The console script's name: importing this module, it calls main() next, so the start-up
#: handler stays in place (restored, a signal pending from the imports would raise in between).
PROGRAM = "gradblocks"

_ARGV0 = (getattr(sys, "argv", None) or [""])[0]
if __name__ != "__main__" and os.path.basename(_ARGV0) != PROGRAM:
    _restore_sigint(_SIGINT_BEFORE_IMPORTS)  # imported by a test or a tool: its handler again

if __name__ == "__main__":
    raise SystemExit(main())
