"""Rules for the text a canvas holds: node ids, titles and names, and how values are echoed.

- A node id is 1-64 characters from ``A-Z a-z 0-9 _ -``. Ids are internal handles (free text
  belongs in titles), so ``NODE.PORT`` is never ambiguous, and no id can carry a newline, quote
  or control character anywhere. People read titles (:mod:`engine.graph.labels`); results files use
  Output names and titles (:mod:`engine.graph.result_names`).
- A title or name (a block's title, an Output's name) is at most 200 characters with no control
  characters (Unicode category Cc), no surrogates and no line or paragraph separators.

Messages quote user values through :func:`shown`, which cuts them to a readable length, so a
100 kB value never ends up in an error message. Names read from files (a model's layer names)
are printed and put in titles through :func:`escaped`, so no control character reaches a terminal
or a canvas.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_TITLE = 200
_SEPARATORS = {"\u2028", "\u2029"}


def id_problem(value: object) -> str | None:
    """Why ``value`` is not a valid node id (None when it is one)."""
    if not isinstance(value, str):
        return f"expected a string id, got {shown(value)}"
    if not ID_PATTERN.fullmatch(value):
        return (f"node id {shown(value)} must be 1-64 characters from A-Z a-z 0-9 _ - "
                "(put free text in the title)")
    return None


def text_problem(value: object, what: str = "title") -> str | None:
    """Why ``value`` is not a valid title or name (None when it is one)."""
    if not isinstance(value, str):
        return f"{what} must be a string, got {shown(value)}"
    if len(value) > MAX_TITLE:
        return f"{what} has {len(value)} characters, more than {MAX_TITLE}"
    if value.isprintable():  # no Cc, Cs, Zl or Zp character: the scan below finds nothing
        return None
    for i, ch in enumerate(value):
        cat = unicodedata.category(ch)
        if cat == "Cc" or cat == "Cs" or ch in _SEPARATORS:
            kind = {"Cc": "a control character", "Cs": "a surrogate"}.get(cat, "a line break")
            return f"{what} has {kind} (U+{ord(ch):04X}) at position {i}"
    return None


def shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (``...`` and the length when cut), with
    every non-ASCII character escaped so that printing it can never fail."""
    try:
        text = ascii(value)
    except (RecursionError, ValueError):  # a list nested too deep, an int too long
        text = f"<{type(value).__name__}>"
    if len(text) <= limit:
        return text
    return f"{text[: limit - 3]}... ({len(text)} characters)"


def escaped(text: str, limit: int | None = None) -> str:
    """``text`` safe for a terminal and for a title: every character ``str.isprintable``
    refuses (control characters such as BEL and ESC, format and bidi characters, surrogates,
    line separators) written as ``repr`` writes it (``\\x07``, ``\\x1b``, ``\\u202e``), other
    characters unchanged; cut to ``limit`` characters (ending in ``...``) when longer. With
    ``limit`` at most :data:`MAX_TITLE` the result passes :func:`text_problem`. A value that is
    not a string (a name a corrupt file gives as a number) is escaped as its ``str``."""
    text = text if isinstance(text, str) else str(text)
    if text.isprintable() and (limit is None or len(text) <= limit):
        return text  # nothing to escape or cut (a whole table's cells pass here)
    if limit is not None:
        text = text[: limit + 1]  # enough to know whether it is cut
    out = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    if limit is not None and len(out) > limit:
        out = out[: max(limit - 3, 0)] + "..."
    return out


#: Characters a suggested file name keeps; others become ``_``.
_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
#: Windows device names: a file named one of them, with any extension and in any case, is the
#: device, not a file.
RESERVED_STEMS = frozenset({"CON", "PRN", "AUX", "NUL", *(f"{port}{i}" for port in ("COM", "LPT")
                                                         for i in range(10))})


def file_stem(text: str, limit: int = 100) -> str:
    """A file name stem suggested from a name read from a file (a model layer's): only
    ``A-Z a-z 0-9 . _ -``, at most ``limit`` characters, no leading or trailing dot (so never
    ``..``, a hidden file, a path or a control character), never a Windows device name with
    any extension (``CON``, ``nul.x``, ``com1`` get a leading ``_``); ``layer`` when nothing
    is left."""
    stem = _FILE_CHARS.sub("_", escaped(text, limit)).strip(".")
    if stem.partition(".")[0].upper() in RESERVED_STEMS:
        stem = f"_{stem}"[:limit].rstrip(".")
    return stem or "layer"


def safe_stems(names: Iterable[str], limit: int = 100) -> list[str]:
    """A :func:`file_stem` for each of ``names``, in order, no two the same ignoring case (one
    file on macOS and Windows): a later name whose stem is taken gets ``_2``, ``_3``..."""
    taken: set[str] = set()
    out = []
    for name in names:
        base = file_stem(name, limit)
        stem, k = base, 1
        while stem.lower() in taken:
            k += 1
            stem = f"{base}_{k}"
        taken.add(stem.lower())
        out.append(stem)
    return out


#: Words that start with a vowel letter but a consonant sound, or the reverse (lower case).
_CONSONANT_SOUND = ("one", "once", "uni", "use", "usu", "uti", "ura", "ure", "uro", "eu")
_VOWEL_SOUND = ("hour", "honest", "honour", "heir")
#: Letters whose names start with a vowel sound (an initialism such as NHWC reads "en-...").
_VOWEL_LETTERS = set("AEFHILMNORSX")


def article(word: str) -> str:
    """``word`` after "a" or "an", as it is read aloud: ``an AdjointCheck``, ``a Conv2D``,
    ``an 8-D``, ``an 11-D``, ``an NHWC`` (an initialism is read letter by letter),
    ``a unit``, ``an hour``. Words starting with a punctuation mark take "a"."""
    if not word:
        return "a"
    lower = word.lower()
    digits = len(word) - len(word.lstrip("0123456789"))
    if digits:  # eight, eleven, eighteen, eighty, eight hundred ..., eleven thousand ...
        number = word[:digits]
        vowel = number[0] == "8" or (digits % 3 == 2 and number[:2] in ("11", "18"))
    elif lower.startswith(_VOWEL_SOUND):
        vowel = True
    elif lower.startswith(_CONSONANT_SOUND):
        vowel = False
    else:
        letters = word.split("-")[0].split(" ")[0]
        if len(letters) > 1 and letters.isalpha() and letters.isupper():
            vowel = letters[0] in _VOWEL_LETTERS
        else:
            vowel = lower[0] in "aeiou"
    return f"{'an' if vowel else 'a'} {word}"


def counted(count: int, noun: str) -> str:
    """``1 problem``, ``2 problems``: every count of things in a message."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
