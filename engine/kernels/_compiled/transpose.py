"""Layout copies between NCHW and NHWC for the compiled conv paths: ``dst[n, c, p] =
src[n, p, c]`` (or back) in blocks of 8x8 float32 values moved as eight vectors through a
shuffle network (:func:`_block8`), the other dtypes and the edges value by value with unsigned
indices (no negative-index wraparound, which kept LLVM from vectorizing).

Images are split over the cores (:mod:`engine.kernels.parallel`), a cancel checkpoint before each.
:func:`repeat_channels` is the depthwise ops' channel repeat (``M`` copies of each channel).
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from engine.base.cancel import checkpoint
from engine.kernels._compiled import cache_key  # noqa: F401 - before any cache=True
from engine.kernels.buffers import contiguous, readonly
from engine.kernels.parallel import copy_ranges

#: (first, second) picks of each shuffle stage of an 8x8 transpose, as indices into the two
#: 8-lane operands concatenated: interleave pairs of rows, then pairs of pairs, then halves.
_STAGES = (([0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15]),
           ([0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]),
           ([0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]))


@intrinsic
def _block8(typingctx, dst, src, d0, d_step, s0, s_step):
    """``dst[d0 + c*d_step + r] = src[s0 + r*s_step + c]`` for ``r, c < 8`` (flat float32
    arrays; bounds are the caller's duty)."""
    f32 = types.float32
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array)
            and dst.dtype == f32 and src.dtype == f32):
        return None

    def codegen(context, builder, signature, args):
        darr = context.make_array(signature.args[0])(context, builder, args[0])
        sarr = context.make_array(signature.args[1])(context, builder, args[1])
        _, _, d0, ds, s0, ss = args
        vec, i64 = ir.VectorType(ir.FloatType(), 8), ir.IntType(64)

        def at(base, start, step, k):
            off = builder.add(start, builder.mul(step, ir.Constant(i64, k)))
            return builder.bitcast(builder.gep(base, [off]), vec.as_pointer())

        def shuffle(a, b, mask):
            return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(ir.IntType(32), 8),
                                                            mask))

        rows = [builder.load(at(sarr.data, s0, ss, r), align=4) for r in range(8)]
        (lo1, hi1), (lo2, hi2), (lo3, hi3) = _STAGES
        t = []
        for k in range(0, 8, 2):  # rows 2k, 2k+1 interleaved
            t += [shuffle(rows[k], rows[k + 1], lo1), shuffle(rows[k], rows[k + 1], hi1)]
        u = []
        for a, b in ((0, 2), (1, 3), (4, 6), (5, 7)):
            u += [shuffle(t[a], t[b], lo2), shuffle(t[a], t[b], hi2)]
        cols = ([shuffle(u[k], u[k + 4], lo3) for k in range(4)]
                + [shuffle(u[k], u[k + 4], hi3) for k in range(4)])
        for c in range(8):
            builder.store(cols[c], at(darr.data, d0, ds, c), align=4)
        return context.get_dummy_value()

    return types.void(dst, src, d0, d_step, s0, s_step), codegen


@numba.njit(inline="always")
def _rest(src, dst, s0, d0, nr, nc, d_step, full_r, full_c):  # pragma: no cover - compiled
    """``dst[d0 + c*d_step + r] = src[s0 + r*nc + c]`` for the values outside the
    ``full_r x full_c`` blocks, one at a time."""
    for r in range(nr):
        for c in range(full_c if r < full_r else nr - nr, nc):
            dst[d0 + c * d_step + r] = src[s0 + r * nc + c]


@numba.njit(inline="always")
def _tiles(src, dst, s0, d0, nr, nc, d_step, t):  # pragma: no cover - compiled
    """``dst[d0 + c*d_step + r] = src[s0 + r*nc + c]`` (``r < nr``, ``c < nc``; flat float32,
    unsigned indices) in 8x8 blocks (:func:`_block8`) walked ``t x t`` values at a time (``t``
    a multiple of 8): the blocks of a tile read and write whole cache lines of a few rows, not
    32 bytes of every row (each such row another page)."""
    full_r, full_c = nr - nr % np.uint64(8), nc - nc % np.uint64(8)
    for rt in range(np.uint64(0), full_r, t):
        for ct in range(np.uint64(0), full_c, t):
            for r0 in range(rt, min(rt + t, full_r), np.uint64(8)):
                for c0 in range(ct, min(ct + t, full_c), np.uint64(8)):
                    _block8(dst, src, d0 + c0 * d_step + r0, d_step, s0 + r0 * nc + c0, nc)
    _rest(src, dst, s0, d0, nr, nc, d_step, full_r, full_c)


@numba.njit(nogil=True, cache=True)
def _transpose_f32(src, dst, lo, hi, rows, cols, tile):  # pragma: no cover - compiled
    """``dst[n, c, r] = src[n, r, c]`` (flat float32, ``r < rows``, ``c < cols``) for images
    ``lo <= n < hi`` (:func:`_tiles`)."""
    u = np.uint64
    nr, nc = u(rows), u(cols)
    for n in range(u(lo), u(hi)):
        _tiles(src, dst, n * nr * nc, n * nr * nc, nr, nc, nr, u(tile))


@numba.njit(nogil=True, cache=True)
def _transpose(src, dst, lo, hi, rows, cols):  # pragma: no cover - compiled
    """:func:`_transpose_f32` value by value (any dtype)."""
    u = np.uint64
    nr, nc = u(rows), u(cols)
    for n in range(u(lo), u(hi)):
        _rest(src, dst, n * nr * nc, n * nr * nc, nr, nc, nr, u(0), u(0))


@numba.njit(nogil=True, cache=True)
def _rows_to_planes_f32(src, dst, s0, d0, pixels, channels, plane):  # pragma: no cover
    """``dst[d0 + c*plane + p] = src[s0 + p*channels + c]`` (flat float32, ``p < pixels``,
    ``c < channels``) in 8x8 blocks (:func:`_block8`), 8 channels at a time over every pixel:
    8 destination lines filled in order (the source is meant to be in cache; walked in
    tiles instead, a 12.8 MB result took twice as long), the edges value by value."""
    u = np.uint64
    nr, nc, dp, s, d = u(pixels), u(channels), u(plane), u(s0), u(d0)
    full_r, full_c = nr - nr % u(8), nc - nc % u(8)
    for c0 in range(u(0), full_c, u(8)):
        for r0 in range(u(0), full_r, u(8)):
            _block8(dst, src, d + c0 * dp + r0, dp, s + r0 * nc + c0, nc)
    _rest(src, dst, s, d, nr, nc, dp, full_r, full_c)


@numba.njit(nogil=True, cache=True)
def _rows_to_planes(src, dst, s0, d0, pixels, channels, plane):  # pragma: no cover - compiled
    """:func:`_rows_to_planes_f32` value by value (any dtype)."""
    u = np.uint64
    _rest(src, dst, u(s0), u(d0), u(pixels), u(channels), u(plane), u(0), u(0))


def rows_to_planes(src, dst, s0, d0, pixels, channels, plane):  # compiled: the overload below
    """``dst[d0 + c*plane + p] = src[s0 + p*channels + c]`` for ``p < pixels``,
    ``c < channels`` (flat arrays of one dtype; bounds are the caller's duty): consecutive NHWC
    pixels into the same positions of NCHW planes ``plane`` values apart."""
    rows = src[s0 : s0 + pixels * channels].reshape(pixels, channels)
    dst[d0 + np.arange(channels)[:, None] * plane + np.arange(pixels)] = rows.T


@overload(rows_to_planes, jit_options={"nogil": True})
def _rows_to_planes_any(src, dst, s0, d0, pixels, channels, plane):
    loop = _rows_to_planes_f32 if src.dtype == dst.dtype == types.float32 else _rows_to_planes

    def moved(src, dst, s0, d0, pixels, channels, plane):  # pragma: no cover - compiled
        loop(src, dst, s0, d0, pixels, channels, plane)
    return moved


@numba.njit(nogil=True, cache=True)
def _embed_f32(src, dst, lo, hi, channels, rows, cols, d_image, d_row):  # pragma: no cover
    """``dst[n*d_image + r*d_row + p*channels + c] = src[((n*channels + c)*rows + r)*cols + p]``
    (flat float32: NCHW images of ``rows x cols`` pixels into NHWC rows ``d_row`` apart, the
    images ``d_image`` apart) for images ``lo <= n < hi``, in 8x8 blocks (:func:`_block8`) of
    8 channels by 8 pixels of one row, the edges value by value."""
    u = np.uint64
    ch, nr, nc = u(channels), u(rows), u(cols)
    full_c, full_p = ch - ch % u(8), nc - nc % u(8)
    plane = nr * nc
    for n in range(u(lo), u(hi)):
        for r in range(nr):
            d, s = n * u(d_image) + r * u(d_row), n * ch * plane + r * nc
            for c0 in range(u(0), full_c, u(8)):
                for p0 in range(u(0), full_p, u(8)):
                    _block8(dst, src, d + p0 * ch + c0, ch, s + c0 * plane + p0, plane)
            _embed_rest(src, dst, d, s, ch, nc, plane, full_c, full_p)


@numba.njit(inline="always")
def _embed_rest(src, dst, d, s, ch, nc, plane, full_c, full_p):  # pragma: no cover - compiled
    """One row's values outside the ``full_c x full_p`` blocks, one at a time."""
    for c in range(ch):
        for p in range(full_p if c < full_c else nc - nc, nc):
            dst[d + p * ch + c] = src[s + c * plane + p]


@numba.njit(nogil=True, cache=True)
def _embed(src, dst, lo, hi, channels, rows, cols, d_image, d_row):  # pragma: no cover
    """:func:`_embed_f32` value by value (any dtype)."""
    u = np.uint64
    ch, nr, nc = u(channels), u(rows), u(cols)
    for n in range(u(lo), u(hi)):
        for r in range(nr):
            _embed_rest(src, dst, n * u(d_image) + r * u(d_row), n * ch * nr * nc + r * nc, ch,
                        nc, nr * nc, u(0), u(0))


def nchw_fill(a: np.ndarray) -> Callable[[np.ndarray, int, int], None] | None:
    """For the NHWC view ``a`` of C-contiguous NCHW data (:func:`nchw_target`): a
    ``fill(out, lo, hi)`` that writes images ``[lo, hi)`` of ``a`` into ``out[lo:hi, :H, :W]``
    of a C-contiguous ``(N, Hq, Wq, C)`` ``out`` of its dtype in one transposing pass (no NHWC
    copy first; a cancel checkpoint per image). None when ``a`` is no such view."""
    nchw = nchw_target(a)
    if nchw is None:
        return None
    src = readonly(nchw.reshape(-1))
    _, rows, cols, channels = a.shape
    loop = _embed_f32 if a.dtype == np.float32 else _embed

    def fill(out: np.ndarray, lo: int, hi: int) -> None:
        d_image, d_row = out.strides[0] // out.itemsize, out.strides[1] // out.itemsize
        dst = out.reshape(-1)
        for n in range(lo, hi):
            checkpoint()
            loop(src, dst, n, n + 1, channels, rows, cols, d_image, d_row)

    return fill


def transpose_tile() -> int:
    """Values per side of :func:`_transpose_f32`'s tiles: a multiple of 8 whose float32 source
    and destination tiles together fill at most half this CPU's L1 data cache."""
    from engine.kernels import cpu

    side = int((cpu.host().l1d // 2 // (2 * 4)) ** 0.5)
    return max(8, side // 8 * 8)


def _copy(src: np.ndarray, dst: np.ndarray, rows: int, cols: int) -> None:
    """Per image ``dst (rows x cols)^T = src``: both C-contiguous, same dtype, images first."""
    s, d = readonly(src.reshape(-1)), dst.reshape(-1)
    tile = transpose_tile()

    def part(lo: int, hi: int) -> None:
        for n in range(lo, hi):
            checkpoint()
            if src.dtype == np.float32:
                _transpose_f32(s, d, n, n + 1, rows, cols, tile)
            else:
                _transpose(s, d, n, n + 1, rows, cols)

    copy_ranges(part, src.shape[0], src[:1].nbytes)


def transposed_planes(a: np.ndarray) -> np.ndarray:
    """``a`` ``(P, R, C)`` as ``(P, C, R)`` C-contiguous: each plane's matrix transposed by
    the compiled copy (split over cores)."""
    src = np.ascontiguousarray(a)
    out = np.empty((a.shape[0], a.shape[2], a.shape[1]), a.dtype)
    _copy(src, out, a.shape[1], a.shape[2])
    return out


def nchw_operand(a: np.ndarray, ctype: np.dtype) -> np.ndarray | None:
    """A C-contiguous NHWC copy of the NHWC view ``a`` when it views C-contiguous NCHW data in
    ``ctype`` (:func:`nchw_target`); else None."""
    nchw = nchw_target(a)
    if nchw is None or nchw.dtype != ctype:
        return None
    out = np.empty(a.shape, ctype)
    _copy(nchw, out, a.shape[3], a.shape[1] * a.shape[2])
    return out


def contiguous_nhwc(a: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """The NHWC view ``a`` C-contiguous in ``ctype``: itself when it is, the compiled layout
    copy when it views NCHW data in ``ctype`` (:func:`nchw_operand`), else
    :func:`engine.kernels.buffers.contiguous` (half types, other views)."""
    if a.dtype == ctype and a.flags.c_contiguous:
        return a
    copy = nchw_operand(a, ctype)
    return copy if copy is not None else contiguous(a, ctype)


def nchw_target(out: np.ndarray) -> np.ndarray | None:
    """The C-contiguous NCHW array behind the NHWC view ``out``, or None (also when empty)."""
    nchw = out.transpose(0, 3, 1, 2)
    return nchw if nchw.flags.c_contiguous and out.size else None


def to_nchw(src: np.ndarray, dst: np.ndarray) -> None:
    """``dst`` (C-contiguous NCHW) = the C-contiguous NHWC ``src`` (same dtype)."""
    _copy(src, dst, src.shape[1] * src.shape[2], src.shape[3])


def warm(dtypes: tuple[type[np.floating], ...] = (np.float32, np.float64)) -> None:
    """Compile (or load from numba's disk cache) the loops for ``dtypes``."""
    for dt in dtypes:
        a = readonly(np.zeros(64, dt))
        if dt == np.float32:
            _transpose_f32(a, np.zeros(64, dt), 0, 1, 8, 8, 8)
            _embed_f32(a, np.zeros(64, dt), 0, 1, 8, 1, 8, 64, 64)
            _rows_to_planes_f32(a, np.zeros(64, dt), 0, 0, 8, 8, 8)
        else:
            _transpose(a, np.zeros(64, dt), 0, 1, 8, 8)
            _embed(a, np.zeros(64, dt), 0, 1, 8, 1, 8, 64, 64)
            _rows_to_planes(a, np.zeros(64, dt), 0, 0, 8, 8, 8)


@numba.njit(nogil=True, cache=True)
def repeat_channels(x, out):  # pragma: no cover - compiled
    """``out[p, c*M + m] = x[p, c]`` for the 2-D ``x (P, C)`` and ``out (P, C*M)``: the
    depthwise ops' operands, output channel ``c*M + m`` reading input channel ``c``. ``M = 2``
    has its own loop, which LLVM vectorizes (the guide's performance page has the figures)."""
    n = x.shape[1]
    m = out.shape[1] // n
    for p in range(x.shape[0]):
        src, dst = x[p], out[p]
        if m == 2:
            for c in range(n):
                v = src[c]
                dst[2 * c] = v
                dst[2 * c + 1] = v
        else:
            for j in range(m):
                for c in range(n):
                    dst[c * m + j] = src[c]
