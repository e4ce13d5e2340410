"""An output that read memory it never wrote: values no computation on the operands gives.

Values no computation gives: every element of every op here, and of every variant, is a sum of
products ``a*b`` of one element of each array operand ``A``, ``B`` in which each element of
``A`` meets at most one of ``B`` (and the reverse), so ``|y| <= M = min(sum|A| max|B|,
max|A| sum|B|)``; and all its values are integer multiples of ``q = 2**(e_A + e_B)``, ``e_X``
the exponent of the lowest set bit over ``X``'s nonzero values, however it is rounded (a
rounding onto a power-of-two grid keeps multiples of ``q``), so a nonzero ``|y| >= q``; an
algorithm with other constants (FFT, Winograd) leaves residues where the exact value is 0, of
about float64's rounding of the largest sum, ``2**-53 M``, or more. A finite element beyond
:data:`GARBAGE_ABOVE` x ``M``, or nonzero below :data:`GARBAGE_BELOW` x ``min(q, 2**-53 M)``,
is one no implementation computes, however wrong its indices, scale or rounding order (the
margins leave room for scalings such as a mean); with an operand all 0, any nonzero element is.
Non-finite elements are left to the nonfinite verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.verify.conventions import TF_OPS

#: An element beyond this many times the largest sum of products is garbage (see the module docstring).
GARBAGE_ABOVE = 2.0 ** 20
#: A nonzero element below this many times ``min(q, 2**-53 M)`` is garbage (see the module docstring).
GARBAGE_BELOW = 2.0 ** -40


def _lowest_bit(a: np.ndarray) -> int | None:
    """The exponent ``e`` of the lowest set bit over the nonzero finite values: each is an
    integer multiple of ``2**e`` (None: no such value)."""
    v = np.abs(a[np.isfinite(a) & (a != 0)])
    if not v.size:
        return None
    mantissa, exponent = np.frexp(v)  # v = mantissa * 2**exponent, mantissa in [0.5, 1)
    ints = (mantissa * 2.0 ** 53).astype(np.int64)  # exact: float64 has 53 bits
    low = np.log2((ints & -ints).astype(np.float64)).astype(np.int64)
    return int(np.min(exponent - 53 + low))


def impossible_values(tf_op: str, tf_args: Mapping[str, Any], got: np.ndarray) -> np.ndarray:
    """Where ``got`` (any shape and layout) holds a finite value that no sum of products of the
    call's operands gives (the rule of the module docstring)."""
    a, b = (np.asarray(tf_args[k], np.float64) for k in TF_OPS[tf_op][1])
    got = np.asarray(got, np.float64)
    finite_nonzero = np.isfinite(got) & (got != 0)
    low_a, low_b = _lowest_bit(a), _lowest_bit(b)
    if low_a is None or low_b is None:
        return finite_nonzero
    largest = min(float(np.abs(a).sum() * np.abs(b).max()),
                  float(np.abs(a).max() * np.abs(b).sum()))
    size = np.abs(np.where(finite_nonzero, got, 1.0))
    smallest = min(np.ldexp(1.0, low_a + low_b), np.ldexp(largest, -53))
    return finite_nonzero & ((size > GARBAGE_ABOVE * largest)
                             | (size < GARBAGE_BELOW * smallest))


def unwritten_memory(tf_op: str, tf_args: Mapping[str, Any], got: np.ndarray) -> bool:
    """Whether ``got`` (the implementation's output for the canonical call ``tf_op(**tf_args)``,
    any shape and layout) holds a value no computation on the operands gives: the output read
    memory it never wrote (:func:`impossible_values`)."""
    return bool(impossible_values(tf_op, tf_args, got).any())


def unwritten_text(tf_op: str, tf_args: Mapping[str, Any], got: np.ndarray) -> str:
    """The diagnosis text of an output :func:`unwritten_memory` holds true for."""
    got = np.asarray(got, np.float64)
    bad = impossible_values(tf_op, tf_args, got)
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"The output reads memory it never wrote: {int(bad.sum())} of {got.size} elements "
            f"hold values no sum of products of these operands gives (e.g. {got[index]:.6g} "
            f"at {list(index)}).")
