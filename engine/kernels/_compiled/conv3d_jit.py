"""The numba-compiled loops of the few-channel Conv3D path (imported only when used).

Arrays are flat views of C-contiguous channels-last operands: ``x`` ``[N, D, H, W, C]``, ``y``
and ``dy`` ``[N, OD, OH, OW, K]``, the filter as a ``(J, K)`` matrix with ``J = kd*kh*kw*C``
(rows in ``(a, i, j, q)`` order). An output row is ``t = (n*OD + p)*OH + r``; its patch matrix
``P_t`` has one row per output column ``c``::

    P_t[c, ((a*kh + i)*kw + j)*C + q] = x[n, p*sd + a*dd - pf, r*sr + i*dr - pt,
                                          c*sc + j*dc - pl, q]   (0 outside x)

- :func:`im2col_rows_3d`: ``y[t] = P_t @ wm``. With ``dc == 1`` the columns whose windows lie
  inside the image read ``x`` in place (a filter row's taps are ``kw*C`` adjacent elements):
  one :func:`~engine.kernels._compiled.numba_simd.gemm_acc2` per depth tap inside the volume
  over the filter rows inside the image (the others skipped: padding adds nothing); the other
  columns' patches are gathered (:func:`_patches_3d`) and multiplied as one block.
- :func:`filter_rows_3d`: ``dw.T += sum_t dy[t].T @ P_t``, the patches of a block of output
  rows gathered into an L2-sized block first, so the register tiles run over all ``J``
  columns (a 3x7x7 filter on 3 channels: 441), not ``kw*C`` rows per filter row.

Every product is a ``fmuladd`` (a NaN or Inf factor reaches its sum). Single-threaded, the
GIL released; callers split the row ranges over cores. Bounds are the caller's duty.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.kernels._compiled import cache_key  # noqa: F401 - before any cache=True
from engine.kernels._compiled.loop_rules import inside
from engine.kernels._compiled.numba_simd import gemm_acc, gemm_acc2, gemm_set
from engine.kernels._compiled.simd_runs import copy_into
from engine.kernels.buffers import readonly


@njit(nogil=True, cache=True)
def _column(pf, o, xf, n, p, r, c, dims, pads, steps, dils, taps):  # pragma: no cover
    """``pf[o + col] = P_t[c, col]``: one column's patch, any window (see :func:`_patches_3d`)."""
    d, h, w, ch = dims[0], dims[1], dims[2], dims[3]
    kd, kh, kw = taps[0], taps[1], taps[2]
    run = kw * ch
    v0 = c * steps[2] - pads[2]
    j0, j1 = inside(v0, dils[2], w, kw)  # the taps inside the image, zeros around them
    for a in range(kd):
        plane = p * steps[0] + a * dils[0] - pads[0]
        for i in range(kh):
            oi = o + (a * kh + i) * run
            hh = r * steps[1] + i * dils[1] - pads[1]
            if plane < 0 or plane >= d or hh < 0 or hh >= h or j1 <= j0:
                pf[oi:oi + run] = 0
                continue
            src = (((n * d + plane) * h + hh) * w + v0) * ch
            pf[oi:oi + j0 * ch] = 0
            if dils[2] == 1:  # adjacent pixels: one run
                copy_into(pf, xf, oi + j0 * ch, src + j0 * ch, (j1 - j0) * ch)
            else:
                for j in range(j0, j1):
                    copy_into(pf, xf, oi + j * ch, src + j * dils[2] * ch, ch)
            pf[oi + j1 * ch:oi + run] = 0


@njit(nogil=True, cache=True)
def _patches_3d(pf, o0, ld, xf, n, p, r, c_lo, c_hi, dims, pads, steps, dils,
               taps):  # pragma: no cover
    """``pf[o0 + (c - c_lo)*ld + col] = P_t[c, col]`` for the columns ``[c_lo, c_hi)`` of row
    ``r`` of output plane ``p`` of image ``n`` (``dims`` = D, H, W, C; ``pads`` = front, top,
    left; ``steps`` and ``dils`` per spatial axis; ``taps`` = kd, kh, kw): the columns whose
    window lies inside the image rows one run per filter row, the others by :func:`_column`."""
    d, h, w, ch = dims[0], dims[1], dims[2], dims[3]
    kd, kh, kw = taps[0], taps[1], taps[2]
    run = kw * ch
    i_lo, i_hi = inside(-pads[2], steps[2], w - kw + 1, c_hi)
    i_lo, i_hi = max(i_lo, c_lo), max(max(i_lo, c_lo), i_hi)
    if dils[2] != 1:
        i_hi = i_lo
    for c in range(c_lo, i_lo):
        _column(pf, o0 + (c - c_lo) * ld, xf, n, p, r, c, dims, pads, steps, dils, taps)
    for c in range(i_hi, c_hi):
        _column(pf, o0 + (c - c_lo) * ld, xf, n, p, r, c, dims, pads, steps, dils, taps)
    for a in range(kd):
        plane = p * steps[0] + a * dils[0] - pads[0]
        for i in range(kh):
            oi = o0 + (i_lo - c_lo) * ld + (a * kh + i) * run
            hh = r * steps[1] + i * dils[1] - pads[1]
            if plane < 0 or plane >= d or hh < 0 or hh >= h:
                for c in range(i_hi - i_lo):
                    pf[oi + c * ld:oi + c * ld + run] = 0
                continue
            src = (((n * d + plane) * h + hh) * w + i_lo * steps[2] - pads[2]) * ch
            for c in range(i_hi - i_lo):
                copy_into(pf, xf, oi + c * ld, src + c * steps[2] * ch, run)


@njit(nogil=True, cache=True)
def im2col_rows_3d(yf, xf, wf, pf, t_lo, t_hi, out, dims, pads, steps, dils,
                   taps):  # pragma: no cover
    """Output rows ``[t_lo, t_hi)`` of ``y = conv3d(x, w)`` (``out`` = OD, OH, OW, K; the rest
    as :func:`_patches_3d`), ``pf`` a ``(OW, J)`` scratch block."""
    d, h, w, ch = dims[0], dims[1], dims[2], dims[3]
    od, oh, ow, k = out[0], out[1], out[2], out[3]
    kd, kh, kw = taps[0], taps[1], taps[2]
    run = kw * ch
    j_all = kd * kh * run
    # columns whose windows lie inside the image rows: read in place
    c_lo, c_hi = inside(-pads[2], steps[2], w - kw + 1, ow)
    if dils[2] != 1:
        c_hi = c_lo
    for t in range(t_lo, t_hi):
        n, pr = t // (od * oh), t % (od * oh)
        p, r = pr // oh, pr % oh
        a_lo, a_hi = inside(p * steps[0] - pads[0], dils[0], d, kd)
        i_lo, i_hi = inside(r * steps[1] - pads[1], dils[1], h, kh)
        if c_hi > c_lo:
            y0 = (t * ow + c_lo) * k
            for m in range((c_hi - c_lo) * k):
                yf[y0 + m] = 0
            if i_hi > i_lo:
                for a in range(a_lo, a_hi):
                    plane = p * steps[0] + a * dils[0] - pads[0]
                    a0 = (((n * d + plane) * h + r * steps[1] + i_lo * dils[1] - pads[1]) * w
                          + c_lo * steps[2] - pads[2]) * ch
                    gemm_acc2(yf, xf, wf, y0, a0, (a * kh + i_lo) * run * k, c_hi - c_lo, k,
                              run, k, steps[2] * ch, 1, k, i_hi - i_lo, dils[1] * w * ch,
                              run * k)
        for b_lo, b_hi in ((0, c_lo), (c_hi, ow)):
            if b_hi > b_lo:
                _patches_3d(pf, 0, j_all, xf, n, p, r, b_lo, b_hi, dims, pads, steps, dils, taps)
                gemm_set(yf, pf, wf, (t * ow + b_lo) * k, 0, 0, b_hi - b_lo, k, j_all, k,
                         j_all, 1, k)


@njit(nogil=True, cache=True)
def filter_rows_3d(acc, xf, df, pf, t_lo, t_hi, block, kb, out, dims, pads, steps, dils,
                   taps):  # pragma: no cover
    """``acc (K, Jp) += sum_t dy[t].T @ P_t`` over the output rows ``[t_lo, t_hi)`` (the
    transposed filter gradient, rows ``Jp >= J`` apart): the patches of ``block`` rows
    gathered into ``pf`` (``(block*OW, Jp)``, its columns from ``J`` on zero), then multiplied
    ``kb`` positions at a time (their patch and ``dy`` rows stay in L1 while every tile of a
    column panel reads them; the rest as :func:`im2col_rows_3d`)."""
    od, oh, ow, k = out[0], out[1], out[2], out[3]
    jp = acc.size // k
    for b0 in range(t_lo, t_hi, block):
        b1 = min(t_hi, b0 + block)
        for t in range(b0, b1):
            n, pr = t // (od * oh), t % (od * oh)
            _patches_3d(pf, (t - b0) * ow * jp, jp, xf, n, pr // oh, pr % oh, 0, ow, dims,
                       pads, steps, dils, taps)
        positions = (b1 - b0) * ow
        for l0 in range(0, positions, kb):
            gemm_acc(acc, df, pf, 0, (b0 * ow + l0) * k, l0 * jp, k, jp,
                     min(kb, positions - l0), jp, 1, k, jp)


def warm(dtypes: tuple[type[np.floating], ...] = (np.float32, np.float64)) -> None:
    """Compile (or load from numba's disk cache) the loops for ``dtypes``, with the argument
    types :mod:`engine.kernels.conv3d_im2col` passes (read-only operands)."""
    ones = np.ones(3, np.int64)  # a 1x1x1 conv of one channel on one voxel
    params = (np.ones(4, np.int64), np.ones(4, np.int64), ones * 0, ones, ones, ones)
    for dt in dtypes:
        z = np.zeros(8, dt)
        r = readonly(z)
        im2col_rows_3d(z, r, r, np.zeros(8, dt), 0, 1, *params)
        filter_rows_3d(z, r, r, np.zeros(8, dt), 0, 1, 1, 8, *params)
