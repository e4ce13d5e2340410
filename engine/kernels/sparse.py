"""The conv ops as a sum over the filter taps that meet real input, for extreme geometries.

Per spatial dimension, tap ``i`` of output row ``r`` reads input row ``h = r*s + i*d - pad``
(``pad`` = padding before). The output rows whose read lands inside the input, ``0 <= h < n``,
form one range ``[r0, r1)``:

    r0 = max(0, ceil((pad - i*d) / s)),   r1 = min(out, floor((n - 1 + pad - i*d) / s) + 1)

reading input rows ``h0 = r0*s + i*d - pad, h0 + s, ...``: a strided slice of the unpadded
input. A tap with ``r1 <= r0`` only ever meets padding and is skipped; only taps with
``pad - (out-1)*s - (n-1) <= i*d <= pad + n - 1`` can meet data, so only those are examined.
In 2-D a tap pair ``(i, j)`` is the product of its row and column ranges, so each op becomes one
product per tap pair that meets data, over exactly its real terms:

- conv2d:          ``y[:, R_i, C_j] += x[:, H_i, V_j] @ w[i, j]``
- backprop filter: ``dw[i, j] = sum over (n, R_i, C_j) of x[:, H_i, V_j].T @ dy[:, R_i, C_j]``
- backprop input:  ``dx[:, H_i, V_j] += dy[:, R_i, C_j] @ w[i, j].T``

(grouped: one batched product per tap over the groups; depthwise: per-channel products). Time
and memory follow the batch, the real input and output sizes, the channels and the number of
taps that meet data, never the stride, dilation or padding magnitude, and no padding or layout
position is ever multiplied (so the NaN/Inf contract holds by construction). The kernels use
this path when the phase layout of :mod:`engine.kernels.layout` would be mostly padding
(:func:`select`); for ordinary geometries that layout is faster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.base.cancel import checkpoint
from engine.shapes.conv import ConvGeometry

#: Extra memory one batch chunk's copies may use.
CHUNK_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Spans:
    """The taps of one dimension that meet data: ``taps[k]`` reads output rows
    ``[out_lo[k], out_hi[k])`` from input rows ``in_lo[k], in_lo[k] + stride, ...``."""

    stride: int
    taps: np.ndarray
    out_lo: np.ndarray
    out_hi: np.ndarray
    in_lo: np.ndarray

    @classmethod
    def of(cls, size: int, taps: int, dilation: int, stride: int, pad: int, out: int) -> Spans:
        """The spans of one dimension (see the module docstring), vectorized over the taps
        that can meet data."""
        empty = np.zeros(0, np.int64)
        if size <= 0 or out <= 0 or taps <= 0:
            return cls(stride, empty, empty, empty, empty)
        lo = max(0, -(-(pad - (out - 1) * stride - (size - 1)) // dilation))
        hi = min(taps - 1, (pad + size - 1) // dilation) if pad + size - 1 >= 0 else -1
        if hi < lo:
            return cls(stride, empty, empty, empty, empty)
        i = np.arange(lo, hi + 1, dtype=np.int64)
        shift = pad - i * dilation  # output row r reads input row r*s - shift
        r0 = np.maximum(0, -(-shift // stride))
        r1 = np.minimum(out, (size - 1 + shift) // stride + 1)
        keep = r1 > r0
        r0, r1, i = r0[keep], r1[keep], i[keep]
        return cls(stride, i, r0, r1, r0 * stride - shift[keep])

    def __len__(self) -> int:
        return len(self.taps)

    def slices(self, k: int) -> tuple[int, slice, slice]:
        """Tap index, output slice and (strided) input slice of span ``k``."""
        r0, r1, h0 = int(self.out_lo[k]), int(self.out_hi[k]), int(self.in_lo[k])
        return (int(self.taps[k]), slice(r0, r1),
                slice(h0, h0 + (r1 - r0 - 1) * self.stride + 1, self.stride))

    @property
    def terms(self) -> int:
        """Number of (output row, tap) pairs that read data."""
        return int((self.out_hi - self.out_lo).sum())


def spans(g: ConvGeometry) -> tuple[Spans, Spans]:
    """Row and column spans of ``g``."""
    return (Spans.of(g.in_rows, g.filter_rows, g.dilation_rows, g.stride_rows, g.pad_top,
                     g.out_rows),
            Spans.of(g.in_cols, g.filter_cols, g.dilation_cols, g.stride_cols, g.pad_left,
                     g.out_cols))


def _extent_wasteful(g: ConvGeometry) -> bool:
    """The phase layout's padded extent (rows read, plus one stride of phases) is over 4x the
    real input and output positions."""
    def extent(out: int, k: int, d: int, s: int) -> int:
        return max(0, out - 1) * s + (k - 1) * d + 1 + s

    layout = (extent(g.out_rows, g.filter_rows, g.dilation_rows, g.stride_rows)
              * extent(g.out_cols, g.filter_cols, g.dilation_cols, g.stride_cols))
    return layout > 4 * (g.in_rows * g.in_cols + g.out_rows * g.out_cols) + 4096


def preferred(g: ConvGeometry, rows: Spans, cols: Spans) -> bool:
    """True when the phase layout would be mostly padding, or fewer than half of the taps
    meet data."""
    taps = g.filter_rows * g.filter_cols
    return _extent_wasteful(g) or taps > 2 * len(rows) * len(cols) + 16


def _every_tap_meets_data(size: int, taps: int, dilation: int, stride: int, pad: int,
                          out: int) -> bool:
    """A sufficient O(1) test: tap ``i`` reads rows ``i*d - pad + r*s``, ``0 <= r < out``, a
    progression with steps ``s <= size`` that cannot jump over the data, so it meets data when
    it starts before the data's end and ends after its start; the last tap starts latest and
    the first ends earliest."""
    return (stride <= size and (taps - 1) * dilation - pad < size
            and (out - 1) * stride - pad >= 0)


def select(g: ConvGeometry) -> tuple[Spans, Spans] | None:
    """The row and column spans when the tap-span path should compute ``g``, else None (an O(1)
    answer for ordinary geometries)."""
    if not _extent_wasteful(g) and (
            g.filter_rows * g.filter_cols <= 16 or (
                _every_tap_meets_data(g.in_rows, g.filter_rows, g.dilation_rows, g.stride_rows,
                                      g.pad_top, g.out_rows)
                and _every_tap_meets_data(g.in_cols, g.filter_cols, g.dilation_cols,
                                          g.stride_cols, g.pad_left, g.out_cols))):
        return None
    rows, cols = spans(g)
    return (rows, cols) if preferred(g, rows, cols) else None


def _pairs(rows: Spans, cols: Spans):
    """``(i, j, out_rows, out_cols, in_rows, in_cols)`` of every tap pair that meets data (a
    cancel checkpoint before each: a chunk may hold many pairs)."""
    col_slices = [cols.slices(b) for b in range(len(cols))]
    for a in range(len(rows)):
        i, ro, ri = rows.slices(a)
        for j, co, ci in col_slices:
            checkpoint()
            yield i, j, ro, co, ri, ci


def _chunks(batch: int, per_image: int):
    step = max(1, CHUNK_BYTES // max(1, per_image))
    for start in range(0, batch, step):
        checkpoint()
        yield slice(start, min(batch, start + step))


def _gather(a: np.ndarray, rs: slice, cs: slice, ctype: np.dtype) -> np.ndarray:
    """``a[:, rs, cs]`` as a contiguous ``(positions, channels)`` matrix of ``ctype``."""
    v = a[:, rs, cs]
    return np.ascontiguousarray(v, ctype).reshape(-1, a.shape[3])


def conv2d(g: ConvGeometry, rows: Spans, cols: Spans, x: np.ndarray, w: np.ndarray,
           ctype: np.dtype) -> np.ndarray:
    """NHWC forward conv (all groups) in ``ctype``."""
    n, groups = x.shape[0], g.groups
    q, o = w.shape[2], w.shape[3]
    y = np.zeros((n, g.out_rows, g.out_cols, o), ctype)
    wg = w.astype(ctype, copy=False).reshape(*w.shape[:3], groups, o // groups)
    for sl in _chunks(n, (x[0].size + y[0].size) * ctype.itemsize):
        for i, j, ro, co, ri, ci in _pairs(rows, cols):
            xs = _gather(x[sl], ri, ci, ctype).reshape(-1, groups, q).transpose(1, 0, 2)
            prod = np.matmul(xs, wg[i, j].transpose(1, 0, 2))  # (groups, P, o/groups)
            dst = y[sl, ro, co]
            dst += prod.transpose(1, 0, 2).reshape(dst.shape)
    return y


def conv2d_backprop_filter(g: ConvGeometry, rows: Spans, cols: Spans, x: np.ndarray,
                           dy: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Filter gradient ``(KH, KW, Q, O)`` (all groups) in ``ctype``."""
    n, groups, o = x.shape[0], g.groups, dy.shape[3]
    q = g.filter_in_depth
    dw = np.zeros((g.filter_rows, g.filter_cols, q, groups, o // groups), ctype)
    for sl in _chunks(n, (x[0].size + dy[0].size) * ctype.itemsize):
        for i, j, ro, co, ri, ci in _pairs(rows, cols):
            xs = _gather(x[sl], ri, ci, ctype).reshape(-1, groups, q).transpose(1, 2, 0)
            ds = _gather(dy[sl], ro, co, ctype).reshape(-1, groups, o // groups)
            dw[i, j] += np.matmul(xs, ds.transpose(1, 0, 2)).transpose(1, 0, 2)
    return dw.reshape(g.filter_rows, g.filter_cols, q, o)


def conv2d_backprop_input(g: ConvGeometry, rows: Spans, cols: Spans, dy: np.ndarray,
                          w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """NHWC input gradient (all groups) in ``ctype``."""
    n, groups, o = dy.shape[0], g.groups, w.shape[3]
    dx = np.zeros((n, g.in_rows, g.in_cols, g.in_depth), ctype)
    wg = w.astype(ctype, copy=False).reshape(*w.shape[:3], groups, o // groups)
    for sl in _chunks(n, (dx[0].size + dy[0].size) * ctype.itemsize):
        for i, j, ro, co, ri, ci in _pairs(rows, cols):
            ds = _gather(dy[sl], ro, co, ctype).reshape(-1, groups, o // groups)
            prod = np.matmul(ds.transpose(1, 0, 2), wg[i, j].transpose(1, 2, 0))  # (G, P, q)
            dst = dx[sl, ri, ci]
            dst += prod.transpose(1, 0, 2).reshape(dst.shape)
    return dx


def depthwise_conv2d(g: ConvGeometry, rows: Spans, cols: Spans, x: np.ndarray, w: np.ndarray,
                     ctype: np.dtype) -> np.ndarray:
    """NHWC depthwise forward ``(N, OH, OW, C*M)`` in ``ctype``."""
    n, c, m = x.shape[0], x.shape[3], w.shape[3]
    y = np.zeros((n, g.out_rows, g.out_cols, c * m), ctype)
    wc = w.astype(ctype, copy=False)
    for sl in _chunks(n, (x[0].size + y[0].size) * ctype.itemsize):
        for i, j, ro, co, ri, ci in _pairs(rows, cols):
            xs = _gather(x[sl], ri, ci, ctype)
            dst = y[sl, ro, co]
            dst += (xs[:, :, None] * wc[i, j]).reshape(dst.shape)
    return y


def depthwise_conv2d_backprop_filter(g: ConvGeometry, rows: Spans, cols: Spans, x: np.ndarray,
                                     dy: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Depthwise filter gradient ``(KH, KW, C, M)`` in ``ctype``."""
    n, c = x.shape[0], x.shape[3]
    m = g.filter_out
    dw = np.zeros((g.filter_rows, g.filter_cols, c, m), ctype)
    for sl in _chunks(n, (x[0].size + dy[0].size) * ctype.itemsize):
        for i, j, ro, co, ri, ci in _pairs(rows, cols):
            xs = _gather(x[sl], ri, ci, ctype)
            ds = _gather(dy[sl], ro, co, ctype).reshape(-1, c, m)
            dw[i, j] += np.einsum("pc,pcm->cm", xs, ds)
    return dw


def depthwise_conv2d_backprop_input(g: ConvGeometry, rows: Spans, cols: Spans, dy: np.ndarray,
                                    w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """NHWC depthwise input gradient in ``ctype``."""
    n, c, m = dy.shape[0], w.shape[2], w.shape[3]
    dx = np.zeros((n, g.in_rows, g.in_cols, c), ctype)
    wc = w.astype(ctype, copy=False)
    for sl in _chunks(n, (dx[0].size + dy[0].size) * ctype.itemsize):
        for i, j, ro, co, ri, ci in _pairs(rows, cols):
            ds = _gather(dy[sl], ro, co, ctype).reshape(-1, c, m)
            dst = dx[sl, ri, ci]
            dst += np.einsum("pcm,cm->pc", ds, wc[i, j]).reshape(dst.shape)
    return dx
