"""The depthwise trio compiled with numba (chosen per call by :mod:`engine.kernels.dispatch`, loaded
by :mod:`engine.kernels.accel`; never imported unless numba is in use).

Same math and conventions as :mod:`engine.kernels.compute` (NHWC ``x (N, H, W, C)``, filter
``w (KH, KW, C, M)`` seen as ``(KH, KW, C*M)``, ``dy (N, OH, OW, C*M)``, output channel
``k = c*M + m`` reads input channel ``c``; the kernels see ``C*M`` channels everywhere: the
forward and filter gradient get the input chunk with each channel repeated ``M`` times by a
compiled loop, the input gradient computes ``C*M`` parts and sums each channel's ``M``), as
fused loops over a range of output (or input) rows, the column range of each tap computed once
(no branch inside), the innermost loop over contiguous channels (vectorized by LLVM). The
forward's rows whose every tap reads inside the image sum their interior columns in registers
(3x3 and 5x5 filters: :mod:`engine.kernels._compiled.depthwise_simd`); elsewhere, where three
neighbouring taps of a filter row all read inside the row they share one pass (the forward adds
three products per output element, the filter gradient two output columns into three taps);
near the borders taps go one at a time. The stride-1 input gradient is the forward loops on
``dy`` with the filter flipped; larger strides scatter. Taps that would read padding are
skipped, so padding contributes nothing, not even ``NaN * 0`` (:mod:`engine.kernels.nonfinite`), and
every term is an explicit product: a finite result vouches for the inputs
(:func:`engine.kernels.path_record.vouch_finite`; the forward and input-gradient loops check their
rows while they are in cache). Arithmetic is in the compute dtype (float32 for the half
types); the only fast-math flag is ``contract`` (fused multiply-add; sums keep their order,
NaN/Inf rules stay IEEE). The filter gradient's loops (:mod:`.depthwise_filter`) keep one partial
sum per output row, added into one accumulator per core's range of rows.

The kernels are compiled without ``parallel=True`` and release the GIL (``nogil``); the row
ranges run on the cores in :mod:`engine.kernels.parallel`'s threads, like the NumPy kernels,
not in numba's own thread pool (``prange``). Python calls the kernels once per batch chunk of at most ``chunk_bytes`` of operands
(passed in by the dispatch: :data:`engine.kernels.accel.CHUNK_BYTES`), so :func:`engine.base.cancel.checkpoint` runs
between chunks (and ranges), and extra memory (the chunk's contiguous compute-dtype copies, an
input-gradient chunk and one filter partial per core) stays bounded whatever the batch.
"""

from __future__ import annotations

import numba
import numpy as np

from engine.base.cancel import checkpoint
from engine.kernels import path_record
from engine.kernels._compiled import (
    cache_key,  # noqa: F401 - before any cache=True
    depthwise_filter,
    depthwise_planes,
    transpose,
)
from engine.kernels._compiled.depthwise_simd import (
    UNROLL,
    UNROLL_STRIDED,
    window3x3,
    window5x5,
)
from engine.kernels._compiled.loop_rules import JIT as _JIT
from engine.kernels._compiled.loop_rules import filter_taps as _filter
from engine.kernels._compiled.loop_rules import finite_rows as _finite
from engine.kernels._compiled.loop_rules import inside_all
from engine.kernels._compiled.loop_rules import span as _span
from engine.kernels.buffers import readonly
from engine.kernels.nonfinite import all_finite
from engine.kernels.parallel import MIN_PRODUCTS_PER_RANGE, map_ranges
from engine.shapes.conv import ConvGeometry

#: Multiply-adds below which operands that fit in one core's cache stay on that core.
ONE_CORE_PRODUCTS = 2**23


@numba.jit(**_JIT)
def _forward_tap(out, xr, wv, lo, hi, sc, off):  # pragma: no cover - compiled
    for q in range(lo, hi):
        o = out[q]
        xv = xr[q * sc + off]
        for k in range(out.shape[1]):
            o[k] += xv[k] * wv[k]


@numba.jit(**_JIT)
def _forward(x, w, y, sr, sc, dr, dc, pt, pl, lo_row, hi_row):  # pragma: no cover - compiled
    """Rows ``[lo_row, hi_row)`` of ``y``; True when they are all finite. Taps go three at a
    time where all three read inside the row (one pass over the output row for three taps),
    one at a time near the borders; every element adds its taps in (i, j) order."""
    _, h_in, w_in, ck = x.shape
    kh, kw, _ = w.shape
    _, oh, ow, _ = y.shape
    ok = True
    window = kh == kw and (kh == 3 or kh == 5)
    xf, wf, yf = x.reshape(x.size), w.reshape(w.size), y.reshape(y.size)
    for row in range(lo_row, hi_row):
        n = row // oh
        r = row - n * oh
        out = y[n, r]
        h0 = r * sr - pt
        if window and h0 >= 0 and h0 + (kh - 1) * dr < h_in:
            lo, hi = inside_all(ow, sc, -pl, dc, kw, w_in)
            if hi > lo:  # the columns every tap reads: in registers; the border: per tap
                y0, x0 = ((n * oh + r) * ow + lo) * ck, ((n * h_in + h0) * w_in + lo * sc - pl) * ck
                if kh == 3 and sc == 1:
                    window3x3(yf, xf, wf, y0, x0, hi - lo, ck, sc * ck, dr * w_in * ck, dc * ck,
                              ck, UNROLL)
                elif kh == 3:
                    window3x3(yf, xf, wf, y0, x0, hi - lo, ck, sc * ck, dr * w_in * ck, dc * ck,
                              ck, UNROLL_STRIDED)
                else:
                    window5x5(yf, xf, wf, y0, x0, hi - lo, ck, sc * ck, dr * w_in * ck, dc * ck,
                              ck, UNROLL)
                out[:lo, :] = 0
                out[hi:, :] = 0
                for i in range(kh):
                    xr = x[n, h0 + i * dr]
                    for j in range(kw):
                        off = j * dc - pl
                        la, ha = _span(ow, sc, off, w_in)
                        _forward_tap(out, xr, w[i, j], la, min(ha, lo), sc, off)
                        _forward_tap(out, xr, w[i, j], max(la, hi), ha, sc, off)
                ok &= _finite(out)
                continue
        out[:, :] = 0
        for i in range(kh):
            h = r * sr + i * dr - pt
            if h < 0 or h >= h_in:
                continue
            xr = x[n, h]
            wi = w[i]
            j0 = 0
            while j0 + 3 <= kw:
                oa = j0 * dc - pl
                lo, hi = inside_all(ow, sc, oa, dc, 3, w_in)
                for j in range(3):  # border columns (each meets only these taps), in tap order
                    off = oa + j * dc
                    la, ha = _span(ow, sc, off, w_in)
                    _forward_tap(out, xr, wi[j0 + j], la, min(ha, lo), sc, off)
                    _forward_tap(out, xr, wi[j0 + j], max(la, hi), ha, sc, off)
                wa, wb, wc = wi[j0], wi[j0 + 1], wi[j0 + 2]
                for q in range(lo, hi):
                    o = out[q]
                    v = q * sc + oa
                    xa, xb, xc = xr[v], xr[v + dc], xr[v + 2 * dc]
                    for k in range(ck):
                        o[k] = o[k] + xa[k] * wa[k] + xb[k] * wb[k] + xc[k] * wc[k]
                j0 += 3
            for j in range(j0, kw):
                off = j * dc - pl
                lo, hi = _span(ow, sc, off, w_in)
                _forward_tap(out, xr, wi[j], lo, hi, sc, off)
        ok &= _finite(out)
    return ok


@numba.jit(**_JIT)
def _input_grad(dy, w, dx, sr, sc, dr, dc, pt, pl, lo_row, hi_row):  # pragma: no cover - compiled
    """Rows ``[lo_row, hi_row)`` of ``dx`` by scattering each ``dy`` column into the columns
    it reaches (strided case); True when they are all finite."""
    _, h_in, w_in, ck = dx.shape
    _, oh, ow, _ = dy.shape
    kh, kw, _ = w.shape
    ok = True
    for row in range(lo_row, hi_row):
        n = row // h_in
        h = row - n * h_in
        out = dx[n, h]
        out[:, :] = 0
        for i in range(kh):
            t = h + pt - i * dr
            if t < 0 or t % sr != 0 or t // sr >= oh:
                continue
            gr = dy[n, t // sr]
            for j in range(kw):
                off = j * dc - pl
                lo, hi = _span(ow, sc, off, w_in)
                wv = w[i, j]
                for q in range(lo, hi):
                    v = q * sc + off
                    for k in range(ck):
                        out[v, k] += gr[q, k] * wv[k]
        ok &= _finite(out)
    return ok


KERNELS = {"forward": _forward, "filter": depthwise_filter.filter_grad, "input": _input_grad}


def _attrs(g: ConvGeometry) -> tuple[int, ...]:
    return (g.stride_rows, g.stride_cols, g.dilation_rows, g.dilation_cols, g.pad_top,
            g.pad_left)


def _chunks(g: ConvGeometry, ctype: np.dtype, chunk_bytes: int | None):
    """Batch slices whose operands (the input's channels repeated ``M`` times) take at most
    ``chunk_bytes`` in ``ctype`` (None: the whole batch at once)."""
    per = (g.in_rows * g.in_cols + g.out_rows * g.out_cols) * g.out_depth
    step = g.batch if chunk_bytes is None else max(1, chunk_bytes // max(1, per * ctype.itemsize))
    step = max(1, step)
    for start in range(0, g.batch, step):
        checkpoint()
        yield slice(start, min(g.batch, start + step))


def _input_chunk(g: ConvGeometry, x: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Contiguous ``ctype`` copy of NHWC ``x`` with each channel repeated ``M`` times (output
    channel ``c*M + m`` reads channel ``c``); ``x`` itself when it already is that. Read-only,
    as every operand of these loops (:func:`engine.kernels.buffers.readonly`)."""
    xc = np.ascontiguousarray(x, ctype)
    if g.filter_out == 1:
        return readonly(xc)
    out = np.empty(xc.shape[:3] + (xc.shape[3] * g.filter_out,), ctype)
    transpose.repeat_channels(readonly(xc.reshape(-1, xc.shape[3])), out.reshape(-1, out.shape[3]))
    return readonly(out)


def warm(dtypes: tuple[type[np.floating], ...] = (np.float32, np.float64)) -> None:
    """Compile (or load) the helpers the tiny problems of :func:`engine.kernels.accel.warm_up`
    do not reach (the channel repeat of ``M > 1``)."""
    for dt in dtypes:
        transpose.repeat_channels(readonly(np.ones((1, 1), dt)), np.empty((1, 2), dt))


def _rows(count: int, row_products: int, call, operand_bytes: int) -> list:
    """``call(lo, hi)`` over ``[0, count)`` rows of ``row_products`` multiply-adds each, split
    over the cores (engine.kernels.parallel's threads: the kernels release the GIL) in ranges
    of at least :data:`~engine.kernels.parallel.MIN_PRODUCTS_PER_RANGE`; on one core when the
    rows' operands (``operand_bytes``) fit in one core's L2 and they take fewer than
    :data:`ONE_CORE_PRODUCTS` (the second core would first have to fetch its operands)."""
    from engine.kernels import cpu

    if operand_bytes <= cpu.host().l2 and count * row_products < ONE_CORE_PRODUCTS:
        return [call(0, count)] if count else []
    return map_ranges(call, count, -(-MIN_PRODUCTS_PER_RANGE // max(1, row_products)))


def _row_products(g: ConvGeometry, input_rows: bool = False) -> int:
    """Multiply-adds of one output row (every tap, every channel), or of one input row of the
    input gradient (its share of the taps at a stride)."""
    taps = g.filter_rows * g.filter_cols
    if input_rows:
        return g.in_cols * g.out_depth * max(1, taps // (g.stride_rows * g.stride_cols))
    return g.out_cols * g.out_depth * taps


def _vouch(finite: bool) -> None:
    """These loops compute every term as an explicit product added into its sum (padding taps
    are skipped, not multiplied by zero), so a finite result vouches for the inputs
    (:func:`engine.kernels.path_record.vouch_finite`)."""
    if finite:
        path_record.vouch_finite()


def depthwise_conv2d(g: ConvGeometry, x: np.ndarray, w: np.ndarray, ctype: np.dtype,
                     chunk_bytes: int | None = None) -> np.ndarray:
    """Forward ``(N, OH, OW, C*M)`` in ``ctype`` of NHWC ``x`` (a view of the result planes
    when ``x`` is a view of NCHW planes in ``ctype``: :mod:`.depthwise_planes`)."""
    if g.data_format == "NCHW" and (xp := depthwise_planes.planes(x, ctype)) is not None:
        y, finite = depthwise_planes.forward(g, xp, w, ctype)
        _vouch(finite)
        return y.transpose(0, 2, 3, 1)
    y = np.empty((g.batch, g.out_rows, g.out_cols, g.out_depth), ctype)
    wc = _filter(g, w, ctype)
    finite = True
    for sl in _chunks(g, ctype, chunk_bytes):
        xc, yc = _input_chunk(g, x[sl], ctype), y[sl]
        finite &= all(_rows(xc.shape[0] * g.out_rows, _row_products(g),
                            lambda lo, hi: _forward(xc, wc, yc, *_attrs(g), lo, hi),  # noqa: B023
                            xc.nbytes + yc.nbytes))
    _vouch(finite)
    return y


def depthwise_conv2d_backprop_filter(g: ConvGeometry, x: np.ndarray, dy: np.ndarray,
                                     ctype: np.dtype, chunk_bytes: int | None = None) -> np.ndarray:
    """Filter gradient ``(KH, KW, C, M)`` in ``ctype`` of NHWC ``x`` and ``dy``: one partial
    sum per core's range of output rows (itself a sum of per-row partial sums); NCHW planes in
    ``ctype`` are read in place (:mod:`.depthwise_planes`)."""
    shape = (g.filter_rows, g.filter_cols, g.in_depth, g.filter_out)
    if g.data_format == "NCHW" and (
            (xp := depthwise_planes.planes(x, ctype)) is not None
            and (dyp := depthwise_planes.planes(dy, ctype)) is not None):
        dw = depthwise_planes.backprop_filter(g, xp, dyp, ctype)
        _vouch(all_finite(dw))
        return dw.reshape(shape)
    ck = g.out_depth
    dw = np.zeros((g.filter_rows, g.filter_cols, ck), ctype)

    def part(xc, dyc, lo, hi):
        acc = np.empty((g.filter_rows, g.filter_cols, ck), ctype)
        depthwise_filter.filter_grad(xc, dyc, acc, *_attrs(g), lo, hi,
                                     depthwise_filter.band(g, ctype))
        return acc

    for sl in _chunks(g, ctype, chunk_bytes):
        xc = _input_chunk(g, x[sl], ctype)
        dyc = readonly(np.ascontiguousarray(dy[sl], ctype))
        for acc in _rows(xc.shape[0] * g.out_rows, _row_products(g),
                         lambda lo, hi: part(xc, dyc, lo, hi),  # noqa: B023
                         xc.nbytes + dyc.nbytes):
            dw += acc
    _vouch(all_finite(dw))  # a non-finite term would have made its partial sums non-finite
    return dw.reshape(shape)


def _input_rows(g: ConvGeometry, dyc: np.ndarray, wc: np.ndarray, dst: np.ndarray) -> bool:
    """``dst`` = the input gradient of the chunk ``dyc``; True when finite. Stride 1 is the
    forward loops on ``dy`` with the filter flipped (``dx[h] = sum_i dy[h + pt - i*dr] w[i]``
    is ``sum_i' dy[h + i'*dr - ((KH-1)*dr - pt)] w[KH-1-i']``, the same for columns); larger
    strides scatter each ``dy`` column."""
    total = dyc.shape[0] * g.in_rows
    if g.stride_rows == 1 and g.stride_cols == 1:
        flipped = readonly(np.ascontiguousarray(wc[::-1, ::-1]))
        pt = (g.filter_rows - 1) * g.dilation_rows - g.pad_top
        pl = (g.filter_cols - 1) * g.dilation_cols - g.pad_left
        attrs = (1, 1, g.dilation_rows, g.dilation_cols, pt, pl)
        return all(_rows(total, _row_products(g, input_rows=True),
                         lambda lo, hi: _forward(dyc, flipped, dst, *attrs, lo, hi),
                         dyc.nbytes + dst.nbytes))
    return all(_rows(total, _row_products(g, input_rows=True),
                     lambda lo, hi: _input_grad(dyc, wc, dst, *_attrs(g), lo, hi),
                     dyc.nbytes + dst.nbytes))


def depthwise_conv2d_backprop_input(g: ConvGeometry, dy: np.ndarray, w: np.ndarray,
                                    ctype: np.dtype, out: np.ndarray,
                                    chunk_bytes: int | None = None) -> None:
    """Input gradient written into NHWC ``out`` (any dtype, any strides). With ``M > 1`` each
    output channel's part is computed, then the ``M`` parts of a channel are summed. NCHW
    planes in ``ctype`` (``dy`` and ``out``) are read and written in place
    (:mod:`.depthwise_planes`)."""
    if g.data_format == "NCHW" and (
            (dyp := depthwise_planes.planes(dy, ctype)) is not None
            and (outp := depthwise_planes.planes(out, ctype)) is not None):
        _vouch(depthwise_planes.backprop_input(g, dyp, w, ctype, outp))
        return
    wc = _filter(g, w, ctype)
    m = g.filter_out
    direct = m == 1 and out.dtype == ctype and out.flags.c_contiguous
    finite = True
    for sl in _chunks(g, ctype, chunk_bytes):
        dyc = readonly(np.ascontiguousarray(dy[sl], ctype))
        dst = out[sl] if direct else np.empty(
            (dyc.shape[0], g.in_rows, g.in_cols, g.out_depth), ctype)
        finite &= _input_rows(g, dyc, wc, dst)
        if not direct:
            out[sl] = dst if m == 1 else _sum_parts(dst.reshape(*dst.shape[:3], g.in_depth, m))
    _vouch(finite)


def _sum_parts(parts: np.ndarray) -> np.ndarray:
    """``parts.sum(axis=-1)`` in order, by whole-array adds of the strided parts (not NumPy's
    reduction over a trailing axis)."""
    total = parts[..., 0] + parts[..., 1]
    for j in range(2, parts.shape[-1]):
        total += parts[..., j]
    return total
