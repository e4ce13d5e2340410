"""The ``gradblocks`` command: ``check``, ``run``, ``export`` (``--to`` a framework:
:mod:`engine.export.frameworks`; the three in :mod:`engine.cli.canvas_commands`), ``explain``
(one output element of a conv block, :mod:`engine.cli.explain`) or ``crosscheck`` (against the
frameworks: :mod:`engine.cli.crosscheck`) a canvas headless, draw a conv block's ``geometry``
(:mod:`engine.cli.geometry`), ``import`` a model's conv layer as a canvas
(:mod:`engine.cli.import_model`), ``verify`` an implementation against the reference
(:mod:`engine.cli.verify`), print a page of the User Guide (``guide``:
:mod:`engine.cli.guide_command`), or open the app.

This module parses the arguments and runs the subcommand: each subcommand module (listed in
:func:`_subcommand_modules`) names its subcommands (``COMMANDS``), adds their parsers
(``add_parser``) and runs them (``run``); what they share is :mod:`engine.cli.common`, which
imports none of them. The app is the caller's: the console script (:mod:`app.launch`) passes
its start-up to :func:`main`; the engine never imports the app.

Exit status: 0 success; 1 a block failed at run time or an output could not be written; 2 an
invalid canvas or usage (a bad option value, an output path that cannot work such as a folder, a
missing folder, a name too long, or the canvas itself). Errors go to stderr, one line per
problem (at most :data:`~engine.cli.common.MAX_PROBLEMS`, each cut to
:data:`~engine.cli.common.MAX_LINE` characters), naming the
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


def _quit_now(_signum: int, _frame: object) -> None:
    """SIGINT where nothing is being written (gradblocks starting, or its work done): one line
    and exit 130 at once. A KeyboardInterrupt raised while modules load can land in the import
    machinery's callbacks, which print it as "Exception ignored" with a traceback and go on."""
    try:
        os.write(2, b"gradblocks: interrupted\n")
    finally:
        os._exit(EXIT_INTERRUPTED)


def _set_sigint(handler: object) -> object:
    """Make ``handler`` SIGINT's and return the previous handler (None: there was none set from
    Python); nothing is changed, and "unchanged" returned, outside the main thread or where
    SIGINT is ignored (``nohup``, a background job)."""
    try:
        if _signal.getsignal(_signal.SIGINT) == _signal.SIG_IGN:
            return "unchanged"
        return _signal.signal(_signal.SIGINT, handler)
    except ValueError:  # not the main thread
        return "unchanged"


def _restore_sigint(previous: object) -> None:
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
from collections.abc import Callable
from typing import NoReturn

from engine.base.names import escaped
from engine.cli.common import cut_line, print_error, say, shown_path
from engine.graph.compiler import DEFAULT_MEMORY_LIMIT
from engine.graph.executor import Executor
from engine.kernels import accel

#: Every subcommand, before any subcommand module is loaded (a first word that is none of them
#: opens the app, or is an unknown command): the subcommand modules' ``COMMANDS``.
SUBCOMMANDS = ("check", "run", "export", "explain", "crosscheck", "geometry", "import", "guide",
               "verify")

class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``gradblocks run: error: ... (see --help)``."""

    def error(self, message: str) -> NoReturn:
        # argparse builds the message, quoting some values with repr and others not
        # ("unrecognized arguments: ..."): escaped here, where it becomes ours
        say(cut_line(f"{self.prog}: error: {escaped(message)} (see {self.prog} --help)"),
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
    for module in _subcommand_modules():
        module.add_parser(sub)
    return ap


def _subcommand_modules() -> tuple:
    """The subcommand modules, in ``--help``'s order: each has ``COMMANDS`` (its subcommands and
    what each is doing), ``add_parser(subparsers)`` and ``run(opts, executor)``. Imported here,
    once gradblocks is to parse a subcommand: none of them is loaded to open the app, and they
    import their heavy parts (the verify sweep, the model readers) when they run."""
    from engine.cli import (
        canvas_commands,
        crosscheck,
        explain,
        geometry,
        guide_command,
        import_model,
        verify,
    )

    return (canvas_commands, explain, crosscheck, geometry, import_model, verify, guide_command)


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


#: The desktop app's start-up as :func:`main` takes it: a function that imports the app and
#: returns its ``main(argv) -> int`` (:func:`app.launch.startup`), raising ImportError when the
#: app cannot be imported (no Qt).
AppStartup = Callable[[], Callable[[list[str]], int | None]]


def open_app(argv: list[str], app: AppStartup | None) -> int:
    """Start the desktop app with ``app`` (the engine never imports the app: the console script
    passes its start-up); without it, say how the app starts."""
    if _no_screen():
        print_error("no screen to open the app on (DISPLAY and WAYLAND_DISPLAY are not set). "
                    "Use `gradblocks check|run|export CANVAS` headless, or set "
                    "QT_QPA_PLATFORM=offscreen with --screenshot.")
        return 2
    if app is None:
        print_error("this entry point runs the subcommands only: the desktop app opens with "
                    "`gradblocks` or `python -m app` (see --help)")
        return 2
    try:
        app_main = app()
    except ImportError as err:
        print_error(f"the desktop app cannot start: {err}")
        return 2
    return int(app_main(argv) or 0)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so that files being written are cleaned up."""


def _raise_interrupted(_signum: int, _frame: object) -> NoReturn:
    """SIGINT during a subcommand: a KeyboardInterrupt where the program is, so that files being
    written are cleaned up."""
    sys.unraisablehook = _after_signal
    raise KeyboardInterrupt


def _raise_terminated(_signum: int, _frame: object) -> NoReturn:
    # The signal can land inside a constructor (a ZipFile being opened for --out): the
    # half-built object's __del__ then fails while the program unwinds, and Python would print
    # its traceback. The program is ending and says so in one line; such messages are noise.
    sys.unraisablehook = _after_signal
    raise Terminated


#: Seconds after which an interrupt that Python dropped is delivered again (_after_signal).
REDELIVER_AFTER = 0.01


def _after_signal(unraisable: sys.UnraisableHookArgs) -> None:
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


def main(argv: list[str] | None = None, app: AppStartup | None = None) -> int:
    """``gradblocks ARGV`` (default: the command line); returns the exit status. Without a
    subcommand it opens the desktop app through ``app`` (:data:`AppStartup`; the console
    script's :func:`app.launch.main` passes it). Ctrl+C, SIGTERM, running out of memory and a
    closed stdout each end it with one line at most (module docstring). Called as the program
    (``argv`` None), Ctrl+C stays handled until the process ends; called with ``argv`` (tests,
    tools), the previous handlers are restored on return."""
    previous = _set_sigint(_quit_now)
    try:
        return _main(list(sys.argv[1:] if argv is None else argv), app)
    finally:
        if argv is None:
            _flush_stdout()  # a late Ctrl+C exits at once: nothing left unwritten
        else:
            _restore_sigint(previous)
            gc.unfreeze()  # what compile_file froze is the caller's to collect again


def _work_done(sigterm: tuple | None) -> None:
    """Nothing more to clean up: SIGINT exits at once again (:func:`_quit_now`) and SIGTERM gets
    its handler back (``sigterm``: the one :func:`_main` replaced, None if none). A SIGINT that
    lands while the handlers are switched, raised by :func:`_raise_interrupted`, is answered as
    :func:`_quit_now` answers one."""
    try:
        _set_sigint(_quit_now)
    except KeyboardInterrupt:
        _quit_now(_signal.SIGINT, None)
    if sigterm:  # None: a handler not set from Python, taken as the default
        signal.signal(signal.SIGTERM, signal.SIG_DFL if sigterm[0] is None else sigterm[0])


def _main(argv: list[str], app: AppStartup | None) -> int:
    """Parse ``argv`` and run its subcommand, or open the app. SIGINT exits at once until the
    subcommand starts, then unwinds it (:func:`_raise_interrupted`)."""
    doing = "starting the app"
    sigterm = None
    try:
        if argv and argv[0] == "help":  # gradblocks help [SUBCOMMAND]: the --help text
            argv = [*argv[1:2], "--help"]
        if argv and _unknown_command(argv[0]):
            print_error(_unknown_command(argv[0]))
            return 2
        if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help")):
            return open_app(argv, app)
        if argv[0] == "guide" and len([a for a in argv[1:] if a not in ("-h", "--help")]) > 1:
            extra = " ".join(repr(a) if not a.startswith("-") else a for a in argv[2:])
            print_error(f"guide takes one TOPIC; got more after {argv[1]!r}: {escaped(extra, 120)}")
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
        modules = {name: (module, doing) for module in _subcommand_modules()
                   for name, doing in module.COMMANDS.items()}
        module, doing = modules[opts.command]
        doing += f" {shown_path(repr(target))}" if target else ""
        if getattr(opts, "out", None) or getattr(opts, "output", None):
            doing += " (files being written are left as they were)"
        accel.announce_compiles()  # a numba compile (cache miss) says so once on stderr
        # import has no --memory-limit-gib: it runs nothing
        executor = Executor(memory_limit=getattr(opts, "memory_limit", DEFAULT_MEMORY_LIMIT))
        if threading.current_thread() is threading.main_thread():
            sigterm = (signal.signal(signal.SIGTERM, _raise_terminated),)
        _set_sigint(_raise_interrupted)
        return module.run(opts, executor)
    except KeyboardInterrupt as stop:
        status = EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
    except MemoryError:
        status = 1
    except BrokenPipeError:  # stdout's reader stopped early (| head): say nothing more
        _flush_stdout()
        return 1
    finally:
        _work_done(sigterm)
    # here the failed command's frames, and the memory they held, are released
    if status == 1:
        print_error(f"out of memory while {doing}")
    else:
        print_error(f"{'terminated' if status == EXIT_TERMINATED else 'interrupted'} (files being "
                    "written are left as they were)")
    return status


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
