"""Winograd F(2x2, 3x3)'s filter transform ``U = G w G^T`` of the forward and input-gradient
filters (:func:`filter_transform`) and the stride-2 polyphase one (:func:`phase_filter_transform`),
as BLAS products over the channels, with
``G = [[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]]`` (the filter gradient's inverse ``G^T M G`` is
:func:`~engine.kernels._compiled.winograd_jit.filter_inverse`)."""

from __future__ import annotations

import numpy as np

from engine.kernels.parallel import map_ranges

#: Winograd F(2x2, 3x3)'s filter transform matrix.
G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


#: Columns of the flattened rest per core range of :func:`sandwich` and of the filter
#: gradient's inverse at least (below, one core).
SANDWICH_MIN_COLUMNS = 8192


def sandwich(m: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``m a m^T`` over the first two axes of ``a`` ``(p, p, ...)``: ``(q, q, ...)`` for ``m``
    ``(q, p)``, in ``a``'s dtype, as two BLAS products per range of the flattened rest, the
    ranges split over cores (a three-operand einsum would walk every index combination)."""
    q, p = m.shape
    rest = a.shape[2:]
    m = np.ascontiguousarray(m, a.dtype)
    flat = a.reshape(p, p, -1)
    out = np.empty((q, q, flat.shape[2]), a.dtype)

    def part(lo: int, hi: int) -> None:
        t = np.matmul(m, flat[:, :, lo:hi].reshape(p, -1)).reshape(q, p, -1)  # (u, j, r)
        out[:, :, lo:hi] = np.matmul(m, t)  # out[u, v] = m @ t[u]: (v, r)

    map_ranges(part, flat.shape[2], SANDWICH_MIN_COLUMNS)
    return out.reshape(q, q, *rest)


def filter_transform(w: np.ndarray, ctype: np.dtype, flipped: bool = False) -> np.ndarray:
    """``U[u*4+v] = (G w G^T)[u, v]``: ``(16, C, K)`` of a ``(3, 3, C, K)`` filter; with
    ``flipped``, of the input gradient's filter ``w[2-i, 2-j].T`` ``(16, K, C)``: each tap's
    matrix transposed first (the compiled layout copy: 9 planes, not the 16 of ``U``), then
    ``G``'s columns reversed (the transform is linear, so transposing before is transposing
    after)."""
    if not flipped:
        wc = np.ascontiguousarray(w, dtype=ctype)
        return sandwich(G, wc).reshape(16, *wc.shape[2:])
    wt = _transposed_taps(w, ctype)
    return sandwich(G[:, ::-1], wt).reshape(16, *wt.shape[2:])


#: The stride-2 polyphase input gradient's filter transform (see
#: :mod:`engine.kernels._compiled.winograd_phases`): F(3, 2)'s ``G = [[1,0],[.5,.5],[.5,-.5],
#: [0,1]]`` on the two-tap phase's taps ``(w[2], w[0])``, then ``w[1]``, the one filter of the
#: one-tap phase's three points.
PHASE_G = np.array([[0.0, 0.0, 1.0], [0.5, 0.0, 0.5], [-0.5, 0.0, 0.5], [1.0, 0.0, 0.0],
                    [0.0, 1.0, 0.0]])


def phase_filter_transform(w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """``U[5*u + v] = (PHASE_G w^T PHASE_G^T)[u, v]``: the 25 distinct ``(K, C)`` matrices of a
    ``(3, 3, C, K)`` filter, each tap's matrix transposed first."""
    wt = _transposed_taps(w, ctype)
    return sandwich(PHASE_G, wt).reshape(len(PHASE_G) ** 2, *wt.shape[2:])


def _transposed_taps(w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """``wt[i, j] = w[i, j].T``: ``(KH, KW, K, C)`` in ``ctype``, by the compiled layout copy."""
    from engine.kernels._compiled import transpose

    wc = np.ascontiguousarray(w, dtype=ctype)
    kh, kw, c, k = wc.shape
    return transpose.transposed_planes(wc.reshape(kh * kw, c, k)).reshape(kh, kw, k, c)
