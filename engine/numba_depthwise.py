"""The depthwise trio compiled with numba (used through :mod:`engine.accel`; never imported
unless numba is in use).

Same math and conventions as :mod:`engine.conv_compute` (NHWC ``x (N, H, W, C)``, filter
``w (KH, KW, C, M)`` seen as ``(KH, KW, C*M)``, ``dy (N, OH, OW, C*M)``, output channel
``k = c*M + m`` reads input channel ``c``), as fused loops: one output (or input) row per
parallel iteration, the innermost loop over contiguous channels (vectorized by LLVM). Taps that
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


@numba.jit(**_JIT)
def _forward(x, w, y, sr, sc, dr, dc, pt, pl):  # pragma: no cover - compiled
    n_img, h_in, w_in, _ = x.shape
    kh, kw, ck = w.shape
    _, oh, ow, _ = y.shape
    mult = ck // x.shape[3]
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
            for q in range(ow):
                o = out[q]
                for j in range(kw):
                    v = q * sc + j * dc - pl
                    if v < 0 or v >= w_in:
                        continue
                    xv = xr[v]
                    wv = w[i, j]
                    if mult == 1:
                        for k in range(ck):
                            o[k] += xv[k] * wv[k]
                    else:
                        for k in range(ck):
                            o[k] += xv[k // mult] * wv[k]


@numba.jit(**_JIT)
def _filter_grad(x, dy, parts, sr, sc, dr, dc, pt, pl):  # pragma: no cover - compiled
    n_img, h_in, w_in, _ = x.shape
    _, oh, ow, ck = dy.shape
    blocks, kh, kw, _ = parts.shape
    mult = ck // x.shape[3]
    rows = n_img * oh
    for b in prange(blocks):
        acc = parts[b]
        acc[:, :, :] = 0
        tmp = np.empty((kh, kw, ck), parts.dtype)
        for row in range(rows * b // blocks, rows * (b + 1) // blocks):
            n = row // oh
            r = row - n * oh
            tmp[:, :, :] = 0
            for i in range(kh):
                h = r * sr + i * dr - pt
                if h < 0 or h >= h_in:
                    continue
                xr = x[n, h]
                for q in range(ow):
                    g = dy[n, r, q]
                    for j in range(kw):
                        v = q * sc + j * dc - pl
                        if v < 0 or v >= w_in:
                            continue
                        xv = xr[v]
                        t = tmp[i, j]
                        if mult == 1:
                            for k in range(ck):
                                t[k] += xv[k] * g[k]
                        else:
                            for k in range(ck):
                                t[k] += xv[k // mult] * g[k]
            acc += tmp


@numba.jit(**_JIT)
def _input_grad(dy, w, dx, sr, sc, dr, dc, pt, pl):  # pragma: no cover - compiled
    n_img, h_in, w_in, c = dx.shape
    _, oh, ow, ck = dy.shape
    kh, kw, _ = w.shape
    mult = ck // c
    for row in prange(n_img * h_in):
        n = row // h_in
        h = row - n * h_in
        out = dx[n, h]
        out[:, :] = 0
        for i in range(kh):
            t = h + pt - i * dr
            if t < 0 or t % sr != 0:
                continue
            r = t // sr
            if r >= oh:
                continue
            gr = dy[n, r]
            for q in range(ow):
                g = gr[q]
                for j in range(kw):
                    v = q * sc + j * dc - pl
                    if v < 0 or v >= w_in:
                        continue
                    o = out[v]
                    wv = w[i, j]
                    if mult == 1:
                        for k in range(c):
                            o[k] += g[k] * wv[k]
                    else:
                        for k in range(c):
                            s = g[k * mult] * wv[k * mult]
                            for m in range(1, mult):
                                s += g[k * mult + m] * wv[k * mult + m]
                            o[k] += s


KERNELS = {"forward": _forward, "filter": _filter_grad, "input": _input_grad}


def _attrs(g: ConvGeometry) -> tuple[int, ...]:
    return (g.stride_rows, g.stride_cols, g.dilation_rows, g.dilation_cols, g.pad_top,
            g.pad_left)


def _chunks(g: ConvGeometry, ctype: np.dtype):
    """Batch slices whose operands take at most :data:`CHUNK_BYTES` in ``ctype``."""
    per = (g.in_rows * g.in_cols * g.in_depth + g.out_rows * g.out_cols * g.out_depth)
    step = max(1, CHUNK_BYTES // max(1, per * ctype.itemsize))
    for start in range(0, g.batch, step):
        checkpoint()
        yield slice(start, min(g.batch, start + step))


def _filter(g: ConvGeometry, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(w, ctype).reshape(g.filter_rows, g.filter_cols, -1)


def depthwise_conv2d(g: ConvGeometry, x: np.ndarray, w: np.ndarray,
                     ctype: np.dtype) -> np.ndarray:
    """Forward ``(N, OH, OW, C*M)`` in ``ctype`` of NHWC ``x``."""
    y = np.empty((g.batch, g.out_rows, g.out_cols, g.out_depth), ctype)
    wc = _filter(g, w, ctype)
    for sl in _chunks(g, ctype):
        xc = np.ascontiguousarray(x[sl], ctype)
        with _lock:
            _forward(xc, wc, y[sl], *_attrs(g))
    return y


def depthwise_conv2d_backprop_filter(g: ConvGeometry, x: np.ndarray, dy: np.ndarray,
                                     ctype: np.dtype) -> np.ndarray:
    """Filter gradient ``(KH, KW, C, M)`` in ``ctype`` of NHWC ``x`` and ``dy``."""
    ck = g.out_depth
    dw = np.zeros((g.filter_rows, g.filter_cols, ck), ctype)
    for sl in _chunks(g, ctype):
        xc = np.ascontiguousarray(x[sl], ctype)
        dyc = np.ascontiguousarray(dy[sl], ctype)
        blocks = max(1, min(xc.shape[0] * g.out_rows, BLOCKS_PER_CORE * workers()))
        parts = np.empty((blocks, g.filter_rows, g.filter_cols, ck), ctype)
        with _lock:
            _filter_grad(xc, dyc, parts, *_attrs(g))
        dw += parts.sum(axis=0)
    return dw.reshape(g.filter_rows, g.filter_cols, g.in_depth, g.filter_out)


def depthwise_conv2d_backprop_input(g: ConvGeometry, dy: np.ndarray, w: np.ndarray,
                                    ctype: np.dtype, out: np.ndarray) -> None:
    """Input gradient written into NHWC ``out`` (any dtype, any strides)."""
    wc = _filter(g, w, ctype)
    direct = out.dtype == ctype and out.flags.c_contiguous
    for sl in _chunks(g, ctype):
        dyc = np.ascontiguousarray(dy[sl], ctype)
        dst = out[sl] if direct else np.empty(
            (dyc.shape[0], g.in_rows, g.in_cols, g.in_depth), ctype)
        with _lock:
            _input_grad(dyc, wc, dst, *_attrs(g))
        if not direct:
            out[sl] = dst


def compiled_signatures() -> int:
    """Signatures compiled or loaded from the cache so far in this process."""
    return sum(len(k.signatures) for k in KERNELS.values())
