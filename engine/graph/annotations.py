"""Frames and notes: what a canvas shows besides blocks (format version 2). They carry no
computation: the compiler, executor, export and CLI never look at them.

- A frame is a titled, coloured rectangle drawn behind blocks (moving it moves what it holds):
  ``{"id", "title", "colour": "#rrggbb", "pos": [x, y], "size": [width, height]}``.
- A note is plain text on a coloured sticky note (never interpreted as HTML or markup):
  ``{"id", "text", "colour": "#rrggbb", "pos": [x, y], "size": [width, height]}``.

Ids follow :func:`engine.base.names.id_problem` (unique across blocks, frames and notes), titles
:func:`engine.base.names.text_problem`, note text :func:`note_text_problem`; positions are finite,
sizes between :data:`MIN_SIZE` and :data:`MAX_SIZE`, colours ``#rrggbb`` (stored lower case).
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from engine.base.errors import InvalidArgumentError
from engine.base.names import id_problem, shown, text_problem
from engine.io import strict_json

FRAME_COLOUR = "#3465a4"
NOTE_COLOUR = "#fce94f"
FRAME_SIZE = (400.0, 260.0)
NOTE_SIZE = (220.0, 120.0)
#: Colours offered by the app (any ``#rrggbb`` loads).
COLOURS = {"Blue": "#3465a4", "Teal": "#05818a", "Green": "#4e9a06", "Yellow": "#fce94f",
           "Orange": "#ce5c00", "Red": "#a40000", "Purple": "#75507b", "Grey": "#555753"}
MIN_SIZE = 40.0
MAX_SIZE = 100_000.0
MAX_NOTE_TEXT = 10_000
_COLOUR = re.compile(r"#[0-9a-fA-F]{6}")


@dataclass
class Frame:
    """A titled, coloured rectangle at ``pos`` (top-left) of ``size`` (width, height)."""

    id: str
    title: str = "Frame"
    colour: str = FRAME_COLOUR
    pos: tuple[float, float] = (0.0, 0.0)
    size: tuple[float, float] = FRAME_SIZE


@dataclass
class Note:
    """Plain ``text`` on a coloured sticky note at ``pos`` (top-left) of ``size``."""

    id: str
    text: str = ""
    colour: str = NOTE_COLOUR
    pos: tuple[float, float] = (0.0, 0.0)
    size: tuple[float, float] = NOTE_SIZE


# -- value rules ------------------------------------------------------------------------------------
def is_finite(v: Any) -> bool:
    """A finite JSON number (not a boolean; an int too large for a float is not finite)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def position(value: Any) -> tuple[float, float]:
    """``value`` as two finite floats, or an error naming ``pos``."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(map(is_finite, value)):
        return float(value[0]), float(value[1])
    raise InvalidArgumentError(f"pos must be [x, y] finite numbers, got {shown(value)}",
                               argument="pos")


def size(value: Any) -> tuple[float, float]:
    """``value`` as [width, height], each from MIN_SIZE to MAX_SIZE, or an error naming size."""
    if (isinstance(value, (list, tuple)) and len(value) == 2 and all(map(is_finite, value))
            and all(MIN_SIZE <= float(v) <= MAX_SIZE for v in value)):
        return float(value[0]), float(value[1])
    raise InvalidArgumentError(f"size must be [width, height], each from {MIN_SIZE:g} to "
                               f"{MAX_SIZE:g}, got {shown(value)}", argument="size")


def colour(value: Any) -> str:
    """``value`` as a lower-case ``#rrggbb`` colour, or an error naming colour."""
    if isinstance(value, str) and _COLOUR.fullmatch(value):
        return value.lower()
    raise InvalidArgumentError(f"colour must be \"#rrggbb\" (six hex digits), got "
                               f"{shown(value)}", argument="colour")


def note_text_problem(value: Any) -> str | None:
    """Why ``value`` is not a note's text (None when it is): a string of at most
    MAX_NOTE_TEXT characters; line breaks (\\n) and tabs are kept, other control characters,
    surrogates and Unicode line/paragraph separators are refused."""
    if not isinstance(value, str):
        return f"text must be a string, got {shown(value)}"
    if len(value) > MAX_NOTE_TEXT:
        return f"text has {len(value)} characters, more than {MAX_NOTE_TEXT}"
    for i, ch in enumerate(value):
        if ch in "\n\t":
            continue
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cs") or ch in "\u2028\u2029":
            kind = {"Cc": "a control character", "Cs": "a surrogate"}.get(cat, "a line "
                                                                          "separator")
            return f"text has {kind} (U+{ord(ch):04X}) at position {i}"
    return None


def title(value: Any) -> str:
    problem = text_problem(value)
    if problem:
        raise InvalidArgumentError(problem, argument="title")
    return value


def note_text(value: Any) -> str:
    problem = note_text_problem(value)
    if problem:
        raise InvalidArgumentError(problem, argument="text")
    return value


# -- JSON ------------------------------------------------------------------------------------------
def frame_json(f: Frame) -> dict:
    return {"id": f.id, "title": f.title, "colour": f.colour, "pos": list(f.pos),
            "size": list(f.size)}


def note_json(n: Note) -> dict:
    return {"id": n.id, "text": n.text, "colour": n.colour, "pos": list(n.pos),
            "size": list(n.size)}


#: field -> (validator, default); a missing field takes the default
_FRAME_FIELDS = {"title": (title, "Frame"), "colour": (colour, FRAME_COLOUR),
                 "pos": (position, None), "size": (size, FRAME_SIZE)}
_NOTE_FIELDS = {"text": (note_text, ""), "colour": (colour, NOTE_COLOUR),
                "pos": (position, None), "size": (size, NOTE_SIZE)}


def parse_item(kind: str, raw: Any, path: str, taken: set[str],
               problems: list[tuple[str, str]]) -> Frame | Note | None:
    """A frame or note (``kind``) from JSON, or None with its problems at their JSON paths.

    ``pos`` is required; the other fields take their defaults. ``taken`` holds the ids already
    used by blocks, frames and notes."""
    cls, fields = (Frame, _FRAME_FIELDS) if kind == "frame" else (Note, _NOTE_FIELDS)
    if not isinstance(raw, dict):
        problems.append((path, "expected an object"))
        return None
    before = len(problems)
    for key in sorted(set(raw) - {"id", *fields}):
        problems.append((strict_json.key_path(path, key), "unknown key"))
    item_id = raw.get("id")
    problem = id_problem(item_id)
    if problem:
        problems.append((f"{path}.id", problem))
    elif item_id in taken:
        problems.append((f"{path}.id", (f"duplicate id {item_id!r} (ids are unique across "
                                        "blocks, frames and notes)")))
    values: dict[str, Any] = {}
    for name, (check, default) in fields.items():
        if name not in raw and default is None:
            problems.append((f"{path}.{name}", "missing"))
            continue
        try:
            values[name] = check(raw[name]) if name in raw else default
        except InvalidArgumentError as err:
            problems.append((f"{path}.{name}", str(err)))
    if len(problems) > before:
        return None
    assert isinstance(item_id, str)  # id_problem found none
    return cls(item_id, **values)
