"""Small pictures of tensors for the canvas: the tensor viewer's default 2-D view as an RGBA image.

The view, colour map and colour levels are the viewer's first choice for a tensor
(:func:`thumbnail_view`): a filter ``(kh, kw, in, out)`` is the montage of its kh x kw tiles
(in down, out across) scaled by max |w| on the diverging map over [-1, 1]; any other tensor is
its default slice (H x W, kh x kw, else the last two axes; other axes at 0), on the diverging
map with levels +-max|slice| when the tensor has a negative value, else on the sequential map
over the slice's finite range. 0-D and 1-D tensors are one row. Bool tensors are two colours
(False = the sequential map's first, True its last).

Pixels: NaN and +-Inf cells are :data:`NONFINITE` (magenta), montage separators transparent.
A view that fits the size is drawn with square integer-scaled cells; a larger one is reduced to
at most the size: slices by block extremes (each pixel shows the value of its block farthest
from the middle of the levels, so single spikes and NaNs stay visible), montages by nearest
sampling of the tiles without separators. No copy larger than one block row of the view (or
the picture) is made; the levels need one pass over the tensor (chunked, no float64 copy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.view.colormaps import DIVERGING, LUTS, SEQUENTIAL
from engine.view.depth_tiles import as_tiles, blank_cells, tiles_kind, tiles_shape
from engine.view.stats import default_axes, default_view_axes, montage, montage_separators

#: RGBA of NaN and infinite cells; transparent montage separators.
NONFINITE = (255, 0, 255, 255)
SEPARATOR = (0, 0, 0, 0)
#: Default size (width, height) in pixels; thin views are drawn at least MIN_SIDE pixels thick.
SIZE = (96, 72)
MIN_SIDE = 8
#: Elements reduced at a time when a whole tensor's range is needed.
CHUNK = 1 << 16


@dataclass(frozen=True)
class ThumbView:
    """What a thumbnail shows: ``kind`` "montage" / "slice" / "empty", the colour map name, the
    colour levels (low, high), the view's size in cells (rows, cols; a montage's include its
    separator lines) and the (row, col) axes of a slice."""

    kind: str
    cmap: str
    levels: tuple[float, float]
    cells: tuple[int, int]
    view_axes: tuple[int, int] = (0, 0)


def is_filter(shape: tuple[int, ...], axes: tuple[str, ...]) -> bool:
    """A 2-D filter (axes kh, kw, ...) or a 3-D one (kd, kh, kw, ...): shown as a montage."""
    return tiles_kind(tuple(shape), tuple(axes)) in ("filter", "filter3d")


def value_range(a: np.ndarray) -> tuple[tuple[float, float] | None, bool]:
    """((min, max) over the finite values of ``a`` or None when there are none, whether ``a``
    holds a NaN or an infinity), in chunks of CHUNK elements of a contiguous array; only
    chunks holding NaN/Inf are masked."""
    a = np.asarray(a)
    if a.size == 0:
        return None, False
    flat = a.reshape(-1) if a.flags.c_contiguous else None
    parts = [a] if flat is None else (flat[i:i + CHUNK] for i in range(0, flat.size, CHUNK))
    lo, hi, nonfinite = math.inf, -math.inf, False
    for part in parts:
        with np.errstate(invalid="ignore"):
            pmin, pmax = float(np.min(part)), float(np.max(part))
        if not (math.isfinite(pmin) and math.isfinite(pmax)):
            nonfinite = True
            good = part[np.isfinite(part)]
            if not good.size:
                continue
            pmin, pmax = float(good.min()), float(good.max())
        lo, hi = min(lo, pmin), max(hi, pmax)
    return ((lo, hi) if lo <= hi else None), nonfinite


def finite_range(a: np.ndarray) -> tuple[float, float] | None:
    """(min, max) over the finite values of ``a``; None when there are none."""
    return value_range(a)[0]


def has_negative(a: np.ndarray) -> bool:
    """Whether ``a`` holds a finite value below 0 (chunked; stops at the first chunk with one)."""
    a = np.asarray(a)
    if a.size == 0 or a.dtype.kind in "bu":
        return False
    flat = a.reshape(-1) if a.flags.c_contiguous else None
    parts = [a] if flat is None else (flat[i:i + CHUNK] for i in range(0, flat.size, CHUNK))
    for part in parts:
        with np.errstate(invalid="ignore"):
            pmin = float(np.min(part))
        if pmin < 0 and (math.isfinite(pmin) or np.any(np.isfinite(part) & (part < 0))):
            return True
        if math.isnan(pmin):  # NaN hides the minimum
            with np.errstate(invalid="ignore"):
                if np.any(np.isfinite(part) & (part < 0)):
                    return True
    return False


def colour_levels(diverging: bool, rng: tuple[float, float] | None) -> tuple[float, float]:
    """The viewer's levels for a finite range: +-max|.| when diverging, else the range (a
    constant c gives c +- 0.5; no finite value gives (0, 1))."""
    rng = rng or (0.0, 1.0)
    if diverging:
        m = max(abs(rng[0]), abs(rng[1])) or 1.0
        return -m, m
    lo, hi = rng
    return (lo, hi) if hi > lo else (lo - 0.5, lo + 0.5)


def _axes_of(a: np.ndarray, axes: tuple[str, ...] | None) -> tuple[str, ...]:
    return tuple(axes) if axes and len(axes) == a.ndim else default_axes(a.ndim)


def _as_2d(a: np.ndarray, view_axes: tuple[int, int]) -> np.ndarray:
    """The default slice as a view (no copy): rows down, columns across."""
    if a.ndim == 0:
        return a.reshape(1, 1)
    if a.ndim == 1:
        return a.reshape(1, -1)
    r, c = view_axes
    sel = tuple(slice(None) if ax in (r, c) else 0 for ax in range(a.ndim))
    s = a[sel]
    return s if r < c else s.T


#: What :func:`value_range` returns: (finite (min, max) or None, holds NaN/Inf).
Scan = tuple[tuple[float, float] | None, bool]


def thumbnail_view(array: np.ndarray, axes: tuple[str, ...] | None = None,
                   scan: Scan | None = None) -> ThumbView:
    """The view, colour map and levels the viewer shows first for ``array`` (see module doc);
    ``scan`` is ``value_range(array)`` when the caller has it (saves a pass)."""
    a = np.asarray(array)
    names = _axes_of(a, axes)
    if a.size == 0:
        return ThumbView("empty", SEQUENTIAL, (0.0, 1.0), (0, 0))
    tiles = tiles_shape(a.shape, names)
    if tiles is not None:
        kh, kw, cin, cout = tiles
        cells = (cin * (kh + 1) - 1, cout * (kw + 1) - 1)
        if is_filter(a.shape, names):
            return ThumbView("montage", DIVERGING, (-1.0, 1.0), cells)
        t = as_tiles(a, names, {})  # the depth slices at batch 0, channel 0
        if a.dtype == np.bool_:
            return ThumbView("depth", SEQUENTIAL, (0.0, 1.0), cells)
        diverging = has_negative(t) if scan is None else (scan[0] is not None
                                                          and scan[0][0] < 0)
        return ThumbView("depth", DIVERGING if diverging else SEQUENTIAL,
                         colour_levels(diverging, finite_range(t)), cells)
    view_axes = default_view_axes(names)
    s = _as_2d(a, view_axes)
    if a.dtype == np.bool_:
        return ThumbView("slice", SEQUENTIAL, (0.0, 1.0), s.shape, view_axes)
    if scan is not None:  # the viewer: the tensor's finite min < 0
        diverging = scan[0] is not None and scan[0][0] < 0
    else:
        diverging = has_negative(s) or has_negative(a)
    return ThumbView("slice", DIVERGING if diverging else SEQUENTIAL,
                     colour_levels(diverging, finite_range(s)), s.shape, view_axes)


def picture_size(cells: tuple[int, int], size: tuple[int, int] = SIZE) -> tuple[int, int]:
    """(height, width) in pixels of a view of ``cells`` (rows, cols) within ``size`` (w, h):
    square cells of an integer number of pixels when the view fits, else the aspect kept;
    never thinner than MIN_SIDE (nor larger than ``size``)."""
    rows, cols = cells
    max_w, max_h = size
    if rows <= max_h and cols <= max_w:
        s = max(1, min(max_w // cols, max_h // rows))
        h, w = rows * s, cols * s
    else:
        f = min(max_w / cols, max_h / rows)
        h, w = max(1, round(rows * f)), max(1, round(cols * f))
    return min(max(h, MIN_SIDE), max_h), min(max(w, MIN_SIDE), max_w)


def _edges(n_cells: int, n_px: int) -> np.ndarray:
    """Block boundaries splitting ``n_cells`` into ``n_px`` nearly equal blocks (n_px + 1)."""
    return (np.arange(n_px + 1) * n_cells) // n_px


def _reduce_slice(s: np.ndarray, h: int, w: int, levels: tuple[float, float]) -> np.ndarray:
    """``s`` reduced to at most (h, w) cells in float64, each the extreme of its block (the
    value farthest from the levels' middle; NaN when the block holds a NaN)."""
    rows, cols = s.shape
    hc, wc = min(rows, h), min(cols, w)
    if (hc, wc) == (rows, cols):
        return s.astype(np.float64)
    mid = (levels[0] + levels[1]) / 2
    r_edges, c_starts = _edges(rows, hc), _edges(cols, wc)[:-1]
    out = np.empty((hc, wc))
    for i in range(hc):
        block = s[r_edges[i]:r_edges[i + 1]]
        with np.errstate(invalid="ignore"):
            bmax = np.maximum.reduceat(np.max(block, axis=0), c_starts).astype(np.float64)
            bmin = np.minimum.reduceat(np.min(block, axis=0), c_starts).astype(np.float64)
            out[i] = np.where(bmax - mid >= mid - bmin, bmax, bmin)
        nan = np.isnan(bmax) | np.isnan(bmin)
        out[i][nan] = np.nan
    return out


def _nearest(n_cells: int, n_px: int) -> np.ndarray:
    """The cell index shown by each of ``n_px`` pixels (pixel centres)."""
    return ((np.arange(n_px) + 0.5) * n_cells / n_px).astype(np.intp)


def _montage_values(w: np.ndarray, h_px: int, w_px: int, fits: bool) -> np.ndarray:
    """Montage cells scaled by max |w| (NaN separators) when the montage ``fits``, else the
    filter sampled at (h_px, w_px) pixels of its tiles without separators, unscaled."""
    if fits:
        return montage(w, "global")
    kh, kw, cin, cout = w.shape
    i, r = np.divmod(_nearest(cin * kh, h_px), kh)
    o, c = np.divmod(_nearest(cout * kw, w_px), kw)
    return w[r[:, None], c[None, :], i[:, None], o[None, :]].astype(np.float64)


def colourise(values: np.ndarray, levels: tuple[float, float], cmap: str) -> np.ndarray:
    """RGBA uint8 of a 2-D array with pyqtgraph's mapping (index ``(v - low) * 256 / (high -
    low)`` clipped to 0..255); non-finite values are NONFINITE."""
    lut = LUTS[cmap]
    lo, hi = levels
    finite = np.isfinite(values)
    # halved operands: the same products as pyqtgraph's (powers of 2 scale exactly), without
    # overflow for levels near the float64 limits; a zero span maps everything to index 0
    span = hi * 0.5 - lo * 0.5
    scale = 256.0 / span if span > 0 else 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        idx = np.floor((np.where(finite, values, lo) * 0.5 - lo * 0.5) * scale)
    idx = np.clip(np.nan_to_num(idx, nan=0.0), 0, 255).astype(np.intp)
    out = np.empty((*values.shape, 4), np.uint8)
    out[..., :3] = lut[idx]
    out[..., 3] = 255
    out[~finite] = NONFINITE
    return out


def _upscale(img: np.ndarray, h: int, w: int) -> np.ndarray:
    """Nearest-neighbour resize of an (rows, cols, 4) image to (h, w, 4)."""
    rows, cols = img.shape[:2]
    if (rows, cols) == (h, w):
        return img
    return img[_nearest(rows, h)[:, None], _nearest(cols, w)[None, :]]


def thumbnail(array: np.ndarray, axes: tuple[str, ...] | None = None,
              size: tuple[int, int] = SIZE, scan: Scan | None = None) -> np.ndarray:
    """The (height, width, 4) uint8 RGBA picture of ``array``'s default view within ``size``
    (width, height) pixels (see the module doc); (0, 0, 4) for an empty tensor. ``scan`` is
    ``value_range(array)`` when the caller has it (saves a pass over a large tensor)."""
    a = np.asarray(array)
    view = thumbnail_view(a, axes, scan)
    if view.kind == "empty":
        return np.zeros((0, 0, 4), np.uint8)
    h, w = picture_size(view.cells, size)
    names = _axes_of(a, axes)
    if view.kind == "depth":  # the depth slices, coloured as a slice, blank cells transparent
        t = as_tiles(a, names, {})
        picture = montage(t.view(np.uint8) if t.dtype == np.bool_ else t, "none")
        blank = blank_cells(a.shape, names)
        rows = _nearest(picture.shape[0], min(h, picture.shape[0]))
        cols = _nearest(picture.shape[1], min(w, picture.shape[1]))
        img = colourise(picture[rows[:, None], cols[None, :]], view.levels, view.cmap)
        img[blank[rows[:, None], cols[None, :]]] = SEPARATOR
        return _upscale(img, h, w)
    if view.kind == "montage":
        a = as_tiles(a, names, {})
        fits = view.cells[0] <= h and view.cells[1] <= w
        values = _montage_values(a, h, w, fits)
        if fits:  # +-Inf were clipped to +-1 by the scaling: mark them from the raw values
            raw = montage(a, "none")
            img = colourise(np.where(np.isfinite(raw), values, np.nan), view.levels, view.cmap)
            img[montage_separators(a.shape)] = SEPARATOR
        else:
            rng = finite_range(a) if scan is None else scan[0]
            m = max(abs(rng[0]), abs(rng[1])) if rng else 0.0
            scaled = values / (m or 1.0)
            img = colourise(np.where(np.isfinite(scaled), np.clip(scaled, -1, 1), np.nan),
                            view.levels, view.cmap)
        return _upscale(img, h, w)
    s = _as_2d(a, view.view_axes)
    if a.dtype == np.bool_:
        s = s.view(np.uint8)
    return _upscale(colourise(_reduce_slice(s, h, w, view.levels), view.levels, view.cmap), h, w)

