"""The cells of the geometry pictures (:mod:`engine.explain.geometry_render`): their colours,
the window a long dimension is cut to, and a grid of cell colours painted as an image."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from PIL import Image, ImageFont

#: Cells drawn per dimension at most (larger grids: a window around the frame).
MAX_CELLS = 240
#: Pixels a grid panel aims for, and the cell size bounds.
PANEL_PIXELS = 480
MIN_CELL, MAX_CELL = 2, 26
#: Cells at least this big get grid lines.
GRID_LINES_FROM = 6

WHITE = (255, 255, 255)
INK = (34, 34, 34)
MUTED = (96, 96, 96)
LINE = (190, 196, 204)
INPUT = (226, 236, 250)  # a real input element
PADDING = (208, 208, 208)  # a padding element
TOUCHED = (45, 110, 210)  # an input element this frame touches
TOUCHED_PAD = (236, 130, 130)  # a padding element it touches (adds nothing)
OUTPUT = (250, 240, 222)  # an output element
CURRENT = (232, 128, 30)  # the output element(s) of this frame
CURRENT_PAD = (246, 200, 150)  # filter gradient: out_backprop paired with padding
TAP = (200, 235, 210)  # a filter tap
TAP_ON = (30, 140, 75)  # a tap of this frame
GAP = (255, 255, 255)  # a dilation gap

@lru_cache(maxsize=16)
def text_font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    """DejaVu Sans where the system has it (clear spacing), else Pillow's own font."""
    try:
        return ImageFont.truetype("DejaVuSans.ttf", size)
    except OSError:
        pass
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


@dataclass(frozen=True)
class Window:
    """The cells [lo, hi) of a dimension that are drawn."""

    lo: int
    hi: int
    total: int

    @property
    def cut(self) -> bool:
        return self.hi - self.lo < self.total


def cell_window(total: int, centre: float) -> Window:
    if total <= MAX_CELLS:
        return Window(0, total, total)
    lo = int(min(max(centre - MAX_CELLS / 2, 0), total - MAX_CELLS))
    return Window(lo, lo + MAX_CELLS, total)


def cell_size(n: int) -> int:
    return max(MIN_CELL, min(MAX_CELL, PANEL_PIXELS // max(n, 1)))


def paint(colours: np.ndarray, cell: int) -> Image.Image:
    """An (r, c, 3) uint8 array of cell colours as an image of cell x cell squares, with grid
    lines when cells are big enough and a border."""
    img = np.repeat(np.repeat(colours, cell, axis=0), cell, axis=1)
    if cell >= GRID_LINES_FROM:
        img[::cell, :] = LINE
        img[:, ::cell] = LINE
    img = np.pad(img, ((0, 1), (0, 1), (0, 0)), constant_values=0)
    img[-1, :] = LINE
    img[:, -1] = LINE
    img[0, :] = img[:, 0] = LINE
    return Image.fromarray(img, "RGB")


def mark_cells(colours: np.ndarray, cells: np.ndarray, rw: Window, cw: Window, colour) -> None:
    """Colour ``cells`` (panel coordinates) that fall in the window."""
    if not len(cells):
        return
    r, c = cells[:, 0] - rw.lo, cells[:, 1] - cw.lo
    keep = (r >= 0) & (r < rw.hi - rw.lo) & (c >= 0) & (c < cw.hi - cw.lo)
    colours[r[keep], c[keep]] = colour


@dataclass(frozen=True)
class Panel:
    image: Image.Image
    heading: str
    note: str = ""


def cut_note(rw: Window, cw: Window, what: str = "") -> str:
    """Which cells a windowed panel shows ("" when it shows them all)."""
    parts = [f"{name} {w.lo}..{w.hi - 1} of {w.total}" for name, w in (("rows", rw), ("cols", cw))
             if w.cut]
    return (f"showing {what}" + ", ".join(parts)) if parts else ""
