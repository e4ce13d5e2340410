"""A wait that keeps its core awake: :func:`wait_change` polls one int64 of an array, without
the GIL, until it differs from a known value or a number of polls has passed (loaded by
:mod:`engine.kernels.accel` for :mod:`engine.kernels.parallel`'s workers).

A thread blocked on a lock or condition lets its core go idle, and waking an idle core takes
tens to hundreds of microseconds on a virtual machine (the host must schedule the core again):
as much as a whole depthwise call. The kernel threads therefore poll for their next range a
short while before they block, as OpenMP's and Eigen's thread pools do. Each poll is an
acquire load (the compiler cannot hoist it out of the loop) followed by x86's ``pause`` hint;
every :data:`POLLS_PER_YIELD`-th gives the core to any other thread ready to run on it.
"""

from __future__ import annotations

import os
import platform
import time

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from engine.kernels._compiled import cache_key  # noqa: F401 - before any cache=True

#: Whether this CPU has x86's ``pause`` (a hint to the core that it is spinning).
X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
#: Whether the C library has ``sched_yield`` (POSIX); elsewhere every poll pauses.
POSIX = os.name == "posix"


@intrinsic
def _load_acquire(typingctx, flags, index):
    """``flags[index]`` as an acquire load (re-read on every call, never cached in a register)."""
    if not (isinstance(flags, types.Array) and flags.dtype == types.int64 and flags.ndim == 1
            and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.load_atomic(builder.gep(array.data, [args[1]]), "acquire", 8)

    return types.int64(flags, index), codegen


@intrinsic
def _pause(typingctx):
    """x86's ``pause`` (nothing elsewhere)."""

    def codegen(context, builder, signature, args):
        if X86:
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def _yield_core(typingctx):
    """``sched_yield()`` (POSIX): another thread ready to run on this core runs first."""

    def codegen(context, builder, signature, args):
        if POSIX:
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


#: Polls between two :func:`_yield_core` calls (a spinning thread never keeps a core from
#: another thread that has work: OpenBLAS's, another process's).
POLLS_PER_YIELD = 128


@numba.jit(nopython=True, nogil=True, cache=True)
def wait_change(flags, index, old, polls):  # pragma: no cover - compiled
    """True as soon as ``flags[index] != old``; False after ``polls`` polls without a change."""
    for n in range(polls):
        if _load_acquire(flags, index) != old:
            return True
        if n % POLLS_PER_YIELD == POLLS_PER_YIELD - 1:
            _yield_core()
        else:
            _pause()
    return False


def polls_for(seconds: float) -> int:
    """About how many polls of :func:`wait_change` take ``seconds`` on this core (measured)."""
    flags = np.zeros(1, np.int64)
    wait_change(flags, 0, 0, 1)  # compile (or load) first
    count = 20_000
    t0 = time.perf_counter()
    wait_change(flags, 0, 0, count)
    per = max(1e-9, (time.perf_counter() - t0) / count)
    return max(1, int(seconds / per))
