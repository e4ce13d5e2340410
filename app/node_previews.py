"""Previews on the canvas: each block with a result shows a thumbnail of its main output under
its ports, and check blocks (a spec ``verdict``) a PASS / FAIL badge; View > Show Previews hides
them (persisted in QSettings).

The thumbnail is :func:`engine.view.thumbnail.thumbnail` of the session's output, so its pixels are
the viewer's colours of the viewer's first view. A one-element main output (0-D, or shape
[1, 1, 1, 1]) is shown as its number. A result the session drops (the block or an input changed)
takes its preview with it. While previews are shown every block keeps the preview area its result
will fill, sized from the plan's inferred shapes (a dashed outline before its first run), so a
run never resizes blocks.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from app.node_item import BlockItem
from blocks.registry import get_spec
from engine.view.depth_tiles import tiles_shape
from engine.view.stats import default_axes, default_view_axes
from engine.view.thumbnail import picture_size, thumbnail, value_range

SETTINGS_KEY = "view/show_previews"
#: Largest thumbnail (width, height) on a node: small enough for canvases laid out without one.
THUMB_SIZE = (96, 56)
PAD = 6.0
GAP = 6.0
PASS_COLOR = QtGui.QColor(46, 160, 80)
FAIL_COLOR = QtGui.QColor(205, 55, 50)
FRAME_COLOR = QtGui.QColor(20, 22, 25)
PLACEHOLDER_COLOR = QtGui.QColor(150, 156, 164, 70)
VALUE_COLOR = QtGui.QColor(220, 224, 228)


def rgba_pixmap(img: np.ndarray) -> QtGui.QPixmap:
    """A QPixmap of an (h, w, 4) uint8 RGBA array."""
    h, w = img.shape[:2]
    data = np.ascontiguousarray(img)
    qimg = QtGui.QImage(data.data, w, h, 4 * w, QtGui.QImage.Format_RGBA8888)
    return QtGui.QPixmap.fromImage(qimg.copy())  # copy: the QImage must not outlive ``data``


def pixmap_rgba(pixmap: QtGui.QPixmap) -> np.ndarray:
    """The (h, w, 4) uint8 RGBA array of a QPixmap (the inverse of :func:`rgba_pixmap`)."""
    img = pixmap.toImage().convertToFormat(QtGui.QImage.Format_RGBA8888)
    h, w = img.height(), img.width()
    return np.frombuffer(img.constBits(), np.uint8, img.bytesPerLine() * h).reshape(
        h, img.bytesPerLine() // 4, 4)[:, :w].copy()


def range_text(a: np.ndarray, scan) -> str:
    """``min .. max, shape [..] dtype`` of the finite values (the preview's tooltip); ``scan``
    is ``value_range(a)``."""
    rng, nonfinite = scan
    values = f"{rng[0]:.6g} .. {rng[1]:.6g}" if rng else "no finite values"
    bad = "  (holds NaN/Inf: magenta)" if nonfinite else ""
    return f"{values}, shape {list(a.shape)} {a.dtype.name}{bad}"


def preview_content(a: np.ndarray, axes: tuple[str, ...] | None, size: tuple[int, int]
                    ) -> tuple[QtGui.QPixmap | None, str | None, str]:
    """(thumbnail pixmap or None, value text of a one-element tensor or None, tooltip) of a
    result;
    one pass over the values serves the colours and the tooltip."""
    a = np.asarray(a)
    if not a.size:
        return None, None, f"empty, shape {list(a.shape)} {a.dtype.name}"
    values = a.view(np.uint8) if a.dtype == np.bool_ else a
    scan = value_range(values)
    if a.size == 1:  # a scalar, or one element in any shape: its number, not one colour
        return None, scalar_text(a.reshape(())), range_text(a, scan)
    return rgba_pixmap(thumbnail(a, axes, size, scan)), None, range_text(a, scan)


def scalar_text(a: np.ndarray) -> str:
    """A 0-D value as the node shows it: ``true`` / ``false``, an integer, or 6 digits."""
    if a.dtype == np.bool_:
        return str(bool(a)).lower()
    if a.dtype.kind in "iu":
        return str(int(a))
    return f"{float(a):.6g}"


def picture_cells(shape: tuple[int, ...], axes: tuple[str, ...] | None) -> tuple[int, int]:
    """(rows, cols) of the view a thumbnail of a tensor of ``shape`` draws (the cells of
    :func:`engine.view.thumbnail.thumbnail_view`, known before any value is)."""
    names = tuple(axes) if axes and len(axes) == len(shape) else default_axes(len(shape))
    tiles = tiles_shape(tuple(shape), names)
    if tiles is not None:
        kh, kw, cin, cout = tiles
        return cin * (kh + 1) - 1, cout * (kw + 1) - 1
    if len(shape) < 2:
        return 1, (shape[0] if shape else 1)
    r, c = default_view_axes(names)
    return shape[r], shape[c]


class BadgeItem(QtWidgets.QGraphicsItem):
    """A rounded label: white bold text on a coloured background."""

    def __init__(self, parent: QtWidgets.QGraphicsItem):
        super().__init__(parent)
        self.text = ""
        self.color = PASS_COLOR
        self.font = QtGui.QFont()
        self.font.setBold(True)
        self.font.setPointSizeF(8.5)

    def set(self, text: str, color: QtGui.QColor) -> None:
        self.prepareGeometryChange()
        self.text, self.color = text, color
        self.update()

    def boundingRect(self) -> QtCore.QRectF:
        m = QtGui.QFontMetricsF(self.font)
        return QtCore.QRectF(0, 0, m.horizontalAdvance(self.text) + 12, m.height() + 6)

    def paint(self, painter, option, widget=None) -> None:
        r = self.boundingRect()
        painter.setRenderHint(QtGui.QPainter.Antialiasing)
        painter.setPen(QtCore.Qt.NoPen)
        painter.setBrush(self.color)
        painter.drawRoundedRect(r, 4, 4)
        painter.setPen(QtGui.QColor(255, 255, 255))
        painter.setFont(self.font)
        painter.drawText(r, QtCore.Qt.AlignCenter, self.text)


class PreviewNodeItem(BlockItem):
    """A block's node item (:class:`app.node_item.BlockItem`) with a preview area (thumbnail or
    value, and a badge) under its ports: the node's size includes the area, and every
    ``draw_node`` places it again. The area has a fixed size (:data:`THUMB_SIZE`) whether or
    not a result is shown, so a run never makes a block bigger (into its neighbours or out of
    the view); hiding previews removes it."""

    #: (width, height) of the preview area kept whether or not a result is shown (None: none)
    preview_slot: tuple[float, float] | None = None

    def __init__(self, name="node", parent=None):
        super().__init__(name, parent)
        self.preview_pixmap = QtWidgets.QGraphicsPixmapItem(self)
        self.preview_pixmap.setTransformationMode(QtCore.Qt.FastTransformation)
        self.preview_frame = QtWidgets.QGraphicsRectItem(self)
        self.preview_frame.setPen(QtGui.QPen(FRAME_COLOR, 1.0))
        self.preview_value = QtWidgets.QGraphicsSimpleTextItem(self)
        self.preview_value.setBrush(VALUE_COLOR)
        self.preview_badge = BadgeItem(self)
        for item in self.preview_parts():
            item.setVisible(False)
        # the empty slot before a run: a faint outline where the thumbnail will be
        self.preview_placeholder = QtWidgets.QGraphicsRectItem(self)
        pen = QtGui.QPen(PLACEHOLDER_COLOR, 1.0, QtCore.Qt.DashLine)
        self.preview_placeholder.setPen(pen)
        self.preview_placeholder.setToolTip("no result yet: Run (F5) draws a preview here")

    def preview_parts(self):
        return (self.preview_pixmap, self.preview_frame, self.preview_value, self.preview_badge)

    def set_preview(self, pixmap: QtGui.QPixmap | None, value: str | None,
                    badge: tuple[str, QtGui.QColor] | None, tooltip: str) -> None:
        """Show ``pixmap`` (or the text ``value``) and ``badge`` (text, colour); all None: no
        preview. The node is laid out again."""
        self.preview_pixmap.setVisible(pixmap is not None)
        self.preview_frame.setVisible(pixmap is not None)
        if pixmap is not None:
            self.preview_pixmap.setPixmap(pixmap)
            self.preview_frame.setRect(QtCore.QRectF(-0.5, -0.5, pixmap.width() + 1,
                                                     pixmap.height() + 1))
        self.preview_value.setVisible(value is not None)
        if value is not None:
            self.preview_value.setText(value)
        self.preview_badge.setVisible(badge is not None)
        if badge is not None:
            self.preview_badge.set(*badge)
        for item in self.preview_parts():
            item.setToolTip(tooltip)
        self.draw_node()

    def _preview_boxes(self) -> list[tuple[QtWidgets.QGraphicsItem, QtCore.QSizeF]]:
        """The visible parts, left to right, with their sizes."""
        boxes = []
        if self.preview_pixmap.isVisibleTo(self):  # shown by set_preview (the node may be not)
            p = self.preview_pixmap.pixmap()
            boxes.append((self.preview_pixmap, QtCore.QSizeF(p.width(), p.height())))
        if self.preview_value.isVisibleTo(self):
            boxes.append((self.preview_value, self.preview_value.boundingRect().size()))
        if self.preview_badge.isVisibleTo(self):
            boxes.append((self.preview_badge, self.preview_badge.boundingRect().size()))
        return boxes

    def set_slot(self, size: tuple[float, float] | None) -> None:
        """Keep a preview area of ``size`` (what the block's result will show: a run never
        makes the block bigger), or none (previews hidden); relaid out when this changes."""
        if size != self.preview_slot:
            self.preview_slot = size
            self.draw_node()

    def _content_size(self, boxes) -> tuple[float, float]:
        if not boxes:
            return 0.0, 0.0
        width = sum(s.width() for _i, s in boxes) + GAP * (len(boxes) - 1)
        return width, max(s.height() for _i, s in boxes)

    def preview_size(self) -> tuple[float, float]:
        """(width, height) of the preview area: the slot's size (or the content's, when
        bigger); (0, 0) when nothing is shown and no slot is kept."""
        width, height = self._content_size(self._preview_boxes())
        if self.preview_slot:
            return max(width, self.preview_slot[0]), max(height, self.preview_slot[1])
        return width, height

    def calc_size(self, add_w=0.0, add_h=0.0):
        width, height = super().calc_size(add_w, add_h)  # with the badge's row
        pw, ph = self.preview_size()
        if ph:
            width = max(width, pw + 2 * PAD)
            height += ph  # the badge's row under it is its bottom margin
        return width, height

    def draw_node(self):
        super().draw_node()
        boxes = self._preview_boxes()
        _pw, ph = self.preview_size()
        top = self.badge_top() - ph  # the run badge's row under it
        empty = bool(self.preview_slot) and not boxes
        self.preview_placeholder.setVisible(empty)
        if empty:
            sw, sh = self.preview_slot
            self.preview_placeholder.setRect(QtCore.QRectF((self.width - sw) / 2, top, sw, sh))
        if not boxes:
            return
        x = (self.width - self._content_size(boxes)[0]) / 2
        for item, size in boxes:
            item.setPos(x, top + (ph - size.height()) / 2)
            if item is self.preview_pixmap:
                self.preview_frame.setPos(x, top + (ph - size.height()) / 2)
            x += size.width() + GAP


#: Opacity of the preview of a stale result (greyed like the viewer).
STALE_OPACITY = 0.35


class NodePreviews(QtCore.QObject):
    """Keeps every node's preview equal to the session's current results (and the toggle)."""

    def __init__(self, session, settings: QtCore.QSettings,
                 parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.session, self.adapter, self.settings = session, session.adapter, settings
        self.size = THUMB_SIZE
        # node id -> (view, array, verdict, visible, why stale or None)
        self._shown: dict[str, tuple] = {}
        shown = settings.value(SETTINGS_KEY, True)
        self.action = QtGui.QAction("Show &Previews", parent)
        self.action.setCheckable(True)
        self.action.setChecked(shown not in (False, "false", "0", 0))
        self.action.setStatusTip("Show a thumbnail of each block's result and PASS / FAIL on "
                                 "checks")
        self.action.toggled.connect(self._toggled)
        # not adapter.synced: during a reload the session still holds the old canvas's results
        session.plan_changed.connect(lambda _plan: self.update())
        session.results_changed.connect(self.update)
        self.update()

    @property
    def visible(self) -> bool:
        return self.action.isChecked()

    def _toggled(self, on: bool) -> None:
        self.settings.setValue(SETTINGS_KEY, bool(on))
        self.update()

    def update(self) -> None:
        """Redraw the previews of nodes whose result, view item or visibility changed."""
        canvas = self.session.doc.canvas
        stale = self.session.stale_nodes()
        for cid in [c for c in self._shown if c not in canvas.nodes]:
            del self._shown[cid]
        for cid, node in canvas.nodes.items():
            try:
                view = self.adapter.node(cid).view
            except KeyError:
                continue
            if not isinstance(view, PreviewNodeItem):
                continue
            spec = get_spec(node.type)
            # a block the plan cannot infer (invalid) keeps the area it had: no size change
            slot = (self._slot(cid, spec, view) or view.preview_slot) if self.visible else None
            view.set_slot(slot)
            port = spec.main_output_name()
            arr = self.session.outputs.get((cid, port)) if port else None
            verdict = self.session.outputs.get((cid, spec.verdict)) if spec.verdict else None
            state = (view, arr, verdict, self.visible, stale.get(cid))
            old = self._shown.get(cid)
            if old is not None and all(a is b for a, b in zip(old[:3], state[:3], strict=True)) \
                    and old[3:] == state[3:]:
                continue
            self._shown[cid] = state
            self._draw(cid, view, spec, port, arr, verdict, stale.get(cid))

    def _draw(self, cid: str, view: PreviewNodeItem, spec, port, arr, verdict,
              stale: str | None = None) -> None:
        """Show the preview; a stale one (``stale``: why) is greyed, the reason in its tooltip."""
        if not self.visible or (arr is None and verdict is None):
            view.set_preview(None, None, None, "")
        else:
            pixmap = value = badge = None
            tips = []
            if arr is not None:
                try:
                    pixmap, value, tip = preview_content(arr, self._axes(cid, port), self.size)
                except (TypeError, ValueError, MemoryError) as exc:  # a result no view draws
                    value, tip = "no preview", f"no preview: {exc}"
                tips.append(f"{cid}.{port}: {tip}")
            if verdict is not None:
                passed = bool(np.asarray(verdict))
                badge = ("PASS", PASS_COLOR) if passed else ("FAIL", FAIL_COLOR)
                tips.append(f"{spec.verdict} = {str(passed).lower()}")
            if stale:
                tips.insert(0, f"stale: {stale}")
            view.set_preview(pixmap, value, badge, "\n".join(tips))
        for item in view.preview_parts():
            item.setOpacity(STALE_OPACITY if stale else 1.0)
        self.session.decorator.place_badge(cid)

    def _slot(self, cid: str, spec, view: PreviewNodeItem) -> tuple[float, float] | None:
        """The size of what a run will show on ``cid`` (thumbnail or value, and badge), from
        the plan's inferred shapes; None when the plan does not know."""
        plan = self.session.plan
        port = spec.main_output_name()
        ts = plan.specs.get((cid, port)) if plan is not None and port else None
        boxes = []
        if ts is not None and math.prod(ts.shape) == 1:
            boxes.append((0.0, QtGui.QFontMetricsF(view.preview_value.font()).height()))
        elif ts is not None and math.prod(ts.shape) > 1:
            h, w = picture_size(picture_cells(ts.shape, self._axes(cid, port)), self.size)
            boxes.append((float(w), float(h)))
        if spec.verdict and plan is not None and (cid, spec.verdict) in plan.specs:
            boxes.append((0.0, QtGui.QFontMetricsF(view.preview_badge.font).height() + 6))
        if not boxes:
            return None
        return (sum(b[0] for b in boxes) + GAP * (len(boxes) - 1), max(b[1] for b in boxes))

    def _axes(self, cid: str, port: str):
        return self.session.axes(cid, port)  # a stale result keeps the layout it had


def preview_of(view) -> np.ndarray | None:
    """The RGBA pixels a node item's thumbnail shows (None: no visible thumbnail)."""
    item = getattr(view, "preview_pixmap", None)
    if item is None or not item.isVisible():
        return None
    return pixmap_rgba(item.pixmap())

