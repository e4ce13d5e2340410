"""The NumPy depthwise path (``numpy tiles``): the depthwise forward, filter gradient and input
gradient skip the phase layout: one einsum per tile of output rows over a strided
``(rows, OW, KH, KW, C)`` window view of the tile's padded rows, copied into a per-core buffer
(:func:`_depthwise_tiles`; at most :data:`engine.kernels.compute.DEPTHWISE_TILE_POSITIONS`
output positions a tile). Each tile starts with :func:`engine.base.cancel.checkpoint`. Like
:mod:`engine.kernels.compute` it imports nothing compiled and is the reference the compiled
depthwise loops are tested against.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.lib.stride_tricks import as_strided

from engine.base.cancel import checkpoint
from engine.kernels import compute, parallel
from engine.kernels.layout import PhaseLayout
from engine.kernels.parallel import map_ranges


def depthwise_conv2d(lay: PhaseLayout, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Depthwise forward ``(N, OH, OW, C*M)``:
    ``y[n, r, q, c*M + m] = sum_{i,j} in_pad[n, r*sr + i*dr, q*sc + j*dc, c] w[i, j, c, m]``,
    one einsum per tile of output rows (see :func:`_depthwise_tiles`) written into ``y``."""
    g = lay.g
    n, c, m = x.shape[0], x.shape[3], w.shape[3]
    y = np.empty((n, g.out_rows, g.out_cols, c * m), ctype)
    wc = w.astype(ctype, copy=False).reshape(g.filter_rows, g.filter_cols, c * m)

    def tile(i: int, r0: int, r1: int, windows: np.ndarray) -> None:
        np.einsum("rqijk,ijk->rqk", windows, wc, out=y[i, r0:r1])

    _depthwise_tiles(g, x, ctype, m, tile)  # channels repeated M times: k = c*M + m reads c
    return y


def depthwise_conv2d_backprop_filter(
    lay: PhaseLayout, x: np.ndarray, dy: np.ndarray, ctype: np.dtype
) -> np.ndarray:
    """Depthwise filter gradient ``(KH, KW, C, M)``:
    ``dw[i, j, c, m] = sum_{n,r,q} in_pad[n, r*sr + i*dr, q*sc + j*dc, c] dy[n, r, q, c*M + m]``.

    One einsum per tile of output rows (:func:`_depthwise_tiles`) sums all taps at once over the
    window view, so the input is read from memory once, no padded copy of the whole batch is
    made, and extra memory is a few MiB whatever the batch. A multiplier ``M > 1`` is the
    ``M = 1`` problem with every channel repeated ``M`` times in the tile buffer (output channel
    ``c*M + m`` reads channel ``c``).
    """
    g = lay.g
    c = x.shape[3]
    m = dy.shape[3] // c
    shape = (g.filter_rows, g.filter_cols, c * m)

    def tile(i: int, r0: int, r1: int, windows: np.ndarray) -> np.ndarray:
        return np.einsum("rqijc,rqc->ijc", windows, dy[i, r0:r1])

    partials = _depthwise_tiles(g, x, ctype, m, tile, lambda: np.zeros(shape, ctype))
    dw = sum(partials, np.zeros(shape, ctype))
    return dw.reshape(g.filter_rows, g.filter_cols, c, m)


def _depthwise_tiles(g, x: np.ndarray, ctype: np.dtype, repeat: int, tile, zero=None,
                     spread: tuple[int, int] = (1, 1)) -> list:
    """Cut the output positions into tiles (one image, a band of output rows) split over cores.

    Per tile, the padded input rows its windows read are copied into a per-core buffer that
    stays in cache (zero borders, cast to ``ctype``, channels repeated ``repeat`` times), and
    ``tile(i, r0, r1, windows)`` gets the read-only ``(r1 - r0, OW, KH, KW, C*repeat)`` window
    view of it. With ``zero``, each core sums ``tile``'s results into ``zero()`` and the list of
    these partial sums is returned. ``spread`` is passed on to :func:`_fill_padded_rows`.
    """
    cols = (g.out_cols - 1) * g.stride_cols + (g.filter_cols - 1) * g.dilation_cols + 1
    step = max(1, compute.DEPTHWISE_TILE_POSITIONS // max(1, g.out_cols))
    tiles = [(i, r, min(g.out_rows, r + step))
             for i in range(x.shape[0]) for r in range(0, g.out_rows, step)]

    def part(lo: int, hi: int):
        acc = zero() if zero is not None else None
        rows = _window_rows(g, min(step, g.out_rows))  # no tile has more output rows
        buf = np.empty((rows, cols, x.shape[3], repeat), ctype)
        for i, r0, r1 in tiles[lo:hi]:
            checkpoint()
            xt = _fill_padded_rows(g, x[i], r0 * g.stride_rows, buf[: _window_rows(g, r1 - r0)],
                                   spread)
            res = tile(i, r0, r1, _windows(g, xt, r1 - r0))
            if acc is not None:
                acc += res
        return acc

    min_tiles = -(-parallel.MIN_POSITIONS_PER_RANGE // (step * max(1, g.out_cols)))
    return map_ranges(part, len(tiles), min_tiles)


def _window_rows(g, out_rows: int) -> int:
    """Padded input rows read by ``out_rows`` consecutive output rows."""
    return max(0, out_rows - 1) * g.stride_rows + (g.filter_rows - 1) * g.dilation_rows + 1


def _fill_padded_rows(g, x: np.ndarray, first: int, buf: np.ndarray,
                      spread: tuple[int, int] = (1, 1)) -> np.ndarray:
    """Padded rows ``[first, first + len(buf))`` of one image ``x (H, W, C)`` written into
    ``buf (rows, cols, C, M)`` (channels repeated ``M`` times, zeros where ``in_pad`` is padding);
    returns ``buf`` as ``(rows, cols, C*M)``. With ``spread = (sr, sc)`` the image is first
    spread out with ``sr - 1`` zero rows and ``sc - 1`` zero columns between its own."""
    rows, cols = buf.shape[:2]
    r0, r1, rsrc, nr = _placed(first, rows, g.pad_top, g.in_rows, spread[0])
    c0, c1, csrc, nc = _placed(0, cols, g.pad_left, g.in_cols, spread[1])
    if spread == (1, 1):  # zero only the borders around the copied block
        buf[:r0] = 0
        buf[r1:] = 0
        buf[r0:r1, :c0] = 0
        buf[r0:r1, c1:] = 0
    else:
        buf[...] = 0
    src = x[rsrc : rsrc + nr, csrc : csrc + nc]
    buf[r0 : r1 : spread[0], c0 : c1 : spread[1]] = src[..., None]
    return buf.reshape(rows, cols, buf.shape[2] * buf.shape[3])


def _placed(first: int, count: int, pad: int, size: int, step: int) -> tuple[int, int, int, int]:
    """Buffer slots ``[lo, hi)`` (every ``step``-th) holding image rows ``src .. src + n - 1``.

    Slot ``b`` is padded row ``first + b``, i.e. spread row ``y = first + b - pad``, which holds
    image row ``y / step`` when ``y`` is a multiple of ``step`` in ``[0, (size - 1)*step]``.
    A negative ``pad`` crops.
    """
    y0 = -(-max(first - pad, 0) // step) * step  # the first multiple of step at or after
    y1 = min(first + count - pad, (size - 1) * step + 1)  # exclusive
    if size <= 0 or y1 <= y0:
        return 0, 0, 0, 0
    n = (y1 - 1 - y0) // step + 1
    lo = y0 + pad - first
    return lo, lo + (n - 1) * step + 1, y0 // step, n


def _windows(g, xt: np.ndarray, out_rows: int) -> np.ndarray:
    """Read-only ``(out_rows, OW, KH, KW, C)`` view: ``[r, q, i, j] = xt[r*sr + i*dr, q*sc + j*dc]``."""
    s = xt.strides
    return as_strided(
        xt,
        shape=(out_rows, g.out_cols, g.filter_rows, g.filter_cols, xt.shape[2]),
        strides=(g.stride_rows * s[0], g.stride_cols * s[1], g.dilation_rows * s[0],
                 g.dilation_cols * s[1], s[2]),
        writeable=False,
    )


def depthwise_conv2d_backprop_input(
    lay: PhaseLayout, dy: np.ndarray, w: np.ndarray, ctype: np.dtype, out: np.ndarray
) -> None:
    """Depthwise input gradient into zeroed ``out``:
    ``dx[h, v, c] = sum over (r, i) with r*sr + i*dr - pt = h and (q, j) with
    q*sc + j*dc - pl = v of sum_m dy[r, q, c*M + m] w[i, j, c, m]``.

    With ``dy`` spread out to stride 1 (``sr - 1`` zero rows and ``sc - 1`` zero columns between
    its own: ``dys[y] = dy[y / sr]`` where ``sr`` divides ``y``) this is
    ``dx[h] = sum_i dys[h + pt - i*dr] w[i]``; with ``i' = KH-1-i`` the row read is
    ``h + i'*dr - ((KH-1)*dr - pt)``: a stride-1 depthwise correlation of ``dys`` (``C*M``
    channels) with the flipped filter, padded by ``(KH-1)*dr - pt`` on top (negative: crop) and
    ``(KW-1)*dc - pl`` on the left, whose output is the input's ``H x W``. It runs in the tiles
    of :func:`_depthwise_tiles`, which spread each tile's rows as they copy them.
    """
    g = lay.g
    c, m = w.shape[2], w.shape[3]
    if out.size == 0:  # e.g. an input width of 0 padded to a non-empty output
        return
    gt = dataclasses.replace(
        g, in_rows=g.out_rows, in_cols=g.out_cols, in_depth=c * m, filter_out=1,
        out_rows=g.in_rows, out_cols=g.in_cols, stride_rows=1, stride_cols=1,
        pad_top=(g.filter_rows - 1) * g.dilation_rows - g.pad_top,
        pad_left=(g.filter_cols - 1) * g.dilation_cols - g.pad_left)
    wf = w[::-1, ::-1].astype(ctype).reshape(g.filter_rows, g.filter_cols, c * m)
    direct = m == 1 and out.dtype == ctype

    def tile(i: int, r0: int, r1: int, windows: np.ndarray) -> None:
        if direct:
            np.einsum("rqijk,ijk->rqk", windows, wf, out=out[i, r0:r1])
        else:  # per output channel k = c*M + m, then the sum over m
            y = np.einsum("rqijk,ijk->rqk", windows, wf)
            out[i, r0:r1] = y.reshape(*y.shape[:2], c, m).sum(axis=3)

    _depthwise_tiles(gt, dy, ctype, 1, tile, spread=(g.stride_rows, g.stride_cols))
