"""``python -m engine.bench``: the conv kernels' benchmark."""

from engine.bench.kernels import main

raise SystemExit(main())
