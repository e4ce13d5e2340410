"""Ranking blocks for a search query (palette and Tab popup), Qt-free.

Rank, best first: 0 the query is a block's name (type id or title), 1 a name starts with it,
2 every query word starts a word of a name (``back filt`` -> Conv2D *back*prop *filt*er),
3 every query word is inside a name, 4 every word is somewhere in the name, category, op or
documentation. Ties go to the shorter name (``conv`` -> Conv2D), then the palette's order;
None means no match.
"""

from __future__ import annotations

import re

NO_RANK = None


def _name_words(spec) -> list[str]:
    """Words of the title and of the type id split at case changes and digits."""
    camel = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+[A-Za-z]?", spec.type_id)
    return [w.lower() for w in re.split(r"[\s_]+", spec.title) + camel if w]


def search_rank(spec, query: str) -> int | None:
    """The rank of ``spec`` for ``query`` (see the module docstring); an empty query ranks 0."""
    words = query.lower().split()
    if not words:
        return 0
    forms = ("".join(words), " ".join(words))  # "shape of" also finds ShapeOf
    names = [spec.type_id.lower(), spec.title.lower(), spec.title.lower().replace(" ", "")]
    if any(f in names for f in forms):
        return 0
    if any(n.startswith(forms) for n in names):
        return 1
    name_words = _name_words(spec)
    if all(any(nw.startswith(w) for nw in name_words) for w in words):
        return 2
    if all(any(w in n for n in names) for w in words):
        return 3
    hay = " ".join([*names, spec.category, str(spec.op), spec.doc]).lower()
    if all(w in hay for w in words):
        return 4
    return NO_RANK


def ranked(specs, query: str) -> list:
    """The specs matching ``query``, best first (rank, then name length, then given order);
    all of them in their given order for an empty query."""
    if not query.split():
        return list(specs)
    scored = [(search_rank(s, query), len(s.type_id), i, s) for i, s in enumerate(specs)]
    return [t[3] for t in sorted((t for t in scored if t[0] is not None),
                                 key=lambda t: t[:3])]
