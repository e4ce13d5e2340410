"""The depthwise forward's 3x3 and 5x5 windows as numba intrinsics (imported by the compiled loops
only).

:func:`window3x3` (``K = 3``) and :func:`window5x5` (``K = 5``) compute, for ``q < nq``, ``k < C``,

    ``y[y0 + q*ys + k] = sum_{i, j < K} x[x0 + i*xrow + j*xcol + q*xs + k] * w[(K*i + j)*C + k]``

each sum starting from 0 and adding its ``K*K`` products in ``(i, j)`` order, one ``fmuladd`` each:
the same roundings as the plain loops of :mod:`engine.kernels._compiled.numba_depthwise` (which
zero a row and add the taps into it in that order). Those loops load and store the output row
for every filter row (numba tells LLVM nothing about which arrays may overlap); here
:data:`UNROLL` neighbouring pixels (:data:`UNROLL_STRIDED` for a strided 3x3 window) sum their
products in registers, in independent chains
(one chain would wait on each fused multiply-add's latency), a vector of channels at a time in
memory order, the weights of the vector loaded once for the group (nine fit in registers
beside the chains; 25 are reloaded from L1).

Bounds are the caller's duty (no checks inside): the three arrays are C-contiguous, 1-D, of one
float type, and every index above is inside its array.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from engine.kernels._compiled.numba_simd import fmuladd, intrinsic_operands

#: Pixels summed at once at column stride 1: four chains of nine products, the nine weights
#: and the loaded value fill AVX2's 16 vector registers.
UNROLL = 4
#: ... and for a 3x3 window at larger column strides, where a group of four pixels reads nine
#: columns of each input row per vector of channels (the guide's thresholds table has the
#: figures; a 5x5 window keeps :data:`UNROLL`).
UNROLL_STRIDED = 2


def _taps(size: int) -> tuple[tuple[int, int], ...]:
    """The taps ``(i, j)`` of a ``size x size`` window in the order every sum adds them."""
    return tuple((i, j) for i in range(size) for j in range(size))


def _codegen(size: int, unroll: int):
    def codegen(context, builder, signature, args):
        return _emit(context, builder, signature, args, _taps(size), unroll)

    return codegen


def _emit(context, builder, signature, args, taps, unroll):
    _, _, _, y0, x0, nq, ys, xs, xrow, xcol, ck, _ = args
    (yarr, xarr, warr), fty, lanes, vty = intrinsic_operands(context, builder, signature, args)
    i64 = ir.IntType(64)

    def const(v: int):
        return ir.Constant(i64, v)

    yp, xp, wp = builder.gep(yarr.data, [y0]), builder.gep(xarr.data, [x0]), warr.data
    tap_off = [builder.add(builder.mul(xrow, const(i)), builder.mul(xcol, const(j)))
               for i, j in taps]
    zero_v = ir.Constant(vty, [0.0] * lanes)

    def vector(ptr, off):
        return builder.bitcast(builder.gep(ptr, [off]), vty.as_pointer())

    def pixels(q0, count: int, k0, weights) -> None:
        """Pixels ``[q0, q0 + count)`` of the channel vector at ``k0``."""
        accs = [zero_v] * count
        xq = [builder.add(builder.mul(builder.add(q0, const(u)), xs), k0) for u in range(count)]
        for t in range(len(taps)):
            for u in range(count):
                xv = builder.load(vector(xp, builder.add(tap_off[t], xq[u])), align=4)
                accs[u] = fmuladd(builder, xv, weights[t], accs[u])
        for u in range(count):
            off = builder.add(builder.mul(builder.add(q0, const(u)), ys), k0)
            builder.store(accs[u], vector(yp, off), align=4)

    blocks = builder.sdiv(ck, const(lanes))

    def channel_vectors(q0, count: int) -> None:
        """Pixels ``[q0, q0 + count)``, vector of channels by vector (memory in order)."""
        with cgutils.for_range(builder, blocks) as kb:
            k0 = builder.mul(kb.index, const(lanes))
            weights = [builder.load(vector(wp, builder.add(builder.mul(ck, const(t)), k0)),
                                    align=4) for t in range(len(taps))]
            pixels(q0, count, k0, weights)

    groups = builder.sdiv(nq, const(unroll))
    with cgutils.for_range(builder, groups) as qb:
        channel_vectors(builder.mul(qb.index, const(unroll)), unroll)
    with cgutils.for_range_slice(builder, builder.mul(groups, const(unroll)), nq,
                                 const(1)) as (q, _):
        channel_vectors(q, 1)
    # the channels after the last whole vector, one at a time
    with (cgutils.for_range_slice(builder, builder.mul(blocks, const(lanes)), ck,
                                  const(1)) as (k, _),
          cgutils.for_range(builder, nq) as q):
        acc = ir.Constant(fty, 0.0)
        xq = builder.add(builder.mul(q.index, xs), k)
        for t in range(len(taps)):
            xv = builder.load(builder.gep(xp, [builder.add(tap_off[t], xq)]))
            wv = builder.load(builder.gep(wp, [builder.add(builder.mul(ck, const(t)), k)]))
            acc = fmuladd(builder, xv, wv, acc)
        builder.store(acc, builder.gep(yp, [builder.add(builder.mul(q.index, ys), k)]))
    return context.get_dummy_value()


def _accepts(y, x, w) -> bool:
    floats = (types.float32, types.float64)
    return (all(isinstance(a, types.Array) and a.layout == "C" and a.ndim == 1
                for a in (y, x, w)) and y.dtype in floats and x.dtype == w.dtype == y.dtype)


@intrinsic(prefer_literal=True)
def window3x3(typingctx, y, x, w, y0, x0, nq, ys, xs, xrow, xcol, ck, unroll):
    """``y[y0 + q*ys + k] = sum_{i,j<3} x[x0 + i*xrow + j*xcol + q*xs + k] * w[(3i+j)*ck + k]``
    for ``q < nq``, ``k < ck`` (see the module doc), ``unroll`` (a constant) pixels at once."""
    if not _accepts(y, x, w) or not isinstance(unroll, types.IntegerLiteral):
        return None
    return (types.void(y, x, w, y0, x0, nq, ys, xs, xrow, xcol, ck, unroll),
            _codegen(3, unroll.literal_value))


@intrinsic(prefer_literal=True)
def window5x5(typingctx, y, x, w, y0, x0, nq, ys, xs, xrow, xcol, ck, unroll):
    """:func:`window3x3` with a 5x5 window (``w[(5i+j)*ck + k]``)."""
    if not _accepts(y, x, w) or not isinstance(unroll, types.IntegerLiteral):
        return None
    return (types.void(y, x, w, y0, x0, nq, ys, xs, xrow, xcol, ck, unroll),
            _codegen(5, unroll.literal_value))
