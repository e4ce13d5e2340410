"""The command line: ``gradblocks`` (the console script :func:`app.launch.main`, which adds the
desktop app) and ``python -m engine.cli`` (the subcommands only).

:mod:`.commands` parses the arguments and runs a subcommand (or opens the app it is given);
each subcommand module adds its parser and runs it: :mod:`.canvas_commands` (check, run,
export), :mod:`.explain`, :mod:`.crosscheck`, :mod:`.geometry`, :mod:`.import_model`,
:mod:`.verify`, :mod:`.guide_command`; they share :mod:`.common` (messages, paths, compiling a
canvas, writing a target) and import neither :mod:`.commands` nor each other (the ``cli``
layers contract in ``pyproject.toml``).
"""

from engine.cli.commands import main

__all__ = ["main"]
