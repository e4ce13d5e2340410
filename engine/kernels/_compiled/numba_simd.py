"""Register-accumulating products (numba intrinsics; imported by the compiled kernels only): the
register tiles of the per-tap conv products (:mod:`engine.kernels._compiled.conv_tiles_jit`:
:func:`gemm_acc`, :func:`gemm_set`, :func:`gemm_acc2`, :func:`gemm_rows`), Winograd's and the
few-channel loops' products, and what every intrinsic shares: the vector width chosen for this
CPU (:data:`VECTOR_BYTES`, :func:`registers`), :func:`fmuladd` and :func:`intrinsic_operands`.
The depthwise filter gradient's tap sums are :mod:`engine.kernels._compiled.tap_sums`.
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


def prefetch_write(builder: ir.IRBuilder, ptr) -> None:
    """Ask for ``ptr``'s cache line to be written soon (``llvm.prefetch``: write, keep; a
    hint, no effect on values)."""
    i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch")
    builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 1), ir.Constant(i32, 3),
                      ir.Constant(i32, 1)])


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


def _gemm_codegen(accumulate: bool, two_level: bool = False, indexed: bool = False,
                  tabled: bool = False):
    """``C (+)= A @ B`` in register tiles of ``MR`` rows by ``NR`` vectors of columns (the
    last ``m % MR`` rows as one tile of that many rows; then single vectors, then single
    columns), the sum over ``l`` in order (with ``two_level``, over ``(l2, l)`` in order)
    starting from 0 and added to ``C`` at the end: each call is one block of a two-level sum,
    so a long sum split into calls of ``k`` terms rounds like ``k`` and ``calls``, not like
    their product. With ``indexed`` row ``i`` of the product is row ``crow[i]`` of ``C`` and
    starts at element ``aoff[i]`` of ``A`` (two int64 arrays after ``b``; no ``ars``). With
    ``tabled`` the outer index ``l2 < kd2`` steps ``A`` by ``atab[l2]`` and ``B`` by
    ``btab[l2]`` (two int64 arrays after ``b``): the taps of a conv, each its own shift."""
    def codegen(context, builder, signature, args):
        if indexed:
            _, _, _, aoff, crow, c0, a0, b0, m, n, kd, ldc, acs, brs, kd2, acs2, brs2 = args
            aoff_p, crow_p = (context.make_array(signature.args[i])(context, builder, v).data
                              for i, v in ((3, aoff), (4, crow)))
        elif tabled:
            _, _, _, atab, btab, c0, a0, b0, m, n, kd, ldc, ars, acs, brs, kd2 = args
            atab_p, btab_p = (context.make_array(signature.args[i])(context, builder, v).data
                              for i, v in ((3, atab), (4, btab)))
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
            if not (two_level or indexed or tabled):
                with cgutils.for_range(builder, kd) as l:
                    yield builder.mul(l.index, acs), builder.mul(l.index, brs)
                return
            with cgutils.for_range(builder, kd2) as l2:
                if tabled:
                    a2, b2 = (builder.load(builder.gep(t, [l2.index])) for t in (atab_p, btab_p))
                else:
                    a2, b2 = builder.mul(l2.index, acs2), builder.mul(l2.index, brs2)
                with cgutils.for_range(builder, kd) as l:
                    yield (builder.add(a2, builder.mul(l.index, acs)),
                           builder.add(b2, builder.mul(l.index, brs)))

        def tile(i0, rows: int, j0, nvec: int) -> None:
            coff = [builder.add(c_row(builder.add(i0, const(r))), j0) for r in range(rows)]
            for r in range(rows):
                for u in range(nvec):
                    builder.store(zero, accs[r][u])
                    if tabled:  # C is a large result: its lines come while the tile sums
                        prefetch_write(builder, builder.gep(cp, [builder.add(coff[r],
                                                                             const(u * lanes))]))
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


def _gemm_taps(accumulate: bool):
    def typer(typingctx, c, a, b, atab, btab, c0, a0, b0, m, n, kd, ldc, ars, acs, brs, taps):
        ints = all(isinstance(t, types.Array) and t.layout == "C" and t.ndim == 1
                   and t.dtype == types.int64 for t in (atab, btab))
        if not (ints and _gemm_accepts(c, a, b)):
            return None
        sig = types.void(c, a, b, atab, btab, c0, a0, b0, m, n, kd, ldc, ars, acs, brs, taps)
        return sig, _gemm_codegen(accumulate, tabled=True)
    return typer


#: :func:`gemm_acc` summing over ``taps`` shifted operands (in tap order, then ``l``):
#: ``C[i, j]`` at ``c0 + i*ldc + j`` += the sum over ``t < taps``, ``l < kd`` of ``A[i, (t,
#: l)]`` at ``a0 + atab[t] + i*ars + l*acs`` times ``B[(t, l), j]`` at ``b0 + btab[t] + l*brs
#: + j``: every tap of a conv in one register tile, so ``C`` is read and written once, not
#: once per tap. Arguments ``(c, a, b, atab, btab, c0, a0, b0, m, n, kd, ldc, ars, acs, brs,
#: taps)``.
gemm_taps = intrinsic(_gemm_taps(True))
#: :func:`gemm_taps` writing ``C``'s rows instead of adding to them.
gemm_taps_set = intrinsic(_gemm_taps(False))


def registers() -> int:
    """Vector registers of the unit :data:`VECTOR_BYTES` is written for (32 with AVX-512)."""
    return 32 if VECTOR_BYTES == 64 else 16


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
