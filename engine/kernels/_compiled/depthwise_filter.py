"""The depthwise filter gradient's loops (:func:`filter_grad`, called per core's range of output
rows by :mod:`engine.kernels._compiled.numba_depthwise`, whose conventions it shares):

    ``dw[i, j, k] = sum_{n, r, c} x[n, r*sr + i*dr - pt, c*sc + j*dc - pl, k] * dy[n, r, c, k]``

one partial sum per output row added in row order, the sum over a row's columns in vector
registers (:mod:`engine.kernels._compiled.tap_sums`), taps that would read padding skipped.
A 3x3 or 5x5 filter's rows that read inside the image with every filter row sum all their taps
in one pass, in bands of rows (:func:`band`) whose border columns are one partial sum per band,
where the CPU has the registers for it (:data:`GRID`). How a call's rows split over cores and
bands follows the machine (cores, L2), so the last bits may differ between machines, not
between runs on one.
"""

from __future__ import annotations

import numba
import numpy as np

from engine.kernels._compiled import cache_key  # noqa: F401 - before any cache=True
from engine.kernels._compiled.loop_rules import JIT, inside_all, span
from engine.kernels._compiled.numba_simd import registers
from engine.kernels._compiled.tap_sums import (
    acc_products,
    acc_products3,
    acc_products3x3,
    acc_products5x5,
)
from engine.shapes.conv import ConvGeometry

#: Whether the filter gradient sums a 3x3 or 5x5 filter's taps in one pass over each row whose
#: filter rows all read inside the image (their accumulators fill 32 vector registers; with 16
#: they would spill, so AVX2 sums one filter row at a time).
GRID = registers() == 32
#: Most output rows per band of :func:`_filter_band`.
MAX_BAND = 64


def band(g: ConvGeometry, ctype: np.dtype) -> int:
    """Output rows per band of :func:`_filter_band`: as many as keep the band's input and
    output-gradient rows in half of L2 (:mod:`engine.kernels.cpu`), at most :data:`MAX_BAND`;
    0 (no bands) where :data:`GRID` is off and for other filters than 3x3 and 5x5."""
    if not GRID or g.filter_rows != g.filter_cols or g.filter_rows not in (3, 5):
        return 0
    from engine.kernels import cpu

    row_bytes = (g.stride_rows * g.in_cols + g.out_cols) * g.out_depth * ctype.itemsize
    return max(1, min(MAX_BAND, cpu.host().l2 // 2 // max(1, row_bytes)))


@numba.jit(**JIT)
def _filter_band(xf, gf, edge, acc, n, r, count, lo, hi, sr, sc, dr, dc, pt, pl, h_in,
                 w_in, oh, ow):  # pragma: no cover - compiled
    """Output rows ``[r, r + count)`` of image ``n``, each reading inside the image with every
    filter row: per row a partial sum of its columns ``[lo, hi)`` (all ``k x k`` taps in one
    pass) added into ``acc`` in row order, then each tap's border columns (outside ``[lo, hi)``)
    of all the band's rows summed in one pass per column."""
    k = acc.shape[0]
    ck = acc.shape[2]
    xr = w_in * ck * dr
    flat = acc.reshape(k * k, ck)
    if hi > lo:
        for b in range(count):
            x0 = (n * h_in + (r + b) * sr - pt) * w_in * ck + (lo * sc - pl) * ck
            g0 = ((n * oh + r + b) * ow + lo) * ck
            if k == 3:
                acc_products3x3(flat, xf, gf, x0, g0, hi - lo, sc * ck, ck, xr, dc * ck)
            else:
                acc_products5x5(flat, xf, gf, x0, g0, hi - lo, sc * ck, ck, xr, dc * ck)
    edge[:, :, :] = 0
    x0 = (n * h_in + r * sr - pt) * w_in * ck
    g0 = (n * oh + r) * ow * ck
    for i in range(k):
        for j in range(k):
            off = j * dc - pl
            la, ha = span(ow, sc, off, w_in)
            for c in range(la, ha):
                if c < lo or c >= hi:
                    acc_products(edge[i, j], xf, gf, x0 + i * xr + (c * sc + off) * ck,
                                 g0 + c * ck, count, sr * w_in * ck, ow * ck, 0)
    acc += edge


@numba.jit(**JIT)
def _filter_row(xf, gf, tmp, n, r, sr, sc, dr, dc, pt, pl, h_in, w_in, oh, ow):  # pragma: no cover
    """``tmp`` += output row ``r`` of image ``n``'s terms, one filter row at a time: three taps
    share each pass where all three read inside the row, one tap at a time near the borders."""
    kh, kw, ck = tmp.shape
    xs = sc * ck
    g0 = (n * oh + r) * ow * ck
    for i in range(kh):
        h = r * sr + i * dr - pt
        if h < 0 or h >= h_in:
            continue
        x0 = (n * h_in + h) * w_in * ck
        j0 = 0
        while j0 + 3 <= kw:
            oa = j0 * dc - pl
            lo, hi = inside_all(ow, sc, oa, dc, 3, w_in)
            for j in range(3):  # border columns, one tap at a time
                off = oa + j * dc
                la, ha = span(ow, sc, off, w_in)
                end = min(ha, lo)
                if end > la:
                    acc_products(tmp[i, j0 + j], xf, gf, x0 + (la * sc + off) * ck,
                                 g0 + la * ck, end - la, xs, ck, 0)
                start = max(la, hi)
                if ha > start:
                    acc_products(tmp[i, j0 + j], xf, gf, x0 + (start * sc + off) * ck,
                                 g0 + start * ck, ha - start, xs, ck, 0)
            if hi > lo:
                acc_products3(tmp[i, j0:j0 + 3], xf, gf, x0 + (lo * sc + oa) * ck,
                              g0 + lo * ck, hi - lo, xs, ck, dc * ck)
            j0 += 3
        for j in range(j0, kw):
            off = j * dc - pl
            lo, hi = span(ow, sc, off, w_in)
            if hi > lo:
                acc_products(tmp[i, j], xf, gf, x0 + (lo * sc + off) * ck, g0 + lo * ck,
                             hi - lo, xs, ck, 0)


@numba.jit(**JIT)
def filter_grad(x, dy, acc, sr, sc, dr, dc, pt, pl, lo_row, hi_row, band):  # pragma: no cover
    """``acc`` = the filter gradient over output rows ``[lo_row, hi_row)``: one partial sum per
    output row, added in row order. Each tap's sum over a row's columns runs in vector
    registers (:mod:`engine.kernels._compiled.tap_sums`). With ``band > 0`` a 3x3 or 5x5
    filter's rows that read inside the image with every filter row go ``band`` at a time
    through :func:`_filter_band`; the other rows through :func:`_filter_row`."""
    nb, h_in, w_in, ck = x.shape
    _, oh, ow, _ = dy.shape
    kh, kw, _ = acc.shape
    xf = x.reshape(nb * h_in * w_in * ck)
    gf = dy.reshape(dy.shape[0] * oh * ow * ck)
    acc[:, :, :] = 0
    tmp = np.empty((kh, kw, ck), acc.dtype)
    grid = band > 0 and kh == kw and (kh == 3 or kh == 5)
    clo, chi = inside_all(ow, sc, -pl, dc, kw, w_in)
    # the output rows whose every filter row reads inside: [first, last)
    first = min(oh, max(0, -(-pt // sr)))
    last = max(first, min(oh, (h_in - 1 - (kh - 1) * dr + pt) // sr + 1))
    edge = np.empty((kh, kw, ck), acc.dtype)
    row = lo_row
    while row < hi_row:
        n = row // oh
        r = row - n * oh
        if grid and first <= r < last:
            count = min(band, hi_row - row, last - r)
            _filter_band(xf, gf, edge, acc, n, r, count, clo, chi, sr, sc, dr, dc, pt, pl,
                         h_in, w_in, oh, ow)
            row += count
            continue
        tmp[:, :, :] = 0
        _filter_row(xf, gf, tmp, n, r, sr, sc, dr, dc, pt, pl, h_in, w_in, oh, ow)
        acc += tmp  # one partial sum per output row
        row += 1
