"""The default memory limit, in the bottom layer so that the model readers can check a file's
declared sizes against it before allocating anything (the run's :mod:`engine.graph.compiler` and
:mod:`engine.graph.budget` use the same number and the same size wording).

Sizes are Python ints: a declared shape cannot overflow them.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

GIB = 2**30
#: Bytes a run, or one array read from a model file, may need at most (``--memory-limit-gib``'s
#: default).
DEFAULT_MEMORY_LIMIT = 2 * GIB


def gib(n: int) -> str:
    """``n`` bytes for a person: GiB with two decimals from 0.1 GiB (any size: 1e300 GiB
    prints, never overflows), else MiB, KiB or bytes."""
    n = int(n)
    if n < 2**10:
        return f"{n} bytes"
    if n < GIB // 10:
        unit, size = ("KiB", 2**10) if n < 2**20 else ("MiB", 2**20)
        return f"{n / size:.1f} {unit}"
    q = Fraction(n, GIB)
    if q < 10**15:
        return f"{float(q):.2f} GiB"
    return f"{Decimal(q.numerator) / Decimal(q.denominator):.3e} GiB"
