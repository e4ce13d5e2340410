"""The numba-compiled tile loops of Winograd F(2x2, 3x3) (imported only when used).

With ``B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]`` and ``A^T = [[1,1,1,0],[0,1,-1,-1]]``:

- :func:`patch_tiles`:  ``V = B^T d B`` of every 4x4 input tile ``d`` (tile step 2), or
  ``A e A^T`` of every 2x2 output-gradient tile ``e``;
- :func:`output_tiles`: ``A^T m A`` of every 4x4 product tile ``m``, written as 2x2 outputs;
- :func:`point_products`, :func:`point_products_t`: the 16 per-point matrix products;
- :func:`filter_inverse`: the filter gradient's ``G^T M G`` of the cores' summed points.

Tiles are numbered ``t = (n * tiles_h + a) * tiles_w + b``; the 16 points of a chunk's tiles
are stored as 16 planes of a flat buffer ``plane`` elements apart, point ``4*u + v`` of tile
``t`` at ``(4*u + v)*plane + (t - t0)*channels``, so each per-point product reads one
contiguous ``(tiles, channels)`` matrix. Every function works on the tiles ``[t0, t1)`` only
(one cache-sized chunk) and reads source elements outside the array as zero. Interior tiles
are transformed in place by the vector code of :mod:`engine.kernels._compiled.winograd_simd`, border
tiles from a zero-padded copy of their patch. The loops are single-threaded (callers run one chunk
per core) and release the GIL.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.kernels._compiled import cache_key  # noqa: F401 - before any cache=True
from engine.kernels._compiled.numba_simd import gemm_acc, gemm_set
from engine.kernels._compiled.winograd_simd import grad_transform, input_transform, output_transform


@njit(nogil=True, cache=True)
def _origin(tile, tiles_h, tiles_w):  # pragma: no cover
    """Image, first row and first column of tile ``t = (n * tiles_h + a) * tiles_w + b``."""
    band, b = tile // tiles_w, tile % tiles_w
    return band // tiles_h, 2 * (band % tiles_h), 2 * b


@njit(nogil=True, cache=True)
def patch(src, n, r, c, size, out):  # pragma: no cover
    """``out[(i*size + j)*C + k] = src[n, r + i, c + j, k]``, zero outside ``src``."""
    h, w, ch = src.shape[1], src.shape[2], src.shape[3]
    for i in range(size):
        for j in range(size):
            o = (i * size + j) * ch
            if 0 <= r + i < h and 0 <= c + j < w:
                s = src[n, r + i, c + j]
                for k in range(ch):
                    out[o + k] = s[k]
            else:
                for k in range(ch):
                    out[o + k] = 0


@njit(nogil=True, cache=True)
def patch_tiles(src, size, row0, col0, tiles_h, tiles_w, t0, t1, out, plane):  # pragma: no cover
    """``out[(4u + v)*plane + (t - t0)*C + k] = P[u, v]`` of each tile ``t`` in ``[t0, t1)``:
    with ``size`` 4, ``P = B^T d B`` of the input tile ``d[i, j] = src[n, 2a + i - row0,
    2b + j - col0, k]``; with ``size`` 2, ``P = A e A^T`` of the output-gradient tile
    ``e[i, j] = src[n, 2a + i - row0, 2b + j - col0, k]`` (zero outside ``src``; ``src``
    C-contiguous, ``out`` flat)."""
    h, w, ch = src.shape[1], src.shape[2], src.shape[3]
    sf = src.reshape(src.size)
    pad = np.empty(size * size * ch, out.dtype)
    for tile in range(t0, t1):
        n, r, c = _origin(tile, tiles_h, tiles_w)
        r, c = r - row0, c - col0
        o0 = (tile - t0) * ch
        inside = 0 <= r and r + size <= h and 0 <= c and c + size <= w
        if not inside:
            patch(src, n, r, c, size, pad)
        d, s0, srow = (sf, ((n * h + r) * w + c) * ch, w * ch) if inside else (pad, 0, size * ch)
        if size == 4:
            input_transform(out, d, o0, s0, ch, srow, ch, 4 * plane, plane)
        else:
            grad_transform(out, d, o0, s0, ch, srow, ch, 4 * plane, plane)


@njit(nogil=True, cache=True)
def output_tiles(m, plane, tiles_h, tiles_w, t0, t1, dst):  # pragma: no cover
    """``dst[n, 2a + u, 2b + v, k] = (A^T M A)[u, v]`` with ``M[i, j] = m[(4i + j)*plane +
    (t - t0)*K + k]`` for the outputs inside ``dst`` (``m`` flat, ``dst`` C-contiguous)."""
    h, w, ch = dst.shape[1], dst.shape[2], dst.shape[3]
    df = dst.reshape(dst.size)
    quad = np.empty(4 * ch, dst.dtype)
    for tile in range(t0, t1):
        n, r, c = _origin(tile, tiles_h, tiles_w)
        s0 = (tile - t0) * ch
        if r + 2 <= h and c + 2 <= w:
            output_transform(df, m, ((n * h + r) * w + c) * ch, s0, ch, 4 * plane, plane,
                             w * ch, ch)
        else:
            output_transform(quad, m, 0, s0, ch, 4 * plane, plane, 2 * ch, ch)
            for u in range(min(2, h - r)):
                for v in range(min(2, w - c)):
                    q = (2 * u + v) * ch
                    dst[n, r + u, c + v] = quad[q:q + ch]


@njit(nogil=True, cache=True)
def point_products(v, pv, u, out, po, t):  # pragma: no cover
    """``out[p] = v[p] @ u[p]`` for the 16 points: ``(T, C) @ (C, K)`` (forward and input
    gradient), ``v[p]`` at ``p*pv`` and ``out[p]`` at ``p*po`` of flat ``v`` and ``out``, in
    register tiles (:func:`engine.kernels._compiled.numba_simd.gemm_set`)."""
    points, c, k = u.shape
    uf = u.reshape(points * c * k)
    for p in range(points):
        gemm_set(out, v, uf, p * po, p * pv, p * c * k, t, k, c, k, c, 1, k)


@njit(nogil=True, cache=True)
def point_products_t(v, pv, e, pe, acc, t, block):  # pragma: no cover
    """``acc[p] += v[p].T @ e[p]`` for the 16 points: ``(C, T) @ (T, K)`` (filter gradient),
    ``v[p]`` and ``e[p]`` at ``p*pv`` and ``p*pe`` of flat ``v`` and ``e``; the sum over ``T``
    added to ``acc`` in blocks of ``block`` tiles (a two-level sum)."""
    points, c, k = acc.shape
    af = acc.reshape(points * c * k)
    for p in range(points):
        for b in range(0, t, block):
            gemm_acc(af, v, e, p * c * k, p * pv + b * c, p * pe + b * k, c, k,
                     min(block, t - b), k, 1, c, k)


@njit(nogil=True, cache=True)
def forward_chunks(src, row0, col0, tiles_h, tiles_w, t_lo, t_hi, step, v, pv, u, m, pm,
                   dst):  # pragma: no cover
    """The forward Winograd of the tiles ``[t_lo, t_hi)`` in chunks of ``step`` tiles, each
    transformed (:func:`patch_tiles` into ``v``), multiplied (:func:`point_products` into
    ``m``) and written back (:func:`output_tiles`) before the next: one call for many chunks,
    so the threads of a split meet the GIL once per call, not three times per chunk."""
    for t0 in range(t_lo, t_hi, step):
        t1 = min(t_hi, t0 + step)
        patch_tiles(src, 4, row0, col0, tiles_h, tiles_w, t0, t1, v, pv)
        point_products(v, pv, u, m, pm, t1 - t0)
        output_tiles(m, pm, tiles_h, tiles_w, t0, t1, dst)


@njit(nogil=True, cache=True)
def filter_chunks(xs, es, row0, col0, tiles_h, tiles_w, t_lo, t_hi, step, v, pv, e, pe, acc,
                  block):  # pragma: no cover
    """The filter-gradient Winograd of the tiles ``[t_lo, t_hi)`` in chunks of ``step``
    tiles: input and output-gradient tiles transformed (:func:`patch_tiles`) and their
    products summed into ``acc`` (:func:`point_products_t`), chunk by chunk in order (one
    call for many chunks, as :func:`forward_chunks`)."""
    for t0 in range(t_lo, t_hi, step):
        t1 = min(t_hi, t0 + step)
        patch_tiles(xs, 4, row0, col0, tiles_h, tiles_w, t0, t1, v, pv)
        patch_tiles(es, 2, 0, 0, tiles_h, tiles_w, t0, t1, e, pe)
        point_products_t(v, pv, e, pe, acc, t1 - t0, block)


#: Columns per block of :func:`filter_inverse`: its rows are copied to and from buffers of this
#: many (the planes are ``C*K`` values apart, so reading 16 of them at once per column would
#: meet in a few cache sets).
INVERSE_BLOCK = 256


@njit(nogil=True, cache=True)
def filter_inverse(parts, out, lo, hi):  # pragma: no cover
    """``out[3*a + b, r] = (G^T M G)[a, b]`` with ``M[i, j] = sum_p parts[p, 4*i + j, r]``
    (the cores' partial sums, ``parts`` ``(P, 16, R)``, added in ``p`` order) for
    ``lo <= r < hi``, ``out`` ``(9, R)``, in one pass over them, :data:`INVERSE_BLOCK` columns
    at a time. ``G``'s entries are 0, 1/2 and 1: :func:`_g_columns` over ``M``'s columns, then
    over the result's rows (no products with 0; halving is exact). Flat unsigned indices, so
    LLVM vectorizes the loops over columns."""
    u, bw = np.uint64, np.uint64(INVERSE_BLOCK)
    pf, of = parts.reshape(parts.size), out.reshape(out.size)
    n, c = u(parts.shape[0]), u(parts.shape[2])
    m = np.empty(16 * INVERSE_BLOCK, out.dtype)
    o = np.empty(9 * INVERSE_BLOCK, out.dtype)
    for r0 in range(u(lo), u(hi), bw):
        w = min(bw, u(hi) - r0)
        for k in range(u(16)):
            for x in range(w):
                m[k * bw + x] = pf[k * c + r0 + x]
        for q in range(u(1), n):
            for k in range(u(16)):
                for x in range(w):
                    m[k * bw + x] += pf[(q * u(16) + k) * c + r0 + x]
        for x in range(w):  # G^T M by M's columns j: (a0, a1, a2) of column j ...
            a0, a1, a2 = _g_columns(m[x], m[u(4) * bw + x], m[u(8) * bw + x], m[u(12) * bw + x])
            b0, b1, b2 = _g_columns(m[bw + x], m[u(5) * bw + x], m[u(9) * bw + x],
                                    m[u(13) * bw + x])
            c0, c1, c2 = _g_columns(m[u(2) * bw + x], m[u(6) * bw + x], m[u(10) * bw + x],
                                    m[u(14) * bw + x])
            d0, d1, d2 = _g_columns(m[u(3) * bw + x], m[u(7) * bw + x], m[u(11) * bw + x],
                                    m[u(15) * bw + x])
            for a, (y0, y1, y2) in ((0, _g_columns(a0, b0, c0, d0)),  # ... then its rows times G
                                    (3, _g_columns(a1, b1, c1, d1)),
                                    (6, _g_columns(a2, b2, c2, d2))):
                o[u(a) * bw + x] = y0
                o[u(a + 1) * bw + x] = y1
                o[u(a + 2) * bw + x] = y2
        for k in range(u(9)):
            for x in range(w):
                of[k * c + r0 + x] = o[k * bw + x]


@njit(inline="always")
def _g_columns(x0, x1, x2, x3):  # pragma: no cover - compiled
    """``G^T x`` for the column ``x`` of 4: ``x0 + (x1 + x2)/2``, ``(x1 - x2)/2``,
    ``(x1 + x2)/2 + x3``."""
    h = (x1 + x2) * 0.5
    return x0 + h, (x1 - x2) * 0.5, h + x3
