"""The Conv3D forward and filter gradient on few input channels as one product per output row
over the whole ``kd*kh*kw*C`` patch (:mod:`engine.kernels._compiled.conv3d_jit`): the path
``numba im2col 3-D``.

A sum over depth taps of 2-D convolutions (:mod:`engine.kernels.conv3d_planes`) runs a
``kh*kw*C``-deep product per tap and adds the taps' results in passes over the whole output;
on 3 channels those products are short (147 for a 7x7 filter) and the passes cost a third of
the call. Here each output row's ``J = kd*kh*kw*C`` terms are one product:

- forward: ``y[t] = P_t @ w``, windows inside the volume read in place;
- filter gradient: ``dw += P_t.T @ dy[t]``, the patches of a block of rows gathered into an
  L2-sized block first (:func:`filter_block`), each core summing a partial ``dw``.

Arrays are channels last in the compute dtype (float32 or float64), one group, C-contiguous.
The input gradient stays on the planes path (its col2im already runs one product per row).
"""

from __future__ import annotations

import numpy as np

from engine.base.cancel import checkpoint
from engine.kernels import compute, parallel
from engine.kernels.buffers import readonly
from engine.shapes.geometry import ConvGeometryNd

#: What :func:`engine.kernels.last_path` says after a 3-D call on this path.
PATH = "numba im2col 3-D"
#: Output rows per compiled call: a cancel checkpoint between calls.
CALL_ROWS = 64


def applies(g: ConvGeometryNd, kind: str) -> bool:
    """True when a compiled ``kind`` call ("forward" or "filter") of ``g`` runs here: one group
    of few channels (:func:`engine.kernels.compute.few_channels`)."""
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


def conv(g: ConvGeometryNd, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """The forward conv ``[N, OD, OH, OW, K]`` of channels-last ``x`` and ``w``."""
    y = np.empty((g.batch, *g.out_spatial, g.filter_out), ctype)
    j_all = int(np.prod(g.filter_spatial)) * g.in_depth
    xf, wf, yf = readonly(x.reshape(-1)), readonly(np.ascontiguousarray(w, ctype).reshape(-1)), \
        y.reshape(-1)
    params, jit = _params(g), _jit()

    def part(lo: int, hi: int) -> None:
        patch = np.empty(g.out_spatial[2] * j_all, ctype)
        for t0 in range(lo, hi, CALL_ROWS):
            checkpoint()
            jit.im2col_rows_3d(yf, xf, wf, patch, t0, min(hi, t0 + CALL_ROWS), *params)

    parallel.map_ranges(part, _rows(g), 1)
    return y


def _padded_patch(g: ConvGeometryNd, itemsize: int) -> tuple[int, int]:
    """``(J, Jp)``: a patch's length and its row length in the filter gradient's block, a
    whole number of vectors (:func:`engine.kernels._compiled.numba_simd.lanes`)."""
    from engine.kernels._compiled.numba_simd import lanes

    j_all, v = int(np.prod(g.filter_spatial)) * g.in_depth, lanes(itemsize)
    return j_all, -(-j_all // v) * v


def filter_block(g: ConvGeometryNd, itemsize: int) -> tuple[int, int]:
    """``(rows, positions)`` of the filter gradient: output rows per gathered block (its
    patches fill at most half this CPU's L2, at least one row) and positions per product
    (their patch and ``dy`` rows, one column panel, fill at most 2/3 of its L1, at least 8;
    :mod:`engine.kernels.cpu`)."""
    from engine.kernels import cpu
    from engine.kernels._compiled.numba_simd import tile_columns

    host, jp = cpu.host(), _padded_patch(g, itemsize)[1]
    rows = max(1, host.l2 // 2 // max(1, g.out_spatial[2] * jp * itemsize))
    per_position = (tile_columns(itemsize) + g.filter_out) * itemsize
    return rows, max(8, host.l1d * 2 // 3 // per_position)


def backprop_filter(g: ConvGeometryNd, x: np.ndarray, dy: np.ndarray,
                    ctype: np.dtype) -> np.ndarray:
    """The filter gradient ``[kd, kh, kw, C, K]`` of channels-last ``x`` and ``dy``."""
    j_all, jp = _padded_patch(g, ctype.itemsize)
    block, kb = filter_block(g, ctype.itemsize)
    per_call = max(block, CALL_ROWS // block * block)
    xf, df = readonly(x.reshape(-1)), readonly(np.ascontiguousarray(dy, ctype).reshape(-1))
    params, jit = _params(g), _jit()

    def part(lo: int, hi: int) -> np.ndarray:
        acc = np.zeros(g.filter_out * jp, ctype)
        patch = np.zeros(block * g.out_spatial[2] * jp, ctype)  # columns J on: stay 0
        for t0 in range(lo, hi, per_call):
            checkpoint()
            jit.filter_rows_3d(acc, xf, df, patch, t0, min(hi, t0 + per_call), block, kb,
                               *params)
        return acc

    parts = parallel.map_ranges(part, _rows(g), 1)
    acc = parts[0]
    for p in parts[1:]:
        acc += p
    return np.ascontiguousarray(acc.reshape(g.filter_out, jp)[:, :j_all].T).reshape(
        g.filter_shape)


def workspace_bytes(g: ConvGeometryNd, kind: str, ct: int) -> int:
    """An upper bound of what a ``kind`` call of ``g`` on this path allocates besides its
    operands and result, ``ct`` the compute itemsize (without importing numba): the operands
    in the compute dtype and C-contiguous, each core's patch block (and partial ``dw``), the
    result channels last."""
    from engine.kernels import cpu

    if not applies(g, kind):
        return 0
    x = g.batch * int(np.prod(g.in_spatial)) * g.in_depth
    y = g.batch * int(np.prod(g.out_spatial)) * g.filter_out
    w = int(np.prod(g.filter_shape))
    ow, j_all = g.out_spatial[2], int(np.prod(g.filter_spatial)) * g.in_depth
    cores = parallel.workers()
    if kind == "forward":
        return ct * (x + w + 2 * y + cores * ow * j_all)
    jp = j_all + 16  # at most a vector's lanes of padding
    rows = max(1, cpu.host().l2 // 2 // max(1, ow * j_all * ct))
    return ct * (x + y + 3 * w + cores * (rows * ow + g.filter_out) * jp)
