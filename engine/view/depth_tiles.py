"""Tensors as montages of tiles: a 2-D filter ``(kh, kw, in, out)`` as its in x out grid of
kh x kw tiles, a 3-D filter ``(kd, kh, kw, in, out)`` as the same grid with each out channel's
kd depth slices side by side, and a 3-D activation (axes N, D, H, W, C in either layout) as
the grid of its D depth slices (H x W) at a fixed batch index and channel: slice ``d`` is tile
``(d // cols, d % cols)`` of a grid as close to the node preview's 4:3 as whole rows allow
(:func:`depth_grid`), the tiles after the last slice empty.

Each is written as a 4-D "tiles" array ``(tile rows, tile cols, grid rows, grid cols)`` whose
montage (:func:`engine.view.stats.montage`) is the picture, and pixel indices map back to the
tensor through :func:`tensor_index`.
"""

from __future__ import annotations

import math

import numpy as np

#: The kinds of montage: a 2-D filter, a 3-D filter, a 3-D activation's depth slices.
KINDS = ("filter", "filter3d", "depth")


def tiles_kind(shape: tuple[int, ...], axes: tuple[str, ...]) -> str | None:
    """Which montage a tensor of ``shape`` with axis names ``axes`` has, if any."""
    if len(axes) != len(shape):
        return None
    if len(shape) == 4 and tuple(axes[:2]) == ("kh", "kw"):
        return "filter"
    if len(shape) == 5 and tuple(axes[:3]) == ("kd", "kh", "kw"):
        return "filter3d"
    if len(shape) == 5 and set(axes) == set("NDHWC"):
        return "depth"
    return None


def tiles_shape(shape: tuple[int, ...], axes: tuple[str, ...]) -> tuple[int, int, int, int] | None:
    """The shape of the tiles array of a tensor of ``shape`` (None: it has no montage)."""
    kind = tiles_kind(tuple(shape), tuple(axes))
    if kind == "filter":
        kh, kw, cin, cout = shape
        return kh, kw, cin, cout
    if kind == "filter3d":
        kd, kh, kw, cin, cout = shape
        return kh, kw, cin, cout * kd
    if kind == "depth":
        d, h, w = (shape[axes.index(x)] for x in "DHW")
        return (h, w, *depth_grid(d, h, w))
    return None


#: The width:height a depth grid is chosen to come closest to (the node preview's box).
ASPECT = 4 / 3


def depth_grid(d: int, h: int, w: int) -> tuple[int, int]:
    """(rows, cols) of the grid of ``d`` slices of ``h x w`` cells (1-cell gaps) whose
    picture's width:height is closest to :data:`ASPECT`; (0, 0) without slices."""
    if d == 0:
        return 0, 0
    best: tuple[float, int, int] | None = None
    for cols in range(1, d + 1):
        rows = -(-d // cols)
        width, height = cols * (w + 1) - 1, rows * (h + 1) - 1
        score = abs(math.log(max(width, 1) / max(height, 1) / ASPECT))
        if best is None or score < best[0] - 1e-12:
            best = (score, rows, cols)
    assert best is not None
    return best[1], best[2]


def blank_cells(shape: tuple[int, ...], axes: tuple[str, ...]) -> np.ndarray:
    """The picture cells that show no element: the lines between tiles and a depth grid's
    empty tiles (boolean, the montage's shape)."""
    kh, kw, rows, cols = tiles_shape(shape, axes) or (0, 0, 0, 0)
    r = np.arange(max(0, rows * (kh + 1) - 1))
    c = np.arange(max(0, cols * (kw + 1) - 1))
    blank = (r % (kh + 1) == kh)[:, None] | (c % (kw + 1) == kw)[None, :]
    if tiles_kind(tuple(shape), tuple(axes)) == "depth":
        d = shape[axes.index("D")]
        blank |= ((r // (kh + 1))[:, None] * cols + (c // (kw + 1))[None, :]) >= d
    return blank


def fixed_axes(axes: tuple[str, ...]) -> list[int]:
    """The axes a depth montage holds at an index (batch, channel)."""
    return [axes.index("N"), axes.index("C")]


def as_tiles(a: np.ndarray, axes: tuple[str, ...], index: dict[int, int]) -> np.ndarray:
    """The 4-D tiles array of ``a`` (a view where NumPy allows); ``index`` holds the depth
    montage's batch and channel."""
    kind = tiles_kind(a.shape, axes)
    if kind == "filter":
        return a
    if kind == "filter3d":  # (kh, kw, in, out * kd): out channel o's slices at o*kd .. o*kd+kd-1
        kd, kh, kw, cin, cout = a.shape
        return np.moveaxis(a, 0, -1).reshape(kh, kw, cin, cout * kd)
    if kind != "depth":
        raise ValueError(f"a tensor of axes {list(axes)} has no montage")
    d, h, w = (axes.index(x) for x in "DHW")
    sel = tuple(int(index.get(ax, 0)) if ax in fixed_axes(axes) else slice(None)
                for ax in range(5))
    rest = [ax for ax in range(5) if ax not in fixed_axes(axes)]
    s = a[sel].transpose(rest.index(h), rest.index(w), rest.index(d))
    rows, cols = depth_grid(*(a.shape[x] for x in (d, h, w)))
    if rows * cols == s.shape[2]:
        return s.reshape(s.shape[0], s.shape[1], rows, cols)
    grid = np.full((*s.shape[:2], rows * cols), np.nan)
    grid[:, :, :s.shape[2]] = s
    return grid.reshape(s.shape[0], s.shape[1], rows, cols)


def tensor_index(shape: tuple[int, ...], axes: tuple[str, ...], index: dict[int, int],
                 at: tuple[int, int, int, int]) -> tuple[int, ...] | None:
    """The index in the tensor of index ``at`` of its tiles array (None: an empty tile)."""
    kind = tiles_kind(shape, axes)
    i, j, r, c = at
    if kind == "filter":
        return at
    if kind == "filter3d":
        kd = shape[0]
        return (c % kd, i, j, r, c // kd)
    cols = (tiles_shape(shape, axes) or (0, 0, 0, 1))[3]
    depth = r * cols + c
    if depth >= shape[axes.index("D")]:
        return None
    pos = {ax: int(index.get(ax, 0)) for ax in fixed_axes(axes)}
    pos.update({axes.index("H"): i, axes.index("W"): j, axes.index("D"): depth})
    return tuple(pos[ax] for ax in range(5))


def tile_names(shape: tuple[int, ...], axes: tuple[str, ...]) -> tuple[str, str, str, str]:
    """(tile rows, tile cols, grid rows, grid cols): what each axis of the tiles array is."""
    kind = tiles_kind(shape, axes)
    if kind == "filter":
        return axes[0], axes[1], axes[2], axes[3]
    if kind == "filter3d":
        return axes[1], axes[2], axes[3], f"{axes[4]} × {axes[0]}"
    return "H", "W", "D +", "D"
