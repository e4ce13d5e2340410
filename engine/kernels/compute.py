"""Vectorized NHWC compute of the conv ops on the phase layout of :mod:`engine.kernels.layout`.

Conventions: ``x`` is the input ``(N, H, W, C)``, ``w`` the filter ``(KH, KW, C, O)`` (HWIO; for
depthwise ``(KH, KW, C, M)``), ``dy`` the output gradient ``(N, OH, OW, O)``. With the flat
phase images ``P`` of ``x`` and the zero-embedded flat ``E`` of ``dy`` (``T`` positions each):

- conv2d:          ``Y[p]      = sum_t P_t[p + off_t] @ w_t``
- backprop filter: ``dw_t      = P_t[off_t : off_t + T].T @ E[:T]``
- backprop input:  ``D_t[p + off_t] += E[p] @ w_t.T``, then phases merged back into ``dx``;
  at stride 1 gathered instead: ``D[p] = sum_a R[p - a*row_step] @ W_a`` per cache-sized
  block of ``p``, ``R`` one tap row's sources (:func:`_backprop_input_gather`)

Each is one matrix product per filter tap on shifted views (no copies), or, when the channel
count is too small for a per-tap product to be efficient, one product per cache-sized block of
a transposed im2col matrix built from per-channel ("planar") phase images (one strided copy per
phase). Filter-gradient sums are split over the cores (BLAS parallelizes their thin ``(C, O)``
products poorly) and walked in cache-sized blocks. The depthwise ops skip the phase layout
(:mod:`engine.kernels.depthwise_tiles`; their tile size is :data:`DEPTHWISE_TILE_POSITIONS`,
with the other chunk sizes here). Batches are processed in chunks so extra memory stays bounded
whatever the batch size. Python loops run only over
taps, stride phases, batch chunks and cache blocks/tiles of positions (each a large vectorized
call), never element by element. Each chunk, tap and block/tile starts with
:func:`engine.base.cancel.checkpoint`, so a cancelled run stops within one of them. This module
imports nothing compiled: :mod:`engine.kernels.dispatch` decides per call whether these loops or
the compiled ones (:mod:`engine.kernels.tiled`) run, and this module stays the reference they are
tested against.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from engine.base.cancel import checkpoint
from engine.kernels.buffers import zeroed
from engine.kernels.gemm import gemm_acc
from engine.kernels.layout import PhaseLayout
from engine.kernels.parallel import map_ranges

#: Extra memory one batch chunk may use for its buffers.
CHUNK_BYTES = 96 * 2**20
#: Positions per cache block of the per-tap filter-gradient products.
FILTER_GRAD_BLOCK = 2048
#: Output positions per cache tile of the depthwise filter gradient.
DEPTHWISE_TILE_POSITIONS = 2048
#: Below this many input channels the per-tap products are too thin: use im2col / col2im.
IM2COL_MAX_CHANNELS = 16
#: Bytes of one core's gathered block of the stride-1 input gradient (stays in cache).
GATHER_BLOCK_BYTES = 2**21
#: ... but at least this many destinations per block (smaller products waste BLAS calls).
GATHER_MIN_BLOCK = 64
#: False: the stride-1 input gradient uses the per-tap products too (tests of that path).
GATHER_INPUT_GRADIENT = True


def chunks(batch: int, per_image_bytes: int):
    """Batch slices whose buffers stay within :data:`CHUNK_BYTES` (read at each call)."""
    step = max(1, CHUNK_BYTES // max(1, per_image_bytes))
    for start in range(0, batch, step):
        checkpoint()
        yield slice(start, min(batch, start + step))


def per_image_bytes(lay: PhaseLayout, channels: int, extra: int, itemsize: int) -> int:
    g = lay.g
    phases = g.stride_rows * g.stride_cols * lay.hq * lay.wq * channels
    return (phases + lay.hq * lay.wq * extra) * itemsize


def flat_phases(lay: PhaseLayout, x: np.ndarray, ctype: np.dtype, planar: bool = False):
    """Phase images flattened over (N, Hq, Wq): ``(sr, sc, L, C)``, or ``(sr, sc, C, L)``."""
    p = lay.split_input(x, ctype, planar)
    return p.reshape(*p.shape[:3], -1) if planar else p.reshape(*p.shape[:2], -1, p.shape[-1])


def _cols_t(lay: PhaseLayout, pp: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Transposed im2col ``(taps * C, hi - lo)`` from planar phases, rows in
    :attr:`PhaseLayout.grid_order`: one copy per phase from a strided view of its grid."""
    c, n = pp.shape[2], hi - lo
    cols = np.empty((len(lay.taps), c, n), pp.dtype)
    k = 0
    for grid in lay.grids:
        plane = pp[grid.phase_row, grid.phase_col, :, grid.offset + lo :]
        s = plane.strides
        src = as_strided(plane, shape=(grid.rows, grid.cols, c, n),
                         strides=(grid.row_step * s[1], grid.col_step * s[1], s[0], s[1]),
                         writeable=False)
        cols[k : k + len(grid.taps)].reshape(grid.rows, grid.cols, c, n)[...] = src
        k += len(grid.taps)
    return cols.reshape(-1, n)


def _dest_span(lo: int, hi: int, offset: int, t: int) -> tuple[int, int]:
    """Source positions ``[p0, p1)`` whose shifted destination ``p + offset`` is in ``[lo, hi)``."""
    return max(0, lo - offset), max(0, min(t, hi - offset))


def few_channels(ci: int) -> bool:
    """True below :data:`IM2COL_MAX_CHANNELS` input channels (per group): im2col / col2im."""
    return ci < IM2COL_MAX_CHANNELS


def conv2d(lay: PhaseLayout, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Forward conv ``(N, OH, OW, O)`` in ``ctype`` (one group)."""
    g = lay.g
    n, ci, co = x.shape[0], x.shape[3], w.shape[3]
    y = np.empty((n, g.out_rows, g.out_cols, co), ctype)
    wc = np.ascontiguousarray(w, ctype)
    few = few_channels(ci)
    per = per_image_bytes(lay, ci * (1 + few * len(lay.taps)), co, ctype.itemsize)
    for sl in chunks(n, per):
        pf = flat_phases(lay, x[sl], ctype, few)
        acc = _conv2d_chunk(lay, pf, wc, few)
        y[sl] = acc.reshape(-1, lay.hq, lay.wq, co)[:, : g.out_rows, : g.out_cols]
    return y


def _conv2d_chunk(lay: PhaseLayout, pf: np.ndarray, wc: np.ndarray, few: bool) -> np.ndarray:
    """Flat ``(L, O)`` forward result of one batch chunk's phases ``pf``."""
    length = pf.shape[-1] if few else pf.shape[2]
    t = length - lay.max_offset
    co = wc.shape[3]
    acc = zeroed((length, co), wc.dtype)
    if few:  # one product on the transposed im2col matrix, split over cores
        wg = wc.reshape(len(lay.taps), -1, co)[list(lay.grid_order)].reshape(-1, co)

        def part(lo: int, hi: int) -> None:
            np.matmul(_cols_t(lay, pf, lo, hi).T, wg, out=acc[lo:hi])

        map_ranges(part, t)
    else:  # one product per tap on shifted views, accumulated in place by BLAS
        for tap in lay.taps:
            checkpoint()
            a = pf[tap.phase_row, tap.phase_col, tap.offset : tap.offset + t]
            gemm_acc(acc[:t], a, wc[tap.row, tap.col])
    return acc


def conv2d_backprop_filter(
    lay: PhaseLayout, x: np.ndarray, dy: np.ndarray, ctype: np.dtype
) -> np.ndarray:
    """Filter gradient ``(KH, KW, C, O)`` in ``ctype`` (one group)."""
    g = lay.g
    n, ci, co = x.shape[0], x.shape[3], dy.shape[3]
    dw = np.zeros((g.filter_rows, g.filter_cols, ci, co), ctype)
    few = few_channels(ci)
    per = per_image_bytes(lay, ci, co, ctype.itemsize)  # im2col blocks are cache-sized
    for sl in chunks(n, per):
        pf = flat_phases(lay, x[sl], ctype, few)
        e = lay.embed_output(dy[sl], ctype).reshape(-1, co)
        dw += _backprop_filter_chunk(lay, pf, e[: e.shape[0] - lay.max_offset], few)
    return dw


def _backprop_filter_chunk(lay: PhaseLayout, pf: np.ndarray, e: np.ndarray, few: bool):
    """One chunk's filter gradient; the sum over its ``T`` positions is split over cores
    (each range gives a partial ``dw``), as BLAS parallelizes thin ``(C, O)`` products poorly."""
    g = lay.g
    shape = (g.filter_rows, g.filter_cols, pf.shape[2] if few else pf.shape[3], e.shape[1])
    part = _filter_grad_im2col if few else _filter_grad_per_tap
    partials = map_ranges(lambda lo, hi: part(lay, pf, e, lo, hi, shape), e.shape[0])
    return sum(partials, np.zeros(shape, e.dtype))


def _filter_grad_per_tap(lay, pf, e, lo, hi, shape) -> np.ndarray:
    """``dw_t = sum_p P_t[p + off_t].T @ E[p]`` over ``[lo, hi)``, in cache-sized blocks that
    every tap reuses."""
    out = np.zeros(shape, e.dtype)
    tmp = np.empty(shape[2:], e.dtype)
    for b0 in range(lo, hi, FILTER_GRAD_BLOCK):
        checkpoint()
        b1 = min(hi, b0 + FILTER_GRAD_BLOCK)
        for tap in lay.taps:
            a = pf[tap.phase_row, tap.phase_col, tap.offset + b0 : tap.offset + b1]
            out[tap.row, tap.col] += np.matmul(a.T, e[b0:b1], out=tmp)
    return out


def _filter_grad_im2col(lay, pf, e, lo, hi, shape) -> np.ndarray:
    """The same sum as one product per cache-sized block of the transposed im2col matrix
    (planar phases ``pf``); its rows come in grid order and are put back in tap order."""
    taps, co = len(lay.taps), shape[3]
    acc = np.zeros((taps * shape[2], co), e.dtype)
    tmp = np.empty_like(acc)
    for b0 in range(lo, hi, FILTER_GRAD_BLOCK):
        checkpoint()
        b1 = min(hi, b0 + FILTER_GRAD_BLOCK)
        acc += np.matmul(_cols_t(lay, pf, b0, b1), e[b0:b1], out=tmp)
    out = np.empty((taps, shape[2], co), e.dtype)
    out[list(lay.grid_order)] = acc.reshape(taps, shape[2], co)
    return out.reshape(shape)


def conv2d_backprop_input(lay: PhaseLayout, dy: np.ndarray, w: np.ndarray, ctype: np.dtype,
                          out: np.ndarray, cleared: bool = True) -> None:
    """Input gradient written into NHWC ``out`` (one group), zeroed unless ``cleared`` is
    False: then it is zeroed here, except where every element is written without being read
    (the gathered stride-1 products straight into a C-contiguous ``out`` in the compute
    dtype), which saves a pass over the result."""
    g = lay.g
    n, ci, co = dy.shape[0], w.shape[2], w.shape[3]
    wt = np.ascontiguousarray(w.astype(ctype, copy=False).transpose(0, 1, 3, 2))  # (KH,KW,O,C)
    few = few_channels(ci)
    gather = not few and input_strategy(lay, ci) == "gather"
    direct = not few and lay.identity and out.dtype == ctype and out.flags.c_contiguous
    gathered = (gather and not direct and out.dtype == ctype and out.flags.c_contiguous
                and _gathers_every_pixel(lay))
    whole = gathered or (direct and gather)
    if not cleared and not whole:
        out[...] = 0
    per = per_image_bytes(lay, ci * (1 + few * len(lay.taps)), co, ctype.itemsize)
    sr, sc = g.stride_rows, g.stride_cols
    for sl in chunks(n, per):
        nb = sl.stop - sl.start
        if gather:
            # E after max_offset zero rows: the gather reads sources before position 0
            src = lay.embed_output_flat(dy[sl], ctype, lay.max_offset)
            e = src[lay.max_offset : src.shape[0] - lay.max_offset]
        else:
            src = None
            e = lay.embed_output(dy[sl], ctype).reshape(-1, co)
            e = e[: e.shape[0] - lay.max_offset]
        if gathered:  # the products of the image's pixels straight into the result
            assert src is not None  # gathered implies gather
            _backprop_input_gather_pixels(lay, src, wt, out[sl])
            continue
        into = out[sl].reshape(1, 1, -1, ci) if direct else None
        d = _backprop_input_chunk(lay, e, wt, few, into, src)
        if direct:  # accumulated straight into the result
            continue
        if few:
            lay.merge_input(d.reshape(sr, sc, ci, nb, lay.hq, lay.wq), out[sl], planar=True)
        else:
            lay.merge_input(d.reshape(sr, sc, nb, lay.hq, lay.wq, ci), out[sl])


def input_strategy(lay: PhaseLayout, channels: int) -> str:
    """How :func:`conv2d_backprop_input` computes geometry ``lay`` with ``channels`` input
    channels per group: ``col2im`` (few channels), ``gather`` (stride 1, several taps: one
    product with ``K = taps * O`` per block of destinations) or ``per-tap`` products."""
    g = lay.g
    if few_channels(channels):
        return "col2im"
    if GATHER_INPUT_GRADIENT and g.stride_rows == g.stride_cols == 1 and len(lay.taps) > 1:
        return "gather"
    return "per-tap"


def gather_block(lay: PhaseLayout, o: int, itemsize: int) -> int:
    """Destinations per gathered block: :data:`GATHER_BLOCK_BYTES` of ``(B, taps * O)``."""
    return max(GATHER_MIN_BLOCK, GATHER_BLOCK_BYTES // max(1, len(lay.taps) * o * itemsize))


def _grid_filters(lay: PhaseLayout, wt: np.ndarray) -> np.ndarray:
    """``W_a`` of every row ``a`` of the (single) tap grid: its taps' ``(O, C)`` filters
    stacked to ``(cols * O, C)``, from ``wt`` ``(KH, KW, O, C)``."""
    (grid,) = lay.grids
    co, ci = wt.shape[2], wt.shape[3]
    return wt.reshape(len(lay.taps), co, ci)[list(grid.taps)].reshape(grid.rows, -1, ci)


def _grid_products(dst: np.ndarray, rows: np.ndarray, ws: np.ndarray, shifts) -> None:
    """``dst = sum_a rows[shifts[a] : shifts[a] + len(dst)] @ ws[a]``: the first product
    writes ``dst``, the others add in place (BLAS, ``beta = 1``)."""
    m = dst.shape[0]
    for a, shift in enumerate(shifts):
        if a == 0:
            np.matmul(rows[shift : shift + m], ws[a], out=dst)
        else:
            gemm_acc(dst, rows[shift : shift + m], ws[a])


def _backprop_input_gather(lay: PhaseLayout, e: np.ndarray, wt: np.ndarray,
                           into: np.ndarray | None, src: np.ndarray | None = None) -> np.ndarray:
    """Stride-1 ``D[p] = sum_t E[p - off_t] @ w_t.T`` in cache-sized blocks of destinations
    ``p``, one product per row ``a`` of the tap grid: ``D[p] += R[p - a*row_step] @ W_a`` with
    ``R[q] = [E[q - b*col_step] for b in grid columns]`` gathered once per block (one strided
    copy of the zero-headed ``E``, a third of the full im2col for a 3x3 filter: every grid row
    reads ``R`` at its own row shift) and ``W_a`` the grid row's stacked ``(cols * O, C)``
    filter. The first row's product writes ``D``, the others add in place (BLAS, ``beta = 1``).
    Blocks are split over cores."""
    (grid,) = lay.grids
    t, co, ci = e.shape[0], wt.shape[2], wt.shape[3]
    head = lay.max_offset
    length = t + head
    d = into if into is not None else np.empty((1, 1, length, ci), e.dtype)
    dflat = d.reshape(length, ci)
    if src is None:  # E between max_offset zero rows (embed_output_flat's layout)
        src = np.zeros((2 * head + t, co), e.dtype)
        src[head : head + t] = e
    ws = _grid_filters(lay, wt)
    block = gather_block(lay, co, e.itemsize)
    reach = (grid.rows - 1) * grid.row_step  # extra R rows the grid rows shift over
    s0, s1 = src.strides

    def part(lo: int, hi: int) -> None:
        r = np.empty((block + reach, grid.cols, co), e.dtype)
        for b0 in range(lo, hi, block):
            checkpoint()
            b1 = min(hi, b0 + block)
            first = src[head - grid.offset - reach + b0 :]  # R[0]: column 0 of the last row
            view = as_strided(first, shape=(b1 - b0 + reach, grid.cols, co),
                              strides=(s0, -grid.col_step * s0, s1), writeable=False)
            rb = r[: b1 - b0 + reach]
            rb[...] = view
            _grid_products(dflat[b0:b1], rb.reshape(b1 - b0 + reach, -1), ws,
                           [reach - a * grid.row_step for a in range(grid.rows)])

    map_ranges(part, length, block)  # one-thread BLAS per core: small products stay cheap
    return d


def _gathers_every_pixel(lay: PhaseLayout) -> bool:
    """True when :func:`_backprop_input_gather_pixels` computes ``lay``: one phase whose rows
    and columns are every input row and column, and tap-grid rows whole phase rows apart."""
    g = lay.g
    spans = list(lay.spans())
    if len(spans) != 1 or len(lay.grids) != 1:
        return False
    _, _, _, (ri, cols) = spans[0]
    return (ri == slice(0, g.in_rows, 1) and cols == slice(0, g.in_cols, 1)
            and lay.grids[0].row_step % lay.wq == 0)


def _backprop_input_gather_pixels(lay: PhaseLayout, src: np.ndarray, wt: np.ndarray,
                                  out: np.ndarray) -> None:
    """:func:`_backprop_input_gather` for the input's pixels only, written straight into the
    C-contiguous NHWC ``out`` (:func:`_gathers_every_pixel` holds): blocks of whole input rows
    of one image, ``R`` gathered for those rows' pixels (and the rows the tap grid reaches
    above them), so each grid row's product is a block of ``out`` itself; no padded phase
    positions are computed and no phase buffer is merged (on 8x56x56x64 SAME: 14.1 -> 11.3-11.9
    ms)."""
    (grid,) = lay.grids
    (_, _, (rs, cs), (ri, _)), = lay.spans()
    g = lay.g
    co, ci = wt.shape[2], wt.shape[3]
    rows, width = g.in_rows, g.in_cols
    step = grid.row_step // lay.wq  # phase rows from one grid row to the next
    reach = (grid.rows - 1) * step
    ws = _grid_filters(lay, wt)
    per_block = max(1, gather_block(lay, co, src.itemsize) // width)
    s0, s1 = src.strides
    origin = lay.max_offset - grid.offset + (rs.start - ri.start - reach) * lay.wq + cs.start

    def part(lo: int, hi: int) -> None:
        r = np.empty(((per_block + reach) * width, grid.cols, co), src.dtype)
        t = lo
        while t < hi:
            checkpoint()
            n, h0 = divmod(t, rows)
            h1 = min(rows, h0 + per_block, h0 + hi - t)
            m = h1 - h0
            first = src[origin + (n * lay.hq + h0) * lay.wq:]
            view = as_strided(first, shape=(m + reach, width, grid.cols, co),
                              strides=(lay.wq * s0, s0, -grid.col_step * s0, s1), writeable=False)
            rb = r[: (m + reach) * width]
            rb.reshape(m + reach, width, grid.cols, co)[...] = view
            _grid_products(out[n, h0:h1].reshape(m * width, ci),
                           rb.reshape((m + reach) * width, -1), ws,
                           [(reach - a * step) * width for a in range(grid.rows)])
            t += m

    map_ranges(part, out.shape[0] * rows, per_block)


def _backprop_input_chunk(lay: PhaseLayout, e: np.ndarray, wt: np.ndarray, few: bool,
                          into: np.ndarray | None = None, src: np.ndarray | None = None):
    """Flat phase gradients of one chunk: ``(sr, sc, C, L)`` if ``few`` else ``(sr, sc, L, C)``
    (accumulated into the zeroed ``into`` when given)."""
    g = lay.g
    t, ci, co = e.shape[0], wt.shape[3], wt.shape[2]
    length = t + lay.max_offset
    if not few and input_strategy(lay, ci) == "gather":
        return _backprop_input_gather(lay, e, wt, into, src)
    if not few:  # one product per tap accumulated in place into the shifted phase view
        d = into if into is not None else zeroed(
            (g.stride_rows, g.stride_cols, length, ci), e.dtype)
        for tap in lay.taps:
            checkpoint()
            dst = d[tap.phase_row, tap.phase_col, tap.offset : tap.offset + t]
            gemm_acc(dst, e, wt[tap.row, tap.col])
        return d
    # col2im: one product, then contiguous per-tap plane adds split over cores by destination
    d = zeroed((g.stride_rows, g.stride_cols, ci, length), e.dtype)
    cols = (wt.transpose(0, 1, 3, 2).reshape(-1, co) @ e.T).reshape(len(lay.taps), ci, t)

    def part(lo: int, hi: int) -> None:
        for k, tap in enumerate(lay.taps):
            p0, p1 = _dest_span(lo, hi, tap.offset, t)
            if p1 > p0:
                dst = d[tap.phase_row, tap.phase_col, :, tap.offset + p0 : tap.offset + p1]
                dst += cols[k, :, p0:p1]

    map_ranges(part, length)
    return d
