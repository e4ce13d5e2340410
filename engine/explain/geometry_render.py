"""Pictures of a :class:`~engine.explain.geometry.GeometryModel` with Pillow: stills, the
overlap-count map and the animated GIF (the CLI and the app draw the same images).

A picture has a title, the attributes in words, three panels side by side - the padded input
grid (padding cells grey), the filter footprint with its dilation gaps, the output (or
out_backprop) grid - then the frame's caption, the batch/channel summary and a legend. Grids
are drawn as NumPy arrays (one colour per cell, scaled up, grid lines between cells when cells
are big enough), so a 224x224 input renders in milliseconds; a dimension longer than
:data:`MAX_CELLS` is shown as a window around the current frame, with a note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from engine.explain.geometry import MAX_FRAMES, Frame, GeometryModel
from engine.view.colormaps import LUTS, SEQUENTIAL

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

MARGIN = 14
GAP_X = 28
#: Pixels a panel column takes at least (room for its heading)
COLUMN = 210


@lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
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
class _Window:
    """The cells [lo, hi) of a dimension that are drawn."""

    lo: int
    hi: int
    total: int

    @property
    def cut(self) -> bool:
        return self.hi - self.lo < self.total


def _window(total: int, centre: float) -> _Window:
    if total <= MAX_CELLS:
        return _Window(0, total, total)
    lo = int(min(max(centre - MAX_CELLS / 2, 0), total - MAX_CELLS))
    return _Window(lo, lo + MAX_CELLS, total)


def _cell_size(n: int) -> int:
    return max(MIN_CELL, min(MAX_CELL, PANEL_PIXELS // max(n, 1)))


def _paint(colours: np.ndarray, cell: int) -> Image.Image:
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


def _mark(colours: np.ndarray, cells: np.ndarray, rw: _Window, cw: _Window, colour) -> None:
    """Colour ``cells`` (panel coordinates) that fall in the window."""
    if not len(cells):
        return
    r, c = cells[:, 0] - rw.lo, cells[:, 1] - cw.lo
    keep = (r >= 0) & (r < rw.hi - rw.lo) & (c >= 0) & (c < cw.hi - cw.lo)
    colours[r[keep], c[keep]] = colour


@dataclass(frozen=True)
class _Panel:
    image: Image.Image
    heading: str
    note: str = ""


def _centre(cells: np.ndarray, axis: int, default: float) -> float:
    return float(cells[:, axis].mean()) if len(cells) else default


def _input_panel(model: GeometryModel, frame: Frame | None, counts: np.ndarray | None) -> _Panel:
    rows, cols = model.rows, model.cols
    shift = np.array([rows.pad_before, cols.pad_before])
    touched = (np.concatenate([frame.input_cells, frame.pad_cells]) + shift
               if frame is not None else np.zeros((0, 2), np.int64))
    rw = _window(rows.padded, _centre(touched, 0, rows.padded / 2))
    cw = _window(cols.padded, _centre(touched, 1, cols.padded / 2))
    colours = np.empty((rw.hi - rw.lo, cw.hi - cw.lo, 3), np.uint8)
    colours[:] = PADDING
    r0, c0 = rows.pad_before - rw.lo, cols.pad_before - cw.lo
    rs = slice(max(r0, 0), max(min(r0 + rows.size, rw.hi - rw.lo), 0))
    cs = slice(max(c0, 0), max(min(c0 + cols.size, cw.hi - cw.lo), 0))
    if counts is not None:
        table = LUTS[SEQUENTIAL]
        top = max(int(counts.max(initial=0)), 1)
        shown = counts[rs.start - r0: rs.stop - r0, cs.start - c0: cs.stop - c0]
        colours[rs, cs] = table[np.rint(shown / top * 255).astype(int)]
    else:
        assert frame is not None  # the panel shows a frame's cells or the overlap counts
        colours[rs, cs] = INPUT
        _mark(colours, frame.input_cells + shift, rw, cw, TOUCHED)
        _mark(colours, frame.pad_cells + shift, rw, cw, TOUCHED_PAD)
    cell = _cell_size(max(colours.shape[:2]))
    image = _paint(colours, cell)
    if counts is not None and cell >= 14:
        _numbers(image, counts, rs, cs, r0, c0, cell)
    what = "overlap count of " + model.input_name if counts is not None else model.input_name
    heading = (f"{what} {rows.size}x{cols.size}, padded {rows.padded}x{cols.padded}")
    return _Panel(image, heading, _cut_note(rw, cw, "padded "))


def _numbers(image: Image.Image, counts: np.ndarray, rs: slice, cs: slice, r0: int, c0: int,
             cell: int) -> None:
    draw = ImageDraw.Draw(image)
    font = _font(max(8, cell // 2))
    for pr in range(rs.start, rs.stop):
        for pc in range(cs.start, cs.stop):
            v = int(counts[pr - r0, pc - c0])
            x, y = pc * cell + cell / 2, pr * cell + cell / 2
            colour = WHITE if v < 0.6 * max(counts.max(), 1) else INK
            draw.text((x, y), str(v), fill=colour, font=font, anchor="mm")


def _cut_note(rw: _Window, cw: _Window, what: str = "") -> str:
    """Which cells a windowed panel shows ("" when it shows them all)."""
    parts = [f"{name} {w.lo}..{w.hi - 1} of {w.total}" for name, w in (("rows", rw), ("cols", cw))
             if w.cut]
    return (f"showing {what}" + ", ".join(parts)) if parts else ""


def _filter_panel(model: GeometryModel, frame: Frame | None) -> _Panel:
    rows, cols = model.rows, model.cols
    rw, cw = _window(rows.span, rows.span / 2), _window(cols.span, cols.span / 2)
    colours = np.empty((rw.hi - rw.lo, cw.hi - cw.lo, 3), np.uint8)
    colours[:] = GAP
    taps = np.stack(np.meshgrid(np.arange(rows.taps) * rows.dilation,
                                np.arange(cols.taps) * cols.dilation, indexing="ij"),
                    axis=-1).reshape(-1, 2)
    _mark(colours, taps, rw, cw, TAP)
    if frame is not None:
        on = frame.taps * np.array([rows.dilation, cols.dilation])
        _mark(colours, on, rw, cw, TAP_ON)
    gaps = "" if rows.dilation == cols.dilation == 1 else ", white: dilation gaps"
    heading = f"filter {rows.taps}x{cols.taps} taps over {rows.span}x{cols.span}{gaps}"
    return _Panel(_paint(colours, _cell_size(max(colours.shape[:2]))), heading,
                  _cut_note(rw, cw))


def _output_panel(model: GeometryModel, frame: Frame) -> _Panel:
    rows, cols = model.rows, model.cols
    cells = frame.paired if model.kind == "filter" else frame.output_cells
    rw = _window(rows.out, _centre(cells, 0, rows.out / 2))
    cw = _window(cols.out, _centre(cells, 1, cols.out / 2))
    colours = np.empty((max(rw.hi - rw.lo, 1), max(cw.hi - cw.lo, 1), 3), np.uint8)
    colours[:] = OUTPUT if rows.out and cols.out else WHITE
    if model.kind == "filter":
        _mark(colours, frame.output_cells, rw, cw, CURRENT_PAD)
    _mark(colours, cells, rw, cw, CURRENT)
    heading = f"{model.output_name} {rows.out}x{cols.out}, stride {rows.stride}x{cols.stride}"
    return _Panel(_paint(colours, _cell_size(max(colours.shape[:2]))), heading,
                  _cut_note(rw, cw))


def _legend(model: GeometryModel, overlap: bool) -> list[tuple[tuple[int, int, int], str]]:
    if overlap:
        return [(PADDING, "padding")]
    out = [(INPUT, model.input_name), (PADDING, "padding"), (TOUCHED, "touched"),
           (TOUCHED_PAD, "padding touched (adds 0)"), (TAP_ON, "tap")]
    if model.kind == "filter":
        return out + [(CURRENT, "out_backprop paired"), (CURRENT_PAD, "paired with padding")]
    return out + [(CURRENT, "output position" if model.kind == "forward"
                   else "out_backprop element")]


def _wrap(draw: ImageDraw.ImageDraw, text: str, font, width: int, lines: int) -> list[str]:
    """``text`` in at most ``lines`` lines of ``width`` pixels (the last one cut with ...)."""
    out: list[str] = []
    words = text.split(" ")
    line = ""
    for word in words:
        trial = f"{line} {word}".strip()
        if draw.textlength(trial, font=font) <= width or not line:
            line = trial
        else:
            out.append(line)
            line = word
    out.append(line)
    if len(out) > lines:
        last = " ".join(out[lines - 1:])
        while last and draw.textlength(last + "...", font=font) > width:
            last = last[:-1]
        out = out[: lines - 1] + [last + "..."]
    return out + [""] * (lines - len(out))


def _compose(model: GeometryModel, title: str, panels: Sequence[_Panel], caption: str,
             overlap_max: int | None) -> Image.Image:
    head, body, small = _font(15), _font(12), _font(11)
    width = max(sum(max(p.image.width, COLUMN) for p in panels) + GAP_X * (len(panels) - 1)
                + 2 * MARGIN, 720)
    grid_h = max(p.image.height for p in panels)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    legend_w = (290 if overlap_max is not None else 0) + sum(
        33 + int(probe.textlength(text, font=small))
        for _, text in _legend(model, overlap_max is not None))
    width = max(width, legend_w + 2 * MARGIN)
    text_w = width - 2 * MARGIN
    top = [*_wrap(probe, title, head, text_w, 1), *_wrap(probe, model.summary(), body, text_w, 2)]
    bottom = [*_wrap(probe, caption, body, text_w, 2), *_wrap(probe, model.caption, small,
                                                              text_w, 2)]
    line_h, panel_head = 18, 34
    height = (MARGIN + line_h * len(top) + panel_head + grid_h + 18 + line_h * len(bottom)
              + 26 + MARGIN)
    img = Image.new("RGB", (width, height), WHITE)
    draw = ImageDraw.Draw(img)
    y = MARGIN
    for i, text in enumerate(top):
        draw.text((MARGIN, y), text, fill=INK if i == 0 else MUTED, font=head if i == 0 else body)
        y += line_h
    y += 6
    x = MARGIN
    for p in panels:
        for k, text in enumerate(_wrap(draw, p.heading, small, max(p.image.width, COLUMN), 2)):
            draw.text((x, y + 14 * k), text, fill=INK, font=small)
        img.paste(p.image, (x, y + panel_head - 4))
        if p.note:
            draw.text((x, y + panel_head + p.image.height - 2), p.note, fill=MUTED, font=small)
        x += max(p.image.width, COLUMN) + GAP_X
    y += panel_head + grid_h + 18
    for i, text in enumerate(bottom):
        draw.text((MARGIN, y), text, fill=INK if i < 2 else MUTED, font=body if i < 2 else small)
        y += line_h
    _draw_legend(draw, model, MARGIN, y + 4, small, overlap_max)
    return img


def _draw_legend(draw: ImageDraw.ImageDraw, model: GeometryModel, x: int, y: int, font,
                 overlap_max: int | None) -> None:
    if overlap_max is not None:
        table = LUTS[SEQUENTIAL]
        for k in range(160):
            draw.line([(x + k, y), (x + k, y + 12)], fill=tuple(int(v) for v in table[k * 255 // 159]))
        draw.text((x + 166, y), f"0 to {overlap_max} touches", fill=INK, font=font)
        x += 290
    for colour, text in _legend(model, overlap_max is not None):
        draw.rectangle([x, y, x + 12, y + 12], fill=colour, outline=LINE)
        draw.text((x + 17, y), text, fill=INK, font=font)
        x += 17 + int(draw.textlength(text, font=font)) + 16


def picture_title(label: str, node_id: str, type_id: str) -> str:
    """The title line of a block's pictures (the CLI and the app use the same)."""
    return f"{label} ({node_id}): {type_id}"


def render_frame(model: GeometryModel, k: int, title: str) -> Image.Image:
    """Frame ``k`` as a picture (IndexError for a frame out of range)."""
    frame = model.frame(k)
    panels = [_input_panel(model, frame, None), _filter_panel(model, frame),
              _output_panel(model, frame)]
    caption = f"frame {k + 1} of {model.frame_count}: {frame.label}"
    return _compose(model, title, panels, caption, None)


def render_overlap(model: GeometryModel, title: str) -> Image.Image:
    """The overlap-count map: each input element coloured by how many (output position, tap)
    pairs touch it."""
    counts = model.overlap()
    panels = [_input_panel(model, None, counts), _filter_panel(model, None)]
    caption = overlap_caption(model, counts)
    hi = int(counts.max()) if counts.size else 0
    return _compose(model, title, panels, caption, hi)


def overlap_caption(model: GeometryModel, counts: np.ndarray) -> str:
    """The overlap map's caption: the range of the counts, and the checkerboard's cause when a
    kernel is not divisible by its stride."""
    lo, hi = (int(counts.min()), int(counts.max())) if counts.size else (0, 0)
    uneven = lo != hi and any(a.stride > 1 and a.taps % a.stride for a in (model.rows, model.cols))
    return (f"overlap: every input element is touched {lo} to {hi} times"
            + ("; a kernel not divisible by the stride gives this checkerboard of strided "
               "gradients" if uneven else ""))


def frame_duration_ms(frames: int) -> int:
    """Milliseconds per GIF frame: a whole animation lasts about 4 to 40 seconds."""
    return max(100, min(700, 16000 // max(frames, 1)))


def write_png(image: Image.Image, f: BinaryIO) -> None:
    image.save(f, format="PNG", optimize=False)


def write_gif(model: GeometryModel, title: str, f: BinaryIO,
              max_frames: int = MAX_FRAMES) -> int:
    """The animation (frames of :meth:`GeometryModel.frame_indices`, looping) as a GIF;
    returns the number of frames written."""
    indices = model.frame_indices(max_frames)
    if not indices:
        images = [render_overlap(model, title)]
    else:
        images = [render_frame(model, k, title) for k in indices]
        if len(indices) < model.frame_count:
            note = (f"(GIF: {len(indices)} of {model.frame_count} frames, evenly spaced)")
            for im in images:
                ImageDraw.Draw(im).text((im.width - MARGIN, MARGIN), note, fill=MUTED,
                                        font=_font(11), anchor="ra")
    palette = images[0].quantize(colors=255, method=Image.Quantize.MEDIANCUT)
    frames = [im.quantize(palette=palette, dither=Image.Dither.NONE) for im in images]
    frames[0].save(f, format="GIF", save_all=True, append_images=frames[1:], loop=0,
                   duration=frame_duration_ms(len(frames)), disposal=1, optimize=False)
    return len(frames)
