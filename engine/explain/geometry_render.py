"""Pictures of a :class:`~engine.explain.geometry.GeometryModel` with Pillow: stills, the
overlap-count map and the animated GIF (the CLI and the app draw the same images).

A picture has a title, the attributes in words, three panels side by side - the padded input
grid (padding cells grey), the filter footprint with its dilation gaps, the output (or
out_backprop) grid - then the frame's caption, the batch/channel summary and a legend. A 3-D
op's picture is one depth slice of that, with a fourth panel of the planes (input planes over
output planes, the slice's pairs marked) and a caption line saying which planes pair. Grids
are drawn as NumPy arrays (one colour per cell, scaled up, grid lines between cells when cells
are big enough), so a 224x224 input renders in milliseconds; a dimension longer than
:data:`MAX_CELLS` is shown as a window around the current frame, with a note.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageDraw

from engine.explain.geometry import MAX_FRAMES, DepthSlice, Frame, GeometryModel
from engine.explain.geometry_cells import (
    CURRENT,
    CURRENT_PAD,
    GAP,
    INK,
    INPUT,
    LINE,
    MUTED,
    OUTPUT,
    PADDING,
    TAP,
    TAP_ON,
    TOUCHED,
    TOUCHED_PAD,
    WHITE,
    Panel,
    Window,
    cell_size,
    cell_window,
    cut_note,
    mark_cells,
    paint,
    text_font,
)
from engine.view.colormaps import LUTS, SEQUENTIAL

MARGIN = 14
GAP_X = 28
#: Pixels a panel column takes at least (room for its heading)
COLUMN = 210


def _centre(cells: np.ndarray, axis: int, default: float) -> float:
    return float(cells[:, axis].mean()) if len(cells) else default


def _input_panel(model: GeometryModel, frame: Frame | None, counts: np.ndarray | None) -> Panel:
    rows, cols = model.rows, model.cols
    shift = np.array([rows.pad_before, cols.pad_before])
    touched = (np.concatenate([frame.input_cells, frame.pad_cells]) + shift
               if frame is not None else np.zeros((0, 2), np.int64))
    rw = cell_window(rows.padded, _centre(touched, 0, rows.padded / 2))
    cw = cell_window(cols.padded, _centre(touched, 1, cols.padded / 2))
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
        mark_cells(colours, frame.input_cells + shift, rw, cw, TOUCHED)
        mark_cells(colours, frame.pad_cells + shift, rw, cw, TOUCHED_PAD)
    cell = cell_size(max(colours.shape[:2]))
    image = paint(colours, cell)
    if counts is not None and cell >= 14:
        _numbers(image, counts, rs, cs, r0, c0, cell)
    what = "overlap count of " + model.input_name if counts is not None else model.input_name
    heading = (f"{what} {rows.size}x{cols.size}, padded {rows.padded}x{cols.padded}")
    return Panel(image, heading, cut_note(rw, cw, "padded "))


def _numbers(image: Image.Image, counts: np.ndarray, rs: slice, cs: slice, r0: int, c0: int,
             cell: int) -> None:
    draw = ImageDraw.Draw(image)
    font = text_font(max(8, cell // 2))
    for pr in range(rs.start, rs.stop):
        for pc in range(cs.start, cs.stop):
            v = int(counts[pr - r0, pc - c0])
            x, y = pc * cell + cell / 2, pr * cell + cell / 2
            colour = WHITE if v < 0.6 * max(counts.max(), 1) else INK
            draw.text((x, y), str(v), fill=colour, font=font, anchor="mm")


def _filter_panel(model: GeometryModel, frame: Frame | None) -> Panel:
    rows, cols = model.rows, model.cols
    rw, cw = cell_window(rows.span, rows.span / 2), cell_window(cols.span, cols.span / 2)
    colours = np.empty((rw.hi - rw.lo, cw.hi - cw.lo, 3), np.uint8)
    colours[:] = GAP
    taps = np.stack(np.meshgrid(np.arange(rows.taps) * rows.dilation,
                                np.arange(cols.taps) * cols.dilation, indexing="ij"),
                    axis=-1).reshape(-1, 2)
    mark_cells(colours, taps, rw, cw, TAP)
    if frame is not None:
        on = frame.taps * np.array([rows.dilation, cols.dilation])
        mark_cells(colours, on, rw, cw, TAP_ON)
    gaps = "" if rows.dilation == cols.dilation == 1 else ", white: dilation gaps"
    heading = f"filter {rows.taps}x{cols.taps} taps over {rows.span}x{cols.span}{gaps}"
    return Panel(paint(colours, cell_size(max(colours.shape[:2]))), heading,
                  cut_note(rw, cw))


def _output_panel(model: GeometryModel, frame: Frame) -> Panel:
    rows, cols = model.rows, model.cols
    cells = frame.paired if model.kind == "filter" else frame.output_cells
    rw = cell_window(rows.out, _centre(cells, 0, rows.out / 2))
    cw = cell_window(cols.out, _centre(cells, 1, cols.out / 2))
    colours = np.empty((max(rw.hi - rw.lo, 1), max(cw.hi - cw.lo, 1), 3), np.uint8)
    colours[:] = OUTPUT if rows.out and cols.out else WHITE
    if model.kind == "filter":
        mark_cells(colours, frame.output_cells, rw, cw, CURRENT_PAD)
    mark_cells(colours, cells, rw, cw, CURRENT)
    heading = f"{model.output_name} {rows.out}x{cols.out}, stride {rows.stride}x{cols.stride}"
    return Panel(paint(colours, cell_size(max(colours.shape[:2]))), heading,
                  cut_note(rw, cw))


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


def _row(colours: np.ndarray, row: int, cells: np.ndarray, w: Window, colour) -> None:
    """Colour the ``cells`` of row ``row`` that fall in the window ``w``."""
    keep = cells[(cells >= w.lo) & (cells < w.hi)] - w.lo
    colours[row, keep] = colour


def _depth_panel(model: GeometryModel, ds: DepthSlice | None, plane: int = 0) -> Panel:
    """A 3-D op's planes: the (padded) input planes in the top row, the output planes in the
    bottom one; the slice's pairs marked (or, for the overlap map, the plane shown)."""
    d = model.depth
    assert d is not None
    iw, ow = cell_window(d.padded, d.padded / 2), cell_window(d.out, d.out / 2)
    if ds is not None and len(ds.pairs):
        iw = cell_window(d.padded, float(ds.pairs[:, 1].mean()) + d.pad_before)
        ow = cell_window(d.out, float(ds.pairs[:, 2].mean()))
    colours = np.empty((3, max(iw.hi - iw.lo, ow.hi - ow.lo, 1), 3), np.uint8)
    colours[:] = WHITE
    _row(colours, 0, np.arange(d.padded), iw, PADDING)
    _row(colours, 0, np.arange(d.size) + d.pad_before, iw, INPUT)
    _row(colours, 2, np.arange(d.out), ow, OUTPUT)
    if ds is None:
        _row(colours, 0, np.array([plane + d.pad_before]), iw, TOUCHED)
    else:
        pairs, real = ds.pairs, ds.real
        _row(colours, 0, pairs[real, 1] + d.pad_before, iw, TOUCHED)
        _row(colours, 0, pairs[~real, 1] + d.pad_before, iw, TOUCHED_PAD)
        _row(colours, 2, pairs[~real, 2], ow, CURRENT_PAD)
        _row(colours, 2, pairs[real, 2] if model.kind == "filter" else np.array([ds.index]), ow,
             CURRENT)
    heading = (f"planes: {model.input_name} {d.size}, padded {d.padded} (top), "
               f"{model.output_name} {d.out} (bottom)")
    return Panel(paint(colours, cell_size(colours.shape[1])), heading,
                  cut_note(Window(0, 1, 1), iw, "padded "))


def _compose(model: GeometryModel, title: str, panels: Sequence[Panel], caption: str,
             overlap_max: int | None, depth_text: str = "") -> Image.Image:
    head, body, small = text_font(15), text_font(12), text_font(11)
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
    depth = _wrap(probe, depth_text, body, text_w, 2) if depth_text else []
    bottom = [*_wrap(probe, caption, body, text_w, 2), *depth,
              *_wrap(probe, model.caption, small, text_w, 2)]
    ink = 2 + len(depth)
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
        draw.text((MARGIN, y), text, fill=INK if i < ink else MUTED,
                  font=body if i < ink else small)
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


def render_frame(model: GeometryModel, k: int, title: str, depth_slice: int = 0) -> Image.Image:
    """Frame ``k`` as a picture (IndexError for a frame out of range); for a 3-D op, of depth
    slice ``depth_slice`` (:meth:`GeometryModel.depth_slice`), with a panel of the planes."""
    frame = model.frame(k)
    panels = [_input_panel(model, frame, None), _filter_panel(model, frame),
              _output_panel(model, frame)]
    caption = f"frame {k + 1} of {model.frame_count}: {frame.label}"
    depth_text = ""
    if model.depth is not None:
        ds = model.depth_slice(depth_slice)
        panels.append(_depth_panel(model, ds))
        depth_text = f"depth slice {depth_slice + 1} of {model.slice_count}: {ds.label}"
    return _compose(model, title, panels, caption, None, depth_text)


def render_overlap(model: GeometryModel, title: str, plane: int = 0) -> Image.Image:
    """The overlap-count map: each input element coloured by how many (output position, tap)
    pairs touch it; for a 3-D op, of input plane ``plane`` (IndexError outside)."""
    panels = []
    depth_text = ""
    if model.depth is None:
        counts = model.overlap()
    else:
        if not 0 <= plane < model.depth.size:
            raise IndexError(f"plane {plane} is out of range: the input has "
                             f"{model.depth.size} plane(s), 0 to {model.depth.size - 1}")
        counts = model.plane_overlap(plane)
        pairs = int(model.depth.counts()[plane])
        depth_text = (f"input plane {plane} of {model.depth.size}: touched by {pairs} (output "
                      f"plane, depth tap) pair(s), so its map is {pairs} times the 2-D one")
        panels.append(_depth_panel(model, None, plane))
    panels = [_input_panel(model, None, counts), _filter_panel(model, None), *panels]
    caption = overlap_caption(model, counts)
    hi = int(counts.max()) if counts.size else 0
    return _compose(model, title, panels, caption, hi, depth_text)


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


def gif_steps(model: GeometryModel, max_frames: int = MAX_FRAMES) -> list[tuple[int, int]]:
    """The (depth slice, frame) pairs an animation shows: every frame of every depth slice
    (one slice for a 2-D op), or ``max_frames`` of them spread evenly."""
    n = model.frame_count
    if model.slice_count == 1:
        return [(0, k) for k in model.frame_indices(max_frames)]
    total = n * model.slice_count
    picks = (range(total) if total <= max_frames else
             sorted({int(x) for x in np.rint(np.linspace(0, total - 1, max_frames))}))
    return [divmod(i, n) for i in picks]


def write_gif(model: GeometryModel, title: str, f: BinaryIO,
              max_frames: int = MAX_FRAMES) -> int:
    """The animation (frames of :meth:`GeometryModel.frame_indices`, looping) as a GIF;
    returns the number of frames written."""
    steps = gif_steps(model, max_frames)
    total = model.frame_count * model.slice_count
    if not steps:
        images = [render_overlap(model, title)]
    else:
        images = [render_frame(model, k, title, s) for s, k in steps]
        if len(steps) < total:
            note = (f"(GIF: {len(steps)} of {total} frames, evenly spaced)")
            for im in images:
                ImageDraw.Draw(im).text((im.width - MARGIN, MARGIN), note, fill=MUTED,
                                        font=text_font(11), anchor="ra")
    palette = images[0].quantize(colors=255, method=Image.Quantize.MEDIANCUT)
    frames = [im.quantize(palette=palette, dither=Image.Dither.NONE) for im in images]
    frames[0].save(f, format="GIF", save_all=True, append_images=frames[1:], loop=0,
                   duration=frame_duration_ms(len(frames)), disposal=1, optimize=False)
    return len(frames)
