"""The input gradient of a 3x3, stride-2 conv as a polyphase Winograd (compiled, numba).

Along one axis, input row ``h = 2p + i - pad`` takes output row ``p`` through tap ``i``. With
``s = pad mod 2`` and ``b = (s + pad) / 2``, the rows ``h = 2m + s`` (the two-tap phase) are
``dx[2m + s] = dy[m + b - 1] w[2] + dy[m + b] w[0]``, a two-tap correlation, and the others
take tap 1 alone. So 3 rows of each phase (6 pixels from row ``6a - s``) come from the 4 values
``d = dy[3a + b - s - 1 + (0..3)]`` through 7 points: F(3, 2)'s 4 for the two-tap phase
(:data:`~engine.kernels._compiled.winograd_simd.B3_T`), then ``d[1..3]``
(:data:`~engine.kernels._compiled.winograd_simd.PHASE_IN`). Over both axes, a 6x6 pixel tile
is

    ``dx_tile = L_out [ sum_k (G w^T G^T) * (L_in d L_in^T) ] L_out^T``

(:data:`~engine.kernels._compiled.winograd_simd.PHASE_OUT`; ``G``
:data:`~engine.kernels._compiled.winograd_filters.PHASE_G` with its last row for each of the
one-tap phase's three points, so 25 distinct filter matrices): 49 products of a ``(tiles, K)`` by
a ``(K, C)`` matrix per tile where the direct sum has 81 (9 taps per 2x2 block of pixels), in
register tiles, chunk by chunk as :mod:`engine.kernels._compiled.winograd` does (its chunk
walker, buffers and operand copies).

Accuracy: as Winograd's, normwise (``max |out - exact| <= RTOL * max bound``): the transforms
mix a tile's output-gradient values. An element whose terms all read beyond ``dy`` must be
exactly 0: with stride 2 that can only be the last row or column, and it is one-tap (its
points are ``d`` itself, exact). A result that is not finite is dropped for the exact
path, as Winograd's is.
"""

from __future__ import annotations

import threading

import numpy as np

from engine.kernels._compiled import winograd, winograd_filters
from engine.kernels.buffers import readonly
from engine.kernels.parallel import workers
from engine.shapes.conv import ConvGeometry

#: Pixels per tile side and points per tile (7 x 7).
TILE, POINTS = 6, 49
#: Distinct filter matrices (the one-tap phase's three points share ``w[1]``: 5 x 5).
FILTERS = len(winograd_filters.PHASE_G) ** 2
#: At least this many tiles per call (below, fixed costs dominate), and per core's range.
MIN_TILES = 16
#: ... and computes at most 1/this of the direct sum's products (:func:`saving`: at 14x14
#: inputs the tiles' overhang eats the whole gain).
MIN_SAVING = 1.3
#: ... and its result channels are a multiple of this: float32 lanes of the widest vector (64
#: bytes), so the register tiles take whole vectors on every CPU and the path is the same on all.
CHANNEL_MULTIPLE = 16
#: A chunk holds at least this many tiles (register tiles of 6 rows need rows), whatever the
#: channel count (its buffers are otherwise :data:`~engine.kernels._compiled.winograd.CHUNK_BYTES`).
MIN_CHUNK_TILES = 12
_last = threading.local()


def _axis(pad: int) -> tuple[int, int]:
    """Along one axis padded by ``pad`` before: the output-gradient row of tile 0's first
    value (``b - s - 1``) and how far its first pixel lies before row 0 (``s``)."""
    s = pad % 2
    return (s + pad) // 2 - s - 1, s


def applies(g: ConvGeometry) -> bool:
    """True for the geometries computed here, and faster than the per-tap tiles: a 3x3,
    stride-2, dilation-1, ungrouped conv's input gradient with the channel and size minimums of
    :mod:`~engine.kernels._compiled.winograd`, :data:`MIN_TILES`, :data:`MIN_SAVING`, and result
    channels a multiple of :data:`CHANNEL_MULTIPLE`. Any padding: the
    windows reach every input row but perhaps the last, and that one is one-tap (its points
    are output-gradient values beyond ``dy``: exactly 0)."""
    return (not g.depthwise and g.groups == 1
            and (g.filter_rows, g.filter_cols) == (3, 3)
            and (g.stride_rows, g.stride_cols, g.dilation_rows, g.dilation_cols) == (2, 2, 1, 1)
            and min(g.in_depth, g.filter_out) >= winograd.MIN_CHANNELS
            and g.in_depth * g.filter_out >= winograd.MIN_CHANNEL_PRODUCT
            and g.in_depth % CHANNEL_MULTIPLE == 0 and tiles(g) >= MIN_TILES
            and saving(g) >= MIN_SAVING
            and min(g.in_rows, g.in_cols, g.out_rows, g.out_cols) >= winograd.MIN_SIZE)


def saving(g: ConvGeometry) -> float:
    """The direct sum's products over this path's: 9 per output-gradient pixel against 49 per
    tile (tiles past the image's edge compute products that are dropped)."""
    return 9 * g.batch * g.out_rows * g.out_cols / max(1, POINTS * tiles(g))


def tiles(g: ConvGeometry) -> int:
    """Tiles of a call: 6x6 pixels each, from ``s`` pixels before row and column 0."""
    rows, cols = _tile_counts(g)
    return g.batch * rows * cols


def _tile_counts(g: ConvGeometry) -> tuple[int, int]:
    return (-(-(g.in_rows + _axis(g.pad_top)[1]) // TILE),
            -(-(g.in_cols + _axis(g.pad_left)[1]) // TILE))


def _chunk_tiles(channels: int, itemsize: int) -> int:
    """Tiles per chunk: their buffers (49 points of ``channels`` values per tile) fit
    :data:`~engine.kernels._compiled.winograd.CHUNK_BYTES`, and at least :data:`MIN_CHUNK_TILES`."""
    return max(MIN_CHUNK_TILES, winograd.CHUNK_BYTES // max(1, POINTS * channels * itemsize))


def backprop_input(g: ConvGeometry, dy: np.ndarray, w: np.ndarray,
                   ctype: np.dtype) -> tuple[np.ndarray, bool]:
    """Input gradient ``(N, H, W, C)`` in ``ctype`` of NHWC ``dy`` (:func:`applies` holds), and
    whether it came out finite (each tile checked as it is written)."""
    from engine.kernels._compiled import winograd_phases_jit as jit

    src = readonly(winograd.nhwc_operand(dy, ctype))
    u = winograd_filters.phase_filter_transform(w, ctype)
    k, c = u.shape[1], u.shape[2]
    (row0, row_shift), (col0, col_shift) = _axis(g.pad_top), _axis(g.pad_left)
    th, tw = _tile_counts(g)
    total = g.batch * th * tw
    step = min(total, _chunk_tiles(k + c, ctype.itemsize))
    dx = np.empty((g.batch, g.in_rows, g.in_cols, c), ctype)

    def work(t0: int, t1: int, st) -> None:
        (v, pv), (m, pm), finite = st
        finite.append(jit.input_chunks(src, row0, col0, row_shift, col_shift, th, tw, t0, t1,
                                       step, v, pv, u, m, pm, dx))

    def state(_: int):
        """Per core: its chunk buffers, reused chunk after chunk, and its calls' finiteness."""
        return (winograd.points_buffer(step, k, ctype, POINTS),
                winograd.points_buffer(step, c, ctype, POINTS), [])

    done = winograd.chunked(total, step, work, state, MIN_TILES)
    return dx, all(all(st[2]) for st in done)


def used() -> str:
    """``"winograd phases"`` or ``"numpy"``: the path of this thread's last call of
    :func:`try_backprop_input`, ``""`` before any."""
    return getattr(_last, "path", "")


def try_backprop_input(g, dy, w, ctype, take: bool) -> np.ndarray | None:
    """:func:`backprop_input` when ``take`` (the dispatch chose this path) and its result is
    finite, else None (the caller takes the exact path)."""
    _last.path = "winograd phases" if take else "numpy"
    if not take:
        return None
    dx, finite = backprop_input(g, dy, w, ctype)
    if finite:
        return dx
    _last.path = "numpy"
    return None


def warm(dtypes: tuple[type[np.floating], ...] = (np.float32, np.float64)) -> None:
    """Compile (or load from numba's on-disk cache) the tile loops for ``dtypes``."""
    from engine.kernels._compiled import winograd_phases_jit as jit

    for dt in dtypes:
        src = readonly(np.zeros((1, 2, 2, 1), dt))
        v, pv = winograd.points_buffer(1, 1, np.dtype(dt), POINTS)
        jit.input_chunks(src, -1, -1, 0, 0, 1, 1, 0, 1, 1, v, pv, np.zeros((FILTERS, 1, 1), dt),
                         v.copy(), pv, np.zeros((1, 3, 3, 1), dt))


def workspace_bytes(g: ConvGeometry, kind: str, ct: int) -> int:
    """Upper bound of the extra memory of one call (``ct``: compute itemsize): contiguous
    compute-dtype copies of ``dy`` and ``w``, the transposed and transformed filter and the
    transform's temporary, per core one chunk's buffers, and the result in the compute dtype
    (twice: cast or re-laid out at the end)."""
    ci, co = g.in_depth, g.filter_out
    chunk = min(tiles(g), _chunk_tiles(ci + co, ct))
    padding = 2 * (POINTS * 2 + 1) * winograd.LINE_BYTES  # per buffer: planes' lines, alignment
    per_core = POINTS * chunk * (ci + co) * ct + padding
    dy = g.batch * g.out_rows * g.out_cols * co
    # w, w^T, PHASE_G w^T, the distinct points
    filters = (9 + 9 + 3 * len(winograd_filters.PHASE_G) + FILTERS) * ci * co
    result = g.batch * g.in_rows * g.in_cols * ci
    return (dy + filters + 2 * result) * ct + workers() * per_core
