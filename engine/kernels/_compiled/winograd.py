"""Winograd F(2x2, 3x3) for 3x3, stride-1, dilation-1 conv gradients (compiled, numba).

With the tile transforms of :mod:`engine.kernels._compiled.winograd_jit` (numba, imported on first
use) and ``G = [[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]]``, over 4x4 input tiles ``d`` at step 2:

- forward:          ``y_tile = A^T [ sum_c (G w G^T) * (B^T d B) ] A``
- input gradient:   the forward conv of ``dy`` with the filter flipped and transposed
  (``wf[i, j, o, c] = w[2-i, 2-j, c, o]``), read from row ``h - (2 - pad_top)``;
- filter gradient:  ``dw = G^T [ sum_tiles (B^T d B) * (A dy_tile A^T) ] G`` (the adjoint of the
  forward formula in the filter).

Each sum over channels (or over tiles) is 16 products, one per tile point, of a ``(tiles, C)``
by a ``(C, K)`` matrix: register tiles of :mod:`engine.kernels._compiled.numba_simd` when the
result's columns fill whole vectors (:func:`_simd_columns`), BLAS otherwise; the tiles of a batch
chunk (bands of tile rows, at most :data:`CHUNK_BYTES` of buffers) are transformed, multiplied and
written back before the next chunk, with :func:`engine.base.cancel.checkpoint` between chunks. Half
types compute in float32 as the NumPy path does.

Accuracy: transforms mix the elements of a 4x4 tile, so the rounding error of an output is
relative to the terms of its tile (and, for the filter gradient, of all taps), not to its own
``sum |terms|``: float32 results are within about 4e-7 of the largest exact value (TensorFlow's
kernels: the same order). The contract tested is ``max |out - exact| <= RTOL * max bound``
(normwise, :data:`engine.base.dtypes.RTOL`). The elementwise ``RTOL * bound`` of the NumPy path held
on every golden case, but is not guaranteed: an element whose terms are far smaller than its
tile neighbours' (a corner of a VALID input gradient with one output channel, a filter tap of a
1-pixel image) keeps their rounding (hence also :data:`MIN_SIZE`). Because transforms also multiply padding zeros with data,
a result that is not finite (an operand not finite, or a transform overflowing) is dropped for
the exact NumPy path (:func:`_finite_or_none`), as is every call of the NaN/Inf path of
:mod:`engine.kernels.nonfinite`.

When: :func:`applies` (:data:`MIN_CHANNELS`, :data:`MIN_CHANNEL_PRODUCT`, :data:`MIN_TILES`,
:data:`MIN_SIZE`) and
:mod:`engine.kernels.dispatch` takes the compiled path for the call (it passes ``take`` to
:func:`try_conv2d` and its siblings). :func:`used` names the path the last conv kernel call of
this thread took.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from typing import NamedTuple

import numpy as np

from engine.base.cancel import checkpoint
from engine.kernels._compiled import winograd_filters
from engine.kernels.buffers import readonly
from engine.kernels.nonfinite import all_finite
from engine.kernels.parallel import map_ranges, ranges, workers
from engine.shapes.conv import ConvGeometry

#: Tile buffers of one chunk (per core): small enough to stay in cache while multiplied.
CHUNK_BYTES = 2**20
#: Winograd only when both channel counts are at least this (thin products lose to the
#: per-tap NumPy path, and the transforms cost more than they save).
MIN_CHANNELS = 16
#: ... and their product at least this...
MIN_CHANNEL_PRODUCT = 1024
#: ... and the batch has at least this many 2x2 output tiles (below, fixed costs dominate).
MIN_TILES = 128
#: ... and input and output images at least this many rows and columns: Winograd's rounding
#: is relative to a tile's terms, not to each element's own, and on tiny images most elements
#: are border elements with a few terms next to ones with many (see the module doc).
MIN_SIZE = 4
#: The filter gradient sums its tiles' products in blocks of this many, each block's sum added
#: to the core's partial sum: the inverse transform takes differences of the summed points, so
#: their rounding shows in full.
SUM_BLOCK = 32
#: A chunk holds at least this many tiles (BLAS needs rows to be efficient), whatever the
#: channel count.
MIN_CHUNK_TILES = 128
#: Chunks per compiled call (a cancel checkpoint between calls): each return from compiled
#: code takes the GIL, and when the other core's thread holds it the wait is a sleep and a
#: wake-up, which on two cores cost more than the chunks' Python glue.
CALL_CHUNKS = 8
_last = threading.local()


#: Cache line bytes (the points' planes are padded to an odd number of them, see
#: :func:`points_buffer`).
LINE_BYTES = 64


def points_buffer(tiles: int, channels: int, ctype: np.dtype,
                   points: int = 16) -> tuple[np.ndarray, int]:
    """A flat, line-aligned buffer for the ``points`` points of ``tiles`` tiles and its plane
    stride (elements from one point's ``(tiles, channels)`` matrix to the next).

    The stride is an odd number of cache lines: a transform stores one vector to each of the
    16 planes in turn, and with planes a multiple of 4 KiB apart (128 tiles of 64 float32
    channels) all 16 stores fall in one set of the L1 cache, more than its ways."""
    per_line = LINE_BYTES // ctype.itemsize
    lines = -(-tiles * channels // per_line)
    plane = (lines | 1) * per_line
    raw = np.empty(points * plane + per_line, ctype)
    skip = (-raw.ctypes.data % LINE_BYTES) // ctype.itemsize
    return raw[skip:skip + points * plane], plane


def _points(flat: np.ndarray, plane: int, tiles: int, channels: int) -> np.ndarray:
    """The ``(16, tiles, channels)`` view of a :func:`points_buffer` (for BLAS)."""
    return flat.reshape(16, plane)[:, :tiles * channels].reshape(16, tiles, channels)


def _input_tiles(src, row0, col0, th, tw, t0, t1, out, plane) -> None:
    """(``src`` read-only, as :func:`warm` compiled it, whatever the caller's flags.)"""
    _jit().patch_tiles(readonly(src), 4, row0, col0, th, tw, t0, t1, out, plane)


def _grad_tiles(src, th, tw, t0, t1, out, plane) -> None:
    _jit().patch_tiles(readonly(src), 2, 0, 0, th, tw, t0, t1, out, plane)


@functools.cache
def enabled() -> bool:
    """True when numba is installed (whether Winograd runs for a call is
    :mod:`engine.kernels.dispatch`'s decision)."""
    return importlib.util.find_spec("numba") is not None


def applies(g: ConvGeometry) -> bool:
    """True for the geometries Winograd computes, and faster than the NumPy path: a 3x3,
    stride-1, dilation-1, ungrouped conv with at least :data:`MIN_CHANNELS` input and output
    channels (product :data:`MIN_CHANNEL_PRODUCT`) and :data:`MIN_TILES` output tiles, padded by at most 2 on each side (so every
    output reads data: an element whose terms all read padding must be exactly 0, and the
    transforms would leave rounding there)."""
    tiles = g.batch * (-(-g.out_rows // 2)) * (-(-g.out_cols // 2))
    return (not g.depthwise and g.groups == 1
            and (g.filter_rows, g.filter_cols) == (3, 3)
            and (g.stride_rows, g.stride_cols, g.dilation_rows, g.dilation_cols) == (1, 1, 1, 1)
            and max(g.pad_top, g.pad_bottom, g.pad_left, g.pad_right) <= 2
            and min(g.in_depth, g.filter_out) >= MIN_CHANNELS
            and g.in_depth * g.filter_out >= MIN_CHANNEL_PRODUCT and tiles >= MIN_TILES
            and min(g.in_rows, g.in_cols, g.out_rows, g.out_cols) >= MIN_SIZE)


def used() -> str:
    """``"winograd"`` or ``"numpy"``: the path of this thread's last conv kernel call that
    asked (see :func:`try_conv2d` and its siblings), ``""`` before any."""
    return getattr(_last, "path", "")


def _take(take: bool) -> bool:
    """Record this call's path for :func:`used`: ``take`` is the dispatch's decision (Winograd
    applies, the compiled code is ready, not the exact NaN/Inf path)."""
    _last.path = "winograd" if take else "numpy"
    return take


def _finite_or_none(out: np.ndarray) -> np.ndarray | None:
    """``out`` when all finite, else None (the caller then takes the exact NumPy path).

    Checked after the fact instead of scanning the operands first: transforms add up to 16
    elements and multiply padding zeros with data, so an operand that is not finite, or so
    large that a transform overflows, shows as a non-finite result (a NaN or Inf never turns
    finite again through sums and products), while a finite result has overflowed nowhere."""
    if all_finite(out):
        return out
    _last.path = "numpy"
    return None


def _jit():
    from engine.kernels._compiled import winograd_jit

    return winograd_jit


def _tiles(rows: int, cols: int) -> tuple[int, int]:
    return -(-rows // 2), -(-cols // 2)


def _chunk_tiles(channels: int, itemsize: int) -> int:
    """Tiles per chunk: their buffers (16 points of ``channels`` values per tile) fit
    :data:`CHUNK_BYTES`, and at least :data:`MIN_CHUNK_TILES`."""
    return max(MIN_CHUNK_TILES, CHUNK_BYTES // max(1, 16 * channels * itemsize))


def chunked(tiles: int, chunk: int, work, state=lambda k: None, least: int = 0) -> list:
    """Run ``work(t0, t1, st)`` on ranges of the tiles ``[0, tiles)`` of at most
    :data:`CALL_CHUNKS` chunks of ``chunk`` tiles: each core walks its own contiguous
    range of at least ``least`` tiles (:func:`_range_tiles` when 0; a cancel checkpoint before
    each call, BLAS on one thread) with its own ``st = state(k)`` (``k``: the range's index in
    :func:`_spans`); ``work`` takes its range
    chunk by chunk, so a chunk's transformed tiles are multiplied while they are still in
    cache. Returns each core's ``st``."""
    step, least = chunk * CALL_CHUNKS, least or _range_tiles()
    starts = [lo for lo, _ in ranges(tiles, least)]

    def walk(lo: int, hi: int):
        st = state(starts.index(lo))
        for t0 in range(lo, hi, step):
            checkpoint()
            work(t0, min(hi, t0 + step), st)
        return st

    return map_ranges(walk, tiles, least)


def _range_tiles() -> int:
    """Tiles per core's range of :func:`chunked` at least (:data:`MIN_TILES`, read at call
    time)."""
    return max(1, MIN_TILES)


def _spans(tiles: int) -> list[tuple[int, int]]:
    """The cores' ranges of the tiles ``[0, tiles)`` in :func:`chunked`, in order (those
    :func:`~engine.kernels.parallel.map_ranges` makes there)."""
    return ranges(tiles, _range_tiles())


def _simd_columns(columns: int, ctype: np.dtype) -> bool:
    """True when the per-point products run as :mod:`engine.kernels._compiled.numba_simd`'s register
    tiles: the result's columns fill whole vectors (BLAS otherwise)."""
    from engine.kernels._compiled.numba_simd import lanes

    return columns % lanes(np.dtype(ctype).itemsize) == 0


def nhwc_operand(a: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """``a`` C-contiguous in ``ctype``: a copy only for NCHW views (by the compiled layout
    copy) or half types (:func:`~engine.kernels._compiled.transpose.contiguous_nhwc`)."""
    from engine.kernels._compiled import transpose

    return transpose.contiguous_nhwc(a, ctype)


def _forward(src: np.ndarray, u: np.ndarray, row0: int, col0: int, out_rows: int,
             out_cols: int, ctype: np.dtype) -> np.ndarray:
    """``y[n, r, c, k] = sum_{i,j,q} src[n, r + i - row0, c + j - col0, q] w[i, j, q, k]`` (zero
    outside ``src``), ``u`` the transformed ``w``; NHWC ``(N, out_rows, out_cols, K)``."""
    jit = _jit()
    n, ci, co = src.shape[0], src.shape[3], u.shape[2]
    y = np.empty((n, out_rows, out_cols, co), ctype)
    th, tw = _tiles(out_rows, out_cols)

    simd = _simd_columns(co, ctype)
    step = min(n * th * tw, _chunk_tiles(ci + co, ctype.itemsize))
    src_r = readonly(src)

    def work(t0: int, t1: int, st) -> None:
        (v, pv), products = st
        if products is not None:
            m, pm = products
            jit.forward_chunks(src_r, row0, col0, th, tw, t0, t1, step, v, pv, u, m, pm, y)
            return
        for c0 in range(t0, t1, step):
            c1 = min(t1, c0 + step)
            _input_tiles(src, row0, col0, th, tw, c0, c1, v, pv)
            mm = np.matmul(_points(v, pv, c1 - c0, ci), u).reshape(-1)
            jit.output_tiles(mm, (c1 - c0) * co, th, tw, c0, c1, y)

    def state(k: int):
        """Per core: its chunk buffers, reused chunk after chunk (BLAS allocates its own
        products)."""
        return (points_buffer(step, ci, ctype),
                points_buffer(step, co, ctype) if simd else None)

    chunked(n * th * tw, step, work, state)
    return y


def conv2d(g: ConvGeometry, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Forward conv of NHWC ``x`` ``(N, OH, OW, K)`` in ``ctype`` (:func:`applies` holds)."""
    return _forward(nhwc_operand(x, ctype), winograd_filters.filter_transform(w, ctype), g.pad_top,
                    g.pad_left, g.out_rows, g.out_cols, ctype)


def backprop_input(g: ConvGeometry, dy: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Input gradient ``(N, H, W, C)`` in ``ctype`` of NHWC ``dy`` (:func:`applies` holds)."""
    return _forward(nhwc_operand(dy, ctype), winograd_filters.filter_transform(w, ctype, True), 2 - g.pad_top,
                    2 - g.pad_left, g.in_rows, g.in_cols, ctype)


def backprop_filter(g: ConvGeometry, x: np.ndarray, dy: np.ndarray,
                    ctype: np.dtype) -> np.ndarray:
    """Filter gradient ``(3, 3, C, K)`` in ``ctype`` of NHWC ``x`` and ``dy``."""
    xs, es = nhwc_operand(x, ctype), nhwc_operand(dy, ctype)
    n, ci, co = xs.shape[0], xs.shape[3], es.shape[3]
    th, tw = _tiles(g.out_rows, g.out_cols)

    simd = _simd_columns(co, ctype)
    jit = _jit()

    step = min(n * th * tw, _chunk_tiles(ci + co, ctype.itemsize))
    xs_r, es_r = readonly(xs), readonly(es)

    def work(t0: int, t1: int, st: _FilterState) -> None:
        (v, pv), (e, pe) = st.v, st.e
        if simd:
            jit.filter_chunks(xs_r, es_r, g.pad_top, g.pad_left, th, tw, t0, t1, step, v, pv,
                              e, pe, st.acc, SUM_BLOCK)
            return
        for c0 in range(t0, t1, step):
            c1 = min(t1, c0 + step)
            t = c1 - c0
            _input_tiles(xs, g.pad_top, g.pad_left, th, tw, c0, c1, v, pv)
            _grad_tiles(es, th, tw, c0, c1, e, pe)
            vt, et = _points(v, pv, t, ci).transpose(0, 2, 1), _points(e, pe, t, co)
            for b in range(0, t, SUM_BLOCK):
                np.add(st.acc, np.matmul(vt[:, :, b:b + SUM_BLOCK], et[:, b:b + SUM_BLOCK],
                                         out=st.tmp), out=st.acc)

    parts = np.zeros((len(_spans(n * th * tw)), 16, ci, co), ctype)  # one partial sum per core

    def state(k: int) -> _FilterState:
        """Core ``k``'s: its partial sum, its chunk buffers (reused chunk after chunk) and a
        buffer for BLAS's product (the tiles add in place)."""
        return _FilterState(parts[k], points_buffer(step, ci, ctype),
                            points_buffer(step, co, ctype),
                            None if simd else np.empty((16, ci, co), ctype))

    chunked(n * th * tw, step, work, state)
    flat, dw = parts.reshape(len(parts), 16, -1), np.empty((9, ci * co), ctype)
    map_ranges(lambda lo, hi: jit.filter_inverse(flat, dw, lo, hi), ci * co,
               winograd_filters.SANDWICH_MIN_COLUMNS)
    dw = dw.reshape(3, 3, ci, co)
    # taps that read only padding (tiny images) have no terms: exactly 0, not rounding
    dw[~_taps_meeting_data(g.in_rows, g.out_rows, g.pad_top)] = 0
    dw[:, ~_taps_meeting_data(g.in_cols, g.out_cols, g.pad_left)] = 0
    return dw


class _FilterState(NamedTuple):
    """One core's state in :func:`backprop_filter`."""

    acc: np.ndarray
    v: tuple[np.ndarray, int]
    e: tuple[np.ndarray, int]
    tmp: np.ndarray | None


def _taps_meeting_data(size: int, out: int, pad: int) -> np.ndarray:
    """Per filter row ``i``: some output row ``r < out`` reads input row ``r + i - pad`` inside
    ``[0, size)``."""
    i = np.arange(3)
    return (np.maximum(0, i - pad) <= np.minimum(size - 1, out - 1 + i - pad)) & (size > 0)


def try_conv2d(g, x, w, ctype, take: bool) -> np.ndarray | None:
    """:func:`conv2d` when ``take`` (the dispatch chose Winograd) and its result is finite,
    else None."""
    return _finite_or_none(conv2d(g, x, w, ctype)) if _take(take) else None


def try_backprop_filter(g, x, dy, ctype, take: bool) -> np.ndarray | None:
    """:func:`backprop_filter` when ``take`` and its result is finite, else None."""
    return _finite_or_none(backprop_filter(g, x, dy, ctype)) if _take(take) else None


def try_backprop_input(g, dy, w, ctype, take: bool) -> np.ndarray | None:
    """:func:`backprop_input` when ``take`` and its result is finite, else None."""
    return _finite_or_none(backprop_input(g, dy, w, ctype)) if _take(take) else None


def warm(dtypes: tuple[type[np.floating], ...] = (np.float32, np.float64)) -> None:
    """Compile (or load from numba's on-disk cache) the transforms and the per-point products
    for ``dtypes`` (:func:`engine.kernels.accel.warm_up` does, in a background thread at start-up),
    so the first Winograd call does not wait for the JIT."""
    jit = _jit()
    for dt in dtypes:
        src = np.zeros((1, 2, 2, 1), dt)
        out, plane = points_buffer(1, 1, np.dtype(dt))
        _input_tiles(src, 0, 0, 1, 1, 0, 1, out, plane)
        _grad_tiles(src, 1, 1, 0, 1, out, plane)
        jit.output_tiles(out, plane, 1, 1, 0, 1, np.zeros((1, 2, 2, 1), dt))
        jit.point_products(out, plane, np.zeros((16, 1, 1), dt), out, plane, 1)
        jit.point_products_t(out, plane, out, plane, np.zeros((16, 1, 1), dt), 1, SUM_BLOCK)
        r = readonly(src)
        jit.forward_chunks(r, 0, 0, 1, 1, 0, 1, 1, out, plane, np.zeros((16, 1, 1), dt), out,
                           plane, np.zeros((1, 2, 2, 1), dt))
        jit.filter_chunks(r, r, 0, 0, 1, 1, 0, 1, 1, out, plane, out, plane,
                          np.zeros((16, 1, 1), dt), SUM_BLOCK)
        jit.filter_inverse(np.zeros((1, 16, 1), dt), np.zeros((9, 1), dt), 0, 1)


def workspace_bytes(g: ConvGeometry, kind: str, ct: int) -> int:
    """Upper bound of the extra memory of one Winograd call (``ct``: compute itemsize):
    contiguous compute-dtype copies of both operands, per core one chunk's tile buffers and
    its partial sum, the transformed filter and its temporaries, and the result in the compute
    dtype (twice: cast or re-laid out at the end)."""
    ci, co = g.in_depth, g.filter_out
    rows, cols = (g.in_rows, g.in_cols) if kind == "input" else (g.out_rows, g.out_cols)
    th, tw = _tiles(rows, cols)
    tiles = g.batch * th * tw
    chunk = min(tiles, _chunk_tiles(ci + co, ct))
    padding = 2 * (16 * 2 + 1) * LINE_BYTES  # per buffer: 16 planes' lines, the alignment
    per_core = 16 * chunk * (ci + co) * ct + padding + 2 * 16 * ci * co * ct
    x = g.batch * g.in_rows * g.in_cols * ci
    y = g.batch * g.out_rows * g.out_cols * co
    w = 9 * ci * co
    operands = {"forward": x + w, "filter": x + y, "input": y + w}[kind] * ct
    result = {"forward": y, "filter": w, "input": x}[kind] * ct
    return operands + workers() * per_core + 4 * 16 * ci * co * ct + 2 * result
