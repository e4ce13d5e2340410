"""The numba-compiled loops of the few-channel Conv3D path (imported only when used).

Arrays are flat views of C-contiguous channels-last operands: ``x`` ``[N, D, H, W, C]``, ``y``
and ``dy`` ``[N, OD, OH, OW, K]``, the filter as a ``(J, K)`` matrix with ``J = kd*kh*kw*C``
(rows in ``(a, i, j, q)`` order). An output row is ``t = (n*OD + p)*OH + r``; its patch matrix
``P_t`` has one row per output column ``c``::

    P_t[c, ((a*kh + i)*kw + j)*C + q] = x[n, p*sd + a*dd - pf, r*sr + i*dr - pt,
                                          c*sc + j*dc - pl, q]   (0 outside x)

- :func:`im2col_rows_3d`: ``y[t] = P_t @ wm``. With ``dc == 1`` the columns whose windows lie
  inside the image read ``x`` in place (a filter row's taps are ``kw*C`` adjacent elements):
  per group of output rows one :func:`~engine.kernels._compiled.numba_simd.gemm_rows`
  product per depth tap inside the volume and block of filter rows inside the image (the
  others skipped: padding adds nothing), its rows the group's columns through a table; the
  other columns' patches are gathered (:func:`_patches_3d`) and multiplied as one product.
- :func:`filter_rows_3d`: ``dw += sum_t P_t.T @ dy[t]`` with ``x`` read in place too: one
  product whose rows are all the filter's taps inside the image (a 3x7x7 filter on 3 channels:
  441 rows, not ``kw*C`` per filter row), their offsets in ``x`` from a table; the columns
  whose windows cross the image's sides gathered.

Every product is a ``fmuladd`` (a NaN or Inf factor reaches its sum). Single-threaded, the
GIL released; callers split the row ranges over cores. Bounds are the caller's duty.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.kernels._compiled import cache_key  # noqa: F401 - before any cache=True
from engine.kernels._compiled.loop_rules import inside
from engine.kernels._compiled.numba_simd import gemm_acc, gemm_rows, gemm_rows_set
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
def _inner_columns(w, kw, ow, pads, steps, dils):  # pragma: no cover
    """The output columns ``[c_lo, c_hi)`` whose window lies inside the image rows (read in
    place; none with dilated columns: every column is gathered then)."""
    c_lo, c_hi = inside(-pads[2], steps[2], w - kw + 1, ow)
    return (c_lo, c_lo) if dils[2] != 1 else (c_lo, c_hi)


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
    i_lo, i_hi = _inner_columns(w, kw, c_hi, pads, steps, dils)
    i_lo = max(i_lo, c_lo)
    i_hi = max(i_lo, i_hi)
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
def _group(t, t_hi, rb, out, dims, pads, steps, dils, taps):  # pragma: no cover
    """The group of output rows from ``t``: at most ``rb`` rows ``[t, t1)`` (before ``t_hi``)
    of one plane with the same filter rows inside the image. Returns ``n, p, r`` (image, plane
    and row of ``t``), ``t1`` and the filter rows ``[i_lo, i_hi)`` and depth taps
    ``[a_lo, a_hi)`` inside."""
    od, oh = out[0], out[1]
    n, pr = t // (od * oh), t % (od * oh)
    p, r = pr // oh, pr % oh
    i_lo, i_hi = inside(r * steps[1] - pads[1], dils[1], dims[1], taps[1])
    t1 = t + 1
    while t1 < t_hi and t1 - t < rb and t1 % oh != 0:
        if inside((t1 % oh) * steps[1] - pads[1], dils[1], dims[1], taps[1]) != (i_lo, i_hi):
            break
        t1 += 1
    a_lo, a_hi = inside(p * steps[0] - pads[0], dils[0], dims[0], taps[0])
    return n, p, r, t1, i_lo, i_hi, a_lo, a_hi


@njit(nogil=True, cache=True)
def _positions(aoff, crow, t, t1, c_lo, c_hi, ow, row, col):  # pragma: no cover
    """The row tables of :func:`im2col_rows_3d`'s in-place product: each column ``[c_lo, c_hi)``
    of the output rows ``[t, t1)`` (of one plane), its offset in ``x`` from the first's
    (``row``, ``col``: the element steps of one output row and column) and its row of ``y``;
    returns how many."""
    m = 0
    for tt in range(t, t1):
        for c in range(c_lo, c_hi):
            aoff[m] = (tt - t) * row + (c - c_lo) * col
            crow[m] = tt * ow + c
            m += 1
    return m


@njit(nogil=True, cache=True)
def im2col_rows_3d(yf, xf, wf, pf, aoff, crow, t_lo, t_hi, rb, ic, out, dims, pads, steps, dils,
                   taps):  # pragma: no cover
    """Output rows ``[t_lo, t_hi)`` of ``y = conv3d(x, w)`` (``out`` = OD, OH, OW, K; the rest
    as :func:`_patches_3d`): the columns whose window lies inside the image rows read in
    place, per group of at most ``rb`` rows of one plane with the same filter rows inside, one
    :func:`~engine.kernels._compiled.numba_simd.gemm_rows` product per depth tap and ``ic``
    filter rows (so that part of ``w`` stays in L1 while every tile reads it; ``aoff``,
    ``crow``: tables of ``rb*OW`` entries); the other columns' patches gathered into ``pf``
    (``(rb*OW, J)``) and multiplied as one product per group."""
    d, h, w, ch = dims[0], dims[1], dims[2], dims[3]
    oh, ow, k = out[1], out[2], out[3]
    kd, kh, kw = taps[0], taps[1], taps[2]
    run = kw * ch
    j_all = kd * kh * run
    c_lo, c_hi = _inner_columns(w, kw, ow, pads, steps, dils)
    t = t_lo
    while t < t_hi:
        n, p, r, t1, i_lo, i_hi, a_lo, a_hi = _group(t, t_hi, rb, out, dims, pads, steps,
                                                     dils, taps)
        if c_hi > c_lo:
            m = _positions(aoff, crow, t, t1, c_lo, c_hi, ow, steps[1] * w * ch, steps[2] * ch)
            if a_hi <= a_lo or i_hi <= i_lo:  # no term: zeros
                for q in range(m):
                    yf[crow[q] * k:crow[q] * k + k] = 0
            for a in range(a_lo, a_hi):
                plane = p * steps[0] + a * dils[0] - pads[0]
                for i0 in range(i_lo, i_hi, ic):
                    i1 = min(i_hi, i0 + ic)
                    a0 = (((n * d + plane) * h + r * steps[1] + i0 * dils[1] - pads[1]) * w
                          + c_lo * steps[2] - pads[2]) * ch
                    args = (yf, xf, wf, aoff, crow, 0, a0, (a * kh + i0) * run * k, m, k, run, k,
                            1, k, i1 - i0, dils[1] * w * ch, run * k)
                    if a == a_lo and i0 == i_lo:  # the first product writes the rows
                        gemm_rows_set(*args)
                    else:
                        gemm_rows(*args)
        m = 0  # the other columns of the group: gathered, one product
        for tt in range(t, t1):
            for b_lo, b_hi in ((0, c_lo), (c_hi, ow)):
                if b_hi > b_lo:
                    _patches_3d(pf, m * j_all, j_all, xf, n, p, tt % oh, b_lo, b_hi, dims, pads,
                                steps, dils, taps)
                    for c in range(b_lo, b_hi):
                        aoff[m] = m * j_all
                        crow[m] = tt * ow + c
                        m += 1
        if m:
            gemm_rows_set(yf, pf, wf, aoff, crow, 0, 0, 0, m, k, j_all, k, 1, k, 1, 0, 0)
        t = t1


@njit(nogil=True, cache=True)
def _filter_rows(aoff, crow, a_lo, a_hi, i_lo, i_hi, plane, row, run, kh):  # pragma: no cover
    """The row tables of :func:`filter_rows_3d`'s in-place product: for the depth taps
    ``[a_lo, a_hi)`` and filter rows ``[i_lo, i_hi)`` inside the image, each ``(a, i, j, q)``'s
    offset in ``x`` from tap ``(0, 0, 0, 0)`` (``plane``, ``row``: the element steps of one
    dilated depth tap and filter row) and its row of ``dw``; returns how many."""
    m = 0
    for a in range(a_lo, a_hi):
        for i in range(i_lo, i_hi):
            for q in range(run):
                aoff[m] = a * plane + i * row + q
                crow[m] = (a * kh + i) * run + q
                m += 1
    return m


@njit(nogil=True, cache=True)
def filter_rows_3d(acc, xf, df, pf, db, aoff, crow, t_lo, t_hi, rb, out, dims, pads, steps,
                   dils, taps):  # pragma: no cover
    """``dw (J, K) += sum_t P_t.T @ dy[t]`` over the output rows ``[t_lo, t_hi)`` (the rest as
    :func:`im2col_rows_3d`). The columns whose window lies inside the image rows are read in
    place: per group of at most ``rb`` rows of one output plane with the same filter rows
    inside the image, one :func:`~engine.kernels._compiled.numba_simd.gemm_rows` product
    whose rows are the taps inside (``aoff``, ``crow``: tables of ``J`` entries) and whose sum
    runs over the group's pixels. The other columns' patches and ``dy`` rows are gathered into
    ``pf`` ``(L, J)`` and ``db`` ``(L, K)`` and multiplied when full."""
    d, h, w, ch = dims[0], dims[1], dims[2], dims[3]
    oh, ow, k = out[1], out[2], out[3]
    kd, kh, kw = taps[0], taps[1], taps[2]
    run = kw * ch
    j_all = kd * kh * run
    cap = pf.size // j_all
    c_lo, c_hi = _inner_columns(w, kw, ow, pads, steps, dils)
    ne = 0
    t = t_lo
    while t < t_hi:
        n, p, r, t1, i_lo, i_hi, a_lo, a_hi = _group(t, t_hi, rb, out, dims, pads, steps,
                                                     dils, taps)
        if c_hi > c_lo and i_hi > i_lo and a_hi > a_lo:
            m = _filter_rows(aoff, crow, a_lo, a_hi, i_lo, i_hi, dils[0] * h * w * ch,
                             dils[1] * w * ch, run, kh)
            base = (((n * d + p * steps[0] - pads[0]) * h + r * steps[1] - pads[1]) * w
                    + c_lo * steps[2] - pads[2]) * ch
            gemm_rows(acc, xf, df, aoff, crow, 0, base, (t * ow + c_lo) * k, m, k, c_hi - c_lo,
                      k, steps[2] * ch, k, t1 - t, steps[1] * w * ch, ow * k)
        for tt in range(t, t1):
            for b_lo, b_hi in ((0, c_lo), (c_hi, ow)):
                if b_hi <= b_lo:
                    continue
                if ne + b_hi - b_lo > cap:
                    gemm_acc(acc, pf, db, 0, 0, 0, j_all, k, ne, k, 1, j_all, k)
                    ne = 0
                _patches_3d(pf, ne * j_all, j_all, xf, n, p, tt % oh, b_lo, b_hi, dims, pads,
                            steps, dils, taps)
                copy_into(db, df, ne * k, (tt * ow + b_lo) * k, (b_hi - b_lo) * k)
                ne += b_hi - b_lo
        t = t1
    if ne:
        gemm_acc(acc, pf, db, 0, 0, 0, j_all, k, ne, k, 1, j_all, k)


def warm(dtypes: tuple[type[np.floating], ...] = (np.float32, np.float64)) -> None:
    """Compile (or load from numba's disk cache) the loops for ``dtypes``, with the argument
    types :mod:`engine.kernels.im2col_nd` passes (read-only operands)."""
    ones = np.ones(3, np.int64)  # a 1x1x1 conv of one channel on one voxel
    params = (np.ones(4, np.int64), np.ones(4, np.int64), ones * 0, ones, ones, ones)
    for dt in dtypes:
        z = np.zeros(8, dt)
        r = readonly(z)
        tables = np.zeros(1, np.int64), np.zeros(1, np.int64)
        im2col_rows_3d(z, r, r, np.zeros(8, dt), *tables, 0, 1, 1, 1, *params)
        filter_rows_3d(z, r, r, np.zeros(8, dt), np.zeros(8, dt), *tables, 0, 1, 1, *params)
