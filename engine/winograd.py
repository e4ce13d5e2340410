"""Winograd F(2x2, 3x3) for 3x3, stride-1, dilation-1 conv gradients (the ``fast`` extra).

With the tile transforms of :mod:`engine.winograd_jit` (numba, imported on first use) and
``G = [[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]]``, over 4x4 input tiles ``d`` at step 2:

- forward:          ``y_tile = A^T [ sum_c (G w G^T) * (B^T d B) ] A``
- input gradient:   the forward conv of ``dy`` with the filter flipped and transposed
  (``wf[i, j, o, c] = w[2-i, 2-j, c, o]``), read from row ``h - (2 - pad_top)``;
- filter gradient:  ``dw = G^T [ sum_tiles (B^T d B) * (A dy_tile A^T) ] G`` (the adjoint of the
  forward formula in the filter).

Each sum over channels (or over tiles) is 16 BLAS products, one per tile point, of a
``(tiles, C)`` by a ``(C, K)`` matrix; the tiles of a batch chunk (bands of tile rows, at most
:data:`CHUNK_BYTES` of buffers) are transformed, multiplied and written back before the next
chunk, with :func:`engine.cancel.checkpoint` between chunks. Half types compute in float32 as
the NumPy path does.

Accuracy: transforms mix several inputs per output, so float32 results differ from the exact
sum by about 1e-7..1e-6 relative to ``sum |terms|`` (TensorFlow's own kernels: the same order),
within :data:`engine.dtypes.RTOL`. Because transforms also multiply padding zeros with data,
Winograd runs only on operands that are finite and far from overflow (:func:`in_range`);
everything else, and every call of the NaN/Inf path of :mod:`engine.nonfinite`, takes the exact
NumPy path.

When: :func:`chosen` (the rule is measured, see :data:`MIN_CHANNELS` and :data:`MIN_TILES`).
``GRADBLOCKS_KERNELS=numpy`` or no numba turns it off (:func:`enabled`). :func:`used` names the
path the last conv kernel call of this thread took.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading

import numpy as np

from engine.cancel import checkpoint
from engine.conv_shapes import ConvGeometry
from engine.dtypes import DTYPES
from engine.nonfinite import exact_required
from engine.parallel import map_ranges

#: Extra memory one batch chunk's tile buffers may use.
CHUNK_BYTES = 64 * 2**20
#: Winograd only when both channel counts are at least this (thin products lose to the
#: per-tap NumPy path, and the transforms cost more than they save).
MIN_CHANNELS = 16
#: ... and the batch has at least this many 2x2 output tiles.
MIN_TILES = 64
#: Operands must be below ``2**MAX_EXPONENT`` in magnitude for Winograd: transforms add up to
#: 16 elements, so products and sums then stay far from float32 overflow (2**128).
MAX_EXPONENT = 40
#: Per dtype: unsigned view, mantissa bits, exponent bias (the half types' whole finite range
#: is below the limit: for them this is a finiteness check).
_LAYOUT = {
    np.dtype(np.float16): (np.uint16, 10, 15),
    np.dtype(DTYPES["bfloat16"]): (np.uint16, 7, 127),
    np.dtype(np.float32): (np.uint32, 23, 127),
    np.dtype(np.float64): (np.uint64, 52, 1023),
}

_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
_last = threading.local()


@functools.cache
def _numba_importable() -> bool:
    return importlib.util.find_spec("numba") is not None


def enabled() -> bool:
    """True unless ``GRADBLOCKS_KERNELS=numpy`` or numba is not installed."""
    return os.environ.get("GRADBLOCKS_KERNELS", "auto") != "numpy" and _numba_importable()


def applies(g: ConvGeometry) -> bool:
    """True for the geometries Winograd computes, and faster than the NumPy path: a 3x3,
    stride-1, dilation-1, ungrouped conv with at least :data:`MIN_CHANNELS` input and output
    channels and :data:`MIN_TILES` output tiles."""
    tiles = g.batch * (-(-g.out_rows // 2)) * (-(-g.out_cols // 2))
    return (not g.depthwise and g.groups == 1
            and (g.filter_rows, g.filter_cols) == (3, 3)
            and (g.stride_rows, g.stride_cols, g.dilation_rows, g.dilation_cols) == (1, 1, 1, 1)
            and min(g.in_depth, g.filter_out) >= MIN_CHANNELS and tiles >= MIN_TILES)


def chosen(g: ConvGeometry) -> bool:
    """True when a conv kernel call of geometry ``g`` on finite operands takes Winograd."""
    return enabled() and applies(g)


def in_range(*arrays: np.ndarray) -> bool:
    """True when every element of every array is finite with magnitude below
    ``2**MAX_EXPONENT`` (one pass over the exponent bits each, as :mod:`engine.nonfinite`)."""
    for a in arrays:
        if a.size == 0:
            continue
        utype, mantissa, bias = _LAYOUT[a.dtype]
        if a.ndim and not (a.flags.c_contiguous or a.flags.f_contiguous):
            a = np.ascontiguousarray(a)
        magnitude = a.view(utype) & utype((1 << (8 * a.dtype.itemsize - 1)) - 1)
        if int(magnitude.max()) >= (bias + MAX_EXPONENT) << mantissa:
            return False
    return True


def used() -> str:
    """``"winograd"`` or ``"numpy"``: the path of this thread's last conv kernel call that
    asked (see :func:`try_conv2d` and its siblings), ``""`` before any."""
    return getattr(_last, "path", "")


def _take(g: ConvGeometry, *operands: np.ndarray) -> bool:
    ok = chosen(g) and not exact_required() and in_range(*operands)
    _last.path = "winograd" if ok else "numpy"
    return ok


def _jit():
    from engine import winograd_jit

    return winograd_jit


def _tiles(rows: int, cols: int) -> tuple[int, int]:
    return -(-rows // 2), -(-cols // 2)


def _bands(batch: int, tiles_h: int, tiles_w: int, channels: int, itemsize: int):
    """Band ranges ``(band0, band1)`` of tile rows whose buffers stay within
    :data:`CHUNK_BYTES` (one band at least), with a cancel checkpoint before each."""
    per_band = 16 * tiles_w * channels * itemsize
    step = max(1, CHUNK_BYTES // max(1, per_band))
    total = batch * tiles_h
    for b0 in range(0, total, step):
        checkpoint()
        yield b0, min(total, b0 + step)


def _nhwc_operand(a: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """``a`` C-contiguous in ``ctype`` (a copy only for NCHW views or half types)."""
    return np.ascontiguousarray(a, ctype)


def _filter_transform(w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """``U[u*4+v] = (G w G^T)[u, v]``: ``(16, C, K)`` of a ``(3, 3, C, K)`` filter."""
    g = _G.astype(ctype)
    u = np.einsum("ui,ijck,vj->uvck", g, w.astype(ctype, copy=False), g)
    return np.ascontiguousarray(u.reshape(16, *w.shape[2:]))


def _per_point(fn, points: int = 16) -> list:
    """Run ``fn(lo, hi)`` over the tile points split over cores (one BLAS thread each)."""
    return map_ranges(fn, points, 1)


def _forward(src: np.ndarray, u: np.ndarray, row0: int, col0: int, out_rows: int,
             out_cols: int, ctype: np.dtype) -> np.ndarray:
    """``y[n, r, c, k] = sum_{i,j,q} src[n, r + i - row0, c + j - col0, q] w[i, j, q, k]`` (zero
    outside ``src``), ``u`` the transformed ``w``; NHWC ``(N, out_rows, out_cols, K)``."""
    jit = _jit()
    n, ci, co = src.shape[0], src.shape[3], u.shape[2]
    y = np.empty((n, out_rows, out_cols, co), ctype)
    th, tw = _tiles(out_rows, out_cols)
    for b0, b1 in _bands(n, th, tw, ci + co, ctype.itemsize):
        t = (b1 - b0) * tw
        v = np.empty((16, t, ci), ctype)
        jit.input_tiles(src, row0, col0, th, tw, b0, b1, v)
        m = np.empty((16, t, co), ctype)

        def products(lo: int, hi: int, v=v, m=m) -> None:
            for p in range(lo, hi):
                np.matmul(v[p], u[p], out=m[p])

        _per_point(products)
        jit.output_tiles(m, th, tw, b0, b1, y)
    return y


def conv2d(g: ConvGeometry, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Forward conv of NHWC ``x`` ``(N, OH, OW, K)`` in ``ctype`` (:func:`applies` holds)."""
    return _forward(_nhwc_operand(x, ctype), _filter_transform(w, ctype), g.pad_top,
                    g.pad_left, g.out_rows, g.out_cols, ctype)


def backprop_input(g: ConvGeometry, dy: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Input gradient ``(N, H, W, C)`` in ``ctype`` of NHWC ``dy`` (:func:`applies` holds)."""
    wf = w[::-1, ::-1].transpose(0, 1, 3, 2)
    return _forward(_nhwc_operand(dy, ctype), _filter_transform(wf, ctype), 2 - g.pad_top,
                    2 - g.pad_left, g.in_rows, g.in_cols, ctype)


def backprop_filter(g: ConvGeometry, x: np.ndarray, dy: np.ndarray,
                    ctype: np.dtype) -> np.ndarray:
    """Filter gradient ``(3, 3, C, K)`` in ``ctype`` of NHWC ``x`` and ``dy``."""
    jit = _jit()
    xs, es = _nhwc_operand(x, ctype), _nhwc_operand(dy, ctype)
    n, ci, co = xs.shape[0], xs.shape[3], es.shape[3]
    th, tw = _tiles(g.out_rows, g.out_cols)
    acc = np.zeros((16, ci, co), ctype)
    for b0, b1 in _bands(n, th, tw, ci + co, ctype.itemsize):
        t = (b1 - b0) * tw
        v = np.empty((16, t, ci), ctype)
        jit.input_tiles(xs, g.pad_top, g.pad_left, th, tw, b0, b1, v)
        e = np.empty((16, t, co), ctype)
        jit.grad_tiles(es, th, tw, b0, b1, e)

        def products(lo: int, hi: int, v=v, e=e) -> None:
            tmp = np.empty((ci, co), ctype)
            for p in range(lo, hi):
                acc[p] += np.matmul(v[p].T, e[p], out=tmp)

        _per_point(products)
    gm = _G.astype(ctype)
    return np.einsum("ui,uvck,vj->ijck", gm, acc.reshape(4, 4, ci, co), gm)


def try_conv2d(g, x, w, ctype) -> np.ndarray | None:
    """:func:`conv2d` when Winograd is :func:`chosen` for these operands, else None."""
    return conv2d(g, x, w, ctype) if _take(g, x, w) else None


def try_backprop_filter(g, x, dy, ctype) -> np.ndarray | None:
    """:func:`backprop_filter` when Winograd is :func:`chosen` for these operands, else None."""
    return backprop_filter(g, x, dy, ctype) if _take(g, x, dy) else None


def try_backprop_input(g, dy, w, ctype) -> np.ndarray | None:
    """:func:`backprop_input` when Winograd is :func:`chosen` for these operands, else None."""
    return backprop_input(g, dy, w, ctype) if _take(g, dy, w) else None


def workspace_bytes(g: ConvGeometry, kind: str, ct: int) -> int:
    """Upper bound of the extra memory of one Winograd call (``ct``: compute itemsize):
    contiguous compute-dtype copies of both operands, one chunk's tile buffers (at most
    :data:`CHUNK_BYTES` or one band), the transformed filter, the accumulators and the
    result in the compute dtype."""
    ci, co = g.in_depth, g.filter_out
    th, tw = _tiles(g.out_rows, g.out_cols) if kind != "input" else _tiles(g.in_rows, g.in_cols)
    per_band = 16 * tw * (ci + co) * ct
    chunk = min(g.batch * th * per_band, max(CHUNK_BYTES, per_band))
    x = g.batch * g.in_rows * g.in_cols * ci
    y = g.batch * g.out_rows * g.out_cols * co
    w = 9 * ci * co
    operands = {"forward": x + w, "filter": x + y, "input": y + w}[kind] * ct
    result = {"forward": y, "filter": w, "input": x}[kind] * ct
    return operands + 2 * chunk + 4 * 16 * ci * co * ct + 2 * result
