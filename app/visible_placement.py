"""Where a block added by a wire drop, or a pasted group, goes so that the user sees it.

The group is first shifted into the visible canvas (its top-left corner kept in view when it is
bigger than the view), then to the nearest spot inside the view where it covers no block
(:func:`app.placement.free_offset` with the outside of the view as walls). When the view has
no such spot, it goes to the nearest free spot beyond, and :func:`reveal` pans (or zooms out,
never below the readable zoom) until it is in view. Boxes are ``(x, y, width, height)`` in scene
units.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from PySide6 import QtCore

from app import view_zoom
from app.placement import free_offset

Box = tuple[float, float, float, float]
#: Room kept between a placed group and the edges of the view (pixels on screen).
VIEW_MARGIN_PX = 12.0
#: Thickness of the walls standing for the outside of the view (scene units).
WALL = 1.0e7
#: Room kept between a placed group and the blocks around it (scene units).
GAP = 12.0
#: Width a new block's port labels gain once its shapes are inferred (``output 4×12×12×3 f32``).
LABEL_ROOM = 100.0


@functools.cache
def new_block_size(type_id: str) -> tuple[float, float]:
    """The size a new block of ``type_id`` is drawn at, plus :data:`LABEL_ROOM` across for the
    shape labels it gets once inferred and the room of the largest preview down (the preview
    area a wired block gets once its shapes are known: :mod:`app.node_previews`)."""
    from app.node_classes import node_class
    from app.node_previews import THUMB_SIZE
    from blocks.registry import get_spec

    view = node_class(get_spec(type_id))().view
    view.draw_node()
    room = 0.0 if getattr(view, "preview_slot", None) else float(THUMB_SIZE[1])
    return float(view.width) + LABEL_ROOM, float(view.height) + room


def view_box(viewer, margin_px: float = VIEW_MARGIN_PX) -> Box:
    """The visible part of the scene, less ``margin_px`` screen pixels on each side."""
    r = viewer.mapToScene(viewer.viewport().rect()).boundingRect()
    m = margin_px / max(viewer.transform().m11(), 1e-9)
    return (r.x() + m, r.y() + m, max(r.width() - 2 * m, 0.0), max(r.height() - 2 * m, 0.0))


def bounds(group: Sequence[Box]) -> Box:
    x0, y0 = min(b[0] for b in group), min(b[1] for b in group)
    x1, y1 = max(b[0] + b[2] for b in group), max(b[1] + b[3] for b in group)
    return x0, y0, x1 - x0, y1 - y0


def into_view(box: Box, view: Box) -> tuple[float, float]:
    """The shift that puts ``box`` inside ``view`` (its top-left corner when it is bigger)."""
    shift = []
    for lo, size, vlo, vsize in ((box[0], box[2], view[0], view[2]),
                                 (box[1], box[3], view[1], view[3])):
        if size >= vsize or lo < vlo:
            shift.append(vlo - lo)
        elif lo + size > vlo + vsize:
            shift.append(vlo + vsize - lo - size)
        else:
            shift.append(0.0)
    return shift[0], shift[1]


def _walls(view: Box, gap: float) -> list[Box]:
    """Boxes around ``view``: a group ``gap`` away from them is inside it."""
    x, y, w, h = view[0] - gap, view[1] - gap, view[2] + 2 * gap, view[3] + 2 * gap
    return [(x - WALL, y - WALL, WALL, h + 2 * WALL), (x + w, y - WALL, WALL, h + 2 * WALL),
            (x - WALL, y - WALL, w + 2 * WALL, WALL), (x - WALL, y + h, w + 2 * WALL, WALL)]


def _overlaps(group: Sequence[Box], boxes: Sequence[Box]) -> bool:
    return any(a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3]
               and b[1] < a[1] + a[3] for a in group for b in boxes)


def _shifted(group: Sequence[Box], dx: float, dy: float) -> list[Box]:
    return [(b[0] + dx, b[1] + dy, b[2], b[3]) for b in group]


def visible_offset(occupied: Sequence[Box], group: Sequence[Box], view: Box
                   ) -> tuple[float, float]:
    """The shift of ``group`` to the nearest spot inside ``view`` that covers no ``occupied``
    box; when there is none, to the nearest free spot outside (then :func:`reveal` it)."""
    if not group:
        return 0.0, 0.0
    sx, sy = into_view(bounds(group), view)
    moved = _shifted(group, sx, sy)
    b = bounds(moved)
    if b[2] <= view[2] and b[3] <= view[3]:
        walled = [*occupied, *_walls(view, GAP)]
        dx, dy = free_offset(walled, moved, gap=GAP)
        if not _overlaps(_shifted(moved, dx, dy), walled):
            return sx + dx, sy + dy
    dx, dy = free_offset(occupied, moved, gap=GAP)
    return sx + dx, sy + dy


def reveal(viewer, rect: QtCore.QRectF, min_scale: float) -> None:
    """Pan the view until ``rect`` (scene) is in it; zoom out first when it is bigger than the
    view (not below ``min_scale``)."""
    x, y, w, h = view_box(viewer)
    if QtCore.QRectF(x, y, w, h).contains(rect):
        return
    if rect.width() > w or rect.height() > h:
        view_zoom.frame(viewer, rect, min_scale)
        return
    dx, dy = into_view((rect.x(), rect.y(), rect.width(), rect.height()), (x, y, w, h))
    center = view_zoom.visible_rect(viewer).center() - QtCore.QPointF(dx, dy)
    shown = viewer.scene_rect()[2]  # the scale asked of NodeGraphQt's viewer, kept
    scale = viewer.viewport().width() / shown if shown > 0 else view_zoom.view_scale(viewer)
    view_zoom.set_view(viewer, center, scale)
