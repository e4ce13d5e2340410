"""A slow reference for the conv ops, written from the definition with plain loops.

Everything is float64 on NHWC; NCHW arrays are transposed in and out. Output sizes and paddings
come from engine.conv_shapes (they are checked separately against TensorFlow's golden data);
the arithmetic here shares no code with the kernels.
"""

from __future__ import annotations

import numpy as np

from engine.conv_shapes import ConvGeometry


def _nhwc(a: np.ndarray, fmt: str) -> np.ndarray:
    a = np.asarray(a, np.float64)
    return a if fmt == "NHWC" else a.transpose(0, 2, 3, 1)


def _back(a: np.ndarray, fmt: str) -> np.ndarray:
    return a if fmt == "NHWC" else a.transpose(0, 3, 1, 2)


def _windows(g: ConvGeometry):
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


def _pairs(g: ConvGeometry):
    """(input channels, output channels) index arrays per group; depthwise: per channel."""
    if g.depthwise:
        m = g.filter_out
        return [(slice(k, k + 1), slice(k * m, (k + 1) * m)) for k in range(g.in_depth)]
    q, o = g.filter_in_depth, g.filter_out // g.groups
    return [(slice(k * q, (k + 1) * q), slice(k * o, (k + 1) * o)) for k in range(g.groups)]


def _wslice(w: np.ndarray, g: ConvGeometry, ci: slice, co: slice) -> np.ndarray:
    """The filter block (taps, in, out) for one group (depthwise: one input channel)."""
    return w[:, :, ci, :] if g.depthwise else w[:, :, :, co]


def conv2d(x, w, g: ConvGeometry) -> np.ndarray:
    xv, w = _nhwc(x, g.data_format), np.asarray(w, np.float64)
    y = np.zeros((g.batch, g.out_rows, g.out_cols, g.out_depth))
    for ci, co in _pairs(g):
        wk = _wslice(w, g, ci, co)
        for n, r, c, i, j, row, col in _windows(g):
            y[n, r, c, co] += xv[n, row, col, ci] @ wk[i, j]
    return _back(y, g.data_format)


def backprop_filter(x, dy, g: ConvGeometry) -> np.ndarray:
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


def backprop_input(w, dy, g: ConvGeometry) -> np.ndarray:
    w, dyv = np.asarray(w, np.float64), _nhwc(dy, g.data_format)
    dx = np.zeros((g.batch, g.in_rows, g.in_cols, g.in_depth))
    for ci, co in _pairs(g):
        wk = _wslice(w, g, ci, co)
        for n, r, c, i, j, row, col in _windows(g):
            dx[n, row, col, ci] += wk[i, j] @ dyv[n, r, c, co]
    return _back(dx, g.data_format)
