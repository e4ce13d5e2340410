"""What the tensor viewer shows, computed without Qt: statistics, 2-D slices, filter montages."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.dtypes import dtype_name


@dataclass(frozen=True)
class TensorStats:
    """Summary of a tensor. min/max/mean/std are over the finite values (None if none)."""

    shape: tuple[int, ...]
    dtype: str
    size: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    nan_count: int
    inf_count: int
    zero_fraction: float | None

    def summary(self) -> str:
        """One line for a status bar."""
        def f(v: float | None) -> str:
            return "-" if v is None else f"{v:.6g}"
        zeros = "-" if self.zero_fraction is None else f"{self.zero_fraction:.1%}"
        return (f"shape {list(self.shape)}  {self.dtype}  min {f(self.min)}  max {f(self.max)}  "
                f"mean {f(self.mean)}  std {f(self.std)}  NaN {self.nan_count}  "
                f"Inf {self.inf_count}  zeros {zeros}")


def tensor_stats(a: np.ndarray) -> TensorStats:
    """Statistics in float64 (bfloat16 and float16 included)."""
    a = np.asarray(a)
    v = a.astype(np.float64, copy=False).ravel() if a.dtype != bool else a.ravel().astype(float)
    finite = np.isfinite(v)
    nan_count = int(np.count_nonzero(np.isnan(v)))
    inf_count = int(v.size - nan_count - np.count_nonzero(finite))
    good = v[finite]
    if good.size:
        stats = (float(good.min()), float(good.max()), float(good.mean()), float(good.std()))
    else:
        stats = (None, None, None, None)
    zero = float(np.count_nonzero(v == 0)) / v.size if v.size else None
    return TensorStats(tuple(a.shape), dtype_name(a.dtype), int(a.size), *stats, nan_count,
                       inf_count, zero)


def default_axes(ndim: int) -> tuple[str, ...]:
    """Axis names when nothing better is known: d0, d1, ..."""
    return tuple(f"d{i}" for i in range(ndim))


def default_view_axes(axes: tuple[str, ...]) -> tuple[int, int]:
    """(row axis, column axis) a user expects first: H x W, kh x kw, else the last two."""
    for rows, cols in (("H", "W"), ("kh", "kw")):
        if rows in axes and cols in axes:
            return axes.index(rows), axes.index(cols)
    n = len(axes)
    return (max(0, n - 2), max(0, n - 1)) if n >= 2 else (0, 0)


def slice_2d(a: np.ndarray, row_axis: int, col_axis: int, index: dict[int, int]) -> np.ndarray:
    """The 2-D float64 slice with ``row_axis`` down and ``col_axis`` across; every other axis is
    fixed at ``index[axis]`` (default 0). 0-D and 1-D tensors become one row."""
    a = np.asarray(a)
    if a.ndim == 0:
        return a.astype(np.float64).reshape(1, 1)
    if a.ndim == 1:
        return a.astype(np.float64).reshape(1, -1)
    if row_axis == col_axis:
        raise ValueError("the row and column axes must differ")
    sel = tuple(slice(None) if ax in (row_axis, col_axis) else int(index.get(ax, 0))
                for ax in range(a.ndim))
    s = a[sel].astype(np.float64)
    return s if row_axis < col_axis else s.T


def montage(w: np.ndarray, scale: str = "global") -> np.ndarray:
    """A 4-D filter ``(kh, kw, in, out)`` as one image: an in x out grid of kh x kw tiles, tile
    ``(i, o)`` at rows ``i*(kh+1) ..``, columns ``o*(kw+1) ..``, separated by NaN lines.

    Values are divided by max |w| (``scale="global"``) or by each tile's own max |w|
    (``"tile"``), so a diverging colour map over [-1, 1] centres 0.
    """
    w = np.asarray(w, np.float64)
    if w.ndim != 4:
        raise ValueError(f"a montage needs a 4-D filter, got shape {list(w.shape)}")
    kh, kw, cin, cout = w.shape
    tiles = w.transpose(2, 3, 0, 1)  # (in, out, kh, kw)
    if scale == "tile":
        denom = np.abs(tiles).max(axis=(2, 3), keepdims=True, initial=0.0)
    elif scale == "global":
        denom = np.array(np.abs(w).max(initial=0.0))
    else:
        raise ValueError(f"scale {scale!r} is not 'global' or 'tile'")
    with np.errstate(invalid="ignore", divide="ignore"):
        tiles = np.where(denom > 0, tiles / np.where(denom > 0, denom, 1), 0.0)
    out = np.full((cin, kh + 1, cout, kw + 1), np.nan)
    out[:, :kh, :, :kw] = tiles.transpose(0, 2, 1, 3)
    return out.reshape(cin * (kh + 1), cout * (kw + 1))[:-1, :-1]
