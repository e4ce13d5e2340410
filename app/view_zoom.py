"""Zoom and framing of the canvas view: fit all, frame selected, zoom in/out, 100 %.

Framing a set of blocks zooms so they fill the view, but never below :func:`readable_scale` (the
scale at which node titles are :data:`MIN_TITLE_PX` pixels tall on screen) and never above
:data:`MAX_FIT_SCALE` (tiny canvases stay at 100 %). Blocks that do not fit at the readable
scale are shown from their top-left corner (graphs read left to right, inputs first).

NodeGraphQt's viewer keeps the visible scene range itself (``set_scene_rect`` / ``scene_rect``,
then ``fitInView``); every change here goes through those public methods.
"""

from __future__ import annotations

from PySide6 import QtCore, QtGui

#: Node titles are at least this many pixels tall on screen after fitting.
MIN_TITLE_PX = 10.0
#: Fitting never magnifies beyond 100 %.
MAX_FIT_SCALE = 1.0
#: Manual zoom limits (NodeGraphQt's wheel zoom allows scales 0.05 .. 3).
MIN_SCALE, MAX_SCALE = 0.05, 3.0
#: One Zoom In / Zoom Out step.
ZOOM_STEP = 1.25
#: Scene units left around framed blocks.
MARGIN = 40.0


def view_scale(viewer) -> float:
    """The view's current scale (screen pixels per scene unit)."""
    return float(viewer.transform().m11())


def font_px(font: QtGui.QFont) -> float:
    """Pixel size of ``font`` at 100 %."""
    return float(QtGui.QFontInfo(font).pixelSize() or 12)


def readable_scale(title_font: QtGui.QFont) -> float:
    """The smallest scale at which titles in ``title_font`` are :data:`MIN_TITLE_PX` pixels
    tall (at most 100 %)."""
    return min(MAX_FIT_SCALE, MIN_TITLE_PX / max(font_px(title_font), 1.0))


def visible_rect(viewer) -> QtCore.QRectF:
    """The scene rectangle shown in the viewport."""
    return viewer.mapToScene(viewer.viewport().rect()).boundingRect()


def set_view(viewer, center: QtCore.QPointF, scale: float) -> None:
    """Show the scene at ``scale`` centred on ``center``."""
    vp = viewer.viewport().size()
    w, h = max(vp.width(), 1) / scale, max(vp.height(), 1) / scale
    viewer.set_scene_rect([center.x() - w / 2, center.y() - h / 2, w, h])


def frame(viewer, rect: QtCore.QRectF, min_scale: float) -> None:
    """Zoom to show ``rect`` (scene units, plus a margin) as large as fits, between
    ``min_scale`` (the readable scale) and 100 %; too big to fit at ``min_scale``: its
    top-left corner."""
    rect = rect.adjusted(-MARGIN, -MARGIN, MARGIN, MARGIN)
    vp = viewer.viewport().size()
    vw, vh = max(vp.width(), 1), max(vp.height(), 1)
    fit = min(vw / rect.width(), vh / rect.height())
    scale = max(min_scale, min(MAX_FIT_SCALE, fit))
    if scale <= fit:
        set_view(viewer, rect.center(), scale)
        return
    w, h = vw / scale, vh / scale  # the top-left part of rect (centred where it fits)
    cx = rect.center().x() if w >= rect.width() else rect.left() + w / 2
    cy = rect.center().y() if h >= rect.height() else rect.top() + h / 2
    set_view(viewer, QtCore.QPointF(cx, cy), scale)


def _asked_scale(viewer) -> float:
    """The scale last asked of the viewer (its transform is a little smaller: ``fitInView``
    keeps a margin), so repeated steps do not drift."""
    width = viewer.scene_rect()[2]
    return max(viewer.viewport().width(), 1) / width if width > 0 else view_scale(viewer)


def zoom_by(viewer, factor: float) -> None:
    """Zoom about the view centre by ``factor``, within :data:`MIN_SCALE`..:data:`MAX_SCALE`."""
    scale = max(MIN_SCALE, min(MAX_SCALE, _asked_scale(viewer) * factor))
    set_view(viewer, visible_rect(viewer).center(), scale)


def actual_size(viewer) -> None:
    """100 % about the view centre."""
    set_view(viewer, visible_rect(viewer).center(), 1.0)
