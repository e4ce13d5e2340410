"""``gradblocks``, the console script: :func:`engine.cli.commands.main` with the desktop app's
start-up, which it calls without a subcommand (``gradblocks [CANVAS] [--run] ...``). The app
(Qt) is imported only then: ``gradblocks check|run|...`` import no Qt module. The engine never
imports the app; this is where the two meet.
"""

from __future__ import annotations

from collections.abc import Callable

# first: its SIGINT handler (Ctrl+C while gradblocks starts is one line) precedes the imports
from engine.cli.commands import main as cli_main


def startup() -> Callable[[list[str]], int | None]:
    """The app's ``main(argv)``, imported now (ImportError without Qt)."""
    from app.startup import main as app_main

    return app_main


def main(argv: list[str] | None = None) -> int:
    """``gradblocks ARGV`` (default: the command line): a subcommand, or the desktop app."""
    return cli_main(argv, app=startup)
