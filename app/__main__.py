"""``python -m app``: ``gradblocks`` (:mod:`app.launch`), the app or a subcommand."""

from app.launch import main

raise SystemExit(main())
