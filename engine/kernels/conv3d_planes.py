"""The Conv3D family as sums over depth taps of 2-D convolutions, on the 2-D kernels
(:mod:`engine.kernels.dispatch`): the path ``planes (2-D kernels)``.

Arrays are channels last (``[N, D, H, W, C]``) in the compute dtype, filters
``[kd, kh, kw, Q, O]``. With depth stride ``s``, dilation ``d`` and front padding ``f``, depth
tap ``a`` of output plane ``p`` reads input plane ``p*s + a*d - f``; the planes ``p`` for which
that plane exists are one range ``p0:p1`` (:func:`plane_range`), and the others are skipped
(padding contributes nothing). Per tap, with ``X_a`` the input planes ``i0, i0+s, ...`` of
those ``p`` and ``Y_a`` the out_backprop planes ``p0:p1``, each stacked into the batch axis:

- forward: ``out[:, p0:p1] += conv2d(X_a, w[a])``;
- filter gradient: ``dw[a] = conv2d_backprop_filter(X_a, Y_a)`` (0 for a tap with no plane);
- input gradient: ``dx[:, i0::s] += conv2d_backprop_input(Y_a, w[a])``.

Each 2-D call has the 3-D geometry's height/width sizes, strides, dilations and pads (copied
from it, not recomputed) and its groups, so it sums exactly the 3-D op's terms of that tap.
The NaN/Inf contract is the 3-D ops' (:func:`engine.kernels.nonfinite.nonfinite_safe` around
them): these calls see finite operands, or run inside its exact path, where the 2-D dispatch
takes its exact paths too. The 2-D paths load on the first call that takes this one
(``import engine.kernels`` loads no kernel path).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from engine.shapes.conv import ConvGeometry, ConvGeometryNd

#: What :func:`engine.kernels.last_path` says after a 3-D call on this path.
PATH = "planes (2-D kernels)"


def applies(g: ConvGeometryNd, ctype: np.dtype) -> bool:
    """True when a (non-empty) 3-D call runs here: when the 2-D kernels would run compiled
    for its work (:func:`engine.kernels.accel.use_compiled`, so ``GRADBLOCKS_KERNELS`` and the
    size rule decide, as for the 2-D ops); else the N-d NumPy core
    (:mod:`engine.kernels.conv_nd`) computes it in one pass."""
    from engine.kernels import accel, dispatch

    products = (g.batch * int(np.prod(g.out_spatial)) * int(np.prod(g.filter_spatial))
                * g.filter_in_depth * g.filter_out)
    return accel.use_compiled(ctype, products / dispatch.NUMPY_PRODUCTS_PER_S["conv"])


def plane_range(g: ConvGeometryNd, a: int) -> tuple[int, int, int]:
    """``(p0, p1, i0)``: the output planes ``p0:p1`` whose depth tap ``a`` reads an input plane,
    and the plane ``i0`` that ``p0`` reads (``p1 <= p0`` when there is none)."""
    s, off = g.strides[0], a * g.dilations[0] - g.pads[0][0]
    p0 = max(0, -(off // s))
    p1 = min(g.out_spatial[0], (g.in_spatial[0] - 1 - off) // s + 1)
    return p0, p1, p0 * s + off


def _taps(g: ConvGeometryNd) -> Iterator[tuple[int, int, int, int]]:
    """``(a, p0, p1, i0)`` of every depth tap that reads some plane."""
    for a in range(g.filter_spatial[0]):
        p0, p1, i0 = plane_range(g, a)
        if p1 > p0:
            yield a, p0, p1, i0


def geometry_2d(g: ConvGeometryNd, batch: int) -> ConvGeometry:
    """The NHWC 2-D geometry of one depth tap's call on ``batch`` stacked planes."""
    return g.plane_geometry(batch)


def _stack(a: np.ndarray, first: int, count: int, step: int) -> np.ndarray:
    """Planes ``first, first+step, ...`` (``count`` of them) of C-contiguous ``[N, D, H, W, C]``
    ``a`` as ``[N*count, H, W, C]``: a view when they are adjacent in memory, else a copy made
    on every core."""
    planes = a[:, first:first + (count - 1) * step + 1:step]
    if a.shape[0] == 1 and step == 1 or count == a.shape[1]:
        return planes.reshape(-1, *a.shape[2:])
    out = np.empty(planes.shape, a.dtype)
    _by_planes(np.copyto, out, planes)
    return out.reshape(-1, *a.shape[2:])


def _by_planes(op, dst: np.ndarray, src: np.ndarray) -> None:
    """``op(dst, src)`` on ``[N, P, ...]`` arrays, split over the planes ``P`` and run on every
    core (:func:`engine.kernels.parallel.copy_ranges`; NumPy's loops run on one)."""
    from engine.kernels.parallel import copy_ranges

    def part(lo: int, hi: int) -> None:
        op(dst[:, lo:hi], src[:, lo:hi])

    copy_ranges(part, dst.shape[1], dst[:, :1].nbytes)


def _add(dst: np.ndarray, src: np.ndarray) -> None:
    np.add(dst, src, out=dst)


def _buffer(shape: tuple[int, ...], ctype: np.dtype):
    """The 2-D input gradient's result maker (:data:`engine.kernels.dispatch.ResultBuffer`):
    a new NHWC array of ``shape``, zeroed when asked."""
    def out(zero: bool) -> tuple[np.ndarray, np.ndarray]:
        res = np.zeros(shape, ctype) if zero else np.empty(shape, ctype)
        return res, res
    return out


def conv(g: ConvGeometryNd, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """The forward conv of ``x`` and ``w`` (channels last, ``ctype``); channels last."""
    from engine.kernels import dispatch

    shape = (g.batch, *g.out_spatial, g.out_depth)
    out: np.ndarray | None = None
    for a, p0, p1, i0 in sorted(_taps(g), key=lambda t: t[1] - t[2]):  # the widest first
        n = p1 - p0
        y = dispatch.conv2d(geometry_2d(g, g.batch * n), _stack(x, i0, n, g.strides[0]), w[a],
                            ctype).reshape(g.batch, n, *shape[2:])
        if out is None and n == shape[1] and y.dtype == ctype:
            out = y  # a new array of the whole result: no zeros to add to
            continue
        if out is None:
            out = np.zeros(shape, ctype)
        _by_planes(_add, out[:, p0:p1], y)
    return np.zeros(shape, ctype) if out is None else out


def backprop_filter(g: ConvGeometryNd, x: np.ndarray, dy: np.ndarray,
                    ctype: np.dtype) -> np.ndarray:
    """The filter gradient ``[kd, kh, kw, Q, O]`` of ``x`` and ``dy`` (channels last)."""
    from engine.kernels import dispatch

    dw = np.zeros(g.filter_shape, ctype)
    for a, p0, p1, i0 in _taps(g):
        n = p1 - p0
        dw[a] = dispatch.conv2d_backprop_filter(
            geometry_2d(g, g.batch * n), _stack(x, i0, n, g.strides[0]), _stack(dy, p0, n, 1),
            ctype)
    return dw


def backprop_input(g: ConvGeometryNd, dy: np.ndarray, w: np.ndarray,
                   ctype: np.dtype) -> np.ndarray:
    """The input gradient (channels last, ``g``'s input sizes) of ``dy`` and ``w``."""
    from engine.kernels import dispatch

    shape = (g.batch, *g.in_spatial, g.in_depth)
    s = g.strides[0]
    dx: np.ndarray | None = None
    for a, p0, p1, i0 in sorted(_taps(g), key=lambda t: t[1] - t[2]):
        n = p1 - p0
        d = dispatch.conv2d_backprop_input(geometry_2d(g, g.batch * n), _stack(dy, p0, n, 1),
                                           w[a], ctype, _buffer((g.batch * n, *shape[2:]),
                                                                ctype))[0]
        d = d.reshape(g.batch, n, *shape[2:])
        if dx is None and s == 1 and n == shape[1] and d.dtype == ctype:
            dx = d  # every input plane, a new array
            continue
        if dx is None:
            dx = np.zeros(shape, ctype)
        _by_planes(_add, dx[:, i0:i0 + (n - 1) * s + 1:s], d)
    return np.zeros(shape, ctype) if dx is None else dx
