"""The compiled path of the per-tap conv kernels: the products of :mod:`engine.kernels.compute`
as :mod:`engine.kernels._compiled.conv_tiles_jit`'s register tiles, read in place (no packing, no
im2col).

- filter gradient, :func:`backprop_filter_direct`: ``dw[i, j] = sum_{n,r,c} x[n, r*sr + i*dr
  - pt, c*sc + j*dc - pl].T @ dy[n, r, c]`` straight from NHWC ``x`` and ``dy`` (windows of
  pixels clipped to the image, so no phase images and no zero-embedded ``dy``); work items of
  a few output rows split over cores, each core summing a partial ``dw``. ``x`` on many
  channels is read in place whatever its channel step (an NCHW view: the tiles read it one
  value at a time); other operands whose channels are not adjacent, or that need a dtype
  conversion, are copied to NHWC per batch chunk first (:func:`filter_input_operand`,
  :func:`nhwc_operand`). Both layouts sum in the same order. (Fewer than 16 channels:
  :mod:`engine.kernels.im2col_nd`.)

With the flat phase images ``P`` and the zero-embedded ``E`` of
:class:`~engine.kernels.layout.PhaseLayout`:

- input gradient (:mod:`engine.kernels._compiled.conv_tiles_input`): ``D_phase[q] = sum_{t in
  phase} E[q - off_t] @ w_t.T``, written by :func:`backprop_input_into` straight into the result, one segment per phase row (columns
  ``stride_cols`` pixels apart), over the result's old contents when the phases cover every
  pixel (:func:`covers_input`), so the result needs no zeroing pass; or by
  :func:`backprop_input` into flat phase images. Destination rows are split over cores (one
  owner per row, no races) and every tap of a phase adds into a block while it is in cache.
- forward: ``Y[q] = sum_t P_t[q + off_t] @ w_t`` (:func:`conv2d`), split the same way;
- few channels (a product over 3 channels is too short for the per-tap tiles): the input
  gradient as col2im (:func:`backprop_input_col2im`: one product per output-gradient row with
  ``N = KH*KW*C``, its columns added where their taps land); the forward and the filter
  gradient in :mod:`engine.kernels.im2col_nd`.

The NumPy kernels stay the reference; :mod:`engine.kernels.dispatch` decides when this runs and
:mod:`engine.kernels.tiled` calls it per batch chunk. Every call checks for cancellation before each :data:`CALL_POSITIONS` positions of a core's
range.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from engine.base.cancel import checkpoint
from engine.kernels import parallel
from engine.kernels.buffers import readonly
from engine.kernels.layout import PhaseLayout
from engine.kernels.parallel import map_ranges
from engine.shapes.conv import ConvGeometry

#: Positions per K block of the filter-gradient tiles.
FILTER_BLOCK = 64
#: Below this many input channels a filter row's taps form one operand (the in-place filter
#: gradient); a threshold of its own, not the NumPy path's.
FEW_CHANNELS = 16
#: Destination rows per block of the forward / input-gradient tiles; the shifted products take
#: at most :func:`row_block` rows.
ROW_BLOCK = 96


def l1_operand_bytes() -> int:
    """Bytes of a block's operand rows (rows x k) meant to stay in L1 while every column panel
    of the block reads them: half this CPU's L1 data cache (:mod:`engine.kernels.cpu`)."""
    from engine.kernels import cpu

    return cpu.host().l1d // 2


def row_block(k: int, itemsize: int) -> int:
    """Destination rows per block of :func:`shifted`: :data:`ROW_BLOCK`, fewer (a multiple of
    6, the tiles' rows, at least 24) when the block's ``k``-long operand rows would not stay in
    L1 (:func:`l1_operand_bytes`)."""
    fit = l1_operand_bytes() // max(1, k * itemsize) // 6 * 6
    return max(24, min(ROW_BLOCK, fit))


#: Positions (or destination rows) per compiled call: a cancel checkpoint between calls.
CALL_POSITIONS = 2**15


def jit_loops():
    """:mod:`engine.kernels._compiled.conv_tiles_jit` (imported on first use: it compiles)."""
    from engine.kernels._compiled import conv_tiles_jit

    return conv_tiles_jit


def transposes():
    """:mod:`engine.kernels._compiled.transpose` (imported on first use: it imports numba)."""
    from engine.kernels._compiled import transpose

    return transpose


def tile_columns(itemsize: int) -> int:
    """Columns of the register tile for ``itemsize``-byte floats."""
    from engine.kernels._compiled.numba_simd import tile_columns

    return tile_columns(itemsize)


def lanes(itemsize: int) -> int:
    """Vector lanes for ``itemsize``-byte floats."""
    from engine.kernels._compiled.numba_simd import lanes

    return lanes(itemsize)


def phase(lay: PhaseLayout, phase_row: int, phase_col: int) -> int:
    """The flat index of phase ``(phase_row, phase_col)``."""
    return phase_row * lay.g.stride_cols + phase_col


def tap_panels(w: np.ndarray, taps, transposed: bool) -> np.ndarray:
    """The taps' matrices ``B_t = w[tap.row, tap.col]`` ``(k, n) = (C, O)`` of the
    C-contiguous filter ``w`` ``(KH, KW, C, O)`` (their transposes ``(O, C)`` when
    ``transposed``: the input gradient's) as
    :func:`~engine.kernels._compiled.conv_tiles_jit.shifted_products` reads them: flat
    ``(taps, P, k, nr)``, ``nr`` the columns of one register tile, the last panel padded with
    zeros (never read). Read-only, packed in one compiled pass (not NumPy copies, which run
    before the cores start)."""
    ci, co = w.shape[2], w.shape[3]
    k, n = (co, ci) if transposed else (ci, co)
    nr = tile_columns(w.dtype.itemsize)
    out = np.empty(len(taps) * -(-n // nr) * k * nr, w.dtype)
    rows, cols = (np.array([getattr(t, a) for t in taps], np.int64) for a in ("row", "col"))
    jit_loops().pack_panels(out, readonly(w), rows, cols, transposed, nr)
    return readonly(out)


def nhwc_operand(a: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """NHWC ``a`` as :func:`backprop_filter_direct` reads it: itself when it is in ``ctype``
    with adjacent channels, else a C-contiguous copy in ``ctype`` (NCHW views: by
    :func:`~engine.kernels._compiled.transpose.nchw_operand`; half types)."""
    if a.dtype == ctype and flat_nhwc(a) is not None:
        return a
    return transposes().contiguous_nhwc(a, ctype)


def filter_input_operand(x: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """NHWC ``x`` as :func:`backprop_filter_direct` reads it: itself when it is in ``ctype``
    and its channels are adjacent or, for at least :data:`FEW_CHANNELS` channels, any whole
    number of elements apart (an NCHW view read in place: 8x128x56x56 stride 2 15.8 -> 12.5
    ms on two cores, the layout copy gone), else :func:`nhwc_operand`."""
    view = flat_pixels(x) if x.dtype == ctype else None
    if view is not None and (view[2] <= 1 or x.shape[3] >= FEW_CHANNELS):
        return x
    return nhwc_operand(x, ctype)


def backprop_filter_direct(g: ConvGeometry, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """``(KH, KW, C, O)`` filter gradient of NHWC ``x`` and ``dy`` (one group, both in the
    compute dtype: :func:`filter_input_operand`, :func:`nhwc_operand`) read in place: each
    tap's operand is a window of ``x`` (column step ``stride_cols`` pixels, row step
    ``stride_rows`` rows)
    against the same rows of ``dy``, so no phase images and no zero-embedded ``dy`` are built;
    taps and pixels that would read padding are clipped away."""
    ci, co = x.shape[3], dy.shape[3]
    if x.size == 0 or dy.size == 0:  # no terms
        return np.zeros((g.filter_rows, g.filter_cols, ci, co), x.dtype)
    fx, fd = flat_pixels(x), flat_nhwc(dy)
    if fx is None or fd is None or (fx[2] > 1 and ci < FEW_CHANNELS):
        raise ValueError("backprop_filter_direct needs adjacent channels (nhwc_operand)")
    (xf, xs, x_channel), (df, ds) = fx, fd
    xf, df = readonly(xf), readonly(df)
    taps = g.filter_rows * g.filter_cols
    row_offs = np.arange(g.filter_rows, dtype=np.int64) * g.dilation_rows - g.pad_top
    col_offs = np.arange(g.filter_cols, dtype=np.int64) * g.dilation_cols - g.pad_left
    tap_rows, tap_cols = (np.repeat(row_offs, g.filter_cols), np.tile(col_offs, g.filter_rows))
    rows = max(1, FILTER_BLOCK // g.out_cols)  # output rows per work item: one K block
    blocks = -(-g.out_rows // rows)
    items = x.shape[0] * blocks
    per_call = max(1, CALL_POSITIONS // (rows * g.out_cols))
    xsa, dsa = np.array(xs, np.int64), np.array(ds, np.int64)
    jit = jit_loops()

    def part(lo: int, hi: int) -> np.ndarray:
        acc = np.zeros(taps * ci * co, x.dtype)
        for w0 in range(lo, hi, per_call):
            checkpoint()
            end = min(hi, w0 + per_call)
            jit.filter_direct(acc, xf, df, w0, end, blocks, rows, xsa, dsa, g.stride_rows,
                              g.stride_cols, g.in_rows, g.in_cols, g.out_rows, g.out_cols,
                              tap_rows, tap_cols, ci, co, x_channel)
        return acc

    positions = rows * g.out_cols  # per work item
    parts = map_ranges(part, items, max(1, parallel.MIN_POSITIONS_PER_RANGE // positions))
    acc = parts[0]
    for p in parts[1:]:
        acc += p
    return acc.reshape(g.filter_rows, g.filter_cols, ci, co)


def shifted(c: np.ndarray, c_base: int, rows: int, a: np.ndarray, bp: np.ndarray, k: int,
             n: int, shifts, a_bases, a_rows: int, lda: int, ldc: int, overwrite: bool) -> bool:
    """:func:`~engine.kernels._compiled.conv_tiles_jit.shifted_products` over destination rows
    ``[0, rows)``, split over cores; ``bp`` the ``(taps, k, n)`` matrices as :func:`tap_panels`.
    True when every row came out finite."""
    jit = jit_loops()
    s, ab = (np.asarray(v, np.int64) for v in (shifts, a_bases))
    a = readonly(a)
    nr = tile_columns(bp.dtype.itemsize)
    mb = row_block(k, bp.dtype.itemsize)

    def part(lo: int, hi: int) -> bool:
        ok = True
        for q0 in range(lo, hi, CALL_POSITIONS):
            checkpoint()
            ok &= jit.shifted_products(c, a, bp, c_base, q0, min(hi, q0 + CALL_POSITIONS), s,
                                       ab, a_rows, lda, ldc, k, n, nr, mb, overwrite)
        return ok

    return all(map_ranges(part, rows))


def flat_pixels(a: np.ndarray) -> tuple[np.ndarray, tuple[int, int, int], int] | None:
    """``a`` (an NHWC view) as a flat array over its extent, its element strides ``(image,
    row, column)`` and its channel step (1 in NHWC, a plane in NCHW); None when a stride is
    negative or not a whole number of elements. Axes of length 1 never step, whatever stride
    NumPy gave them (a contiguous copy may keep any)."""
    it = a.itemsize
    strides = [0 if d == 1 else s for d, s in zip(a.shape, a.strides)]
    if a.size == 0 or any(s % it or s < 0 for s in strides):
        return None
    steps = [s // it for s in strides]
    extent = sum((d - 1) * s for d, s in zip(a.shape, steps)) + 1
    flat = as_strided(a, shape=(extent,), strides=(it,))
    return flat, (steps[0], steps[1], steps[2]), steps[3]


def flat_nhwc(out: np.ndarray) -> tuple[np.ndarray, tuple[int, int, int]] | None:
    """:func:`flat_pixels` of ``out`` when its channels are adjacent (step 0 or 1), else
    None."""
    view = flat_pixels(out)
    if view is None or view[2] > 1:
        return None
    return view[0], view[1]


def conv2d(lay: PhaseLayout, pf: np.ndarray, wc: np.ndarray) -> np.ndarray:
    """Flat ``(L, O)`` forward result of one chunk's C-contiguous phases ``pf``
    ``(sr, sc, L, C)`` and filter ``wc`` ``(KH, KW, C, O)`` (rows from ``T`` on stay 0)."""
    length, ci = pf.shape[2], pf.shape[3]
    co = wc.shape[3]
    t = length - lay.max_offset
    acc = np.empty((length, co), wc.dtype)
    acc[t:] = 0
    taps = lay.taps
    shifted(acc.reshape(-1), 0, t, pf.reshape(-1), tap_panels(wc, taps, False), ci, co,
             [tap.offset for tap in taps],
             [phase(lay, tap.phase_row, tap.phase_col) * length * ci for tap in taps], length,
             ci, co, True)
    return acc


def warm(dtypes: tuple[type[np.floating], ...] = (np.float32, np.float64)) -> None:
    """Compile (or load from numba's disk cache) the loops for ``dtypes``."""
    jit = jit_loops()
    one = np.ones(1, np.int64)
    for dt in dtypes:
        z = np.zeros(8, dt)
        r = readonly(z)  # operands as the calls above pass them
        steps = np.ones(3, np.int64)
        jit.filter_direct(z, r, r, 0, 1, 1, 1, steps, steps, 1, 1, 1, 1, 1, 1, one * 0,
                          one * 0, 1, 1, 1)
        jit.col2im_rows(z, 1, 1, 1, 1, r[:1].reshape(1, 1, 1, 1), r.reshape(1, 8),
                        np.zeros((1, 8), dt), 0, 0, 1, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1)
        for transposed in (False, True):
            jit.pack_panels(np.empty(16, dt), readonly(np.ones((1, 1, 1, 1), dt)), one * 0,
                            one * 0, transposed, 16)
        for overwrite in (False, True):
            jit.shifted_products(z, r, r, 0, 0, 1, one * 0, one * 0, 1, 1, 1, 1, 1, 1, 1,
                                 overwrite)
            jit.segment_products(z, r, r, one * 0, one * 0, 1, 1, 0, 1, one * 0, one * 0, 1,
                                 1, 1, 1, 1, overwrite)
            jit.planes_blocks(z, z, r, z, one, one, one, one, one, one, one, one, 0, 0, 1, 1,
                              1, 1, 1, 1, 1, 1, 1, overwrite)
