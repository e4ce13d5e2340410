"""The conv forward and filter gradient on few input channels, 2-D and 3-D, as one product
over the whole ``kd*kh*kw*C`` patch (:mod:`engine.kernels._compiled.conv3d_jit`): the paths
``numba im2col 3-D`` (the Conv3D family, :mod:`engine.kernels.conv3d`) and ``numba im2col``
(the 2-D ops, through :mod:`engine.kernels.tiled`: a 2-D call is a volume of depth 1,
:func:`volume`).

Per depth tap or filter row, a product over 3 channels is short (147 terms for a 7x7 tap,
21 rows for a filter row); here each output row's ``J = kd*kh*kw*C`` terms are one product,
``x`` read in place:

- forward: ``y[t] = P_t @ w`` (:func:`forward_block`);
- filter gradient: ``dw += P_t.T @ dy[t]``, the product's rows every filter tap inside the
  image (:func:`filter_block`), each core summing a partial ``dw``.

Arrays are channels last in the compute dtype (float32 or float64), one group, C-contiguous.
The input gradient stays on col2im (one product per row already).
"""

from __future__ import annotations

import numpy as np

from engine.base.cancel import checkpoint
from engine.kernels import parallel
from engine.kernels.buffers import contiguous, readonly
from engine.shapes.geometry import ConvGeometry, ConvGeometryNd

#: What :func:`engine.kernels.last_path` says after a 3-D call on this path.
PATH = "numba im2col 3-D"
#: Output rows per compiled call: a cancel checkpoint between calls.
CALL_ROWS = 64
#: Output rows per in-place product of the forward (their output columns are its rows).
FORWARD_ROWS = 16


def applies(g: ConvGeometryNd, kind: str) -> bool:
    """True when a compiled ``kind`` call ("forward" or "filter") of ``g`` runs here: one group
    of few channels (:func:`engine.kernels.compute.few_channels`)."""
    from engine.kernels import compute  # not at import: engine.kernels loads no path

    return (kind in ("forward", "filter") and g.groups == 1
            and compute.few_channels(g.filter_in_depth))


def _params(g: ConvGeometryNd) -> tuple[np.ndarray, ...]:
    """``out``, ``dims``, ``pads``, ``steps``, ``dils``, ``taps`` of the compiled loops."""
    def ints(*values: int) -> np.ndarray:
        return np.array(values, np.int64)

    return (ints(*g.out_spatial, g.filter_out), ints(*g.in_spatial, g.in_depth),
            ints(*(before for before, _ in g.pads)), ints(*g.strides), ints(*g.dilations),
            ints(*g.filter_spatial))


def _jit():
    from engine.kernels._compiled import conv3d_jit

    return conv3d_jit


def _rows(g: ConvGeometryNd) -> int:
    return g.batch * g.out_spatial[0] * g.out_spatial[1]


def _patch(g: ConvGeometryNd) -> int:
    """``J``: the terms of one output element (``kd*kh*kw*C``)."""
    return int(np.prod(g.filter_spatial)) * g.in_depth


def conv(g: ConvGeometryNd, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """The forward conv ``[N, OD, OH, OW, K]`` of channels-last ``x`` and ``w``."""
    y = np.empty((g.batch, *g.out_spatial, g.filter_out), ctype)
    j_all = _patch(g)
    xf, wf, yf = readonly(x.reshape(-1)), readonly(np.ascontiguousarray(w, ctype).reshape(-1)), \
        y.reshape(-1)
    params, jit = _params(g), _jit()
    rows, taps = forward_block(g, ctype.itemsize)

    spans = parallel.ranges(_rows(g), 1)
    scratch = {span: (np.empty(rows * g.out_spatial[2] * j_all, ctype),  # made here: the
                      np.empty(rows * g.out_spatial[2], np.int64),  # memory does not depend
                      np.empty(rows * g.out_spatial[2], np.int64))  # on the threads' timing
               for span in spans}

    def part(lo: int, hi: int) -> None:
        patch, *tables = scratch[lo, hi]
        for t0 in range(lo, hi, CALL_ROWS):
            checkpoint()
            jit.im2col_rows_3d(yf, xf, wf, patch, *tables, t0, min(hi, t0 + CALL_ROWS), rows,
                               taps, *params)

    parallel.map_ranges(part, _rows(g), 1)
    return y


def forward_block(g: ConvGeometryNd, itemsize: int) -> tuple[int, int]:
    """``(rows, filter_rows)`` of the forward: output rows per in-place product
    (:data:`FORWARD_ROWS`) and filter rows per product: the fewest products whose part of the
    filter fills at most 4/5 of this CPU's L1 data cache, split evenly (at least one row;
    :mod:`engine.kernels.cpu`)."""
    from engine.kernels import cpu

    kh = g.filter_spatial[1]
    row = g.filter_spatial[2] * g.in_depth * g.filter_out * itemsize
    fit = max(1, cpu.host().l1d * 4 // 5 // max(1, row))
    return FORWARD_ROWS, -(-kh // -(-kh // fit))


def filter_block(g: ConvGeometryNd, itemsize: int) -> tuple[int, int]:
    """``(rows, positions)`` of the filter gradient: output rows per in-place product (their
    ``dy`` rows fill at most 2/3 of this CPU's L1 data cache, at least one row) and the
    gathered columns' block (its patches and ``dy`` rows fill at most half its L2, at least one
    row's; :mod:`engine.kernels.cpu`)."""
    from engine.kernels import cpu

    host, ow = cpu.host(), g.out_spatial[2]
    rows = max(1, host.l1d * 2 // 3 // max(1, ow * g.filter_out * itemsize))
    return rows, max(ow, host.l2 // 2 // max(1, (_patch(g) + g.filter_out) * itemsize))


def backprop_filter(g: ConvGeometryNd, x: np.ndarray, dy: np.ndarray,
                    ctype: np.dtype) -> np.ndarray:
    """The filter gradient ``[kd, kh, kw, C, K]`` of channels-last ``x`` and ``dy``."""
    j_all = _patch(g)
    rows, positions = filter_block(g, ctype.itemsize)
    xf, df = readonly(x.reshape(-1)), readonly(np.ascontiguousarray(dy, ctype).reshape(-1))
    params, jit = _params(g), _jit()

    spans = parallel.ranges(_rows(g), 1)
    scratch = {span: (np.zeros(j_all * g.filter_out, ctype), np.empty(positions * j_all, ctype),
                      np.empty(positions * g.filter_out, ctype), np.empty(j_all, np.int64),
                      np.empty(j_all, np.int64))
               for span in spans}  # made here: the memory does not depend on the threads

    def part(lo: int, hi: int) -> np.ndarray:
        acc, patch, rows_dy, *tables = scratch[lo, hi]
        for t0 in range(lo, hi, CALL_ROWS):
            checkpoint()
            jit.filter_rows_3d(acc, xf, df, patch, rows_dy, *tables, t0, min(hi, t0 + CALL_ROWS),
                               rows, *params)
        return acc

    parts = parallel.map_ranges(part, _rows(g), 1)
    acc = parts[0]
    for p in parts[1:]:
        acc += p
    return acc.reshape(g.filter_shape)


def volume(g: ConvGeometry, in_channels: int, out_channels: int) -> ConvGeometryNd:
    """One group of the 2-D call ``g`` (``in_channels`` input channels, ``out_channels``
    outputs) as the 3-D geometry of depth 1 these loops take (channels last)."""
    return ConvGeometryNd("NDHWC", g.padding, False, g.batch, (1, g.in_rows, g.in_cols),
                          in_channels, (1, g.filter_rows, g.filter_cols), in_channels,
                          out_channels, (1, g.stride_rows, g.stride_cols),
                          (1, g.dilation_rows, g.dilation_cols), (1, g.out_rows, g.out_cols),
                          ((0, 0), (g.pad_top, g.pad_bottom), (g.pad_left, g.pad_right)))


def _planes(a: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """NHWC ``a`` as one C-contiguous plane per image, ``[N, 1, H, W, C]`` in ``ctype``
    (copied only when it is not so already)."""
    return contiguous(a, ctype).reshape(a.shape[0], 1, *a.shape[1:])


def conv2d(g: ConvGeometry, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """One group's 2-D forward conv ``(N, OH, OW, O)`` of NHWC ``x`` (any strides) and ``w``
    ``(KH, KW, C, O)``."""
    y = conv(volume(g, x.shape[3], w.shape[3]), _planes(x, ctype), w.reshape(1, *w.shape),
             ctype)
    return y.reshape(g.batch, g.out_rows, g.out_cols, w.shape[3])


def conv2d_backprop_filter(g: ConvGeometry, x: np.ndarray, dy: np.ndarray,
                           ctype: np.dtype) -> np.ndarray:
    """One group's 2-D filter gradient ``(KH, KW, C, O)`` of NHWC ``x`` and ``dy`` (any
    strides)."""
    v = volume(g, x.shape[3], dy.shape[3])
    return backprop_filter(v, _planes(x, ctype), _planes(dy, ctype), ctype)[0]


def workspace_bytes(g: ConvGeometryNd, kind: str, ct: int) -> int:
    """An upper bound of what a ``kind`` call of ``g`` on this path allocates besides its
    operands and result, ``ct`` the compute itemsize (without importing numba): the operands
    in the compute dtype and C-contiguous, each core's patch block (and partial ``dw``), the
    result channels last."""
    if not applies(g, kind):
        return 0
    x = g.batch * int(np.prod(g.in_spatial)) * g.in_depth
    y = g.batch * int(np.prod(g.out_spatial)) * g.filter_out
    w = int(np.prod(g.filter_shape))
    ow, j_all = g.out_spatial[2], _patch(g)
    cores = parallel.workers()
    if kind == "forward":  # each core's patch block and two int64 tables per position
        rows = forward_block(g, ct)[0]
        return ct * (x + w + 2 * y + cores * rows * ow * (j_all + 16 // ct))
    positions = filter_block(g, ct)[1]  # each core's gathered block, its dw and two tables
    per_core = positions * (j_all + g.filter_out) + w + 2 * j_all * 8 // ct
    return ct * (x + y + 2 * w + cores * per_core)
