"""Where new blocks go: the nearest spot to where the user wants them that covers no block.

Qt-free: boxes are ``(x, y, width, height)`` in scene units. The search walks square rings of
``step`` around the wanted offset, nearest first, and takes the first offset at which no box of
the group (with a ``gap`` around it) meets a box already on the canvas.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Box = tuple[float, float, float, float]

#: Size assumed for a block whose view is not built yet.
DEFAULT_SIZE = (180.0, 110.0)


def _meets(a: Box, b: Box, gap: float) -> bool:
    return (a[0] < b[0] + b[2] + gap and b[0] < a[0] + a[2] + gap
            and a[1] < b[1] + b[3] + gap and b[1] < a[1] + a[3] + gap)


def _offsets(step: float, rings: int) -> Iterable[tuple[float, float]]:
    """(0, 0), then the points of square rings 1..rings, nearest to the centre first."""
    yield 0.0, 0.0
    for r in range(1, rings + 1):
        ring = [(i, j) for i in range(-r, r + 1) for j in range(-r, r + 1)
                if max(abs(i), abs(j)) == r]
        ring.sort(key=lambda p: (p[0] ** 2 + p[1] ** 2, -p[1], -p[0]))  # down, right first
        for i, j in ring:
            yield i * step, j * step


def free_offset(occupied: Sequence[Box], group: Sequence[Box], step: float = 30.0,
                gap: float = 12.0, rings: int = 40) -> tuple[float, float]:
    """The smallest shift ``(dx, dy)`` of ``group`` so that none of its boxes meets an
    ``occupied`` one; ``(0, 0)`` when nothing is free within ``rings`` steps."""
    if not occupied or not group:
        return 0.0, 0.0
    gx0 = min(b[0] for b in group) - step * rings
    gy0 = min(b[1] for b in group) - step * rings
    gx1 = max(b[0] + b[2] for b in group) + step * rings
    gy1 = max(b[1] + b[3] for b in group) + step * rings
    near = [b for b in occupied  # only boxes the search can reach
            if b[0] < gx1 + gap and b[0] + b[2] > gx0 - gap
            and b[1] < gy1 + gap and b[1] + b[3] > gy0 - gap]
    for dx, dy in _offsets(step, rings):
        moved = [(b[0] + dx, b[1] + dy, b[2], b[3]) for b in group]
        if not any(_meets(m, o, gap) for m in moved for o in near):
            return dx, dy
    return 0.0, 0.0
