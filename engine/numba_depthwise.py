"""The depthwise trio compiled with numba (used through :mod:`engine.accel`; never imported
unless numba is in use).

Same math and conventions as :mod:`engine.conv_compute` (NHWC ``x (N, H, W, C)``, filter
``w (KH, KW, C, M)`` seen as ``(KH, KW, C*M)``, ``dy (N, OH, OW, C*M)``, output channel
``k = c*M + m`` reads input channel ``c``; the kernels see ``C*M`` channels everywhere: the
forward and filter gradient get the input chunk with each channel repeated ``M`` times, the
input gradient computes ``C*M`` parts and sums each channel's ``M``), as fused loops: one output (or input) row per
parallel iteration, the column range of each tap computed once (no branch inside), the
innermost loop over contiguous channels (vectorized by LLVM). Taps that
would read padding are skipped, so padding contributes nothing, not even ``NaN * 0``
(:mod:`engine.nonfinite`). Arithmetic is in the compute dtype (float32 for the half types), no
``fastmath`` (IEEE order and NaN/Inf rules kept). The filter gradient keeps one partial sum per
output row, added into one accumulator per block of rows (a few blocks per core), so its
rounding error grows with the rows per block, not with the batch.

Python calls the compiled kernels once per batch chunk of at most :data:`CHUNK_BYTES` of
operands, so :func:`engine.cancel.checkpoint` runs between chunks and extra memory (the chunk's
contiguous compute-dtype copies, a chunk result and the per-block filter partials) stays
bounded whatever the batch. The kernels release the GIL; one lock serializes them because
numba's default thread pool must not be entered from two threads at once.
"""

from __future__ import annotations

import threading

import numba
import numpy as np
from numba import prange

from engine.accel import BLOCKS_PER_CORE, CHUNK_BYTES
from engine.cancel import checkpoint
from engine.conv_shapes import ConvGeometry
from engine.parallel import workers

_lock = threading.Lock()
_JIT = {"nopython": True, "parallel": True, "nogil": True, "cache": True}


@numba.njit(inline="always")
def _span(count, step, offset, size):  # pragma: no cover - compiled
    """``[lo, hi)``: the ``q < count`` with ``0 <= q*step + offset < size``."""
    lo = 0 if offset >= 0 else (step - 1 - offset) // step
    last = size - 1 - offset
    hi = min(count, last // step + 1) if last >= 0 else 0
    return lo, max(lo, hi)


@numba.jit(**_JIT)
def _forward(x, w, y, sr, sc, dr, dc, pt, pl):  # pragma: no cover - compiled
    n_img, h_in, w_in, ck = x.shape
    kh, kw, _ = w.shape
    _, oh, ow, _ = y.shape
    for row in prange(n_img * oh):
        n = row // oh
        r = row - n * oh
        out = y[n, r]
        out[:, :] = 0
        for i in range(kh):
            h = r * sr + i * dr - pt
            if h < 0 or h >= h_in:
                continue
            xr = x[n, h]
            for j in range(kw):
                off = j * dc - pl
                lo, hi = _span(ow, sc, off, w_in)
                wv = w[i, j]
                for q in range(lo, hi):
                    v = q * sc + off
                    for k in range(ck):
                        out[q, k] += xr[v, k] * wv[k]


@numba.jit(**_JIT)
def _filter_grad(x, dy, parts, sr, sc, dr, dc, pt, pl):  # pragma: no cover - compiled
    n_img, h_in, w_in, ck = x.shape
    _, oh, ow, _ = dy.shape
    blocks, kh, kw, _ = parts.shape
    rows = n_img * oh
    for b in prange(blocks):
        acc = np.zeros((kh, kw, ck), parts.dtype)
        tmp = np.empty((kh, kw, ck), parts.dtype)
        for row in range(rows * b // blocks, rows * (b + 1) // blocks):
            n = row // oh
            r = row - n * oh
            tmp[:, :, :] = 0
            gr = dy[n, r]
            for i in range(kh):
                h = r * sr + i * dr - pt
                if h < 0 or h >= h_in:
                    continue
                xr = x[n, h]
                for j in range(kw):
                    off = j * dc - pl
                    lo, hi = _span(ow, sc, off, w_in)
                    t = tmp[i, j]
                    for q in range(lo, hi):
                        v = q * sc + off
                        for k in range(ck):
                            t[k] += xr[v, k] * gr[q, k]
            acc += tmp  # one partial sum per output row
        parts[b] = acc


@numba.jit(**_JIT)
def _input_grad(dy, w, dx, sr, sc, dr, dc, pt, pl):  # pragma: no cover - compiled
    n_img, h_in, w_in, ck = dx.shape
    _, oh, ow, _ = dy.shape
    kh, kw, _ = w.shape
    for row in prange(n_img * h_in):
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


KERNELS = {"forward": _forward, "filter": _filter_grad, "input": _input_grad}


def _attrs(g: ConvGeometry) -> tuple[int, ...]:
    return (g.stride_rows, g.stride_cols, g.dilation_rows, g.dilation_cols, g.pad_top,
            g.pad_left)


def _chunks(g: ConvGeometry, ctype: np.dtype):
    """Batch slices whose operands (the input's channels repeated ``M`` times) take at most
    :data:`CHUNK_BYTES` in ``ctype``."""
    per = (g.in_rows * g.in_cols + g.out_rows * g.out_cols) * g.out_depth
    step = max(1, CHUNK_BYTES // max(1, per * ctype.itemsize))
    for start in range(0, g.batch, step):
        checkpoint()
        yield slice(start, min(g.batch, start + step))


def _filter(g: ConvGeometry, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(w, ctype).reshape(g.filter_rows, g.filter_cols, -1)


def _input_chunk(g: ConvGeometry, x: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Contiguous ``ctype`` copy of NHWC ``x`` with each channel repeated ``M`` times (output
    channel ``c*M + m`` reads channel ``c``); ``x`` itself when it already is that."""
    if g.filter_out == 1:
        return np.ascontiguousarray(x, ctype)
    return np.repeat(x.astype(ctype, copy=False), g.filter_out, axis=3)


def depthwise_conv2d(g: ConvGeometry, x: np.ndarray, w: np.ndarray,
                     ctype: np.dtype) -> np.ndarray:
    """Forward ``(N, OH, OW, C*M)`` in ``ctype`` of NHWC ``x``."""
    y = np.empty((g.batch, g.out_rows, g.out_cols, g.out_depth), ctype)
    wc = _filter(g, w, ctype)
    for sl in _chunks(g, ctype):
        xc = _input_chunk(g, x[sl], ctype)
        with _lock:
            _forward(xc, wc, y[sl], *_attrs(g))
    return y


def depthwise_conv2d_backprop_filter(g: ConvGeometry, x: np.ndarray, dy: np.ndarray,
                                     ctype: np.dtype) -> np.ndarray:
    """Filter gradient ``(KH, KW, C, M)`` in ``ctype`` of NHWC ``x`` and ``dy``."""
    ck = g.out_depth
    dw = np.zeros((g.filter_rows, g.filter_cols, ck), ctype)
    for sl in _chunks(g, ctype):
        xc = _input_chunk(g, x[sl], ctype)
        dyc = np.ascontiguousarray(dy[sl], ctype)
        blocks = max(1, min(xc.shape[0] * g.out_rows, BLOCKS_PER_CORE * workers()))
        parts = np.empty((blocks, g.filter_rows, g.filter_cols, ck), ctype)
        with _lock:
            _filter_grad(xc, dyc, parts, *_attrs(g))
        dw += parts.sum(axis=0)
    return dw.reshape(g.filter_rows, g.filter_cols, g.in_depth, g.filter_out)


def depthwise_conv2d_backprop_input(g: ConvGeometry, dy: np.ndarray, w: np.ndarray,
                                    ctype: np.dtype, out: np.ndarray) -> None:
    """Input gradient written into NHWC ``out`` (any dtype, any strides). With ``M > 1`` each
    output channel's part is computed, then the ``M`` parts of a channel are summed."""
    wc = _filter(g, w, ctype)
    m = g.filter_out
    direct = m == 1 and out.dtype == ctype and out.flags.c_contiguous
    for sl in _chunks(g, ctype):
        dyc = np.ascontiguousarray(dy[sl], ctype)
        dst = out[sl] if direct else np.empty(
            (dyc.shape[0], g.in_rows, g.in_cols, g.out_depth), ctype)
        with _lock:
            _input_grad(dyc, wc, dst, *_attrs(g))
        if not direct:
            out[sl] = dst if m == 1 else dst.reshape(*dst.shape[:3], g.in_depth, m).sum(axis=4)


def compiled_signatures() -> int:
    """Signatures compiled or loaded from the cache so far in this process."""
    return sum(len(k.signatures) for k in KERNELS.values())
