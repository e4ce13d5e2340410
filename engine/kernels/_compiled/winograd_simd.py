"""Winograd F(2x2, 3x3) tile transforms as numba intrinsics (imported by the compiled loops only).

Each intrinsic computes, for every channel ``k < n``, the transform ``P = L d R^T`` of one tile
``d`` with constant matrices ``L`` (``p x i``) and ``R`` (``q x j``) of 0 and ±1:

    ``d[i, j] = src[s0 + i*srow + j*scol + k]``,  ``out[o0 + u*orow + v*ocol + k] = P[u, v]``

- :func:`input_transform`:  ``L = R = B^T`` (4x4 input tile to 16 points);
- :func:`grad_transform`:   ``L = R = A`` (2x2 output-gradient tile to 16 points);
- :func:`output_transform`: ``L = R = A^T`` (16 points to a 2x2 output tile);
- :func:`phase_input_transform`, :func:`phase_output_transform`: the stride-2 polyphase
  transforms of :mod:`engine.kernels._compiled.winograd_phases` (``L = R =`` :data:`PHASE_IN`,
  a 4x4 output-gradient tile to 49 points; ``L = R =`` :data:`PHASE_OUT`, 49 points to a 6x6
  input-gradient tile).

Written as plain numba loops, the 16 loads and 16 stores of a tile are 32 arrays or offsets
that LLVM cannot prove apart, so it does not vectorize them, and the table-driven loop it does vectorize reads each element once per point
(64 loads per tile and channel vector). These emit the vector code themselves: per vector of
channels, ``d`` is loaded once, ``T = L d`` and ``P = T R^T`` are formed in registers with
adds and subtracts only (separably, in the order of the matrices' columns), and ``P`` is stored
once; then the channels after the last whole vector, one at a time. Every result is a sum of
at most 4 terms of ``d`` (9 for the output transform) with IEEE adds (no fused or reordered
operations), so it is the same on every CPU.

Bounds are the caller's duty (no checks inside): ``out`` and ``src`` are C-contiguous 1-D
arrays of one float type, and every index above is inside its array.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from engine.kernels._compiled.numba_simd import intrinsic_operands

#: ``B^T``, ``A`` and ``A^T`` of F(2x2, 3x3).
B_T = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))
A = ((1, 0), (1, 1), (1, -1), (0, -1))
A_T = ((1, 1, 1, 0), (0, 1, -1, -1))
#: ``B^T`` and ``A^T`` of F(3, 2) (points 0, 1, -1 and infinity), for the correlation
#: ``y[t] = d[t] f[0] + d[t + 1] f[1]``, ``t < 3``, of 4 values ``d`` with 2 taps ``f``.
B3_T = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, -1, 0, 1))
A3_T = ((1, 1, 1, 0), (0, 1, -1, 0), (0, 1, 1, 1))
#: Along one axis of a stride-2 3-tap input gradient: 7 points of 4 output-gradient values,
#: F(3, 2)'s 4 for the two-tap phase, then ``d[1..3]`` for the one-tap phase...
PHASE_IN = B3_T + ((0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1))
#: ... and 6 results of the 7 points in pixel order, two-tap and one-tap phase alternating.
PHASE_OUT = tuple(row for t in range(3) for row in (
    A3_T[t] + (0, 0, 0), tuple(int(p == 4 + t) for p in range(7))))


def _combine(builder: ir.IRBuilder, coefs: tuple[int, ...], values: list):
    """``sum_i coefs[i] * values[i]`` (coefficients 0 or ±1) in the order of ``i``, a
    positive term first where there is one."""
    terms = [(c, v) for c, v in zip(coefs, values, strict=True) if c]
    terms.sort(key=lambda t: t[0] < 0)  # stable: positive terms first, each kept in order
    c, total = terms[0]
    if c < 0:
        total = builder.fneg(total)
    for c, v in terms[1:]:
        total = builder.fadd(total, v) if c > 0 else builder.fsub(total, v)
    return total


def _transform_codegen(left: tuple, right: tuple):
    def codegen(context, builder, signature, args):
        _, _, o0, s0, n, srow, scol, orow, ocol = args
        (oarr, sarr), _, lanes, vty = intrinsic_operands(context, builder, signature, args, 2)
        i64 = ir.IntType(64)
        op, sp = builder.gep(oarr.data, [o0]), builder.gep(sarr.data, [s0])
        rows_in, cols_in = len(left[0]), len(right[0])
        soff = [[builder.add(builder.mul(srow, ir.Constant(i64, i)),
                             builder.mul(scol, ir.Constant(i64, j))) for j in range(cols_in)]
                for i in range(rows_in)]
        ooff = [[builder.add(builder.mul(orow, ir.Constant(i64, u)),
                             builder.mul(ocol, ir.Constant(i64, v))) for v in range(len(right))]
                for u in range(len(left))]

        def tile(k, load, store) -> None:
            d = [[load(builder.add(soff[i][j], k)) for j in range(cols_in)]
                 for i in range(rows_in)]
            t = [[_combine(builder, row, [d[i][j] for i in range(rows_in)])
                  for j in range(cols_in)] for row in left]
            for u, tu in enumerate(t):
                for v, row in enumerate(right):
                    store(builder.add(ooff[u][v], k), _combine(builder, row, tu))

        def vload(off):
            ptr = builder.bitcast(builder.gep(sp, [off]), vty.as_pointer())
            return builder.load(ptr, align=4)

        def vstore(off, value) -> None:
            builder.store(value, builder.bitcast(builder.gep(op, [off]), vty.as_pointer()),
                          align=4)

        step = ir.Constant(i64, lanes)
        count = builder.sdiv(n, step)
        with cgutils.for_range(builder, count) as block:
            tile(builder.mul(block.index, step), vload, vstore)
        with cgutils.for_range_slice(builder, builder.mul(count, step), n,
                                     ir.Constant(i64, 1)) as (k, _):
            tile(k, lambda off: builder.load(builder.gep(sp, [off])),
                 lambda off, value: builder.store(value, builder.gep(op, [off])))
        return context.get_dummy_value()

    return codegen


def _accepts(out, src, ints: tuple) -> bool:
    floats = (types.float32, types.float64)
    return (all(isinstance(a, types.Array) and a.layout == "C" and a.ndim == 1
                for a in (out, src)) and out.dtype in floats and src.dtype == out.dtype
            and all(isinstance(i, types.Integer) and i.bitwidth == 64 for i in ints))


def _transform(left: tuple, right: tuple, doc: str):
    """The intrinsic ``(out, src, o0, s0, n, srow, scol, orow, ocol)`` of ``P = L d R^T``."""
    def transform(typingctx, out, src, o0, s0, n, srow, scol, orow, ocol):
        ints = (o0, s0, n, srow, scol, orow, ocol)
        if not _accepts(out, src, ints):
            return None
        return types.void(out, src, *ints), _transform_codegen(left, right)

    transform.__doc__ = doc
    return intrinsic(transform)


input_transform = _transform(B_T, B_T, "``B^T d B`` of the 4x4 tile ``d`` at ``s0`` into the 16 "
                             "points at ``o0``.")
grad_transform = _transform(A, A, "``A e A^T`` of the 2x2 tile ``e`` at ``s0`` into the 16 "
                            "points at ``o0``.")
output_transform = _transform(A_T, A_T, "``A^T m A`` of the 16 points ``m`` at ``s0`` into the "
                              "2x2 tile at ``o0``.")
phase_input_transform = _transform(PHASE_IN, PHASE_IN, "``L d L^T`` (``L`` :data:`PHASE_IN`) of "
                                   "the 4x4 tile ``d`` at ``s0`` into the 49 points at ``o0``.")
phase_output_transform = _transform(PHASE_OUT, PHASE_OUT, "``L m L^T`` (``L`` :data:`PHASE_OUT`) "
                                    "of the 49 points ``m`` at ``s0`` into the 6x6 tile at ``o0``.")
