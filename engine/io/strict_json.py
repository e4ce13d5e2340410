"""Strict reading of canvas JSON: every oddity is a problem with its JSON path, never an exception.

Python's ``json`` module accepts duplicate keys (the last one silently wins), turns ``1e999`` into
``inf``, raises ``ValueError`` on integers of more than 4300 digits and ``RecursionError`` on
deep nesting. :func:`loads` reads with hooks that mark those cases instead, then walks the result
(iteratively, so depth costs no stack) and reports each with its JSON path:

- a duplicate key in an object;
- a number literal that overflows a float (``1e999``, or an integer beyond float range where a
  float is needed is left to the schema); ``NaN``, ``Infinity`` and ``-Infinity`` are allowed;
- an integer literal too long to convert (more than 4300 digits);
- nesting deeper than :data:`MAX_DEPTH` (``json`` itself stops at Python's recursion limit
  with ``RecursionError``, which is reported the same way).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from engine.base.names import shown

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")

DUPLICATE = "duplicate key (each key may appear once)"
#: Deepest nesting of arrays and objects a canvas may have (the format needs 5).
MAX_DEPTH = 64


class _Marked:
    """A value the hooks could not represent faithfully; ``problem`` says why."""

    __slots__ = ("problem",)

    def __init__(self, problem: str):
        self.problem = problem


class _Object(dict):
    """An object that had duplicate keys (listed in ``duplicates``)."""

    duplicates: list[str]


#: The container types the hooks produce (``type(v) in`` is cheaper than ``isinstance``).
_CONTAINERS = frozenset((dict, list, _Object))


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    seen = dict(pairs)
    if len(seen) == len(pairs):
        return seen
    dups: list[str] = []
    keys: set[str] = set()
    for key, _ in pairs:
        if key in keys and key not in dups:
            dups.append(key)
        keys.add(key)
    out = _Object(seen)
    out.duplicates = dups
    return out


def _float(text: str) -> float | _Marked:
    value = float(text)
    if math.isinf(value):
        return _Marked(f"number {text[:40]} overflows a float (largest is about 1.8e308)")
    return value


def _int(text: str) -> int | _Marked:
    try:
        return int(text)
    except ValueError:
        return _Marked(f"integer literal of {len(text)} digits is too long")


def loads(text: str, max_depth: int = MAX_DEPTH) -> tuple[Any, list[tuple[str, str]]]:
    """``(value, problems)``: the parsed document and every problem with its JSON path.

    A syntax error is one problem at ``$`` with its line and column; the value is then None.
    ``max_depth`` is the deepest nesting allowed (a canvas's :data:`MAX_DEPTH` by default).
    """
    marked: list[bool] = []  # whether a hook marked anything: only then are paths built

    def pairs(items: list[tuple[str, Any]]) -> dict:
        out = dict(items)  # the common case inline: one call per object in big files
        if len(out) == len(items):
            return out
        marked.append(True)
        return _pairs(items)

    def number(text: str) -> float | _Marked:
        value = float(text)
        if not math.isinf(value):
            return value
        marked.append(True)
        return _float(text)

    try:
        try:
            data = json.loads(text, object_pairs_hook=pairs, parse_float=number)
        except json.JSONDecodeError:
            raise
        except ValueError:  # an integer literal too long for int(): parse again, marking it
            marked.append(True)
            data = json.loads(text, object_pairs_hook=pairs, parse_float=number,
                              parse_int=_int)
    except json.JSONDecodeError as err:
        return None, [("$", f"not JSON: {err.msg} at line {err.lineno} column {err.colno}")]
    except RecursionError:
        return None, [("$", f"nested more than {max_depth} levels deep")]
    if not marked and _depth(data) < max_depth:
        return data, []
    return data, _marked_problems(data, max_depth)


def _depth(data: Any) -> int:
    """The nesting depth of ``data``'s deepest array or object (0 for a scalar or a flat
    document), walked level by level over the containers only."""
    level = [data] if type(data) in _CONTAINERS else []
    depth = -1
    while level:  # one comprehension per level: big documents have few levels, many values
        depth += 1
        level = [v for c in level for v in (c if type(c) is list else c.values())
                 if type(v) in _CONTAINERS]
    return max(depth, 0)


def key_path(path: str, key: str) -> str:
    """``path.key`` for a plain key, else ``path["..."]`` with the key escaped and cut."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}"
    return f"{path}[{shown(key, 40)}]"


def _marked_problems(data: Any, max_depth: int = MAX_DEPTH) -> list[tuple[str, str]]:
    """Walk ``data`` (iteratively) for duplicate keys, marked values and deep nesting."""
    problems: list[tuple[str, str]] = []
    stack: list[tuple[str, Any, int]] = [("$", data, 0)]
    too_deep = False
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, _Marked):
            problems.append((path, value.problem))
        elif isinstance(value, (dict, list)) and depth >= max_depth:
            if not too_deep:
                problems.append((path, f"nested more than {max_depth} levels deep"))
            too_deep = True
        elif isinstance(value, dict):
            for key in getattr(value, "duplicates", ()):
                problems.append((key_path(path, key), DUPLICATE))
            stack.extend((key_path(path, k), v, depth + 1)
                         for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v, depth + 1)
                         for i, v in reversed(list(enumerate(value))))
    return problems
