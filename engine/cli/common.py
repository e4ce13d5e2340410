"""What the subcommands share: their messages (one line each, cut to :data:`MAX_LINE`, at most
:data:`MAX_PROBLEMS` problems listed, paths :func:`escaped`), ``--memory-limit-gib``, loading
and compiling a canvas (every problem printed), writing a target atomically (never the canvas
nor a file it reads), whole-number arguments and a block named by id or title.

The bottom of :mod:`engine.cli`: the subcommand modules import it, it imports none of them (the
``cli`` layers contract in ``pyproject.toml``).
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import BinaryIO, TextIO

from engine.base.atomic import Member, write_atomically, write_file_set
from engine.base.names import counted, escaped, shown
from engine.explain.terms import OPS
from engine.graph.budget import gib_to_bytes
from engine.graph.canvas import Canvas, CanvasError
from engine.graph.canvas_file import load_canvas
from engine.graph.compiler import Plan
from engine.graph.executor import Executor
from engine.graph.report import (
    attribute_problems_only,
    canvas_error_lines,
    file_problem,
    problem_lines,
)
from engine.graph.targets import canvas_protected, target_problem

#: What ``add_subparsers()`` returns: each subcommand module's ``add_parser`` adds to it.
Subparsers = argparse._SubParsersAction

#: Problems listed per error message, and characters per line.
MAX_PROBLEMS = 20
MAX_LINE = 300


def say(text: str, stream: TextIO | None = None) -> None:
    """Print ``text``; characters the stream cannot encode are shown as backslash escapes."""
    stream = stream or sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    print(text.encode(encoding, "backslashreplace").decode(encoding, "replace"), file=stream)


def cut_line(line: str) -> str:
    """``line`` cut to :data:`MAX_LINE` characters (ending in ``...`` when cut)."""
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 3] + "..."


def shown_path(path: str, limit: int = 120) -> str:
    """A path for a message, :func:`escaped`: cut in the middle when long, so the message after
    it survives."""
    path = escaped(path)
    return path if len(path) <= limit else f"{path[: limit // 2 - 3]}...{path[-(limit // 2):]}"


def print_error(head: str, problems: Sequence[str] = ()) -> None:
    """``gradblocks: head`` then one indented line per problem (at most MAX_PROBLEMS)."""
    lines = [cut_line(f"gradblocks: {head}")]
    lines += [cut_line(f"  {p}") for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        lines.append(f"  ... and {len(problems) - MAX_PROBLEMS} more")
    say("\n".join(lines), sys.stderr)


def memory_limit_argument(text: str) -> int:
    """``--memory-limit-gib`` as bytes: a positive number (not NaN or infinite)."""
    try:
        return gib_to_bytes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def compile_file(path: str, executor: Executor) -> tuple[Canvas, Plan] | None:
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
        whole = file_problem(err)
        if whole is not None:
            print_error(f"cannot open {shown_path(path)}: {whole}")
            return None
        lines = canvas_error_lines(err, plan)
        print_error(f"{shown_path(path)}: {counted(len(lines), 'problem')} in the canvas:", lines)
        return None
    plan = executor.compile(canvas, Path(path).resolve().parent)
    if plan.errors:
        errors = problem_lines(plan)
        print_error(f"{shown_path(path)}: {counted(len(errors), 'problem')}:", errors)
        return None
    return canvas, plan


def check_target(target: str, canvas_path: str, canvas: Canvas | None = None) -> bool:
    """Print why ``target`` cannot be written and return False, or return True: never the
    canvas file nor (given the loaded ``canvas``) a file it reads (:mod:`engine.graph.targets`)."""
    problem = target_problem(target, canvas_protected(canvas_path, canvas))
    if problem:
        print_error(f"{shown_path(repr(target))} {problem}")
    return not problem


def write_target(target: str, write: Callable[[BinaryIO], object],
                 members: Sequence[Member] = (),
                 owned_before: Callable[[Path], Iterable[str]] | None = None,
                 keep: Sequence[str] = ()) -> bool:
    """Write ``target`` atomically, with its ``members`` all or nothing
    (:func:`engine.base.atomic.write_file_set`); print why not and return False when that fails."""
    try:
        if members:
            write_file_set(target, write, members, owned_before or (lambda _main: ()), keep)
        else:
            write_atomically(target, write)
    except OSError as err:
        print_error(f"cannot write {shown_path(repr(target))}: {err.strerror or err} (the "
                    f"previous {'files' if members else 'file'}, if any, "
                    f"{'are' if members else 'is'} unchanged)")
        return False
    return True


#: Digits of a whole-number argument (an index entry, --limit, --frame): no array dimension
#: reaches 2**63 (19 digits), and Python refuses to read an int of more than 4300 digits.
MAX_INDEX_DIGITS = 19


class UsageError(Exception):
    """A bad node, port or index: one line, exit 2."""


def whole_number(text: str) -> int | str:
    """``text`` (ASCII digits, an optional sign) as an int, or why it is not one."""
    match = re.fullmatch(r"([+-]?)0*([0-9]+)", text.strip())
    if not match:
        return f"{shown(text, 40)} is not a whole number"
    sign, digits = match.groups()
    if len(digits) > MAX_INDEX_DIGITS:
        return (f"{shown(text, 40)} has {len(digits)} digits, too many for any array index "
                f"or count (at most {MAX_INDEX_DIGITS})")
    return int(sign + digits)


def count_argument(text: str) -> int:
    """A whole number >= 0 of at most :data:`MAX_INDEX_DIGITS` digits (argparse type)."""
    value = whole_number(text)
    if isinstance(value, str):
        raise argparse.ArgumentTypeError(value)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _by_title(canvas: Canvas, title: str) -> str | None:
    """The one node titled ``title``; UsageError when several are."""
    ids = [n for n, node in canvas.nodes.items() if node.title.strip() == title.strip()]
    if len(ids) > 1:
        raise UsageError(f"block title {shown(title, 60)} is shared by {', '.join(ids)}: name "
                         "the block by its id")
    return ids[0] if ids else None


def resolve_node(canvas: Canvas, text: str) -> tuple[str, str | None]:
    """``(node_id, port or None)`` from ``NODE[.PORT]``, NODE an id or a unique title."""
    if text in canvas.nodes:
        return text, None
    found = _by_title(canvas, text)
    if found is not None:
        return found, None
    if "." in text:
        head, port = text.rsplit(".", 1)
        node_id = head if head in canvas.nodes else _by_title(canvas, head)
        if node_id is not None:
            return node_id, port
    convs = [f"{n} ({node.type})" for n, node in canvas.nodes.items() if node.type in OPS]
    hint = f"; its conv blocks: {', '.join(convs)}" if convs else "; it has no conv blocks"
    raise UsageError(f"no block {shown(text, 60)} in the canvas (by id or title){hint}")
