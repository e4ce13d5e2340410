"""The depthwise trio on NCHW arrays in their own layout, compiled with numba: each channel of
an image is one contiguous ``H x W`` plane, so nothing is transposed to NHWC and back.

With ``x (N, C, H, W)``, ``w (KH, KW, C*M)``, ``dy (N, C*M, OH, OW)`` and ``k = c*M + m``:

- forward: ``y[n, k, r, q] = sum_{i, j} x[n, c, r*sr + i*dr - pt, q*sc + j*dc - pl] w[i, j, k]``
  (each output row adds its taps in ``(i, j)`` order);
- filter gradient: ``dw[i, j, k] = sum_{n, r, q} x[n, c, r*sr + i*dr - pt, q*sc + j*dc - pl]
  dy[n, k, r, q]``, summed per column ``q`` over ``(n, r)`` first, then over ``q`` in order;
  each channel has one owner, so the cores write disjoint parts of one result;
- input gradient: ``dx[n, c, h, v]`` the sum of ``dy[n, k, r, q] w[i, j, k]`` over the
  ``(m, i, j, r, q)`` with ``r*sr + i*dr - pt = h`` and ``q*sc + j*dc - pl = v``.

The innermost loop runs along a plane row (contiguous at stride 1, vectorized by LLVM). As in
:mod:`engine.kernels._compiled.numba_depthwise`: taps that would read padding are skipped, every
term is an explicit product (a finite result vouches for the inputs), the only fast-math flag
is ``contract``, and the kernels release the GIL and run on :mod:`engine.kernels.parallel`'s
threads, a cancel checkpoint between calls of at most :data:`CALL_PLANES` planes. The caller
passes operands already C-contiguous in the compute dtype (:func:`planes`).
"""

from __future__ import annotations

import numba
import numpy as np

from engine.base.cancel import checkpoint
from engine.kernels._compiled import cache_key  # noqa: F401 - before any cache=True
from engine.kernels._compiled.loop_rules import JIT as _JIT
from engine.kernels._compiled.loop_rules import filter_taps as _filter
from engine.kernels._compiled.loop_rules import finite_rows as _finite
from engine.kernels._compiled.loop_rules import span as _span
from engine.kernels._compiled.transpose import nchw_target
from engine.kernels.buffers import readonly
from engine.kernels.parallel import MIN_PRODUCTS_PER_RANGE, map_ranges
from engine.shapes.conv import ConvGeometry

#: Planes (or filter-gradient channels) per compiled call: a cancel checkpoint between calls.
CALL_PLANES = 64


@numba.njit(inline="always")
def _madd(dst, d0, d_step, src, s0, s_step, n, wv):  # pragma: no cover - compiled
    """``dst[d0 + q*d_step] += src[s0 + q*s_step] * wv`` for ``q < n`` on flat arrays. The
    indices are unsigned, so numba adds no negative-index wraparound and LLVM vectorizes the
    loop (versioned for a step of 1)."""
    u = np.uint64
    d, ds, sa, ss = u(d0), u(d_step), u(s0), u(s_step)
    for q in range(u(n)):
        dst[d + q * ds] += src[sa + q * ss] * wv


@numba.njit(inline="always")
def _mul_add(dst, d0, a, a0, a_step, b, b0, n):  # pragma: no cover - compiled
    """``dst[d0 + q] += a[a0 + q*a_step] * b[b0 + q]`` for ``q < n`` (flat, as :func:`_madd`)."""
    u = np.uint64
    d, aa, st, bb = u(d0), u(a0), u(a_step), u(b0)
    for q in range(u(n)):
        dst[d + q] += a[aa + q * st] * b[bb + q]


@numba.njit(inline="always")
def _column_spans(kw, ow, sc, dc, pl, w_in):  # pragma: no cover - compiled
    """Per filter column ``j``: its offset and the span ``[lo, hi)`` of output columns whose
    input column ``q*sc + j*dc - pl`` is inside (computed once per call: the divisions
    cost more than a row's products)."""
    spans = np.empty((kw, 3), np.int64)
    for j in range(kw):
        off = j * dc - pl
        a, b = _span(ow, sc, off, w_in)
        spans[j, 0], spans[j, 1], spans[j, 2] = off, a, b
    return spans


@numba.jit(**_JIT)
def _forward(x, w, y, m, sr, sc, dr, dc, pt, pl, lo, hi):  # pragma: no cover - compiled
    """Planes ``[lo, hi)`` of ``y (N*C*M, OH, OW)`` from ``x (N*C, H, W)``; True when finite."""
    _, h_in, w_in = x.shape
    kh, kw, ck = w.shape
    _, oh, ow = y.shape
    cin = ck // m
    xf, yf = x.reshape(x.size), y.reshape(y.size)
    spans = _column_spans(kw, ow, sc, dc, pl, w_in)
    ok = True
    for p in range(lo, hi):
        n = p // ck
        k = p - n * ck
        xp = (n * cin + k // m) * h_in * w_in
        for r in range(oh):
            o0 = (p * oh + r) * ow
            yf[o0:o0 + ow] = 0
            for i in range(kh):
                h = r * sr + i * dr - pt
                if h < 0 or h >= h_in:
                    continue
                for j in range(kw):
                    off, a, b = spans[j, 0], spans[j, 1], spans[j, 2]
                    if b > a:
                        _madd(yf, o0 + a, 1, xf, xp + h * w_in + a * sc + off, sc, b - a,
                              w[i, j, k])
            ok &= _finite(y[p, r:r + 1])
    return ok


@numba.jit(**_JIT)
def _filter_grad(x, dy, dw, m, sr, sc, dr, dc, pt, pl, lo, hi):  # pragma: no cover - compiled
    """Channels ``[lo, hi)`` of ``dw (KH, KW, C*M)`` from ``x (N*C, H, W)`` and
    ``dy (N*C*M, OH, OW)``: per tap one partial sum per output column, over images and rows."""
    _, h_in, w_in = x.shape
    kh, kw, ck = dw.shape
    ndy, oh, ow = dy.shape
    nb = ndy // ck
    cin = ck // m
    xf, gf = x.reshape(x.size), dy.reshape(dy.size)
    t = np.empty(kh * kw * ow, dw.dtype)
    spans = _column_spans(kw, ow, sc, dc, pl, w_in)
    for k in range(lo, hi):
        t[:] = 0
        for n in range(nb):
            xp = (n * cin + k // m) * h_in * w_in
            gp = (n * ck + k) * oh * ow
            for r in range(oh):
                for i in range(kh):
                    h = r * sr + i * dr - pt
                    if h < 0 or h >= h_in:
                        continue
                    for j in range(kw):
                        off, a, b = spans[j, 0], spans[j, 1], spans[j, 2]
                        if b > a:
                            _mul_add(t, (i * kw + j) * ow + a, xf,
                                     xp + h * w_in + a * sc + off, sc, gf, gp + r * ow + a, b - a)
        for i in range(kh):
            for j in range(kw):
                t0 = (i * kw + j) * ow
                s = t[t0]
                for q in range(1, ow):
                    s += t[t0 + q]
                dw[i, j, k] = s


@numba.jit(**_JIT)
def _input_grad(dy, w, dx, m, sr, sc, dr, dc, pt, pl, lo, hi):  # pragma: no cover - compiled
    """Planes ``[lo, hi)`` of ``dx (N*C, H, W)`` from ``dy (N*C*M, OH, OW)``: each row
    gathers the ``dy`` rows that reach it and scatters their columns; True when finite."""
    _, h_in, w_in = dx.shape
    kh, kw, ck = w.shape
    _, oh, ow = dy.shape
    cin = ck // m
    gf, xf = dy.reshape(dy.size), dx.reshape(dx.size)
    spans = _column_spans(kw, ow, sc, dc, pl, w_in)
    source = np.full((h_in, kh), -1, np.int64)  # the dy row tap i of input row h reads
    for h in range(h_in):
        for i in range(kh):
            t = h + pt - i * dr
            if t >= 0 and t % sr == 0 and t // sr < oh:
                source[h, i] = t // sr
    ok = True
    for p in range(lo, hi):
        n = p // cin
        c = p - n * cin
        for h in range(h_in):
            o0 = (p * h_in + h) * w_in
            xf[o0:o0 + w_in] = 0
            for mm in range(m):
                k = c * m + mm
                for i in range(kh):
                    if source[h, i] < 0:
                        continue
                    g0 = ((n * ck + k) * oh + source[h, i]) * ow
                    for j in range(kw):
                        off, a, b = spans[j, 0], spans[j, 1], spans[j, 2]
                        if b > a:
                            _madd(xf, o0 + a * sc + off, sc, gf, g0 + a, 1, b - a, w[i, j, k])
            ok &= _finite(dx[p, h:h + 1])
    return ok


def planes(a: np.ndarray, ctype: np.dtype) -> np.ndarray | None:
    """The NCHW array behind the NHWC view ``a`` as ``(N*C, H, W)`` planes, when it is
    C-contiguous in ``ctype`` (:func:`~engine.kernels._compiled.transpose.nchw_target`); else
    None (the caller takes the NHWC loops)."""
    nchw = nchw_target(a)
    if nchw is None or nchw.dtype != ctype:
        return None
    n, c, h, w = nchw.shape
    return nchw.reshape(n * c, h, w)


def _attrs(g: ConvGeometry) -> tuple[int, ...]:
    return (g.filter_out, g.stride_rows, g.stride_cols, g.dilation_rows, g.dilation_cols,
            g.pad_top, g.pad_left)


def _over(count: int, plane_products: int, call) -> bool:
    """``call(lo, hi)`` over ``[0, count)`` planes of ``plane_products`` multiply-adds each,
    split over the cores (ranges of at least
    :data:`~engine.kernels.parallel.MIN_PRODUCTS_PER_RANGE`), in calls of at most
    :data:`CALL_PLANES` with a cancel checkpoint before each; True when every call was."""
    def part(lo: int, hi: int) -> bool:
        ok = True
        for p0 in range(lo, hi, CALL_PLANES):
            checkpoint()
            ok &= bool(call(p0, min(hi, p0 + CALL_PLANES)))
        return ok

    return all(map_ranges(part, count, -(-MIN_PRODUCTS_PER_RANGE // max(1, plane_products))))


def forward(g: ConvGeometry, xp: np.ndarray, w: np.ndarray,
            ctype: np.dtype) -> tuple[np.ndarray, bool]:
    """Forward ``(N, C*M, OH, OW)`` of the planes ``xp``, and whether it is finite."""
    y = np.empty((g.batch, g.out_depth, g.out_rows, g.out_cols), ctype)
    yp, xr, wc = y.reshape(-1, g.out_rows, g.out_cols), readonly(xp), _filter(g, w, ctype)
    taps = g.filter_rows * g.filter_cols
    ok = _over(yp.shape[0], g.out_rows * g.out_cols * taps,
               lambda lo, hi: _forward(xr, wc, yp, *_attrs(g), lo, hi))
    return y, ok


def backprop_filter(g: ConvGeometry, xp: np.ndarray, dyp: np.ndarray,
                    ctype: np.dtype) -> np.ndarray:
    """Filter gradient ``(KH, KW, C*M)`` of the planes ``xp`` and ``dyp``."""
    dw = np.empty((g.filter_rows, g.filter_cols, g.out_depth), ctype)
    xr, dr = readonly(xp), readonly(dyp)
    _over(g.out_depth, g.batch * g.out_rows * g.out_cols * g.filter_rows * g.filter_cols,
          lambda lo, hi: _filter_grad(xr, dr, dw, *_attrs(g), lo, hi))
    return dw


def backprop_input(g: ConvGeometry, dyp: np.ndarray, w: np.ndarray, ctype: np.dtype,
                   outp: np.ndarray) -> bool:
    """The input gradient written into the planes ``outp``; True when finite."""
    dr, wc = readonly(dyp), _filter(g, w, ctype)
    return _over(outp.shape[0], g.out_rows * g.out_cols * g.filter_rows * g.filter_cols
                 * g.filter_out,
                 lambda lo, hi: _input_grad(dr, wc, outp, *_attrs(g), lo, hi))


def warm(dtypes: tuple[type[np.floating], ...] = (np.float32, np.float64)) -> None:
    """Compile (or load from numba's disk cache) the loops for ``dtypes``."""
    for dt in dtypes:
        x = readonly(np.ones((1, 2, 2), dt))
        w = readonly(np.ones((1, 1, 1), dt))
        out = np.zeros((1, 2, 2), dt)
        _forward(x, w, out, 1, 1, 1, 1, 1, 0, 0, 0, 1)
        _filter_grad(x, x, np.zeros((1, 1, 1), dt), 1, 1, 1, 1, 1, 0, 0, 0, 1)
        _input_grad(x, w, out, 1, 1, 1, 1, 1, 0, 0, 0, 1)
