"""``python -m engine.cli``."""

from engine.cli.commands import main

raise SystemExit(main())
