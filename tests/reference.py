"""A slow reference for the conv ops, written from the definition with plain loops.

Everything is float64 on NHWC; NCHW arrays are transposed in and out. Output sizes and paddings
come from :func:`geometry`, written here from TensorFlow's documented definition (not from
engine.shapes.padding / engine.shapes.conv; tests/test_reference_geometry.py compares the two), and
the arithmetic shares no code with the kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def window(size: int, taps: int, dilation: int, stride: int, padding: str,
           before: int = 0, after: int = 0) -> tuple[int, int, int]:
    """(output size, pad before, pad after) of one spatial dimension.

    From TensorFlow's documentation: a filter of ``taps`` taps dilated by ``dilation`` spans
    ``span = dilation * (taps - 1) + 1`` input elements. SAME gives ``ceil(size / stride)``
    outputs and pads ``max(span - stride, 0)`` in total when ``size`` is a multiple of
    ``stride``, else ``max(span - size % stride, 0)``; the smaller half goes before. VALID
    (no padding) and EXPLICIT (``before`` and ``after``) give one output per window start
    ``0, stride, 2 * stride, ...`` whose whole span lies in the padded input (none if the span
    does not fit).
    """
    span = dilation * (taps - 1) + 1
    if padding == "SAME":
        outputs = -(-size // stride)
        if size % stride == 0:
            total = max(span - stride, 0)
        else:
            total = max(span - size % stride, 0)
        return outputs, total // 2, total - total // 2
    if padding == "VALID":
        before = after = 0
    padded = before + size + after
    starts = range(0, padded - span + 1, stride)
    return len(starts), before, after


@dataclass(frozen=True)
class Geometry:
    """The sizes the loops below need, in layout-free terms (NHWC order)."""

    data_format: str
    depthwise: bool
    batch: int
    in_rows: int
    in_cols: int
    in_depth: int
    filter_rows: int
    filter_cols: int
    filter_in_depth: int
    filter_out: int  # out_channels, or the depth multiplier for depthwise
    stride_rows: int
    stride_cols: int
    dilation_rows: int
    dilation_cols: int
    out_rows: int
    out_cols: int
    pad_top: int
    pad_bottom: int
    pad_left: int
    pad_right: int

    @property
    def out_depth(self) -> int:
        return self.in_depth * self.filter_out if self.depthwise else self.filter_out

    @property
    def groups(self) -> int:
        return 1 if self.depthwise else self.in_depth // self.filter_in_depth

    def _layout(self, rows: int, cols: int, depth: int) -> tuple[int, ...]:
        if self.data_format == "NHWC":
            return (self.batch, rows, cols, depth)
        return (self.batch, depth, rows, cols)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self._layout(self.in_rows, self.in_cols, self.in_depth)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self._layout(self.out_rows, self.out_cols, self.out_depth)

    @property
    def filter_shape(self) -> tuple[int, ...]:
        return (self.filter_rows, self.filter_cols, self.filter_in_depth, self.filter_out)


def geometry(input_shape, filter_shape, strides, padding, explicit_paddings=(),
             data_format="NHWC", dilations=(1, 1, 1, 1), depthwise=False) -> Geometry:
    """The geometry of a valid call (arguments as the kernels take them; not validated)."""
    if data_format == "NHWC":
        batch, rows, cols, depth = input_shape
        (_, sr, sc, _), (_, dr, dc, _) = strides, dilations
        spatial_pads = list(explicit_paddings)[2:6]
    else:
        batch, depth, rows, cols = input_shape
        (_, _, sr, sc), (_, _, dr, dc) = strides, dilations
        spatial_pads = list(explicit_paddings)[4:8]
    top, bottom, left, right = spatial_pads if padding == "EXPLICIT" else (0, 0, 0, 0)
    fr, fc, fin, fout = filter_shape
    orows, ptop, pbottom = window(rows, fr, dr, sr, padding, top, bottom)
    ocols, pleft, pright = window(cols, fc, dc, sc, padding, left, right)
    return Geometry(data_format, depthwise, batch, rows, cols, depth, fr, fc, fin, fout,
                    sr, sc, dr, dc, orows, ocols, ptop, pbottom, pleft, pright)


def _nhwc(a: np.ndarray, fmt: str) -> np.ndarray:
    a = np.asarray(a, np.float64)
    return a if fmt == "NHWC" else a.transpose(0, 2, 3, 1)


def _back(a: np.ndarray, fmt: str) -> np.ndarray:
    return a if fmt == "NHWC" else a.transpose(0, 3, 1, 2)


def _windows(g: Geometry):
    """Yield (n, r, c, i, j, row, col) for every output position and tap reading the input."""
    for n in range(g.batch):
        for r in range(g.out_rows):
            for c in range(g.out_cols):
                for i in range(g.filter_rows):
                    row = r * g.stride_rows + i * g.dilation_rows - g.pad_top
                    if not 0 <= row < g.in_rows:
                        continue
                    for j in range(g.filter_cols):
                        col = c * g.stride_cols + j * g.dilation_cols - g.pad_left
                        if 0 <= col < g.in_cols:
                            yield n, r, c, i, j, row, col


def _pairs(g: Geometry):
    """(input channels, output channels) index arrays per group; depthwise: per channel."""
    if g.depthwise:
        m = g.filter_out
        return [(slice(k, k + 1), slice(k * m, (k + 1) * m)) for k in range(g.in_depth)]
    q, o = g.filter_in_depth, g.filter_out // g.groups
    return [(slice(k * q, (k + 1) * q), slice(k * o, (k + 1) * o)) for k in range(g.groups)]


def _wslice(w: np.ndarray, g: Geometry, ci: slice, co: slice) -> np.ndarray:
    """The filter block (taps, in, out) for one group (depthwise: one input channel)."""
    return w[:, :, ci, :] if g.depthwise else w[:, :, :, co]


def conv2d(x, w, g: Geometry) -> np.ndarray:
    xv, w = _nhwc(x, g.data_format), np.asarray(w, np.float64)
    y = np.zeros((g.batch, g.out_rows, g.out_cols, g.out_depth))
    for ci, co in _pairs(g):
        wk = _wslice(w, g, ci, co)
        for n, r, c, i, j, row, col in _windows(g):
            y[n, r, c, co] += xv[n, row, col, ci] @ wk[i, j]
    return _back(y, g.data_format)


def backprop_filter(x, dy, g: Geometry) -> np.ndarray:
    xv, dyv = _nhwc(x, g.data_format), _nhwc(dy, g.data_format)
    dw = np.zeros(g.filter_shape)
    for ci, co in _pairs(g):
        for n, r, c, i, j, row, col in _windows(g):
            outer = np.outer(xv[n, row, col, ci], dyv[n, r, c, co])
            if g.depthwise:
                dw[i, j, ci, :] += outer
            else:
                dw[i, j, :, co] += outer
    return dw


def backprop_input(w, dy, g: Geometry) -> np.ndarray:
    w, dyv = np.asarray(w, np.float64), _nhwc(dy, g.data_format)
    dx = np.zeros((g.batch, g.in_rows, g.in_cols, g.in_depth))
    for ci, co in _pairs(g):
        wk = _wslice(w, g, ci, co)
        for n, r, c, i, j, row, col in _windows(g):
            dx[n, row, col, ci] += wk[i, j] @ dyv[n, r, c, co]
    return _back(dx, g.data_format)
