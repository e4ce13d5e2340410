"""Checks of a public function's arguments at its boundary (the notebook API, :mod:`engine.api`
and :mod:`engine.verify.api`): each returns the value when it is of the documented kind, or
raises one :class:`InvalidArgumentError` line naming the argument, what it must be and what it
is (``cases must be a whole number in 1..10000000, got str '3'``), before any work starts."""

from __future__ import annotations

from typing import Any

from engine.base.errors import InvalidArgumentError
from engine.base.names import shown


def bad(name: str, expected: str, value: object) -> InvalidArgumentError:
    """``name must be <expected>, got <type> <value>``: one line, the value quoted safely."""
    got = type(value).__name__
    if isinstance(value, (str, bytes, int, float, tuple, list)) or value is None:
        got += f" {shown(value, 60)}"
    return InvalidArgumentError(f"{name} must be {expected}, got {got}", argument=name)


def whole_number(name: str, value: Any, lo: int, hi: int) -> int:
    """``value``: an int in ``lo..hi`` (never a bool, a float or a string of digits)."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise bad(name, f"a whole number in {lo}..{hi}", value)
    return value


def string(name: str, value: Any, expected: str = "a string") -> str:
    """``value``: a str."""
    if not isinstance(value, str):
        raise bad(name, expected, value)
    return value


def optional_string(name: str, value: Any, expected: str = "a string") -> str | None:
    """``value``: a str or None."""
    return None if value is None else string(name, value, f"None or {expected}")


def optional_callable(name: str, value: Any, expected: str = "a callable") -> Any:
    """``value``: a callable (not a class) or None."""
    if value is not None and (not callable(value) or isinstance(value, type)):
        raise bad(name, f"None or {expected}", value)
    return value


def optional_event(name: str, value: Any) -> Any:
    """``value``: None or an event a caller sets (``threading.Event`` or anything with an
    ``is_set()`` method), not the class itself."""
    if value is not None and (isinstance(value, type)
                              or not callable(getattr(value, "is_set", None))):
        raise bad(name, "None or a threading.Event (anything with is_set())", value)
    return value
