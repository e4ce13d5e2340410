"""``gradblocks verify``: check anyone's conv or conv-gradient implementation against the exact
reference (:mod:`engine.kernels`), shrink each failure to the smallest geometry, and say what is
wrong. ``verify(fn, op=..., convention=...)`` and ``assert_conformant(...)`` are in
:mod:`engine.verify.api`, imported on first use so that a worker process
(:mod:`engine.verify.worker`) stays light.

Modules: ``conventions`` (the tf and torch calls, the canonical TF call) > ``values`` (a case
and its arrays) > ``support`` (``--support``) > ``cases`` (catalogue and random search),
``shrink``, ``verdicts``, ``runner`` over ``worker`` and ``sandbox`` (processes, their groups
and limits) and ``serve`` (``--cmd-serve``), ``report`` and ``command_line`` (the pasteable
reproductions), ``diagnosis`` (over ``diagnose`` and ``mistakes``), ``sweep``, ``repro``
(``--repro``), ``frameworks`` (built-in adapters: ``gradblocks verify tensorflow``), ``api``.
"""

_API = ("verify", "assert_conformant", "VerifyReport", "DEFAULT_CASES")


def __getattr__(name: str):
    if name in _API:
        from engine.verify import api

        return getattr(api, name)
    raise AttributeError(f"module 'engine.verify' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
