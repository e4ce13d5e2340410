"""Vectorized NHWC compute of the conv ops on the phase layout of :mod:`engine.conv_layout`.

Conventions: ``x`` is the input ``(N, H, W, C)``, ``w`` the filter ``(KH, KW, C, O)`` (HWIO; for
depthwise ``(KH, KW, C, M)``), ``dy`` the output gradient ``(N, OH, OW, O)``. With the flat
phase images ``P`` of ``x`` and the zero-embedded flat ``E`` of ``dy`` (``T`` positions each):

- conv2d:          ``Y[p]      = sum_t P_t[p + off_t] @ w_t``
- backprop filter: ``dw_t      = P_t[off_t : off_t + T].T @ E[:T]``
- backprop input:  ``D_t[p + off_t] += E[p] @ w_t.T``, then phases merged back into ``dx``

Each is one matrix product per filter tap on shifted views (no copies), or, when the channel
count is too small for a per-tap product to be efficient, one product on an im2col matrix.
Depthwise is the same with the channel product replaced by a per-channel one. Batches are
processed in chunks so extra memory stays bounded whatever the batch size. No Python loop runs
over batch, positions or channels: only over taps, stride phases and batch chunks.
"""

from __future__ import annotations

import numpy as np

from engine.conv_layout import PhaseLayout
from engine.gemm import gemm_acc

#: Extra memory one batch chunk may use for its buffers.
CHUNK_BYTES = 96 * 2**20
#: Below this many input channels the per-tap products are too thin: use im2col / col2im.
IM2COL_MAX_CHANNELS = 16


def _chunks(batch: int, per_image_bytes: int):
    """Batch slices whose buffers stay within :data:`CHUNK_BYTES`."""
    step = max(1, CHUNK_BYTES // max(1, per_image_bytes))
    for start in range(0, batch, step):
        yield slice(start, min(batch, start + step))


def _per_image_bytes(lay: PhaseLayout, channels: int, extra: int, itemsize: int) -> int:
    g = lay.g
    phases = g.stride_rows * g.stride_cols * lay.hq * lay.wq * channels
    return (phases + lay.hq * lay.wq * extra) * itemsize


def _flat_phases(lay: PhaseLayout, x: np.ndarray, ctype: np.dtype) -> np.ndarray:
    p = lay.split_input(x, ctype)
    return p.reshape(p.shape[0], p.shape[1], -1, p.shape[-1])


def _im2col(lay: PhaseLayout, pf: np.ndarray, t: int) -> np.ndarray:
    """``(T, taps * C)``: row ``p`` holds every tap's input vector for position ``p``."""
    cols = np.empty((t, len(lay.taps), pf.shape[-1]), pf.dtype)
    for k, tap in enumerate(lay.taps):
        cols[:, k] = pf[tap.phase_row, tap.phase_col, tap.offset : tap.offset + t]
    return cols.reshape(t, -1)


def conv2d(lay: PhaseLayout, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Forward conv ``(N, OH, OW, O)`` in ``ctype`` (one group)."""
    g = lay.g
    n, ci, co = x.shape[0], x.shape[3], w.shape[3]
    y = np.empty((n, g.out_rows, g.out_cols, co), ctype)
    wc = w.astype(ctype, copy=False)
    small = ci < IM2COL_MAX_CHANNELS
    per = _per_image_bytes(lay, ci * (len(lay.taps) if small else 1), co, ctype.itemsize)
    for sl in _chunks(n, per):
        pf = _flat_phases(lay, x[sl], ctype)
        nb = sl.stop - sl.start
        t = lay.positions(nb)
        acc = np.zeros((nb * lay.hq * lay.wq, co), ctype)
        if small:
            acc[:t] = _im2col(lay, pf, t) @ wc.reshape(-1, co)
        else:
            for tap in lay.taps:
                a = pf[tap.phase_row, tap.phase_col, tap.offset : tap.offset + t]
                gemm_acc(acc[:t], a, np.ascontiguousarray(wc[tap.row, tap.col]))
        y[sl] = acc.reshape(nb, lay.hq, lay.wq, co)[:, : g.out_rows, : g.out_cols]
    return y


def conv2d_backprop_filter(
    lay: PhaseLayout, x: np.ndarray, dy: np.ndarray, ctype: np.dtype
) -> np.ndarray:
    """Filter gradient ``(KH, KW, C, O)`` in ``ctype`` (one group)."""
    g = lay.g
    n, ci, co = x.shape[0], x.shape[3], dy.shape[3]
    dw = np.zeros((g.filter_rows, g.filter_cols, ci, co), ctype)
    small = ci < IM2COL_MAX_CHANNELS
    per = _per_image_bytes(lay, ci * (len(lay.taps) if small else 1), co, ctype.itemsize)
    for sl in _chunks(n, per):
        pf = _flat_phases(lay, x[sl], ctype)
        nb = sl.stop - sl.start
        t = lay.positions(nb)
        e = lay.embed_output(dy[sl], ctype).reshape(-1, co)[:t]
        if small:
            dw += (_im2col(lay, pf, t).T @ e).reshape(dw.shape)
        else:
            for tap in lay.taps:
                a = pf[tap.phase_row, tap.phase_col, tap.offset : tap.offset + t]
                dw[tap.row, tap.col] += a.T @ e
    return dw


def conv2d_backprop_input(
    lay: PhaseLayout, dy: np.ndarray, w: np.ndarray, ctype: np.dtype, out: np.ndarray
) -> None:
    """Input gradient written into zeroed NHWC ``out`` (one group)."""
    g = lay.g
    n, ci, co = dy.shape[0], w.shape[2], w.shape[3]
    wt = np.ascontiguousarray(w.astype(ctype, copy=False).transpose(0, 1, 3, 2))  # (KH,KW,O,C)
    small = ci < IM2COL_MAX_CHANNELS
    per = _per_image_bytes(lay, ci * (1 + small * len(lay.taps)), co, ctype.itemsize)
    sr, sc = g.stride_rows, g.stride_cols
    for sl in _chunks(n, per):
        nb = sl.stop - sl.start
        t = lay.positions(nb)
        e = lay.embed_output(dy[sl], ctype).reshape(-1, co)[:t]
        d = np.zeros((sr, sc, nb * lay.hq * lay.wq, ci), ctype)
        if small:
            cols = (e @ wt.transpose(2, 0, 1, 3).reshape(co, -1)).reshape(t, -1, ci)
            for k, tap in enumerate(lay.taps):
                d[tap.phase_row, tap.phase_col, tap.offset : tap.offset + t] += cols[:, k]
        else:
            for tap in lay.taps:
                c = d[tap.phase_row, tap.phase_col, tap.offset : tap.offset + t]
                gemm_acc(c, e, wt[tap.row, tap.col])
        lay.merge_input(d.reshape(sr, sc, nb, lay.hq, lay.wq, ci), out[sl])


def depthwise_conv2d(lay: PhaseLayout, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Depthwise forward ``(N, OH, OW, C*M)``: ``Y[p, c, m] = sum_t P_t[p + off_t, c] w_t[c, m]``."""
    g = lay.g
    n, c, m = x.shape[0], x.shape[3], w.shape[3]
    y = np.empty((n, g.out_rows, g.out_cols, c * m), ctype)
    wc = w.astype(ctype, copy=False)
    per = _per_image_bytes(lay, c, 2 * c * m, ctype.itemsize)
    for sl in _chunks(n, per):
        pf = _flat_phases(lay, x[sl], ctype)
        nb = sl.stop - sl.start
        t = lay.positions(nb)
        acc = np.zeros((nb * lay.hq * lay.wq, c, m), ctype)
        for tap in lay.taps:
            a = pf[tap.phase_row, tap.phase_col, tap.offset : tap.offset + t]
            acc[:t] += a[:, :, None] * wc[tap.row, tap.col]
        acc = acc.reshape(nb, lay.hq, lay.wq, c * m)
        y[sl] = acc[:, : g.out_rows, : g.out_cols]
    return y


def depthwise_conv2d_backprop_filter(
    lay: PhaseLayout, x: np.ndarray, dy: np.ndarray, ctype: np.dtype
) -> np.ndarray:
    """Depthwise filter gradient ``(KH, KW, C, M)``: ``dw_t[c, m] = sum_p P_t[p+off_t, c] E[p, c, m]``."""
    g = lay.g
    n, c = x.shape[0], x.shape[3]
    m = dy.shape[3] // c
    dw = np.zeros((g.filter_rows, g.filter_cols, c, m), ctype)
    per = _per_image_bytes(lay, c, c * m, ctype.itemsize)
    for sl in _chunks(n, per):
        pf = _flat_phases(lay, x[sl], ctype)
        nb = sl.stop - sl.start
        t = lay.positions(nb)
        e = lay.embed_output(dy[sl], ctype).reshape(-1, c, m)[:t]
        for tap in lay.taps:
            a = pf[tap.phase_row, tap.phase_col, tap.offset : tap.offset + t]
            dw[tap.row, tap.col] += np.einsum("pc,pcm->cm", a, e)
    return dw


def depthwise_conv2d_backprop_input(
    lay: PhaseLayout, dy: np.ndarray, w: np.ndarray, ctype: np.dtype, out: np.ndarray
) -> None:
    """Depthwise input gradient into zeroed ``out``: ``D_t[p + off_t, c] += sum_m E[p, c, m] w_t[c, m]``."""
    g = lay.g
    n, c, m = dy.shape[0], w.shape[2], w.shape[3]
    wc = w.astype(ctype, copy=False)
    sr, sc = g.stride_rows, g.stride_cols
    per = _per_image_bytes(lay, c, c * m, ctype.itemsize)
    for sl in _chunks(n, per):
        nb = sl.stop - sl.start
        t = lay.positions(nb)
        e = lay.embed_output(dy[sl], ctype).reshape(-1, c, m)[:t]
        d = np.zeros((sr, sc, nb * lay.hq * lay.wq, c), ctype)
        for tap in lay.taps:
            d[tap.phase_row, tap.phase_col, tap.offset : tap.offset + t] += np.einsum(
                "pcm,cm->pc", e, wc[tap.row, tap.col]
            )
        lay.merge_input(d.reshape(sr, sc, nb, lay.hq, lay.wq, c), out[sl])
