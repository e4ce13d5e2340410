"""What the tensor viewer shows, computed without Qt: statistics, 2-D slices, filter montages and
the difference of two tensors.

Every number is computed in float64 (float16 and bfloat16 convert exactly), so the viewer's
figures are NumPy's figures on ``a.astype(np.float64)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.base.dtypes import dtype_name

#: Montage scalings: by the filter's max |w|, by each tile's own max |w|, or raw values.
MONTAGE_SCALES = ("global", "tile", "none")


@dataclass(frozen=True)
class TensorStats:
    """Summary of a tensor.

    ``min``/``max``/``mean``/``std`` (population std, ddof=0) are over the finite values and are
    None when there are none; ``zero_fraction`` is the fraction of all elements equal to 0 (None
    for an empty tensor).
    """

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
        """One line for a status bar: ``shape [..]  dtype  min ..  max ..  mean ..  std ..``."""
        f = format_value
        zeros = "-" if self.zero_fraction is None else f"{self.zero_fraction:.1%}"
        return (f"shape {list(self.shape)}  {self.dtype}  min {f(self.min)}  max {f(self.max)}  "
                f"mean {f(self.mean)}  std {f(self.std)}  NaN {self.nan_count}  "
                f"Inf {self.inf_count}  zeros {zeros}")


def format_value(v: float | None) -> str:
    """A statistic as text: 6 significant digits, ``-`` when there is none."""
    return "-" if v is None else f"{v:.6g}"


def _float64(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64, copy=False)


#: Elements converted to float64 at a time (bounds the temporary memory of big tensors).
CHUNK = 1 << 20


def tensor_stats(a: np.ndarray) -> TensorStats:
    """Statistics of ``a`` in float64 over its finite values; no warnings for empty tensors.

    One pass over chunks of CHUNK elements; the chunks' counts, means and sums of squared
    deviations combine exactly as in Chan et al.'s parallel variance.
    """
    a = np.asarray(a)
    flat = a.reshape(-1)
    n_good = nan_count = zeros = 0
    lo, hi, mean, m2 = np.inf, -np.inf, 0.0, 0.0
    for start in range(0, flat.size, CHUNK):
        v = flat[start:start + CHUNK].astype(np.float64)
        finite = np.isfinite(v)
        nan_count += int(np.count_nonzero(np.isnan(v)))
        zeros += int(np.count_nonzero(v == 0))
        good = v if finite.all() else v[finite]
        if not good.size:
            continue
        k = good.size
        lo, hi = min(lo, float(good.min())), max(hi, float(good.max()))
        mean_k = float(good.mean())
        m2_k = float(np.square(good - mean_k).sum())
        if n_good:
            total = n_good + k
            delta = mean_k - mean
            mean += delta * k / total
            m2 += m2_k + delta * delta * n_good * k / total
            n_good = total
        else:  # one chunk gives exactly NumPy's mean and std
            n_good, mean, m2 = k, mean_k, m2_k
    zero = zeros / flat.size if flat.size else None
    if not n_good:
        return TensorStats(tuple(a.shape), dtype_name(a.dtype), int(a.size), None, None, None,
                           None, nan_count, flat.size - n_good - nan_count, zero)
    return TensorStats(tuple(a.shape), dtype_name(a.dtype), int(a.size), lo, hi, mean,
                       float(np.sqrt(m2 / n_good)), nan_count, flat.size - n_good - nan_count,
                       zero)


#: Up to this many elements, :func:`min_max_mean` computes in Python (a run of many small
#: blocks spends its time in NumPy's per-call overhead otherwise).
SMALL_TENSOR = 64


def min_max_mean(a: np.ndarray) -> tuple[float | None, float | None, float | None]:
    """:func:`tensor_stats`'s ``min``, ``max`` and ``mean``, exactly; a tensor of at most
    :data:`SMALL_TENSOR` elements is done in Python where that is provably NumPy's result.

    min and max of floats are exact in any order but for the sign of a zero, so a tensor
    holding -0.0 goes to NumPy. The mean is the sum divided by the count; the sum is exact in
    any order (so NumPy's pairwise sum gives it too) when every value is a multiple of the
    smallest power of two ``1/D`` among their binary fractions and the sum of their magnitudes
    is below ``2**53 / D``: every partial sum is then a float."""
    a = np.asarray(a)
    if 0 < a.size <= SMALL_TENSOR:
        flat = a.reshape(-1)  # NumPy's float16/32/64 become Python floats exactly
        exact = a.dtype.kind == "f" and a.dtype.itemsize <= 8
        values = [v for v in (flat if exact else flat.astype(np.float64)).tolist()
                  if math.isfinite(v)]
        if values:
            lo, hi = min(values), max(values)
            ratios = [v.as_integer_ratio() for v in values]
            scale = max(q for _, q in ratios)  # a power of two: every q is one
            if sum(abs(p) * (scale // q) for p, q in ratios) < 2**53 and not (
                    lo <= 0.0 <= hi and any(v == 0.0 and math.copysign(1.0, v) < 0.0
                                            for v in values)):
                return lo, hi, math.fsum(values) / len(values)
    s = tensor_stats(a)
    return s.min, s.max, s.mean


@dataclass(frozen=True)
class DiffStats:
    """How far ``a`` is from ``b`` (same shape), over the positions where both are finite.

    ``max_abs = max |a - b|`` (at index ``argmax_abs``); ``max_rel = max |a - b| / |b|`` over
    the positions with ``b != 0``; ``nonfinite_mismatch`` counts positions where one is NaN/Inf
    and the other is not the same NaN/Inf. Empty or all-non-finite tensors give 0 errors.
    """

    max_abs: float
    argmax_abs: tuple[int, ...] | None
    max_rel: float
    nonfinite_mismatch: int

    def summary(self) -> str:
        at = "" if self.argmax_abs is None else f" at {list(self.argmax_abs)}"
        return (f"max abs error {self.max_abs:.6g}{at}  max rel error {self.max_rel:.6g}  "
                f"NaN/Inf mismatches {self.nonfinite_mismatch}")


def diff_stats(a: np.ndarray, b: np.ndarray) -> DiffStats:
    """The largest absolute and relative error of ``a`` against ``b`` (see :class:`DiffStats`)."""
    a, b = _float64(np.asarray(a)), _float64(np.asarray(b))
    if a.shape != b.shape:
        raise ValueError(f"shapes {list(a.shape)} and {list(b.shape)} differ")
    both = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore"):
        d = np.where(both, np.abs(a - b), 0.0)
        same_nonfinite = (a == b) | (np.isnan(a) & np.isnan(b))
    mismatch = int(np.count_nonzero(~both & ~same_nonfinite))
    if not np.any(both):
        return DiffStats(0.0, None, 0.0, mismatch)
    flat = int(np.argmax(d))
    at = tuple(int(i) for i in np.unravel_index(flat, a.shape))
    nz = both & (b != 0)
    rel = float((d[nz] / np.abs(b[nz])).max()) if np.any(nz) else 0.0
    return DiffStats(float(d.ravel()[flat]), at, rel, mismatch)


def default_axes(ndim: int) -> tuple[str, ...]:
    """Axis names when the layout is unknown: d0, d1, ..."""
    return tuple(f"d{i}" for i in range(ndim))


def default_view_axes(axes: tuple[str, ...]) -> tuple[int, int]:
    """(row axis, column axis) a user expects first: H x W, kh x kw, else the last two."""
    for rows, cols in (("H", "W"), ("kh", "kw")):
        if rows in axes and cols in axes:
            return axes.index(rows), axes.index(cols)
    n = len(axes)
    return (n - 2, n - 1) if n >= 2 else (0, 0)


def slice_2d(a: np.ndarray, row_axis: int, col_axis: int, index: dict[int, int]) -> np.ndarray:
    """The 2-D float64 slice with ``row_axis`` down and ``col_axis`` across; every other axis is
    fixed at ``index[axis]`` (default 0). 0-D and 1-D tensors become one row."""
    a = np.asarray(a)
    if a.ndim == 0:
        return _float64(a).reshape(1, 1)
    if a.ndim == 1:
        return _float64(a).reshape(1, -1)
    if row_axis == col_axis:
        raise ValueError("the row and column axes must differ")
    sel = tuple(slice(None) if ax in (row_axis, col_axis) else int(index.get(ax, 0))
                for ax in range(a.ndim))
    s = a[sel].astype(np.float64)
    return s if row_axis < col_axis else s.T


def slice_index(ndim: int, row_axis: int, col_axis: int, index: dict[int, int], row: int,
                col: int) -> tuple[int, ...]:
    """The tensor index of pixel ``(row, col)`` of :func:`slice_2d` with the same arguments."""
    if ndim == 0:
        return ()
    if ndim == 1:
        return (col,)
    pos = {row_axis: row, col_axis: col}
    return tuple(pos.get(ax, int(index.get(ax, 0))) for ax in range(ndim))


def montage(w: np.ndarray, scale: str = "global", vmax: float | None = None) -> np.ndarray:
    """A 4-D filter ``(kh, kw, in, out)`` as one image: an in x out grid of kh x kw tiles; tile
    ``(i, o)`` is ``w[:, :, i, o]`` at rows ``i*(kh+1) ..`` and columns ``o*(kw+1) ..``, and the
    1-pixel lines between tiles are NaN.

    ``scale="global"`` divides by max |w| over the finite values (or by ``vmax`` when given, e.g.
    the common maximum of two filters being compared), ``"tile"`` by each tile's own max |w|,
    ``"none"`` keeps the values. Scaled values lie in [-1, 1] (+-Inf clip to +-1, NaN stays), so a
    diverging colour map over [-1, 1] is centred at 0; all-zero tiles stay 0.
    """
    w = np.asarray(w)
    if w.ndim != 4:
        raise ValueError(f"a montage needs a 4-D filter, got shape {list(w.shape)}")
    if scale not in MONTAGE_SCALES:
        raise ValueError(f"scale {scale!r} is not one of {', '.join(MONTAGE_SCALES)}")
    kh, kw, cin, cout = w.shape
    tiles = _float64(w).transpose(2, 3, 0, 1)  # (in, out, kh, kw)
    if scale != "none":
        finite_abs = np.where(np.isfinite(tiles), np.abs(tiles), 0.0)
        if scale == "tile":
            denom = finite_abs.max(axis=(2, 3), keepdims=True, initial=0.0)
        else:
            denom = np.asarray(finite_abs.max(initial=0.0) if vmax is None else float(vmax))
        tiles = np.clip(tiles / np.where(denom > 0, denom, 1.0), -1.0, 1.0)
    out = np.full((cin, kh + 1, cout, kw + 1), np.nan)
    out[:, :kh, :, :kw] = tiles.transpose(0, 2, 1, 3)
    return out.reshape(cin * (kh + 1), cout * (kw + 1))[:-1, :-1]


def montage_index(shape: tuple[int, ...], row: int, col: int) -> tuple[int, int, int, int] | None:
    """The filter index ``(kh, kw, in, out)`` of montage pixel ``(row, col)`` for a filter of
    ``shape``; None on a separator line or outside the montage."""
    kh, kw, cin, cout = shape
    if row < 0 or col < 0:
        return None
    i, r = divmod(row, kh + 1)
    o, c = divmod(col, kw + 1)
    if r == kh or c == kw or i >= cin or o >= cout:
        return None
    return r, c, i, o


def montage_separators(shape: tuple[int, ...]) -> np.ndarray:
    """Boolean mask of the separator pixels of the montage of a filter of ``shape``."""
    kh, kw, cin, cout = shape
    rows = np.arange(max(0, cin * (kh + 1) - 1)) % (kh + 1) == kh
    cols = np.arange(max(0, cout * (kw + 1) - 1)) % (kw + 1) == kw
    return rows[:, None] | cols[None, :]


def finite_range(*arrays: np.ndarray) -> tuple[float, float] | None:
    """(min, max) over the finite values of all ``arrays``; None when there are none."""
    lo, hi = np.inf, -np.inf
    for a in arrays:
        a = np.asarray(a)
        if a.size == 0:
            continue
        if a.dtype.kind not in "fc":
            a = _float64(a)
        with np.errstate(invalid="ignore"):
            amin, amax = float(np.min(a)), float(np.max(a))
        if not (np.isfinite(amin) and np.isfinite(amax)):  # NaN or Inf inside: mask them
            f = a[np.isfinite(a)]
            if not f.size:
                continue
            amin, amax = float(f.min()), float(f.max())
        lo, hi = min(lo, amin), max(hi, amax)
    return (lo, hi) if lo <= hi else None


def colour_levels(diverging: bool, *arrays: np.ndarray) -> tuple[float, float]:
    """Colour range of ``arrays``: symmetric around 0 for a diverging map (+-max |value|), else
    the finite range (a constant c gets c +- 0.5; no finite value gets (0, 1))."""
    rng = finite_range(*arrays) or (0.0, 1.0)
    if diverging:
        m = max(abs(rng[0]), abs(rng[1])) or 1.0
        return -m, m
    lo, hi = rng
    return (lo, hi) if hi > lo else (lo - 0.5, lo + 0.5)


@dataclass(frozen=True)
class Histogram:
    """Counts of the finite values in ``len(counts)`` equal bins between ``edges``; ``left_out``
    NaN/Inf values are not counted. No finite value: empty ``counts`` and ``edges``."""

    counts: np.ndarray
    edges: np.ndarray
    finite: int
    left_out: int


def histogram(a: np.ndarray, max_bins: int = 100) -> Histogram:
    """Histogram of the finite values of ``a``: about sqrt(n) bins (1..``max_bins``) over their
    range (a constant c over c +- 0.5, as NumPy does)."""
    v = np.asarray(a).reshape(-1)
    if v.dtype not in (np.float32, np.float64):
        v = v.astype(np.float64)
    rng = finite_range(v)
    if rng is None:
        return Histogram(np.zeros(0, np.int64), np.zeros(0), 0, int(v.size))
    n_finite = int(np.count_nonzero(np.isfinite(v)))
    bins = int(np.clip(np.sqrt(n_finite), 1, max_bins))
    if rng[0] == rng[1]:
        rng = (rng[0] - 0.5, rng[1] + 0.5)
    try:  # values outside the range (NaN, Inf) are not counted
        counts, edges = np.histogram(v, bins=bins, range=rng)
    except ValueError:  # a range of a few ulps cannot hold that many float64 bins
        counts, edges = np.histogram(v, bins=1, range=rng)
    return Histogram(counts, edges, n_finite, int(v.size) - n_finite)


def exact_text(v: float, dtype: np.dtype) -> str:
    """The shortest text that reads back as the same ``dtype`` value (``4`` not ``4.0``,
    ``True``/``False`` for booleans)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return str(bool(v))
    if dtype.kind in "iu":
        return str(int(v))
    if dtype.kind != "f" and dtype.name != "bfloat16":
        dtype = np.dtype(np.float64)
    s = str(dtype.type(v))
    return s.removesuffix(".0")
