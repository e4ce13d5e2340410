"""``gradblocks guide [TOPIC]``: print a page of the User Guide (:mod:`engine.cli.guide`), or
list the pages."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from engine.cli.common import Subparsers, print_error, say, shown_path
from engine.graph.executor import Executor

#: The subcommand this module adds, and what it is doing (for the line that says memory ran
#: out).
COMMANDS = {"guide": "printing the guide"}


def add_parser(sub: Subparsers) -> None:
    """Add ``guide`` to ``gradblocks``' subparsers."""
    p = sub.add_parser("guide", help="print a page of the User Guide (without TOPIC: list "
                                     "the pages)")
    p.add_argument("topic", nargs="?", metavar="TOPIC", action=_GuideAction,
                   help="a page, e.g. cli or app (gradblocks guide lists them)")


def run(opts: argparse.Namespace, _executor: Executor) -> int:
    """The page ``opts.topic`` (parsing has printed it already: :class:`_GuideAction`)."""
    return cmd_guide(opts.topic)


class _GuideAction(argparse.Action):
    """``guide [TOPIC]`` prints and exits while parsing, as ``--help`` does: it needs no canvas
    and runs nothing. An unknown topic is a usage error naming the topics (exit 2)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> NoReturn:
        from engine.base.errors import InvalidArgumentError
        from engine.cli.guide import find_topic

        if not isinstance(values, str):  # no TOPIC: nargs="?" passes the default, None
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
        print_error(f"cannot read the User Guide: {err.strerror or err} "
                    f"({shown_path(str(guide.GUIDE_DIR))})")
        return 1
    if not pages:
        print_error("the User Guide is not installed (no pages in "
                    f"{shown_path(str(guide.GUIDE_DIR))})")
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
        say(text)
        sys.stdout.flush()
    except OSError as err:  # a full disk: one line, no traceback; a closed pipe (| head): quiet
        with contextlib.suppress(OSError, ValueError):  # nothing left to flush at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if not isinstance(err, BrokenPipeError):
            print_error(f"cannot write the guide: {err.strerror or err}")
        return 1
    return 0
