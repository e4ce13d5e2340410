"""The numba-compiled tile transforms of Winograd F(2x2, 3x3) (imported only when used).

With ``B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]`` and ``A^T = [[1,1,1,0],[0,1,-1,-1]]``:

- :func:`input_tiles`:  ``V = B^T d B`` of every 4x4 input tile ``d`` (tile step 2);
- :func:`grad_tiles`:   ``A e A^T`` of every 2x2 output-gradient tile ``e``;
- :func:`output_tiles`: ``A^T m A`` of every 4x4 product tile ``m``, written as 2x2 outputs.

Tiles are stored ``(16, tiles, channels)``: point ``4*u + v`` of tile ``(n, a, b)`` at row
``(band - band0) * tiles_w + b`` with ``band = n * tiles_h + a``, so each of the 16 per-point
matrix products reads one contiguous ``(tiles, channels)`` matrix. Every function works on the
bands ``[band0, band1)`` only (one batch chunk) and reads source elements outside the array as
zero. The loops run over bands in parallel, channels innermost (contiguous, vectorized), and
release the GIL.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(parallel=True, nogil=True, cache=True)
def input_tiles(src, row0, col0, tiles_h, tiles_w, band0, band1, out):  # pragma: no cover
    """``out[:, t, c] = B^T d B`` with ``d[u, v] = src[n, 2a + u - row0, 2b + v - col0, c]``."""
    h, w, ch = src.shape[1], src.shape[2], src.shape[3]
    for band in prange(band0, band1):
        n, a = band // tiles_h, band % tiles_h
        d = np.zeros((4, 4, ch), out.dtype)
        for b in range(tiles_w):
            for u in range(4):
                r = 2 * a + u - row0
                for v in range(4):
                    c = 2 * b + v - col0
                    if 0 <= r < h and 0 <= c < w:
                        for k in range(ch):
                            d[u, v, k] = src[n, r, c, k]
                    else:
                        for k in range(ch):
                            d[u, v, k] = 0
            t = (band - band0) * tiles_w + b
            for k in range(ch):
                # rows: t_u = (B^T d)_u for each column v
                a00 = d[0, 0, k] - d[2, 0, k]
                a01 = d[0, 1, k] - d[2, 1, k]
                a02 = d[0, 2, k] - d[2, 2, k]
                a03 = d[0, 3, k] - d[2, 3, k]
                a10 = d[1, 0, k] + d[2, 0, k]
                a11 = d[1, 1, k] + d[2, 1, k]
                a12 = d[1, 2, k] + d[2, 2, k]
                a13 = d[1, 3, k] + d[2, 3, k]
                a20 = d[2, 0, k] - d[1, 0, k]
                a21 = d[2, 1, k] - d[1, 1, k]
                a22 = d[2, 2, k] - d[1, 2, k]
                a23 = d[2, 3, k] - d[1, 3, k]
                a30 = d[1, 0, k] - d[3, 0, k]
                a31 = d[1, 1, k] - d[3, 1, k]
                a32 = d[1, 2, k] - d[3, 2, k]
                a33 = d[1, 3, k] - d[3, 3, k]
                out[0, t, k] = a00 - a02
                out[1, t, k] = a01 + a02
                out[2, t, k] = a02 - a01
                out[3, t, k] = a01 - a03
                out[4, t, k] = a10 - a12
                out[5, t, k] = a11 + a12
                out[6, t, k] = a12 - a11
                out[7, t, k] = a11 - a13
                out[8, t, k] = a20 - a22
                out[9, t, k] = a21 + a22
                out[10, t, k] = a22 - a21
                out[11, t, k] = a21 - a23
                out[12, t, k] = a30 - a32
                out[13, t, k] = a31 + a32
                out[14, t, k] = a32 - a31
                out[15, t, k] = a31 - a33


@njit(parallel=True, nogil=True, cache=True)
def grad_tiles(src, tiles_h, tiles_w, band0, band1, out):  # pragma: no cover
    """``out[:, t, c] = A e A^T`` with ``e[u, v] = src[n, 2a + u, 2b + v, c]`` (u, v < 2)."""
    h, w, ch = src.shape[1], src.shape[2], src.shape[3]
    for band in prange(band0, band1):
        n, a = band // tiles_h, band % tiles_h
        e = np.zeros((2, 2, ch), out.dtype)
        for b in range(tiles_w):
            for u in range(2):
                r = 2 * a + u
                for v in range(2):
                    c = 2 * b + v
                    if r < h and c < w:
                        for k in range(ch):
                            e[u, v, k] = src[n, r, c, k]
                    else:
                        for k in range(ch):
                            e[u, v, k] = 0
            t = (band - band0) * tiles_w + b
            for k in range(ch):
                # A (p, q) = (p, p + q, p - q, -q), on rows then on columns
                p0, q0 = e[0, 0, k], e[1, 0, k]
                p1, q1 = e[0, 1, k], e[1, 1, k]
                r00, r01 = p0, p1
                r10, r11 = p0 + q0, p1 + q1
                r20, r21 = p0 - q0, p1 - q1
                r30, r31 = -q0, -q1
                out[0, t, k] = r00
                out[1, t, k] = r00 + r01
                out[2, t, k] = r00 - r01
                out[3, t, k] = -r01
                out[4, t, k] = r10
                out[5, t, k] = r10 + r11
                out[6, t, k] = r10 - r11
                out[7, t, k] = -r11
                out[8, t, k] = r20
                out[9, t, k] = r20 + r21
                out[10, t, k] = r20 - r21
                out[11, t, k] = -r21
                out[12, t, k] = r30
                out[13, t, k] = r30 + r31
                out[14, t, k] = r30 - r31
                out[15, t, k] = -r31


@njit(parallel=True, nogil=True, cache=True)
def output_tiles(m, tiles_h, tiles_w, band0, band1, dst):  # pragma: no cover
    """``dst[n, 2a + u, 2b + v, c] = (A^T m A)[u, v]`` for the tile outputs inside ``dst``."""
    h, w, ch = dst.shape[1], dst.shape[2], dst.shape[3]
    for band in prange(band0, band1):
        n, a = band // tiles_h, band % tiles_h
        for b in range(tiles_w):
            t = (band - band0) * tiles_w + b
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
