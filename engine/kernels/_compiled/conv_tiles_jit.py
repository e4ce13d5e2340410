"""The numba-compiled products of the per-tap conv kernels (imported only when used).

Every loop is a sum of :mod:`engine.kernels._compiled.numba_simd` register tiles (``gemm_acc``,
``gemm_set``, ``gemm_acc2``) read straight from the operands (no packing, no copies), walked in
cache-sized blocks so each tile's operands stay in L1/L2:

- :func:`filter_direct`: the filter gradient from NHWC ``x`` and ``dy``, one 2-D window of
  pixels per tap and block of output rows (few channels: :mod:`.conv3d_jit`);
- :func:`shifted_products`: ``C[q] += sum_t A[q + shift_t] @ B_t`` over a range of destination
  rows ``q`` (rows of ``A`` outside ``[0, a_rows)`` add nothing), in blocks of ``mb`` rows;
  where every tap reads inside ``A`` all taps sum in one register tile (``gemm_taps``: ``C``
  read and written once), else every tap accumulates into the block while it is in cache; each
  ``B_t`` (a filter tap) is stored as panels of one tile's columns, contiguous.
  The forward conv and the input gradient are both this (shift
  ``+offset`` and ``-offset``); :func:`segment_products` writes row segments where they belong
  in the result (the input gradient's phase rows);
- :func:`col2im_rows`: the input gradient on few channels, one product per output-gradient
  row against the filter as a ``KH*KW*C``-wide matrix, columns scattered with the vector run
  adds of :mod:`engine.kernels._compiled.simd_runs` (the forward and filter gradient on few
  channels: :mod:`engine.kernels._compiled.conv3d_jit`).

Every product is a ``fmuladd`` of two operands (IEEE: a NaN or Inf factor reaches its sum). Single-threaded, the
GIL released; callers split the ranges over cores. Bounds are the caller's duty.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.kernels._compiled import cache_key  # noqa: F401 - before any cache=True
from engine.kernels._compiled.loop_rules import inside
from engine.kernels._compiled.numba_simd import (
    gemm_acc,
    gemm_acc2,
    gemm_set,
    gemm_taps,
    gemm_taps_set,
)
from engine.kernels._compiled.simd_runs import add_into, finite_run
from engine.kernels._compiled.transpose import rows_to_planes


@njit(nogil=True, cache=True)
def _covered(q0, q1, shifts, a_rows):  # pragma: no cover
    """True when every tap's source rows ``[q0 + shift, q1 + shift)`` are inside ``[0,
    a_rows)``."""
    for t in range(shifts.shape[0]):
        if q0 + shifts[t] < 0 or q1 + shifts[t] > a_rows:
            return False
    return True


@njit(nogil=True, cache=True)
def _tap_tables(shifts, a_bases, lda, tap_step):  # pragma: no cover
    """:func:`~engine.kernels._compiled.numba_simd.gemm_taps`' tables: each tap's offset into
    ``A`` (its base and shift) and into the packed ``B`` (``tap_step`` elements a tap)."""
    atab = np.empty(shifts.shape[0], np.int64)
    btab = np.empty(shifts.shape[0], np.int64)
    for t in range(shifts.shape[0]):
        atab[t] = a_bases[t] + shifts[t] * lda
        btab[t] = t * tap_step
    return atab, btab


#: Terms (taps x channels) of one register tile's sum at most: more taps go in groups, each
#: group's sum added to the result, so a float32 sum stays well inside the tolerance.
TILE_TERMS = 8192


@njit(nogil=True, cache=True)
def _all_taps(c, a, b, atab, btab, c0, a0, m, k, n, nr, ldc, lda, overwrite):  # pragma: no cover
    """``m`` destination rows at ``c[c0]`` (+)= every tap's product, the taps summed in one
    register tile per panel of ``nr`` columns (``A``'s first row at ``a[a0]``), in groups of
    at most :data:`TILE_TERMS` terms."""
    taps = atab.shape[0]
    group = max(1, TILE_TERMS // max(1, k))
    for pj in range((n + nr - 1) // nr):
        width = min(nr, n - pj * nr)
        for g0 in range(0, taps, group):
            g1 = min(taps, g0 + group)
            if overwrite and g0 == 0:
                gemm_taps_set(c, a, b, atab[g0:g1], btab[g0:g1], c0 + pj * nr, a0, pj * k * nr,
                              m, width, k, ldc, lda, 1, nr, g1 - g0)
            else:
                gemm_taps(c, a, b, atab[g0:g1], btab[g0:g1], c0 + pj * nr, a0, pj * k * nr, m,
                          width, k, ldc, lda, 1, nr, g1 - g0)


@njit(nogil=True, cache=True)
def _rows(c, a, b, c_row, q0, q1, shifts, a_bases, atab, btab, a_rows, lda, ldc, k, n, nr,
          overwrite):  # pragma: no cover
    """Destination rows ``[q0, q1)`` of :func:`shifted_products`, row ``q0`` at ``c[c_row]``:
    when every tap reads inside ``A``, all taps in one register tile per panel
    (:func:`_all_taps`); else tap by tap, each added into the rows while they are in cache
    (the first tap written instead with ``overwrite``, the rows zeroed first when it does not
    cover them all). Returns True when the rows came out finite (checked while in cache: ``v
    - v`` is 0 just then)."""
    panels = (n + nr - 1) // nr
    if _covered(q0, q1, shifts, a_rows):  # atab, btab: _tap_tables, once per call
        _all_taps(c, a, b, atab, btab, c_row, q0 * lda, q1 - q0, k, n, nr, ldc, lda, overwrite)
        return _finite_rows(c, c_row, q1 - q0, ldc, n)
    for t in range(shifts.shape[0]):
        s = shifts[t]
        s0, s1 = max(q0 + s, 0), min(q1 + s, a_rows)
        first = overwrite and t == 0
        if first and (s1 <= s0 or s0 - s > q0 or s1 - s < q1):
            for q in range(q1 - q0):
                row = c_row + q * ldc
                c[row : row + n] = 0
            first = False
        if s1 > s0:
            for pj in range(panels):
                c0 = c_row + (s0 - s - q0) * ldc + pj * nr
                b0 = (t * panels + pj) * k * nr
                if first:
                    gemm_set(c, a, b, c0, a_bases[t] + s0 * lda, b0, s1 - s0,
                             min(nr, n - pj * nr), k, ldc, lda, 1, nr)
                else:
                    gemm_acc(c, a, b, c0, a_bases[t] + s0 * lda, b0, s1 - s0,
                             min(nr, n - pj * nr), k, ldc, lda, 1, nr)
    return _finite_rows(c, c_row, q1 - q0, ldc, n)


@njit(nogil=True, cache=True)
def _finite_rows(c, c_row, rows, ldc, n):  # pragma: no cover
    """True when the ``rows`` rows of ``n`` elements at ``c[c_row]``, ``ldc`` apart, are
    finite."""
    ok = True
    for q in range(rows):
        ok &= finite_run(c, c_row + q * ldc, n)
    return ok


@njit(nogil=True, cache=True)
def shifted_products(c, a, b, c_base, q_lo, q_hi, shifts, a_bases, a_rows, lda, ldc, k, n, nr,
                     mb, overwrite):  # pragma: no cover
    """``c[c_base + q*ldc + j] (+)= sum_t sum_{l < k} a[a_bases[t] + (q + shifts[t])*lda + l] *
    B_t[l, j]`` for ``q_lo <= q < q_hi``, ``j < n``, the taps ``t`` whose source row
    ``q + shifts[t]`` is in ``[0, a_rows)``, in tap order, in blocks of ``mb`` rows; with
    ``overwrite`` the rows are written, not added to (``c`` may hold anything there). ``b``
    holds each ``B_t`` as panels of ``nr`` columns
    (:func:`pack_panels`, :func:`engine.kernels._compiled.conv_tiles.tap_panels`):
    ``B_t[l, j]`` at ``((t*P + j // nr)*k + l)*nr + j % nr`` with ``P = ceil(n / nr)``.
    Returns True when every row written is finite."""
    ok = True
    atab, btab = _tap_tables(shifts, a_bases, lda, (n + nr - 1) // nr * k * nr)
    for q0 in range(q_lo, q_hi, mb):
        ok &= _rows(c, a, b, c_base + q0 * ldc, q0, min(q_hi, q0 + mb), shifts, a_bases, atab,
                    btab, a_rows, lda, ldc, k, n, nr, overwrite)
    return ok


@njit(nogil=True, cache=True)
def segment_products(c, a, b, c_bases, q_starts, length, ldc, s_lo, s_hi, shifts, a_bases,
                     a_rows, lda, k, n, nr, overwrite):  # pragma: no cover
    """:func:`shifted_products` on row segments written where they belong:
    ``c[c_bases[s] + r*ldc + j] (+)= sum_t sum_l a[a_bases[t] + (q + shifts[t])*lda + l] *
    B_t[l, j]`` with ``q = q_starts[s] + r`` for the segments ``s_lo <= s < s_hi``,
    ``r < length``, ``j < n`` (``b`` in panels as there; ``overwrite`` as there). A segment
    whose taps all read inside ``A`` sums them in one register tile per panel
    (:func:`_all_taps`); for the others each tap's column panel is applied to every such
    segment of the range before the next panel, so it is read from L1 once per range, not once
    per (often short) segment. Each element sums its taps in tap order. Returns True when every
    segment written is finite."""
    panels = (n + nr - 1) // nr
    atab, btab = _tap_tables(shifts, a_bases, lda, panels * k * nr)
    covered = np.empty(max(0, s_hi - s_lo), np.bool_)
    for seg in range(s_lo, s_hi):  # every tap reads inside A: all taps in one tile
        covered[seg - s_lo] = _covered(q_starts[seg], q_starts[seg] + length, shifts, a_rows)
        if covered[seg - s_lo]:
            _all_taps(c, a, b, atab, btab, c_bases[seg], q_starts[seg] * lda, length, k, n, nr,
                      ldc, lda, overwrite)
    for t in range(shifts.shape[0]):
        s = shifts[t]
        for pj in range(panels):
            b0 = (t * panels + pj) * k * nr
            width = min(nr, n - pj * nr)
            for seg in range(s_lo, s_hi):
                q0 = q_starts[seg]
                q1 = q0 + length
                if covered[seg - s_lo]:
                    continue
                s0, s1 = max(q0 + s, 0), min(q1 + s, a_rows)
                first = overwrite and t == 0
                if first and (s1 <= s0 or s0 - s > q0 or s1 - s < q1):
                    if pj == 0:  # the first tap misses rows: zero the segment, then add
                        for q in range(length):
                            row = c_bases[seg] + q * ldc
                            c[row : row + n] = 0
                    first = False
                if s1 <= s0:
                    continue
                c0 = c_bases[seg] + (s0 - s - q0) * ldc + pj * nr
                if first:
                    gemm_set(c, a, b, c0, a_bases[t] + s0 * lda, b0, s1 - s0, width, k, ldc,
                             lda, 1, nr)
                else:
                    gemm_acc(c, a, b, c0, a_bases[t] + s0 * lda, b0, s1 - s0, width, k, ldc,
                             lda, 1, nr)
    ok = True
    for seg in range(s_lo, s_hi):
        ok &= _finite_rows(c, c_bases[seg], length, ldc, n)
    return ok


@njit(nogil=True, cache=True)
def planes_blocks(scratch, dst, a, panels, p_off, shifts, t_off, c_bases, q_starts, rows, s_off,
                  lengths, r_lo, r_hi, block, in_rows, in_cols, ldc, a_rows, lda, k, n, nr,
                  overwrite):  # pragma: no cover
    """The result rows ``[r_lo, r_hi)`` of NCHW planes ``dst`` (``n`` channels of ``in_rows x
    in_cols``), ``block`` rows at a time: :func:`segment_products` of each phase ``i`` (its
    panels ``panels[p_off[i]:p_off[i+1]]``, shifts ``shifts[t_off[i]:t_off[i+1]]``, segments
    ``s_off[i] <= s < s_off[i+1]`` of length ``lengths[i]``, result row ``rows[s]``
    increasing, start ``c_bases[s]`` in NHWC rows) on the segments of the block's rows into
    ``scratch`` (the block's NHWC rows; zeroed first unless ``overwrite``), then the block
    moved into the planes. Returns True when every segment written is finite."""
    row = in_cols * n
    zeros = np.zeros(shifts.shape[0], np.int64)  # each tap's A base: none
    ok = True
    for r0 in range(r_lo, r_hi, block):
        r1 = min(r_hi, r0 + block)
        if not overwrite:
            scratch[: (r1 - r0) * row] = 0
        for i in range(p_off.shape[0] - 1):
            seg = rows[s_off[i] : s_off[i + 1]]
            s0 = s_off[i] + np.searchsorted(seg, r0)
            s1 = s_off[i] + np.searchsorted(seg, r1)
            if s1 > s0:
                ts = shifts[t_off[i] : t_off[i + 1]]
                ok &= segment_products(scratch, a, panels[p_off[i] : p_off[i + 1]],
                                       c_bases[s0:s1] - r0 * row, q_starts[s0:s1], lengths[i],
                                       ldc, 0, s1 - s0, ts, zeros[: ts.shape[0]],
                                       a_rows, lda, k, n, nr, overwrite)
        for img in range(r0 // in_rows, (r1 - 1) // in_rows + 1):
            h0, h1 = max(r0, img * in_rows), min(r1, (img + 1) * in_rows)
            rows_to_planes(scratch, dst, (h0 - r0) * row,
                           (img * n * in_rows + h0 - img * in_rows) * in_cols,
                           (h1 - h0) * in_cols, n, in_rows * in_cols)
    return ok


@njit(nogil=True, cache=True)
def pack_panels(out, w, rows, cols, transposed, nr):  # pragma: no cover
    """``out`` (flat ``(T, P, k, nr)``) = the taps ``B_t`` as :func:`shifted_products` reads
    them, straight from the filter ``w (KH, KW, C, O)``: ``B_t = w[rows[t], cols[t]]``
    ``(C, O)``, or its transpose ``(O, C)`` when ``transposed`` (the input gradient's); the
    columns of the last panel past ``n`` are 0."""
    ci, co = w.shape[2], w.shape[3]
    k, n = (co, ci) if transposed else (ci, co)
    count = (n + nr - 1) // nr
    for t in range(rows.shape[0]):
        tap = w[rows[t], cols[t]]
        for p in range(count):
            width = min(nr, n - p * nr)
            for l in range(k):
                o = ((t * count + p) * k + l) * nr
                for jj in range(width, nr):
                    out[o + jj] = 0
            if transposed:  # read rows of the tap: B_t[l, j] = tap[j, l]
                for jj in range(width):
                    src = tap[p * nr + jj]
                    for l in range(k):
                        out[((t * count + p) * k + l) * nr + jj] = src[l]
            else:
                for l in range(k):
                    o = ((t * count + p) * k + l) * nr
                    for jj in range(width):
                        out[o + jj] = tap[l, p * nr + jj]


@njit(nogil=True, cache=True)
def filter_direct(out, x, dy, items_lo, items_hi, blocks, rows_per_block, xs, ds, sr, sc,
                  in_rows, in_cols, out_rows, out_cols, row_offs, col_offs, ci, co,
                  x_channel):  # pragma: no cover
    """``out[t*ci*co + i*co + j] += sum_{r, c} x[n, r*sr + row_offs[t], c*sc + col_offs[t], i]
    * dy[n, r, c, j]`` over the pixels ``(r, c)`` whose input pixel is inside ``x``, for the
    work items ``items_lo <= w < items_hi`` (image ``n = w // blocks``, output rows
    ``[b*rows_per_block, (b+1)*rows_per_block)`` with ``b = w % blocks``), read in place:
    ``x`` and ``dy`` flat with element strides ``xs``/``ds`` = (image, row, column), the
    channels of ``dy`` adjacent and those of ``x`` ``x_channel`` elements apart (1 in NHWC, a
    plane in NCHW: the tiles read ``x`` one value at a time). Per item, every tap sums its
    window of the same rows of ``dy`` (in cache)."""
    for w in range(items_lo, items_hi):
        n, b = w // blocks, w % blocks
        r_a = b * rows_per_block
        r_b = min(out_rows, r_a + rows_per_block)
        for t in range(row_offs.shape[0]):
            ro, cofs = row_offs[t], col_offs[t]
            r_lo, r_hi = inside(ro, sr, in_rows, out_rows)
            r_lo, r_hi = max(r_lo, r_a), min(r_hi, r_b)
            c_lo, c_hi = inside(cofs, sc, in_cols, out_cols)
            if r_hi <= r_lo or c_hi <= c_lo:
                continue
            a0 = n * xs[0] + (r_lo * sr + ro) * xs[1] + (c_lo * sc + cofs) * xs[2]
            b0 = n * ds[0] + r_lo * ds[1] + c_lo * ds[2]
            gemm_acc2(out, x, dy, t * ci * co, a0, b0, ci, co, c_hi - c_lo, co, x_channel,
                      sc * xs[2], ds[2], r_hi - r_lo, sr * xs[1], ds[1])


@njit(nogil=True, cache=True)
def col2im_rows(out, sn, sh, sw, width, dy, wm, cols, n, r0, r1, h0, h1, pt, pl, sr, sc, dr,
                dc, kh, kw, ch):  # pragma: no cover
    """The terms of image ``n``'s output-gradient rows ``[r0, r1)`` added into the input
    gradient's rows ``[h0, h1)`` (flat ``out``, element ``(n, h, v, q)`` at ``n*sn + h*sh +
    v*sw + q``, ``width`` columns):

        ``out[n, r*sr + i*dr - pt, c*sc + j*dc - pl, q] += cols[c, (i*kw + j)*ch + q]``,
        ``cols = dy[n, r] @ wm`` (``(OW, O) @ (O, J)``, ``J >= kh*kw*ch`` columns),

    one register-tile product per row into the row-sized ``cols``, its columns then added
    where they land: with ``dc == 1`` and adjacent pixels each filter row's taps inside the
    image as one contiguous run, in classes of ``c`` (``c mod classes``) whose runs do not
    overlap, else tap by tap in order of ``c``. Every input element sums its terms in one
    fixed order, whatever the split of the rows."""
    oh, ow, o = dy.shape[1], dy.shape[2], dy.shape[3]
    jp = wm.shape[1]
    dyf, wmf, cf = dy.reshape(dy.size), wm.reshape(wm.size), cols.reshape(cols.size)
    run = kw * ch
    classes = max(1, -(-run // max(1, sc * ch)))
    for r in range(r0, r1):
        gemm_set(cf, dyf, wmf, 0, (n * oh + r) * ow * o, 0, ow, jp, o, jp, o, 1, jp)
        i_lo, i_hi = inside(r * sr - pt - h0, dr, h1 - h0, kh)  # taps landing in [h0, h1)
        for i in range(i_lo, i_hi):
            h = r * sr + i * dr - pt
            base = n * sn + h * sh
            if dc == 1 and sw == ch:
                # runs of consecutive c overlap: adding them in c order would make each
                # read wait for the previous store; classes of c a run apart do not
                for first in range(classes):
                    for c in range(first, ow, classes):
                        v0 = c * sc - pl
                        j0, j1 = inside(v0, 1, width, kw)
                        if j1 > j0:
                            add_into(out, cf, base + (v0 + j0) * ch, c * jp + i * run + j0 * ch,
                                     (j1 - j0) * ch)
                continue
            for c in range(ow):
                src = c * jp + i * run
                j0, j1 = inside(c * sc - pl, dc, width, kw)
                for j in range(j0, j1):
                    dst = base + (c * sc + j * dc - pl) * sw
                    for q in range(ch):
                        out[dst + q] += cf[src + j * ch + q]
