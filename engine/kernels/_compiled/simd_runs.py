"""Vector copies and adds of one contiguous run into another, as numba intrinsics (imported by
the compiled loops only).

:func:`add_into` computes ``out[o0 + k] += src[s0 + k]`` and :func:`copy_into`
``out[o0 + k] = src[s0 + k]`` for ``k < n``; :func:`finite_run` tells whether ``a[a0 + k]``,
``k < n``, are all finite (the loops check each block they wrote while it is in cache): whole
vectors of
:data:`engine.kernels._compiled.numba_simd.VECTOR_BYTES`, then the last ``n % lanes`` elements one
at a time. Written as a numba loop, a run of a few dozen elements is not vectorized (LLVM cannot
prove ``out`` and ``src`` apart, and the check it would add costs more than such a short run): the
col2im input gradient's runs of ``KW * C`` elements (21 for a 7x7 filter on 3 channels) are such
runs.

Bounds are the caller's duty (no checks inside): both arrays are C-contiguous, 1-D, of one
float type, and every index above is inside its array. Each element is one IEEE add (or a
plain copy). A copy of at least one vector ends with the (overlapping) vector that ends at
``n`` instead of the element loop.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from engine.kernels._compiled import numba_simd
from engine.kernels._compiled.numba_simd import intrinsic_operands


def _codegen(add: bool):
    def codegen(context, builder, signature, args):
        return _emit(context, builder, signature, args, add)

    return codegen


def _emit(context, builder, signature, args, add: bool):
    _, _, o0, s0, n = args
    (oarr, sarr), _, lanes, vty = intrinsic_operands(context, builder, signature, args, 2)
    i64 = ir.IntType(64)
    op, sp = builder.gep(oarr.data, [o0]), builder.gep(sarr.data, [s0])

    def vector(ptr, off):
        return builder.bitcast(builder.gep(ptr, [off]), vty.as_pointer())

    step = ir.Constant(i64, lanes)
    count = builder.sdiv(n, step)
    with cgutils.for_range(builder, count) as block:
        k = builder.mul(block.index, step)
        value = builder.load(vector(sp, k), align=4)
        if add:
            value = builder.fadd(builder.load(vector(op, k), align=4), value)
        builder.store(value, vector(op, k), align=4)
    tail = builder.mul(count, step)
    if not add:  # a copy of at least one vector ends with the vector that ends at n
        last = builder.sub(n, step)
        whole = builder.and_(builder.icmp_signed(">", count, ir.Constant(i64, 0)),
                             builder.icmp_signed("<", tail, n))
        with builder.if_then(whole):
            builder.store(builder.load(vector(sp, last), align=4), vector(op, last), align=4)
        tail = builder.select(whole, n, tail)
    with cgutils.for_range_slice(builder, tail, n, ir.Constant(i64, 1)) as (k, _):
        dst = builder.gep(op, [k])
        value = builder.load(builder.gep(sp, [k]))
        if add:
            value = builder.fadd(builder.load(dst), value)
        builder.store(value, dst)
    return context.get_dummy_value()


def _accepts(out, src, o0, s0, n) -> bool:
    floats = (types.float32, types.float64)
    arrays = all(isinstance(a, types.Array) and a.layout == "C" and a.ndim == 1
                 for a in (out, src))
    ints = all(isinstance(i, types.Integer) and i.bitwidth == 64 for i in (o0, s0, n))
    return arrays and ints and out.dtype in floats and src.dtype == out.dtype


@intrinsic
def add_into(typingctx, out, src, o0, s0, n):
    """``out[o0 + k] += src[s0 + k]`` for ``k < n``."""
    if not _accepts(out, src, o0, s0, n):
        return None
    return types.void(out, src, o0, s0, n), _codegen(add=True)


@intrinsic
def copy_into(typingctx, out, src, o0, s0, n):
    """``out[o0 + k] = src[s0 + k]`` for ``k < n``."""
    if not _accepts(out, src, o0, s0, n):
        return None
    return types.void(out, src, o0, s0, n), _codegen(add=False)


#: Independent vector sums of :func:`finite_run` (so the adds do not wait on each other).
FINITE_SUMS = 4


def _finite_codegen(context, builder, signature, args):
    _, a0, n = args
    arr = context.make_array(signature.args[0])(context, builder, args[0])
    fty = context.get_data_type(signature.args[0].dtype)
    lanes = numba_simd.VECTOR_BYTES // (4 if signature.args[0].dtype == types.float32 else 8)
    vty = ir.VectorType(fty, lanes)
    i64 = ir.IntType(64)
    ap = builder.gep(arr.data, [a0])
    sums = [cgutils.alloca_once_value(builder, ir.Constant(vty, [0.0] * lanes))
            for _ in range(FINITE_SUMS)]
    step = ir.Constant(i64, lanes * FINITE_SUMS)
    count = builder.sdiv(n, step)
    with cgutils.for_range(builder, count) as block:  # v - v: 0 when finite, else NaN
        k = builder.mul(block.index, step)
        for u, acc in enumerate(sums):
            ptr = builder.bitcast(builder.gep(ap, [builder.add(k, ir.Constant(i64, u * lanes))]),
                                  vty.as_pointer())
            v = builder.load(ptr, align=4)
            builder.store(builder.fadd(builder.load(acc), builder.fsub(v, v)), acc)
    total = builder.load(sums[0])
    for acc in sums[1:]:
        total = builder.fadd(total, builder.load(acc))
    one = cgutils.alloca_once_value(builder, ir.Constant(fty, 0.0))
    with cgutils.for_range_slice(builder, builder.mul(count, step), n,
                                 ir.Constant(i64, 1)) as (k, _):
        v = builder.load(builder.gep(ap, [k]))
        builder.store(builder.fadd(builder.load(one), builder.fsub(v, v)), one)
    ok = builder.fcmp_ordered("==", builder.load(one), ir.Constant(fty, 0.0))
    for lane in range(lanes):
        element = builder.extract_element(total, ir.Constant(ir.IntType(32), lane))
        ok = builder.and_(ok, builder.fcmp_ordered("==", element, ir.Constant(fty, 0.0)))
    return ok


@intrinsic
def finite_run(typingctx, a, a0, n):
    """True when ``a[a0 + k]`` is finite for every ``k < n`` (``v - v`` is 0 just then; the
    sums of those differences are 0 or NaN)."""
    floats = (types.float32, types.float64)
    if not (isinstance(a, types.Array) and a.layout == "C" and a.ndim == 1 and a.dtype in floats
            and all(isinstance(i, types.Integer) and i.bitwidth == 64 for i in (a0, n))):
        return None
    return types.boolean(a, a0, n), _finite_codegen
