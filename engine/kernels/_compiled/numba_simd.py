"""Register-accumulating product sums (numba intrinsics; imported by the compiled kernels only):
the depthwise filter gradient's tap sums, Winograd's per-point products and the per-tap conv
products of :mod:`engine.kernels._compiled.conv_tiles_jit` (:func:`gemm_acc`, :func:`gemm_set`,
:func:`gemm_acc2`).

:func:`acc_products` (one tap), :func:`acc_products3` (three taps sharing ``g``) and
``acc_products3x3`` / ``acc_products5x5`` (a grid of taps, rows ``xr`` apart) compute

    ``t[a, k] += sum_{q < nq} x[x0 + off_a + q*xs + k] * g[g0 + q*gs + k]``   for ``k < C``

with the sum over ``q`` in order, one ``fmuladd`` per product (a fused multiply-add where the
CPU has one: the same rounding as the ``contract`` flag of the other compiled loops). Written in
numba these loops load and store ``t`` for every product (LLVM cannot know the arrays do not
overlap). These intrinsics emit the loop: ``TILE`` vector accumulators of channels at a time,
then single vectors, then channels, ``t`` read and written once (the grids add a partial sum).

Bounds are the caller's duty (no checks inside): ``x``, ``g`` and ``t`` are C-contiguous, ``t``
is ``(C,)`` or ``(taps, C)``, and every index above is inside its array.
"""

from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _vector_bytes() -> int:
    """64 (AVX-512) when this CPU has it, else 32 (AVX2; LLVM splits the vectors for narrower
    units)."""
    from llvmlite import binding

    try:
        features = binding.get_host_cpu_features()
    except RuntimeError:  # pragma: no cover - a host llvmlite cannot describe
        return 32
    return 64 if features.get("avx512f") else 32


#: Bytes per vector the loops are written for (see :func:`_vector_bytes`).
VECTOR_BYTES = _vector_bytes()


def fmuladd(builder: ir.IRBuilder, a, b, acc):
    """``a * b + acc``, fused when the target has a fast FMA (``llvm.fmuladd``)."""
    t = a.type
    width = 32 if str(t.element if isinstance(t, ir.VectorType) else t) == "float" else 64
    name = (f"llvm.fmuladd.v{t.count}f{width}" if isinstance(t, ir.VectorType)
            else f"llvm.fmuladd.f{width}")
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t, t, t]), name)
    return builder.call(fn, [a, b, acc])


def _accepts(t, x, g, taps: int) -> bool:
    floats = (types.float32, types.float64)
    arrays = all(isinstance(a, types.Array) and a.layout == "C" for a in (t, x, g))
    return (arrays and t.dtype in floats and x.dtype == g.dtype == t.dtype
            and t.ndim == (1 if taps == 1 else 2) and x.ndim == g.ndim == 1)


def intrinsic_operands(context, builder, signature, args, count: int = 3):
    """The first ``count`` array arguments (numba's array structs), the element type, the
    lanes per vector and the vector type (also used by :mod:`engine.kernels._compiled.winograd_simd`
    and :mod:`engine.kernels._compiled.simd_runs`)."""
    arrays = tuple(context.make_array(signature.args[i])(context, builder, args[i])
                   for i in range(count))
    dtype = signature.args[0].dtype
    fty = context.get_data_type(dtype)
    lanes = VECTOR_BYTES // (4 if dtype == types.float32 else 8)
    return arrays, fty, lanes, ir.VectorType(fty, lanes)


def _tap_bases(builder, data, x0, xr, xc, rows: int, cols: int) -> list:
    """Pointers to ``x0 + i*xr + j*xc`` of ``data`` for the taps ``i*cols + j``."""
    i64 = ir.IntType(64)
    return [builder.gep(data, [builder.add(x0, builder.add(
        builder.mul(xr, ir.Constant(i64, a // cols)), builder.mul(xc, ir.Constant(i64, a % cols))))])
        for a in range(rows * cols)]


def _opening(builder, fresh: bool, ptr):
    """An accumulator's first value: zero for a partial sum (``fresh``), else ``*ptr``."""
    ty = ptr.type.pointee
    if not fresh:
        return builder.load(ptr, align=4)
    return ir.Constant(ty, [ir.Constant(ty.element, 0.0)] * ty.count
                       if isinstance(ty, ir.VectorType) else 0.0)


def _closing(builder, fresh: bool, total, ptr) -> None:
    """``*ptr`` = the accumulator ``total``, added to ``*ptr`` for a partial sum."""
    if fresh:
        total = builder.fadd(builder.load(ptr, align=4), total)
    builder.store(total, ptr, align=4)


def _codegen(rows: int, cols: int, tile: int):
    """Taps ``a = i*cols + j`` of a ``rows x cols`` grid, tap ``a`` reading ``x`` from ``x0 +
    i*xr + j*xc`` (the grid intrinsics' arguments end ``(..., xr, xc)``, the others' ``(...,
    xt)``: ``xc``). The grid intrinsics' sums start from zero and are added into ``t`` at the
    end (one partial sum per call); the others sum onto ``t``."""
    taps = rows * cols

    def codegen(context, builder, signature, args):
        x0, g0, nq, xs, gs = args[3:8]
        ty = signature.args[0]
        (tarr, xarr, garr), fty, lanes, vty = intrinsic_operands(context, builder, signature, args)
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

        def blocks(first, width: int):
            """Channels ``[first, first + n*width*lanes)`` in blocks of ``width`` vectors (the
            largest ``n`` that fits); returns the first channel after them."""
            step = ir.Constant(i64, lanes * width)
            count = builder.sdiv(builder.sub(ck, first), step)
            with cgutils.for_range(builder, count) as block:
                k0 = builder.add(first, builder.mul(block.index, step))
                offs = [builder.add(k0, ir.Constant(i64, u * lanes)) for u in range(width)]
                for a in range(taps):
                    for u in range(width):
                        builder.store(_opening(builder, fresh, vector(tbase[a], offs[u])),
                                      accs[a][u])
                with cgutils.for_range(builder, nq) as q:
                    gq = builder.gep(gbase, [builder.mul(q.index, gs)])
                    xo = builder.mul(q.index, xs)
                    gvec = [builder.load(vector(gq, offs[u]), align=4) for u in range(width)]
                    for a in range(taps):
                        xq = builder.gep(xbase[a], [xo])
                        for u in range(width):
                            xvec = builder.load(vector(xq, offs[u]), align=4)
                            acc = builder.load(accs[a][u])
                            builder.store(fmuladd(builder, xvec, gvec[u], acc), accs[a][u])
                for a in range(taps):
                    for u in range(width):
                        _closing(builder, fresh, builder.load(accs[a][u]),
                                 vector(tbase[a], offs[u]))
            return builder.add(first, builder.mul(count, step))

        # wide blocks (independent chains overlap their adds), then single vectors
        rest = blocks(blocks(ir.Constant(i64, 0), tile), 1)
        # the channels after the last whole vector, one at a time
        acc1 = cgutils.alloca_once(builder, fty)
        with cgutils.for_range_slice(builder, rest, ck, ir.Constant(i64, 1)) as (k, _):
            for a in range(taps):
                builder.store(_opening(builder, fresh, builder.gep(tbase[a], [k])), acc1)
                with cgutils.for_range(builder, nq) as q:
                    xi = builder.add(builder.mul(q.index, xs), k)
                    gi = builder.add(builder.mul(q.index, gs), k)
                    prod = fmuladd(builder, builder.load(builder.gep(xbase[a], [xi])),
                                    builder.load(builder.gep(gbase, [gi])), builder.load(acc1))
                    builder.store(prod, acc1)
                _closing(builder, fresh, builder.load(acc1), builder.gep(tbase[a], [k]))
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


def registers() -> int:
    """Vector registers of the unit :data:`VECTOR_BYTES` is written for (32 with AVX-512)."""
    return 32 if VECTOR_BYTES == 64 else 16


def grid_width(size: int) -> int:
    """Vectors of channels per pass of a ``size x size`` grid: its accumulators, one vector of
    ``g`` per column and one of ``x`` fill the vector registers."""
    return max(1, (registers() - 1) // (size * size + 1))


#: ``t[i*size + j, k] += sum_q x[x0 + i*xr + j*xc + q*xs + k] * g[g0 + q*gs + k]`` (from zero)
acc_products3x3 = intrinsic(_grid(3))
acc_products5x5 = intrinsic(_grid(5))


def _gemm_codegen(accumulate: bool, two_level: bool = False, indexed: bool = False):
    """``C (+)= A @ B`` in register tiles of ``MR`` rows by ``NR`` vectors of columns (the
    last ``m % MR`` rows as one tile of that many rows; then single vectors, then single
    columns), the sum over ``l`` in order (with ``two_level``, over ``(l2, l)`` in order)
    starting from 0 and added to ``C`` at the end: each call is one block of a two-level sum,
    so a long sum split into calls of ``k`` terms rounds like ``k`` and ``calls``, not like
    their product. With ``indexed`` row ``i`` of the product is row ``crow[i]`` of ``C`` and
    starts at element ``aoff[i]`` of ``A`` (two int64 arrays after ``b``; no ``ars``)."""
    def codegen(context, builder, signature, args):
        if indexed:
            _, _, _, aoff, crow, c0, a0, b0, m, n, kd, ldc, acs, brs, kd2, acs2, brs2 = args
            aoff_p, crow_p = (context.make_array(signature.args[i])(context, builder, v).data
                              for i, v in ((3, aoff), (4, crow)))
        else:
            _, _, _, c0, a0, b0, m, n, kd, ldc, ars, acs, brs = args[:13]
            kd2, acs2, brs2 = args[13:] if two_level else (None, None, None)
        (carr, aarr, barr), fty, lanes, vty = intrinsic_operands(context, builder, signature, args)

        def c_row(i):  # the element offset of the product's row i in C ...
            if indexed:
                return builder.mul(builder.load(builder.gep(crow_p, [i])), ldc)
            return builder.mul(i, ldc)

        def a_row(i):  # ... and in A
            return builder.load(builder.gep(aoff_p, [i])) if indexed else builder.mul(i, ars)

        mr, nr = tile_shape()
        i64, i32 = ir.IntType(64), ir.IntType(32)
        cp = builder.gep(carr.data, [c0])
        ap = builder.gep(aarr.data, [a0])
        bp = builder.gep(barr.data, [b0])
        accs = [[cgutils.alloca_once(builder, vty) for _ in range(nr)] for _ in range(mr)]
        acc1 = cgutils.alloca_once(builder, fty)
        splat_mask = ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
        undef = ir.Constant(vty, ir.Undefined)
        zero = ir.Constant(vty, [0.0] * lanes)

        def const(v: int):
            return ir.Constant(i64, v)

        def vector(ptr, off):
            return builder.bitcast(builder.gep(ptr, [off]), vty.as_pointer())

        @contextmanager
        def k_loop():
            """The sum's loop(s), yielding the offsets of step ``l`` into A and into B."""
            if not (two_level or indexed):
                with cgutils.for_range(builder, kd) as l:
                    yield builder.mul(l.index, acs), builder.mul(l.index, brs)
                return
            with cgutils.for_range(builder, kd2) as l2:
                a2, b2 = builder.mul(l2.index, acs2), builder.mul(l2.index, brs2)
                with cgutils.for_range(builder, kd) as l:
                    yield (builder.add(a2, builder.mul(l.index, acs)),
                           builder.add(b2, builder.mul(l.index, brs)))

        def tile(i0, rows: int, j0, nvec: int) -> None:
            coff = [builder.add(c_row(builder.add(i0, const(r))), j0) for r in range(rows)]
            for r in range(rows):
                for u in range(nvec):
                    builder.store(zero, accs[r][u])
            arow = [a_row(builder.add(i0, const(r))) for r in range(rows)]
            with k_loop() as (loff, koff):
                boff = builder.add(koff, j0)
                bvec = [builder.load(vector(bp, builder.add(boff, const(u * lanes))), align=4)
                        for u in range(nvec)]
                for r in range(rows):
                    a = builder.load(builder.gep(ap, [builder.add(arow[r], loff)]))
                    splat = builder.shuffle_vector(
                        builder.insert_element(undef, a, ir.Constant(i32, 0)), undef, splat_mask)
                    for u in range(nvec):
                        acc = builder.load(accs[r][u])
                        builder.store(fmuladd(builder, splat, bvec[u], acc), accs[r][u])
            for r in range(rows):
                for u in range(nvec):
                    dst = vector(cp, builder.add(coff[r], const(u * lanes)))
                    total = builder.load(accs[r][u])
                    if accumulate:  # C + (the tile's own sum): a two-level sum
                        total = builder.fadd(builder.load(dst, align=4), total)
                    builder.store(total, dst, align=4)

        def columns(j0, nvec: int):
            step = const(nvec * lanes)
            count = builder.sdiv(builder.sub(n, j0), step)
            with cgutils.for_range(builder, count) as jb:
                js = builder.add(j0, builder.mul(jb.index, step))
                blocks = builder.sdiv(m, const(mr))
                with cgutils.for_range(builder, blocks) as ib:
                    tile(builder.mul(ib.index, const(mr)), mr, js, nvec)
                last = builder.mul(blocks, const(mr))
                rem = builder.sub(m, last)
                for rows in range(1, mr):  # the last rows as one narrower tile
                    with builder.if_then(builder.icmp_signed("==", rem, const(rows))):
                        tile(last, rows, js, nvec)
            return builder.add(j0, builder.mul(count, step))

        rest = columns(columns(const(0), nr), 1)
        with (cgutils.for_range_slice(builder, rest, n, const(1)) as (j, _),
              cgutils.for_range(builder, m) as i):
            ci = builder.add(c_row(i.index), j)
            builder.store(ir.Constant(fty, 0), acc1)
            ai = a_row(i.index)
            with k_loop() as (loff, koff):
                a = builder.load(builder.gep(ap, [builder.add(ai, loff)]))
                b = builder.load(builder.gep(bp, [builder.add(koff, j)]))
                builder.store(fmuladd(builder, a, b, builder.load(acc1)), acc1)
            total = builder.load(acc1)
            if accumulate:
                total = builder.fadd(builder.load(builder.gep(cp, [ci])), total)
            builder.store(total, builder.gep(cp, [ci]))
        return context.get_dummy_value()

    return codegen


def _gemm_accepts(c, a, b) -> bool:
    floats = (types.float32, types.float64)
    return (all(isinstance(x, types.Array) and x.layout == "C" and x.ndim == 1
                for x in (c, a, b)) and c.dtype in floats and a.dtype == b.dtype == c.dtype)


@intrinsic
def gemm_acc(typingctx, c, a, b, c0, a0, b0, m, n, kd, ldc, ars, acs, brs):
    """``C += A @ B`` on flat arrays: ``C[i, j]`` at ``c0 + i*ldc + j``, ``A[i, l]`` at
    ``a0 + i*ars + l*acs``, ``B[l, j]`` at ``b0 + l*brs + j`` (``i < m``, ``j < n``, ``l < kd``)."""
    if not _gemm_accepts(c, a, b):
        return None
    return types.void(c, a, b, c0, a0, b0, m, n, kd, ldc, ars, acs, brs), _gemm_codegen(True)


@intrinsic
def gemm_set(typingctx, c, a, b, c0, a0, b0, m, n, kd, ldc, ars, acs, brs):
    """``C = A @ B``, addressed as :func:`gemm_acc`."""
    if not _gemm_accepts(c, a, b):
        return None
    return types.void(c, a, b, c0, a0, b0, m, n, kd, ldc, ars, acs, brs), _gemm_codegen(False)


@intrinsic
def gemm_acc2(typingctx, c, a, b, c0, a0, b0, m, n, kd, ldc, ars, acs, brs, kd2, acs2, brs2):
    """:func:`gemm_acc` summing over two indices ``l2 < kd2``, ``l < kd`` (in that order):
    ``A[i, (l2, l)]`` at ``a0 + i*ars + l2*acs2 + l*acs``, ``B[(l2, l), j]`` at
    ``b0 + l2*brs2 + l*brs + j`` (a sum over a 2-D window, e.g. rows x columns of pixels)."""
    if not _gemm_accepts(c, a, b):
        return None
    sig = types.void(c, a, b, c0, a0, b0, m, n, kd, ldc, ars, acs, brs, kd2, acs2, brs2)
    return sig, _gemm_codegen(True, two_level=True)


def _gemm_rows(accumulate: bool):
    def typer(typingctx, c, a, b, aoff, crow, c0, a0, b0, m, n, kd, ldc, acs, brs, kd2, acs2,
              brs2):
        ints = all(isinstance(t, types.Array) and t.layout == "C" and t.ndim == 1
                   and t.dtype == types.int64 for t in (aoff, crow))
        if not (ints and _gemm_accepts(c, a, b)):
            return None
        sig = types.void(c, a, b, aoff, crow, c0, a0, b0, m, n, kd, ldc, acs, brs, kd2, acs2,
                         brs2)
        return sig, _gemm_codegen(accumulate, two_level=True, indexed=True)
    return typer


#: :func:`gemm_acc2` over rows picked by two int64 tables: ``C[crow[i], j]`` at
#: ``c0 + crow[i]*ldc + j`` += the sum over ``l2 < kd2``, ``l < kd`` of ``A[i, (l2, l)]`` at
#: ``a0 + aoff[i] + l2*acs2 + l*acs`` times ``B[(l2, l), j]`` at ``b0 + l2*brs2 + l*brs + j``
#: (``i < m``: a product over rows of ``A`` that are no one stride apart, e.g. the taps of a
#: conv filter read in place). Arguments ``(c, a, b, aoff, crow, c0, a0, b0, m, n, kd, ldc,
#: acs, brs, kd2, acs2, brs2)``.
gemm_rows = intrinsic(_gemm_rows(True))
#: :func:`gemm_rows` writing ``C``'s rows instead of adding to them.
gemm_rows_set = intrinsic(_gemm_rows(False))


def lanes(itemsize: int) -> int:
    """Elements per vector of the loops above for an item of ``itemsize`` bytes."""
    return VECTOR_BYTES // itemsize


def tile_shape() -> tuple[int, int]:
    """Rows and vectors of columns of one :func:`gemm_acc` register tile: the accumulators and
    the operands of one step fill the vector registers (32 with AVX-512, 16 without)."""
    return (6, 4) if VECTOR_BYTES == 64 else (6, 2)


def tile_columns(itemsize: int) -> int:
    """Columns of one :func:`gemm_acc` register tile for an item of ``itemsize`` bytes."""
    return tile_shape()[1] * lanes(itemsize)
