"""One picture of the tensor viewer: an image with integer ticks at cell centres, the view range
exactly the image, and a colour bar (two colours and a False/True legend for booleans)."""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from engine.view.tensor_view import Picture, Ticks, image_range

pg.setConfigOptions(imageAxisOrder="row-major", antialias=False)

DIVERGING = "CET-D1"
SEQUENTIAL = "viridis"
BACKGROUND = "#1e2124"
TITLE_COLOR = "#d0d4d8"
#: False and True of a boolean picture
BOOL_COLORS = ((52, 56, 62), (240, 190, 60))
BOOL_LUT = np.array(BOOL_COLORS, dtype=np.uint8)
#: Room for colour-bar labels such as "-1.234e-05" (the axis' own guess cuts them)
BAR_AXIS_WIDTH = 64


def bool_legend_html() -> str:
    """The legend of a boolean picture: a swatch and the word for each value."""
    swatch = "<span style='color: rgb{}'>&#9632;</span> {}"
    return "<br>".join(swatch.format(c, name) for c, name in zip(BOOL_COLORS, ("False", "True"),
                                                                  strict=True))


class ElidedTitle(pg.LabelItem):
    """A plot title that never widens its plot: it takes the width the layout gives it and
    shows as much of the text as fits, ending in "…" (the whole title in its tooltip).
    ``text`` is the whole title, ``shown`` the text drawn."""

    shown = ""
    _fitting = False

    def setText(self, text, **args) -> None:
        self._fit(text, args)

    def _fit(self, text: str, args: dict | None = None) -> None:
        """Show ``text`` cut to the label's width (escaped: a title is text, not markup)."""
        if self._fitting:
            return
        self._fitting = True
        try:
            font = QtGui.QFont(self.item.font())
            size = str((args or {}).get("size", self.opts.get("size", "")))
            if size.endswith("pt"):
                font.setPointSizeF(float(size[:-2]))
            room = self.rect().width() - 2 * self.item.document().documentMargin() - 2
            shown = text
            if room > 0:
                shown = QtGui.QFontMetricsF(font).elidedText(text, QtCore.Qt.ElideRight, room)
            if shown != self.shown or args:
                super().setText(html.escape(shown), **(args or {}))
            self.text, self.shown = text, shown
            self.setToolTip(text if shown != text else "")
        finally:
            self._fitting = False

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if not self._fitting and isinstance(getattr(self, "text", None), str):
            self._fit(self.text)

    def updateMin(self) -> None:
        """As tall as the text, no minimum width (the text is elided instead)."""
        bounds = self.itemRect()
        self.setMinimumWidth(0)
        self.setMinimumHeight(bounds.height())
        hint = QtCore.Qt.SizeHint
        self._sizeHint = {hint.MinimumSize: (0, bounds.height()),
                          hint.PreferredSize: (0, bounds.height()),
                          hint.MaximumSize: (-1, -1), hint.MinimumDescent: (0, 0)}
        self.updateGeometry()


class ImagePanel(pg.GraphicsLayoutWidget):
    """One picture with axis labels and a colour bar; NaN pixels are transparent."""

    #: (row, col) of the image pixel under the mouse, (-1, -1) when it leaves the image
    hovered = QtCore.Signal(int, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setBackground(BACKGROUND)
        self.plot = self.addPlot()
        self.plot.invertY(True)
        self.plot.hideButtons()
        self.image = pg.ImageItem()
        self.plot.addItem(self.image)
        self.cmap_name = DIVERGING
        self.bar = pg.ColorBarItem(colorMap=pg.colormap.get(DIVERGING), interactive=False,
                                   width=12)
        self.bar.setImageItem(self.image, insert_in=self.plot)
        self.bar.axis.setWidth(BAR_AXIS_WIDTH)
        self._elide_title()
        self.legend = pg.LabelItem("", color=TITLE_COLOR, size="9pt", justify="left")
        self.boolean = False
        self.data = np.zeros((0, 0))
        self.levels = (-1.0, 1.0)
        self._shape: tuple[int, ...] | None = None
        self.plot.scene().sigMouseMoved.connect(self._mouse_moved)

    def _elide_title(self) -> None:
        """Replace the plot's title label with an :class:`ElidedTitle` (same place): a long
        title (the difference pane's "a − b") would widen the plot past the pane and push the
        colour bar out of view."""
        plot = self.plot
        old = plot.titleLabel
        plot.layout.removeItem(old)
        old.setParentItem(None)
        plot.titleLabel = ElidedTitle("", size="11pt", parent=plot)
        # over the whole plot (axis, image and colour bar): more room before it is cut
        plot.layout.addItem(plot.titleLabel, 0, 0, 1, plot.layout.columnCount())
        plot.setTitle(None)

    def title_text(self) -> str:
        """The picture's whole title ("" when it has none)."""
        label = self.plot.titleLabel
        return label.text if label.isVisible() else ""

    def _keep_content_width(self) -> None:
        """Never narrower than the picture's axes and colour bar need (else they are cut)."""
        need = self.ci.effectiveSizeHint(QtCore.Qt.MinimumSize).width()
        self.setMinimumWidth(math.ceil(need) + 2)

    def set_picture(self, pic: Picture) -> None:
        """Show ``pic``: pixel (r, c) centred at x=c, y=r; a new shape shows exactly the image."""
        a, levels = pic.data, pic.levels
        self.data, self.levels = a, levels
        self.plot.setTitle(pic.title or None, color=TITLE_COLOR, size="9pt")
        self._set_boolean(pic.boolean)
        name = DIVERGING if pic.diverging else SEQUENTIAL
        if name != self.cmap_name:
            self.cmap_name = name
            if not pic.boolean:
                self.bar.setColorMap(pg.colormap.get(name))
        if a.size == 0:
            self.image.clear()
            self._shape = None
            return
        self.image.setImage(a, autoLevels=False, levels=levels)
        self.image.setRect(QtCore.QRectF(-0.5, -0.5, a.shape[1], a.shape[0]))
        if pic.boolean:
            self.image.setLookupTable(BOOL_LUT)
        else:
            self.bar.setLevels(levels)
        if a.shape != self._shape:  # keep the user's zoom while stepping through slices
            self._shape = a.shape
            (x0, x1), (y0, y1) = image_range(a.shape)
            self.plot.vb.setLimits(xMin=x0, xMax=x1, yMin=y0, yMax=y1)
            self.plot.vb.setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0)

    def _set_boolean(self, on: bool) -> None:
        """Two colours and a False/True legend instead of the colour bar (and back)."""
        if on == self.boolean:
            return
        self.boolean = on
        self.bar.setVisible(not on)
        if on:
            self.legend.setText(bool_legend_html())
            self.addItem(self.legend, 0, 1)
        else:
            self.removeItem(self.legend)
            self.bar.setColorMap(pg.colormap.get(self.cmap_name))  # restores the image's LUT
        self._keep_content_width()

    def legend_text(self) -> str:
        """The words of the boolean legend ("" when the colour bar is shown)."""
        if not self.boolean:
            return ""
        text = self.legend.text.replace("<br>", "\n")
        words = [part.rsplit("</span>", 1)[-1].strip() for part in text.splitlines()]
        return "\n".join(words)

    def set_axes(self, row_label: str, col_label: str, row_ticks: Ticks, col_ticks: Ticks) -> None:
        """Axis titles and fixed ticks."""
        self.plot.setLabel("left", row_label)
        self.plot.setLabel("bottom", col_label)
        self.plot.getAxis("left").setTicks([row_ticks])
        self.plot.getAxis("bottom").setTicks([col_ticks])
        self._keep_content_width()

    def clear_image(self) -> None:
        self.data = np.zeros((0, 0))
        self._shape = None
        self.image.clear()
        self.plot.setTitle(None)

    def pixel_at(self, scene_pos: QtCore.QPointF) -> tuple[int, int] | None:
        """The (row, col) of the pixel at a scene position, or None outside the image."""
        if self.data.size == 0 or not self.plot.vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.plot.vb.mapSceneToView(scene_pos)
        row, col = int(np.floor(p.y() + 0.5)), int(np.floor(p.x() + 0.5))
        h, w = self.data.shape
        return (row, col) if 0 <= row < h and 0 <= col < w else None

    def _mouse_moved(self, scene_pos: QtCore.QPointF) -> None:
        self.hovered.emit(*(self.pixel_at(scene_pos) or (-1, -1)))
