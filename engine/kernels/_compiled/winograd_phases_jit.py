"""The numba-compiled tile loops of the stride-2 polyphase Winograd input gradient (imported only
when used; the math is :mod:`engine.kernels._compiled.winograd_phases`').

Tile ``t = (n * tiles_h + a) * tiles_w + b`` reads the 4x4 output-gradient patch at row
``3a + row0``, column ``3b + col0`` of image ``n`` (zero outside the array) and writes the 6x6
input-gradient pixels at row ``6a - row_shift``, column ``6b - col_shift`` (those inside the
result). The 49 points of a chunk's tiles are stored as :mod:`~engine.kernels._compiled.winograd_jit`
stores its 16: point ``7*u + v`` of tile ``t`` at ``(7*u + v)*plane + (t - t0)*channels``.
Single-threaded loops (callers run one range per core) that release the GIL.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from engine.kernels._compiled import cache_key  # noqa: F401 - before any cache=True
from engine.kernels._compiled.numba_simd import gemm_set
from engine.kernels._compiled.simd_runs import finite_run
from engine.kernels._compiled.winograd_jit import patch
from engine.kernels._compiled.winograd_simd import phase_input_transform, phase_output_transform

#: Output-gradient values per tile side, result pixels per tile side, points per tile side.
PATCH, PIXELS, POINTS = 4, 6, 7
#: Distinct filter matrices per side: the one-tap phase's three points all take ``w[1]``.
FILTERS = 5


@njit(nogil=True, cache=True)
def _tile(tile, tiles_h, tiles_w):  # pragma: no cover
    """Image, tile row and tile column of tile ``t``."""
    band, b = tile // tiles_w, tile % tiles_w
    return band // tiles_h, band % tiles_h, b


@njit(nogil=True, cache=True)
def input_tiles(src, row0, col0, tiles_h, tiles_w, t0, t1, out, plane):  # pragma: no cover
    """``out[(7u + v)*plane + (t - t0)*K + k] = (L d L^T)[u, v]`` (``L`` the 7x4
    :data:`~engine.kernels._compiled.winograd_simd.PHASE_IN`) of the patch ``d[i, j] =
    src[n, 3a + row0 + i, 3b + col0 + j, k]`` of each tile in ``[t0, t1)`` (``src``
    C-contiguous, ``out`` flat)."""
    h, w, ch = src.shape[1], src.shape[2], src.shape[3]
    sf = src.reshape(src.size)
    pad = np.empty(PATCH * PATCH * ch, out.dtype)
    for tile in range(t0, t1):
        n, a, b = _tile(tile, tiles_h, tiles_w)
        r, c = 3 * a + row0, 3 * b + col0
        o0 = (tile - t0) * ch
        if 0 <= r and r + PATCH <= h and 0 <= c and c + PATCH <= w:
            phase_input_transform(out, sf, o0, ((n * h + r) * w + c) * ch, ch, w * ch, ch,
                                  POINTS * plane, plane)
        else:
            patch(src, n, r, c, PATCH, pad)
            phase_input_transform(out, pad, o0, 0, ch, PATCH * ch, ch, POINTS * plane, plane)


@njit(nogil=True, cache=True)
def point_products(v, pv, u, out, po, t):  # pragma: no cover
    """``out[7i + j] = v[7i + j] @ u[5 min(i, 4) + min(j, 4)]`` for the 49 points: ``(T, K) @
    (K, C)`` against the 25 distinct filter matrices ``u``, in register tiles
    (:func:`engine.kernels._compiled.numba_simd.gemm_set`; a shared matrix is read again while
    in cache)."""
    _, k, c = u.shape
    uf = u.reshape(u.size)
    for p in range(POINTS * POINTS):
        q = min(p // POINTS, FILTERS - 1) * FILTERS + min(p % POINTS, FILTERS - 1)
        gemm_set(out, v, uf, p * po, p * pv, q * k * c, t, c, k, c, k, 1, c)


@njit(nogil=True, cache=True)
def output_tiles(m, plane, tiles_h, tiles_w, row_shift, col_shift, t0, t1,
                 dst):  # pragma: no cover
    """``dst[n, 6a - row_shift + u, 6b - col_shift + v, c] = (L M L^T)[u, v]`` (``L`` the 6x7
    :data:`~engine.kernels._compiled.winograd_simd.PHASE_OUT`, ``M[i, j] = m[(7i + j)*plane +
    (t - t0)*C + c]``) for the pixels inside ``dst`` (``m`` flat, ``dst`` C-contiguous); True
    when every tile came out finite (each checked while in cache)."""
    h, w, ch = dst.shape[1], dst.shape[2], dst.shape[3]
    df = dst.reshape(dst.size)
    tile_px = np.empty(PIXELS * PIXELS * ch, dst.dtype)
    finite = True
    for tile in range(t0, t1):
        n, a, b = _tile(tile, tiles_h, tiles_w)
        r, c = PIXELS * a - row_shift, PIXELS * b - col_shift
        s0 = (tile - t0) * ch
        if 0 <= r and r + PIXELS <= h and 0 <= c and c + PIXELS <= w:
            o0 = ((n * h + r) * w + c) * ch
            phase_output_transform(df, m, o0, s0, ch, POINTS * plane, plane, w * ch, ch)
            for u in range(PIXELS):
                finite &= finite_run(df, o0 + u * w * ch, PIXELS * ch)
        else:
            phase_output_transform(tile_px, m, 0, s0, ch, POINTS * plane, plane, PIXELS * ch, ch)
            finite &= finite_run(tile_px, 0, PIXELS * PIXELS * ch)
            for u in range(max(0, -r), min(PIXELS, h - r)):
                for v in range(max(0, -c), min(PIXELS, w - c)):
                    q = (PIXELS * u + v) * ch
                    dst[n, r + u, c + v] = tile_px[q:q + ch]
    return finite


@njit(nogil=True, cache=True)
def input_chunks(src, row0, col0, row_shift, col_shift, tiles_h, tiles_w, t_lo, t_hi, step, v,
                 pv, u, m, pm, dst):  # pragma: no cover
    """The tiles ``[t_lo, t_hi)`` in chunks of ``step``, each transformed (:func:`input_tiles`
    into ``v``), multiplied by the 25 transformed filter matrices ``u`` ``(25, K, C)``
    (:func:`point_products` into ``m``) and written (:func:`output_tiles`) before the next;
    True when all came out finite."""
    finite = True
    for t0 in range(t_lo, t_hi, step):
        t1 = min(t_hi, t0 + step)
        input_tiles(src, row0, col0, tiles_h, tiles_w, t0, t1, v, pv)
        point_products(v, pv, u, m, pm, t1 - t0)
        finite &= output_tiles(m, pm, tiles_h, tiles_w, row_shift, col_shift, t0, t1, dst)
    return finite
