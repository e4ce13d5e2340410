"""The numba-compiled tile transforms of Winograd F(2x2, 3x3) (imported only when used).

With ``B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]`` and ``A^T = [[1,1,1,0],[0,1,-1,-1]]``:

- :func:`patch_tiles`:  ``V = B^T d B`` of every 4x4 input tile ``d`` (tile step 2), or
  ``A e A^T`` of every 2x2 output-gradient tile ``e`` (each point a sum of at most 4 patch
  elements with coefficients 0 or ±1, given as tables);
- :func:`output_tiles`: ``A^T m A`` of every 4x4 product tile ``m``, written as 2x2 outputs.

Tiles are numbered ``t = (n * tiles_h + a) * tiles_w + b`` and stored ``(16, tiles,
channels)``: point ``4*u + v`` of tile ``t`` at row ``t - t0``, so each of the 16 per-point
matrix products reads one contiguous ``(tiles, channels)`` matrix. Every function works on the
tiles ``[t0, t1)`` only (one cache-sized chunk) and reads source elements outside the array as
zero. The loops run channels innermost (contiguous, vectorized), single-threaded (callers run
one chunk per core) and release the GIL.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.numba_simd import gemm_acc, gemm_set

#: SHA-256 of ``engine/numba_simd.py`` (see :data:`engine.numba_depthwise.SIMD_SOURCE_SHA256`:
#: numba's cache of this file's loops is rebuilt only when this file changes).
SIMD_SOURCE_SHA256 = "832a0b023863058e320231f1afcb0d92ffeb5b519d82c5192b45dee17938f3c7"


@njit(nogil=True, cache=True)
def patch_tiles(src, size, row0, col0, tiles_h, tiles_w, t0, t1, idx, coef, out):  # pragma: no cover
    """``out[p, t - t0, c] = sum_q coef[p, q] * d[idx[p, q], c]`` with ``d`` the flattened
    ``size x size`` patch ``d[u*size + v, c] = src[n, 2a + u - row0, 2b + v - col0, c]`` of tile
    ``t`` (zero outside ``src``).

    Each output point is one loop over channels with one store and four loads (the compiler
    vectorizes it; a fused loop over all 16 points has too many arrays to prove apart)."""
    h, w, ch = src.shape[1], src.shape[2], src.shape[3]
    d = np.zeros((size * size, ch), out.dtype)
    for tile in range(t0, t1):
        band, b = tile // tiles_w, tile % tiles_w
        n, a = band // tiles_h, band % tiles_h
        for u in range(size):
            r = 2 * a + u - row0
            for v in range(size):
                c = 2 * b + v - col0
                row = d[u * size + v]
                if 0 <= r < h and 0 <= c < w:
                    s = src[n, r, c]
                    for k in range(ch):
                        row[k] = s[k]
                else:
                    for k in range(ch):
                        row[k] = 0
        t = tile - t0
        for p in range(16):
            o = out[p, t]
            x0, x1, x2, x3 = d[idx[p, 0]], d[idx[p, 1]], d[idx[p, 2]], d[idx[p, 3]]
            c0, c1, c2, c3 = coef[p, 0], coef[p, 1], coef[p, 2], coef[p, 3]
            for k in range(ch):
                o[k] = c0 * x0[k] + c1 * x1[k] + c2 * x2[k] + c3 * x3[k]


@njit(nogil=True, cache=True)
def output_tiles(m, tiles_h, tiles_w, t0, t1, dst):  # pragma: no cover
    """``dst[n, 2a + u, 2b + v, c] = (A^T m[:, t - t0] A)[u, v]`` for the outputs inside ``dst``."""
    h, w, ch = dst.shape[1], dst.shape[2], dst.shape[3]
    for tile in range(t0, t1):
        band, b = tile // tiles_w, tile % tiles_w
        n, a = band // tiles_h, band % tiles_h
        t = tile - t0
        r0, c0 = 2 * a, 2 * b
        row2, col2 = r0 + 1 < h, c0 + 1 < w
        for k in range(ch):
            # A^T m: rows (m0 + m1 + m2, m1 - m2 - m3) for each column
            s0 = m[0, t, k] + m[4, t, k] + m[8, t, k]
            s1 = m[1, t, k] + m[5, t, k] + m[9, t, k]
            s2 = m[2, t, k] + m[6, t, k] + m[10, t, k]
            s3 = m[3, t, k] + m[7, t, k] + m[11, t, k]
            d0 = m[4, t, k] - m[8, t, k] - m[12, t, k]
            d1 = m[5, t, k] - m[9, t, k] - m[13, t, k]
            d2 = m[6, t, k] - m[10, t, k] - m[14, t, k]
            d3 = m[7, t, k] - m[11, t, k] - m[15, t, k]
            dst[n, r0, c0, k] = s0 + s1 + s2
            if col2:
                dst[n, r0, c0 + 1, k] = s1 - s2 - s3
            if row2:
                dst[n, r0 + 1, c0, k] = d0 + d1 + d2
                if col2:
                    dst[n, r0 + 1, c0 + 1, k] = d1 - d2 - d3


@njit(nogil=True, cache=True)
def point_products(v, u, out):  # pragma: no cover
    """``out[p] = v[p] @ u[p]`` for the 16 points: ``(T, C) @ (C, K)`` (forward and input
    gradient), in register tiles (:func:`engine.numba_simd.gemm_set`)."""
    points, t, c = v.shape
    k = u.shape[2]
    vf, uf, of = v.reshape(points * t * c), u.reshape(points * c * k), out.reshape(points * t * k)
    for p in range(points):
        gemm_set(of, vf, uf, p * t * k, p * t * c, p * c * k, t, k, c, k, c, 1, k)


@njit(nogil=True, cache=True)
def point_products_t(v, e, acc):  # pragma: no cover
    """``acc[p] += v[p].T @ e[p]`` for the 16 points: ``(C, T) @ (T, K)`` (filter gradient)."""
    points, t, c = v.shape
    k = e.shape[2]
    vf, ef, af = v.reshape(points * t * c), e.reshape(points * t * k), acc.reshape(points * c * k)
    for p in range(points):
        gemm_acc(af, vf, ef, p * c * k, p * t * c, p * t * k, c, k, t, k, 1, c, k)
