"""The NumPy conv family over any number of spatial dimensions: im2col per block of output
rows, then one matmul per group.

Arrays are channels last (``[N, *spatial, C]``) in the compute dtype; filters are
``[*taps, Q, O]`` (``Q`` in_channels per group, ``O`` out_channels). With ``in_pad`` the input
zero-padded per :class:`~engine.shapes.conv.ConvGeometryNd`, ``T`` the taps and ``p`` an output
position, the columns of a block are ``cols[p, t, c] = in_pad[n, p*s + t*d, c]``; then

- forward: ``out[p, o] = sum_{t, q} cols[p, t, g(o)*Q + q] * w[t, q, o]``;
- filter gradient: ``dw[t, q, o] = sum_p cols[p, t, g(o)*Q + q] * dy[p, o]``;
- input gradient: ``dcols[t, g*Q + q, p] = sum_{o in g} w[t, q, o] * dy[p, o]``, added into
  ``dx_pad[g*Q + q, n, p*s + t*d]`` (channels first) tap by tap.

The padding zeros multiply real terms: :func:`engine.kernels.nonfinite.nonfinite_safe` (around
the ops) keeps NaN/Inf to the terms that exist. A block's columns take at most
:data:`BLOCK_BYTES`. Nothing here is specific to three dimensions: with two it computes the
Conv2D family (tests/test_conv3d_kernels.py compares it with the 2-D kernels).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
from numpy.lib.stride_tricks import as_strided

from engine.shapes.conv import ConvGeometryNd

#: Bytes of one block's columns (and of its input-gradient columns).
BLOCK_BYTES = 48 << 20

Index = tuple[slice, ...]


def taps(g: ConvGeometryNd) -> list[tuple[int, ...]]:
    """Every tap of the filter, in C order of ``filter_spatial``."""
    return list(itertools.product(*(range(k) for k in g.filter_spatial)))


def padded_shape(g: ConvGeometryNd) -> tuple[int, ...]:
    """The channels-last shape of the zero-padded input."""
    return (g.batch, *(s + b + a for s, (b, a) in zip(g.in_spatial, g.pads)), g.in_depth)


def pad(g: ConvGeometryNd, x: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """``x`` (channels last) zero-padded, in ``ctype``."""
    xp = np.zeros(padded_shape(g), ctype)
    xp[unpadded(g)] = x
    return xp


def unpadded(g: ConvGeometryNd) -> Index:
    """Where the input sits in the padded array."""
    inner = tuple(slice(b, b + s) for s, (b, _) in zip(g.in_spatial, g.pads))
    return (slice(None), *inner, slice(None))


def blocks(g: ConvGeometryNd, itemsize: int) -> Iterator[tuple[int, int, int, int]]:
    """``(n0, n1, r0, r1)``: images ``n0:n1`` and output rows (first spatial dim) ``r0:r1``,
    each block's columns within :data:`BLOCK_BYTES`."""
    rows = g.out_spatial[0]
    row_bytes = int(np.prod(g.out_spatial[1:], dtype=np.int64)) * len(taps(g)) * g.in_depth \
        * itemsize
    image_bytes = max(1, row_bytes * rows)
    if image_bytes <= BLOCK_BYTES:
        step = max(1, BLOCK_BYTES // image_bytes)
        for n0 in range(0, g.batch, step):
            yield n0, min(g.batch, n0 + step), 0, rows
        return
    step = max(1, BLOCK_BYTES // max(1, row_bytes))
    for n in range(g.batch):
        for r0 in range(0, rows, step):
            yield n, n + 1, r0, min(rows, r0 + step)


def tap_window(g: ConvGeometryNd, t: tuple[int, ...], n0: int, n1: int, r0: int,
               r1: int) -> Index:
    """The padded-input positions tap ``t`` reads for the output block."""
    spans = []
    for i, (k, s, d, o) in enumerate(zip(t, g.strides, g.dilations, g.out_spatial)):
        lo, count = (r0, r1 - r0) if i == 0 else (0, o)
        start = lo * s + k * d
        spans.append(slice(start, start + (count - 1) * s + 1, s))
    return (slice(n0, n1), *spans, slice(None))


def _columns(g: ConvGeometryNd, xp: np.ndarray, block: tuple[int, int, int, int]) -> np.ndarray:
    """``cols[n, p..., t, c]`` of one block. The taps of the last spatial dim are copied
    together, through a read-only strided view (``kw * C`` elements in a run when the last
    dilation is 1), the others one by one."""
    n0, n1, r0, r1 = block
    *lead, last = g.filter_spatial
    outer = list(itertools.product(*(range(k) for k in lead)))
    cols = np.empty((n1 - n0, r1 - r0, *g.out_spatial[1:], len(outer), last, g.in_depth),
                    xp.dtype)
    step = g.dilations[-1] * xp.strides[-2]
    for i, t in enumerate(outer):
        win = xp[tap_window(g, (*t, 0), n0, n1, r0, r1)]
        view = as_strided(win, (*win.shape[:-1], last, g.in_depth),
                          (*win.strides[:-1], step, xp.strides[-1]), writeable=False)
        cols[..., i, :, :] = view
    return cols.reshape(*cols.shape[:-3], len(outer) * last, g.in_depth)


def _out_block(block: tuple[int, int, int, int]) -> Index:
    n0, n1, r0, r1 = block
    return (slice(n0, n1), slice(r0, r1))


def conv(g: ConvGeometryNd, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """The forward conv of channels-last ``x`` and ``w``; channels last, in ``ctype``."""
    xp, wc = pad(g, x, ctype), w.astype(ctype, copy=False)
    t, q, groups = len(taps(g)), g.filter_in_depth, g.groups
    og = g.out_depth // groups
    out = np.empty((g.batch, *g.out_spatial, g.out_depth), ctype)
    for block in blocks(g, ctype.itemsize):
        cols = _columns(g, xp, block)
        dest = out[_out_block(block)]
        flat = cols.reshape(-1, t, groups, q)
        y = dest.reshape(-1, g.out_depth) if dest.flags.c_contiguous else None
        parts = []
        for k in range(groups):
            wk = wc[..., k * og:(k + 1) * og].reshape(t * q, og)
            a = cols.reshape(-1, t * q) if groups == 1 else flat[:, :, k, :].reshape(-1, t * q)
            parts.append(a @ wk)
        res = parts[0] if groups == 1 else np.concatenate(parts, axis=1)
        if y is not None:
            y[...] = res
        else:
            dest[...] = res.reshape(dest.shape)
    return out


def backprop_filter(g: ConvGeometryNd, x: np.ndarray, dy: np.ndarray,
                    ctype: np.dtype) -> np.ndarray:
    """The filter gradient ``[*taps, Q, O]`` of channels-last ``x`` and ``dy``, in ``ctype``."""
    xp, e = pad(g, x, ctype), dy.astype(ctype, copy=False)
    t, q, groups = len(taps(g)), g.filter_in_depth, g.groups
    og = g.out_depth // groups
    dw = np.zeros((t * q, g.out_depth), ctype)
    for block in blocks(g, ctype.itemsize):
        cols = _columns(g, xp, block)
        eb = e[_out_block(block)].reshape(-1, g.out_depth)
        flat = cols.reshape(-1, t, groups, q)
        for k in range(groups):
            a = cols.reshape(-1, t * q) if groups == 1 else flat[:, :, k, :].reshape(-1, t * q)
            dw[:, k * og:(k + 1) * og] += a.T @ eb[:, k * og:(k + 1) * og]
    return dw.reshape(g.filter_shape)


def backprop_input(g: ConvGeometryNd, dy: np.ndarray, w: np.ndarray,
                   ctype: np.dtype) -> np.ndarray:
    """The input gradient (channels last, ``g``'s input sizes) of channels-last ``dy`` and
    ``w``, in ``ctype``. The columns are computed channels first (``dcols[t, q, p]``) and
    added into a channels-first padded gradient, so each tap's addition runs along the
    output positions, not along a few channels."""
    e, wc = dy.astype(ctype, copy=False), w.astype(ctype, copy=False)
    tt = taps(g)
    t, q, groups = len(tt), g.filter_in_depth, g.groups
    og = g.out_depth // groups
    shape = padded_shape(g)
    dxp = np.zeros((shape[-1], *shape[:-1]), ctype)  # channels first
    for block in blocks(g, ctype.itemsize):
        n0, n1, r0, r1 = block
        eb = e[_out_block(block)].reshape(-1, g.out_depth)
        for k in range(groups):
            wk = wc[..., k * og:(k + 1) * og].reshape(t * q, og)
            dcols = (wk @ eb[:, k * og:(k + 1) * og].T).reshape(
                t, q, n1 - n0, r1 - r0, *g.out_spatial[1:])
            for i, tap in enumerate(tt):
                where = tap_window(g, tap, n0, n1, r0, r1)[:-1]
                dxp[(slice(k * q, (k + 1) * q), *where)] += dcols[i]
    return np.moveaxis(dxp, 0, -1)[unpadded(g)]
