"""One memory limit for a whole run, estimated at compile time before anything is allocated.

A run keeps every step's outputs (the executor's cache, the CLI's table and ``--out``, the app's
viewer all hold them), so while step ``k`` runs, the memory in use is the outputs of the steps
before it, plus step ``k``'s own outputs, plus its workspace (``BlockSpec.workspace``: kernel
buffers, dtype casts, the NaN/Inf path, reading a file). :class:`Budget` walks the steps in run
order and refuses a step whose peak would pass the limit, naming the limit, the estimate and the
biggest contributors; a refused step adds nothing, so the steps that remain fit. Sizes are
Python ints throughout: no shape or limit can overflow.
"""

from __future__ import annotations

import heapq
import math
from fractions import Fraction

import numpy as np

from blocks.spec import TensorSpec
from engine.base.dtypes import DTYPES
from engine.base.memory_limit import GIB, gib

#: How many of the biggest contributors a message names.
NAMED = 3


def nbytes(ts: TensorSpec) -> int:
    """Bytes of a tensor of this spec (exact, any size)."""
    dtype = DTYPES.get(ts.dtype) or np.dtype(ts.dtype)
    return math.prod(map(int, ts.shape)) * dtype.itemsize


def limit_bytes(value: float) -> int:
    """A memory limit as a positive int of bytes (an int or a finite float; TypeError or
    ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"the memory limit must be a number of bytes, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"the memory limit must be finite, got {value!r}")
    n = math.floor(value)
    if n <= 0:
        raise ValueError(f"the memory limit must be positive, got {value!r}")
    return n


def gib_to_bytes(text: str) -> int:
    """A limit given in GiB (``"0.5"``, ``"2"``, ``"1e300"``) as a positive int of bytes, exactly
    (at least 1); ValueError for anything else: not a number, zero, negative, NaN, infinite or
    beyond the float range (``"1e400"``)."""
    try:
        q = Fraction(text.strip())
        float(q)
    except (ValueError, ZeroDivisionError, OverflowError):
        raise ValueError(f"not a finite number of GiB: {text!r}") from None
    if q <= 0:
        raise ValueError(f"the memory limit must be positive, got {text!r} GiB")
    return max(1, math.floor(q * GIB))


class Budget:
    """Peak memory of a run, step by step (see the module docstring)."""

    def __init__(self, limit: int):
        self.limit = limit_bytes(limit)
        self.live = 0  #: bytes of the outputs of the accepted steps
        self.peak = 0  #: the highest estimate of an accepted step
        #: min-heap of the NAMED biggest outputs: (bytes, -count, block, port)
        self._biggest: list[tuple[int, int, str, str]] = []
        self._count = 0

    def charge(self, block: str, outputs: dict[str, int], workspace: int) -> str | None:
        """Account for one step of ``block`` (how messages name it: its label) with its new
        outputs' bytes by port and its workspace; a message when it would pass the limit (then
        nothing is added)."""
        new = sum(outputs.values())
        need = self.live + new + workspace
        if need > self.limit:
            return self._message(block, outputs, workspace, need)
        self.live += new
        self.peak = max(self.peak, need)
        for port, size in outputs.items():
            self._count += 1  # a later output never beats an earlier one of the same size
            if len(self._biggest) < NAMED:
                heapq.heappush(self._biggest, (size, -self._count, block, port))
            elif size > self._biggest[0][0]:
                heapq.heapreplace(self._biggest, (size, -self._count, block, port))
        return None

    def _message(self, block: str, outputs: dict[str, int], workspace: int,
                 need: int) -> str:
        parts = [(size, f"output {block}.{port}") for port, size in outputs.items()]
        parts += [(workspace, "this block's workspace")] if workspace else []
        parts += [(size, f"output {name}.{port}") for size, _, name, port in self._biggest]
        parts.sort(key=lambda p: -p[0])
        named = ", ".join(f"{what} {gib(size)}" for size, what in parts[:NAMED] if size)
        return (f"the run would need about {gib(need)} while this block runs, more than the "
                f"memory limit {gib(self.limit)}: {gib(self.live)} of outputs of earlier blocks "
                f"(every output is kept), {gib(sum(outputs.values()))} of this block's outputs "
                f"and {gib(workspace)} of workspace; biggest: {named or 'none'}")
