"""What the tensor viewer shows, without Qt: the tensor(s), the axes and slice, the mode (slice or
filter montage), the compare side that Table / Save / Copy / histogram act on, the pictures with
their colour levels, tick positions and labels, and booleans.

Pixel ``(r, c)`` of a picture is drawn centred at x = c, y = r (it covers [c - 0.5, c + 0.5]), so
a tick at an integer is at a cell centre and the exact image range is ``image_range``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.view import depth_tiles
from engine.view.stats import (
    colour_levels,
    default_axes,
    default_view_axes,
    exact_text,
    finite_range,
    montage,
    montage_index,
    slice_2d,
    slice_index,
)

#: What Table, Save .npy, Copy and the histogram act on while comparing.
SIDES = ("left", "right", "difference")
MODES = ("slice", "montage")
#: An axis labels at most about this many cells or tiles.
MAX_TICKS = 16
Ticks = list[tuple[float, str]]


@dataclass(frozen=True)
class Picture:
    """One image: 2-D float64 ``data`` (NaN transparent) coloured over ``levels``; ``boolean``
    pictures hold 0 (False) and 1 (True) and get two colours instead of a colour bar."""

    data: np.ndarray
    levels: tuple[float, float]
    diverging: bool
    boolean: bool
    title: str


def _step(n: int, max_ticks: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50 ... that labels ``n`` cells with <= ``max_ticks``."""
    scale = 1
    while True:
        for m in (1, 2, 5):
            if n <= m * scale * max_ticks:
                return m * scale
        scale *= 10


def cell_ticks(n: int, max_ticks: int = MAX_TICKS) -> Ticks:
    """Integer ticks at the centres of ``n`` cells (0, 1, 2 ... or every 2nd, 5th, 10th ...)."""
    step = _step(n, max_ticks)
    return [(float(i), str(i)) for i in range(0, n, step)]


def tile_ticks(n: int, k: int, max_ticks: int = MAX_TICKS) -> Ticks:
    """Ticks at the centres of ``n`` montage tiles of ``k`` cells with 1-cell gaps."""
    step = _step(n, max_ticks)
    return [(i * (k + 1) + (k - 1) / 2, str(i)) for i in range(0, n, step)]


def image_range(shape: tuple[int, int]) -> tuple[tuple[float, float], tuple[float, float]]:
    """((x0, x1), (y0, y1)) exactly covering a picture of ``shape`` (rows, cols)."""
    h, w = shape
    return (-0.5, w - 0.5), (-0.5, h - 0.5)


def value_text(v: float, boolean: bool = False) -> str:
    """A read-out value: ``True``/``False`` for booleans, else 7 significant digits."""
    return str(bool(v)) if boolean else f"{v:.7g}"


class ViewState:
    """Which tensor(s) are shown and how; every picture, tick and number the viewer draws."""

    def __init__(self) -> None:
        self.side = "left"
        self.scale = "global"
        self.clear()

    # -- what is shown -------------------------------------------------------------------------
    def clear(self) -> None:
        """Nothing shown (the compare side and montage scale stay the user's choice)."""
        self.array: np.ndarray | None = None
        self.other: np.ndarray | None = None
        self.difference: np.ndarray | None = None
        self.titles: tuple[str, str] = ("", "")
        self.axes: tuple[str, ...] = ()
        self.view_axes: tuple[int, int] = (0, 0)
        self.index: dict[int, int] = {}
        self.mode = "slice"
        self._layout: tuple = ()
        self._diverging = False

    def show(self, array: np.ndarray, axes: tuple[str, ...] | None = None,
             title: str = "") -> bool:
        """Show one tensor; True when its layout (axis names, shape) is new, False when the
        user's axes, indices and mode are kept."""
        a = np.asarray(array)
        self.array, self.other, self.difference = a, None, None
        self.titles = (title, "")
        return self._set_layout(a, axes, a)

    def compare(self, a: np.ndarray, b: np.ndarray, title_a: str, title_b: str,
                axes: tuple[str, ...] | None = None) -> bool:
        """Show ``a`` (left), ``b`` (right) and ``a - b`` (difference, float64) of one shape."""
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            raise ValueError(f"shapes {list(a.shape)} and {list(b.shape)} differ")
        self.array, self.other, self.titles = a, b, (title_a, title_b)
        with np.errstate(invalid="ignore", over="ignore"):
            self.difference = a.astype(np.float64) - b.astype(np.float64)
        return self._set_layout(a, axes, a, b)

    def _set_layout(self, a: np.ndarray, axes, *tensors: np.ndarray) -> bool:
        names = tuple(axes) if axes and len(axes) == a.ndim else default_axes(a.ndim)
        rng = finite_range(*tensors)
        self._diverging = rng is not None and rng[0] < 0 and not self.boolean
        layout = (names, a.shape)
        new = layout != self._layout
        self._layout, self.axes = layout, names
        if new:
            self.view_axes = default_view_axes(names)
            self.index = {}
            self.mode = "montage" if self.can_montage else "slice"
        return new

    @property
    def comparing(self) -> bool:
        return self.other is not None

    @property
    def is_filter(self) -> bool:
        """A 4-D tensor with axes kh, kw, ...: it can be shown as a montage."""
        return self.array is not None and self.array.ndim == 4 and self.axes[:2] == ("kh", "kw")

    @property
    def tiles_kind(self) -> str | None:
        """The montage the tensor has (:func:`engine.view.depth_tiles.tiles_kind`): a 2-D or
        3-D filter's, a 3-D activation's depth slices, or None."""
        if self.array is None:
            return None
        return depth_tiles.tiles_kind(self.array.shape, self.axes)

    @property
    def can_montage(self) -> bool:
        return self.tiles_kind is not None

    @property
    def montage_mode(self) -> bool:
        return self.mode == "montage" and self.can_montage

    @property
    def depth_montage(self) -> bool:
        """Showing a 3-D activation's depth slices (values coloured as a slice's)."""
        return self.montage_mode and self.tiles_kind == "depth"

    def tiles(self, t: np.ndarray) -> np.ndarray:
        """``t`` (a tensor of the shown layout) as its 4-D tiles array."""
        return depth_tiles.as_tiles(t, self.axes, self.index)

    def tiles_shape(self) -> tuple[int, int, int, int]:
        """The shape of the shown tensor's tiles array, from its shape alone (no copy)."""
        shape = None if self.array is None else depth_tiles.tiles_shape(self.array.shape, self.axes)
        assert shape is not None, "a montage needs a tensor with one"
        return shape

    def tile_names(self) -> tuple[str, str, str, str]:
        """(tile rows, tile cols, grid rows, grid cols) of the montage."""
        assert self.array is not None
        return depth_tiles.tile_names(self.array.shape, self.axes)

    def tile_index(self, at: tuple[int, int, int, int]) -> tuple[int, ...] | None:
        """The tensor index of index ``at`` of the tiles array (None: an empty tile)."""
        assert self.array is not None
        return depth_tiles.tensor_index(self.array.shape, self.axes, self.index, at)

    @property
    def boolean(self) -> bool:
        return self.array is not None and self.array.dtype == np.bool_

    # -- the user's choices --------------------------------------------------------------------
    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
        self.mode = mode if self.can_montage else "slice"

    def set_side(self, side: str) -> None:
        if side not in SIDES:
            raise ValueError(f"side {side!r} is not one of {', '.join(SIDES)}")
        self.side = side

    def set_view_axes(self, row_axis: int, col_axis: int) -> None:
        if row_axis == col_axis:
            raise ValueError(f"the row and column axes must differ (both {row_axis})")
        self.view_axes = (row_axis, col_axis)

    def pick_axis(self, which: str, axis: int) -> tuple[int, int]:
        """The user picks ``axis`` for ``"row"`` or ``"col"``; picking the axis the other shows
        swaps the two. Returns the new (row, col) axes."""
        r, c = self.view_axes
        if which == "row":
            r, c = axis, (r if axis == c else c)
        else:
            r, c = (c if axis == r else r), axis
        if r != c:
            self.view_axes = (r, c)
        return self.view_axes

    def fixed_axes(self) -> list[int]:
        """Axes fixed at an index (not shown): in slice mode, and a depth montage's batch and
        channel."""
        if self.depth_montage:
            return depth_tiles.fixed_axes(self.axes)
        if self.array is None or self.montage_mode or self.array.ndim < 2:
            return []
        return [ax for ax in range(self.array.ndim) if ax not in self.view_axes]

    # -- the side acted on ---------------------------------------------------------------------
    def side_tensor(self, side: str | None = None) -> np.ndarray | None:
        """The tensor of ``side`` (default: the chosen side); the only tensor when not comparing."""
        if not self.comparing:
            return self.array
        side = side or self.side
        return {"left": self.array, "right": self.other, "difference": self.difference}[side]

    def side_title(self, side: str | None = None) -> str:
        if not self.comparing:
            return self.titles[0]
        side = side or self.side
        ta, tb = self.titles
        return {"left": ta, "right": tb, "difference": f"{ta} − {tb}"}[side]

    # -- pictures and numbers ------------------------------------------------------------------
    def slice(self, a: np.ndarray) -> np.ndarray:
        r, c = self.view_axes
        return slice_2d(a, r, c, self.index)

    def pictures(self) -> list[Picture]:
        """The image (one tensor) or the three images (left, right, difference) to draw. Left
        and right share their levels, so equal colours mean equal values."""
        a, b, d = self.array, self.other, self.difference
        if a is None:
            return []
        ta, tb = self.titles
        boolean = self.boolean
        div = self._diverging
        if self.depth_montage:  # the depth slices' values, coloured as a slice's
            if b is None or d is None:
                view = montage(self.tiles(a), "none")
                levels = (0.0, 1.0) if boolean else colour_levels(div, view)
                return [Picture(view, levels, div, boolean, "")]
            va, vb, vd = (montage(self.tiles(t), "none") for t in (a, b, d))
            levels = (0.0, 1.0) if boolean else colour_levels(div, va, vb)
            return [Picture(va, levels, div, boolean, ta), Picture(vb, levels, div, boolean, tb),
                    Picture(vd, colour_levels(True, vd), True, False, f"{ta} − {tb}")]
        if self.montage_mode:
            a, b, d = (None if t is None else self.tiles(t) for t in (a, b, d))
            assert a is not None
            if b is None or d is None:  # not comparing (compare sets both)
                return [Picture(montage(a, self.scale), (-1.0, 1.0), True, False, "")]
            vmax = None
            if self.scale == "global":  # one scale for both
                rng = finite_range(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
                vmax = rng[1] if rng else None
            return [Picture(montage(a, self.scale, vmax), (-1.0, 1.0), True, False, ta),
                    Picture(montage(b, self.scale, vmax), (-1.0, 1.0), True, False, tb),
                    # on the scale of both (as the caption says): agreeing filters leave it blank
                    Picture(montage(d, self.scale, vmax), (-1.0, 1.0), True, False,
                            f"{ta} − {tb}")]
        if b is None or d is None:
            view = self.slice(a)
            levels = (0.0, 1.0) if boolean else colour_levels(div, view)
            return [Picture(view, levels, div, boolean, "")]
        va, vb, vd = self.slice(a), self.slice(b), self.slice(d)
        levels = (0.0, 1.0) if boolean else colour_levels(div, va, vb)
        return [Picture(va, levels, div, boolean, ta), Picture(vb, levels, div, boolean, tb),
                Picture(vd, colour_levels(True, vd), True, False, f"{ta} − {tb}")]

    def values(self, side: str | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """The unscaled numbers of the current view of ``side`` (slice, or montage layout) and
        the mask of montage separator cells (None for a slice): what Table and Copy show."""
        t = self.side_tensor(side)
        if t is None:
            return np.zeros((0, 0)), None
        if self.montage_mode:
            assert self.array is not None
            return (montage(self.tiles(t), "none"),
                    depth_tiles.blank_cells(self.array.shape, self.axes))
        return self.slice(t), None

    def values_text(self, side: str | None = None) -> str:
        """:meth:`values` as text for the clipboard: tab-separated rows of exact values of the
        tensor's dtype (True/False for booleans), empty cells on montage separators."""
        values, blank = self.values(side)
        t = self.side_tensor(side)
        dtype = t.dtype if t is not None else np.dtype(np.float64)
        return "\n".join(
            "\t".join("" if blank is not None and blank[r, c] else exact_text(v, dtype)
                      for c, v in enumerate(row.tolist()))
            for r, row in enumerate(values))

    def axis_labels(self) -> tuple[str, str, Ticks, Ticks]:
        """(row label, column label, row ticks, column ticks) of the pictures."""
        a, names = self.array, self.axes
        if a is None:
            return "", "", [], []
        if self.montage_mode:
            kh, kw, cin, cout = self.tiles_shape()
            rows, cols = self.tile_names()[2:]
            row_ticks = tile_ticks(cin, kh)
            if self.depth_montage:  # a row's first slice: D = row tick + column tick
                row_ticks = [(y, str(int(t) * cout)) for y, t in row_ticks]
            return rows, cols, row_ticks, tile_ticks(cout, kw)
        h, w = self.slice_shape()
        if a.ndim >= 2:
            r, c = self.view_axes
            return names[r], names[c], cell_ticks(h), cell_ticks(w)
        return "", (names[0] if names else ""), cell_ticks(h), cell_ticks(w)

    def slice_shape(self) -> tuple[int, int]:
        """(rows, cols) of the slice (0-D and 1-D tensors are one row)."""
        a = self.array
        if a is None:
            return 0, 0
        if a.ndim < 2:
            return 1, (1 if a.ndim == 0 else a.size)
        r, c = self.view_axes
        return a.shape[r], a.shape[c]

    def fixed_text(self) -> str:
        """The fixed axes at their indices, ``N = 0, C = 2`` ("" when none is fixed)."""
        return ", ".join(f"{self.axes[ax]} = {self.index.get(ax, 0)}" for ax in self.fixed_axes())

    def caption(self, top_abs: float | None = None) -> str:
        """What the pictures show: axes down and across, fixed indices, montage colouring
        (``top_abs``: the filter's max |value| for the single-montage caption)."""
        a, names = self.array, self.axes
        if a is None:
            return ""
        title = (f"{self.titles[0]} vs {self.titles[1]}" if self.comparing
                 else self.titles[0]) or "tensor"
        if self.depth_montage:
            fixed = self.fixed_text()
            depth, rows, cols = (a.shape[names.index(x)] for x in "DHW")
            return (f"{title}: the {depth} depth slices (D = row + column), each H ({rows}) "
                    f"down × W ({cols}) across;  {fixed}")
        if self.montage_mode:
            kh, kw, cin, cout = self.tiles_shape()
            tr, tc, gr, gc = self.tile_names()
            if self.scale == "tile":
                colour = "colour: value / max |value| of its tile"
            elif self.comparing:
                colour = "colour: value / max |value| of both"
            else:
                colour = f"colour: value / max |value| ({(top_abs or 0.0):.4g})"
            return (f"{title}: {gr} ({cin}) down × {gc} ({cout}) across, "
                    f"tiles of {tr} × {tc} ({kh}×{kw});  {colour}")
        if a.ndim >= 2:
            r, c = self.view_axes
            fixed = self.fixed_text()
            return f"{title}: {names[r]} down × {names[c]} across" + (f";  {fixed}" if fixed
                                                                       else "")
        return f"{title}: {a.ndim}-D tensor shown as one row"

    def pixel_index(self, row: int, col: int) -> tuple[int, ...] | None:
        """The tensor index shown at picture pixel ``(row, col)``; None off the tensor."""
        a = self.array
        if a is None or row < 0 or col < 0:
            return None
        if self.montage_mode:
            at = montage_index(self.tiles_shape(), row, col)
            return None if at is None else self.tile_index(at)
        h, w = self.slice_shape()
        if row >= h or col >= w:
            return None
        r, c = self.view_axes
        return slice_index(a.ndim, r, c, self.index, row, col)

    def describe_pixel(self, row: int, col: int) -> str:
        """``[H 3, W 5] = value`` (``= a vs b  (a − b = d)`` when comparing), 7 digits."""
        idx = self.pixel_index(row, col)
        a, other, d = self.array, self.other, self.difference
        if idx is None or a is None:  # pixel_index is None without a tensor
            return ""
        where = ", ".join(f"{n} {i}" for n, i in zip(self.axes, idx, strict=True))
        b = self.boolean
        va = value_text(float(a[idx]), b)
        if other is None or d is None:
            return f"[{where}] = {va}"
        return (f"[{where}] = {va} vs {value_text(float(other[idx]), b)}  "
                f"(a − b = {float(d[idx]):.7g})")
