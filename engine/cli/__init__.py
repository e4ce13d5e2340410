"""The command line: ``gradblocks`` (``engine.cli:main``) and ``python -m engine.cli``.

:mod:`.commands` parses the arguments and runs check, run and export (and opens the app without
a subcommand); the other subcommands have a module each: :mod:`.explain`, :mod:`.geometry`,
:mod:`.import_model`, :mod:`.crosscheck`.
"""

from engine.cli.commands import main

__all__ = ["main"]
