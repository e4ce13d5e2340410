"""The depthwise filter gradient's tap sums (numba intrinsics, emitted as LLVM IR):
:func:`acc_products` (one tap), :func:`acc_products3` (three taps sharing ``g``) and
``acc_products3x3`` / ``acc_products5x5`` (a grid of taps, rows ``xr`` apart) compute

    ``t[a, k] += sum_{q < nq} x[x0 + off_a + q*xs + k] * g[g0 + q*gs + k]``   for ``k < C``

with the sum over ``q`` in order, one ``fmuladd`` per product (a fused multiply-add where the
CPU has one: the same rounding as the ``contract`` flag of the other compiled loops). Written in
numba these loops load and store ``t`` for every product (LLVM cannot know the arrays do not
overlap). These intrinsics emit the loop: ``TILE`` vector accumulators of channels at a time,
then single vectors, then the last channels in one masked vector, ``t`` read and written once
(the grids add a partial sum). Channels are independent: how they are grouped into vectors
changes no sum.

Bounds are the caller's duty (no checks inside): ``x``, ``g`` and ``t`` are C-contiguous, ``t``
is ``(C,)`` or ``(taps, C)``, and every index above is inside its array.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from engine.kernels._compiled.numba_simd import fmuladd, intrinsic_operands, registers


def _accepts(t, x, g, taps: int) -> bool:
    floats = (types.float32, types.float64)
    arrays = all(isinstance(a, types.Array) and a.layout == "C" for a in (t, x, g))
    return (arrays and t.dtype in floats and x.dtype == g.dtype == t.dtype
            and t.ndim == (1 if taps == 1 else 2) and x.ndim == g.ndim == 1)


def _tap_bases(builder, data, x0, xr, xc, rows: int, cols: int) -> list:
    """Pointers to ``x0 + i*xr + j*xc`` of ``data`` for the taps ``i*cols + j``."""
    i64 = ir.IntType(64)
    return [builder.gep(data, [builder.add(x0, builder.add(
        builder.mul(xr, ir.Constant(i64, a // cols)), builder.mul(xc, ir.Constant(i64, a % cols))))])
        for a in range(rows * cols)]


class _Plain:
    """Whole-vector loads and stores."""

    def __init__(self, builder):
        self.builder = builder

    def load(self, ptr):
        return self.builder.load(ptr, align=4)

    def store(self, value, ptr) -> None:
        self.builder.store(value, ptr, align=4)


class _Masked(_Plain):
    """Loads and stores of a vector's first ``count`` lanes (``llvm.masked.load`` / ``store``:
    the other lanes are neither read nor written, and load as zero)."""

    def __init__(self, builder, vty, count):
        super().__init__(builder)
        i64, i32 = ir.IntType(64), ir.IntType(32)
        n = vty.count
        bound = builder.insert_element(ir.Constant(ir.VectorType(i64, n), ir.Undefined), count,
                                       ir.Constant(i32, 0))
        bound = builder.shuffle_vector(bound, bound, ir.Constant(ir.VectorType(i32, n), [0] * n))
        self.mask = builder.icmp_signed("<", ir.Constant(ir.VectorType(i64, n), list(range(n))),
                                        bound)
        self.zero = ir.Constant(vty, [ir.Constant(vty.element, 0.0)] * n)
        name = f"v{n}f{32 if vty.element == ir.FloatType() else 64}.p0"
        ptr, mty = vty.as_pointer(), self.mask.type
        self.fload = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vty, [ptr, i32, mty, vty]), f"llvm.masked.load.{name}")
        self.fstore = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [vty, ptr, i32, mty]),
            f"llvm.masked.store.{name}")
        self.align = ir.Constant(i32, 4)

    def load(self, ptr):
        return self.builder.call(self.fload, [ptr, self.align, self.mask, self.zero])

    def store(self, value, ptr) -> None:
        self.builder.call(self.fstore, [value, ptr, self.align, self.mask])


def _opening(io: _Plain, fresh: bool, ptr):
    """An accumulator's first value: zero for a partial sum (``fresh``), else ``*ptr``."""
    ty = ptr.type.pointee
    return ir.Constant(ty, [ir.Constant(ty.element, 0.0)] * ty.count) if fresh else io.load(ptr)


def _closing(io: _Plain, fresh: bool, total, ptr) -> None:
    """``*ptr`` = the accumulator ``total``, added to ``*ptr`` for a partial sum."""
    io.store(io.builder.fadd(io.load(ptr), total) if fresh else total, ptr)


def _codegen(rows: int, cols: int, tile: int):
    """Taps ``a = i*cols + j`` of a ``rows x cols`` grid, tap ``a`` reading ``x`` from ``x0 +
    i*xr + j*xc`` (the grid intrinsics' arguments end ``(..., xr, xc)``, the others' ``(...,
    xt)``: ``xc``). The grid intrinsics' sums start from zero and are added into ``t`` at the
    end (one partial sum per call); the others sum onto ``t``."""
    taps = rows * cols

    def codegen(context, builder, signature, args):
        x0, g0, nq, xs, gs = args[3:8]
        ty = signature.args[0]
        (tarr, xarr, garr), _, lanes, vty = intrinsic_operands(context, builder, signature, args)
        i64 = ir.IntType(64)
        ck = builder.extract_value(tarr.shape, ty.ndim - 1)
        fresh = len(args) > 9
        xr, xc = args[8:10] if fresh else (args[8], args[8])
        tbase = [builder.gep(tarr.data, [builder.mul(ck, ir.Constant(i64, a))])
                 for a in range(taps)]
        xbase = _tap_bases(builder, xarr.data, x0, xr, xc, rows, cols)
        gbase = builder.gep(garr.data, [g0])
        accs = [[cgutils.alloca_once(builder, vty) for _ in range(tile)] for _ in range(taps)]

        def vector(ptr, off):
            return builder.bitcast(builder.gep(ptr, [off]), vty.as_pointer())

        def block(io: _Plain, k0, width: int) -> None:
            """Channels ``[k0, k0 + width*lanes)``, their sums in vector accumulators."""
            offs = [builder.add(k0, ir.Constant(i64, u * lanes)) for u in range(width)]
            for a in range(taps):
                for u in range(width):
                    builder.store(_opening(io, fresh, vector(tbase[a], offs[u])), accs[a][u])
            with cgutils.for_range(builder, nq) as q:
                gq = builder.gep(gbase, [builder.mul(q.index, gs)])
                xo = builder.mul(q.index, xs)
                gvec = [io.load(vector(gq, offs[u])) for u in range(width)]
                for a in range(taps):
                    xq = builder.gep(xbase[a], [xo])
                    for u in range(width):
                        acc = builder.load(accs[a][u])
                        builder.store(fmuladd(builder, io.load(vector(xq, offs[u])), gvec[u],
                                              acc), accs[a][u])
            for a in range(taps):
                for u in range(width):
                    _closing(io, fresh, builder.load(accs[a][u]), vector(tbase[a], offs[u]))

        def blocks(first, width: int):
            """Channels ``[first, first + n*width*lanes)`` in blocks of ``width`` vectors (the
            largest ``n`` that fits); returns the first channel after them."""
            step = ir.Constant(i64, lanes * width)
            count = builder.sdiv(builder.sub(ck, first), step)
            with cgutils.for_range(builder, count) as b:
                block(_Plain(builder), builder.add(first, builder.mul(b.index, step)), width)
            return builder.add(first, builder.mul(count, step))

        def part(first, end) -> None:
            """Channels ``[first, end)``, fewer than a vector, in one masked vector."""
            count = builder.sub(end, first)
            with builder.if_then(builder.icmp_signed(">", count, ir.Constant(i64, 0))):
                block(_Masked(builder, vty, count), first, 1)

        # wide blocks (independent chains overlap their adds), single vectors, the rest
        part(blocks(blocks(ir.Constant(i64, 0), tile), 1), ck)
        return context.get_dummy_value()

    return codegen


@intrinsic
def acc_products(typingctx, t, x, g, x0, g0, nq, xs, gs, xt):
    """One tap: ``t[k] += sum_q x[x0 + q*xs + k] * g[g0 + q*gs + k]`` (``xt`` unused)."""
    if not _accepts(t, x, g, 1):
        return None
    return types.void(t, x, g, x0, g0, nq, xs, gs, xt), _codegen(1, 1, 4)


@intrinsic
def acc_products3(typingctx, t, x, g, x0, g0, nq, xs, gs, xt):
    """Three taps ``a < 3`` of ``t (3, C)``, tap ``a`` reading ``x`` from ``x0 + a*xt``."""
    if not _accepts(t, x, g, 3):
        return None
    return types.void(t, x, g, x0, g0, nq, xs, gs, xt), _codegen(1, 3, 4)


def _grid(size: int):
    def typer(typingctx, t, x, g, x0, g0, nq, xs, gs, xr, xc):
        if not _accepts(t, x, g, size * size):
            return None
        return types.void(t, x, g, x0, g0, nq, xs, gs, xr, xc), _codegen(size, size,
                                                                         grid_width(size))

    typer.__name__ = f"acc_products{size}x{size}"
    return typer


def grid_width(size: int) -> int:
    """Vectors of channels per pass of a ``size x size`` grid: its accumulators, one vector of
    ``g`` per column and one of ``x`` fill the vector registers."""
    return max(1, (registers() - 1) // (size * size + 1))


#: ``t[i*size + j, k] += sum_q x[x0 + i*xr + j*xc + q*xs + k] * g[g0 + q*gs + k]`` (from zero)
acc_products3x3 = intrinsic(_grid(3))
acc_products5x5 = intrinsic(_grid(5))
