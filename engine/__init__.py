"""GradBlocks engine: Qt-free kernels, shape rules, canvas model, compiler, executor and CLI.

``engine.load(path)`` and ``engine.new_canvas()`` are the notebook API (:mod:`engine.api`),
imported on first use so that ``import engine`` stays light.
"""

from engine.base.runtime import configure as _configure

_configure()

_API = ("load", "new_canvas")


def __getattr__(name: str):
    if name in _API:
        from engine import api

        return getattr(api, name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
