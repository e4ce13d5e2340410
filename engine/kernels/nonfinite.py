"""The NaN/Inf contract of the conv ops: padding contributes nothing.

Every conv op is a bilinear form: each output element is a sum of products ``a[u] * b[v]`` of
one element of each array argument, over the pairs its definition names (Conv2D: input and
filter; the backprop-filter ops: input and out_backprop; the backprop-input ops: filter and
out_backprop). Terms that would read padding are not terms. IEEE arithmetic then fixes the
result of an element whose terms are not all finite:

- NaN when some term is NaN (a NaN factor, or ``±Inf * 0``), or when terms of both infinite
  signs meet (``+Inf + -Inf``);
- ``+Inf`` (``-Inf``) when some term is infinite and all infinite terms have that sign;
- otherwise the sum of the finite terms.

The fast kernels compute on padded, phase-split layouts where padding and layout positions are
multiplied by zeros: harmless for finite data, but ``NaN * 0`` would spread a NaN to outputs no
term of which touches it. :func:`nonfinite_safe` therefore runs the kernel as it is when both
arrays are finite (one pass over each, :func:`all_finite`), or when the kernel vouches for its
finite result (:func:`engine.kernels.path_record.vouch_finite`: then no term had a non-finite
factor, and the scans are skipped), and otherwise computes

1. the finite part: the kernel on both arrays with every non-finite element replaced by 0;
2. for each kind of non-finite term (NaN, +Inf, -Inf), how many terms of each output element
   are of that kind, by the same kernel on 0/1 indicator arrays (exact in float32: a sum of
   non-negative integers is positive exactly when one of them is); the indicator of a term
   kind is a sum of products of indicators of its factors, e.g.
   ``[a*b = +Inf] = [a=+Inf][b>0] + [a=-Inf][b<0] + [0<a<Inf][b=+Inf] + [-Inf<a<0][b=-Inf]``;

and overwrites the elements with non-finite terms by the rule above. This is TensorFlow's
float32 CPU behaviour, applied to every dtype (TensorFlow's float64 path multiplies padding
zeros and gives NaN on every border). It costs at most the scans on finite data and a
bounded number of extra kernel calls (at most 12, one per indicator product that is not all
zero) otherwise.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from engine.base.dtypes import dtype_name
from engine.kernels import path_record

F = TypeVar("F", bound=Callable[..., np.ndarray])

#: Exponent bits of each float dtype, by name: all of them set means Inf or NaN.
_EXPONENT: dict[str, tuple[type[np.unsignedinteger], int]] = {
    "float16": (np.uint16, 0x7C00),
    "bfloat16": (np.uint16, 0x7F80),
    "float32": (np.uint32, 0x7F800000),
    "float64": (np.uint64, 0x7FF0000000000000),
}


#: Elements per block of :func:`all_finite` (a 256 KiB float32 block stays in cache).
SCAN_BLOCK = 1 << 16


def all_finite(a: np.ndarray) -> bool:
    """True when no element of the float array ``a`` is NaN or ±Inf: one pass in cache-sized
    blocks, no full-size temporary, stopping at the first block with one (float32/float64 by
    ``np.isfinite``; the half types by their exponent bits, no float compare)."""
    if a.size == 0:
        return True
    if a.ndim and not a.flags.c_contiguous and not a.flags.f_contiguous:
        a = np.ascontiguousarray(a)
    flat = a.reshape(-1, order="A")
    utype, mask = _EXPONENT[dtype_name(a.dtype)]
    bits = a.dtype.itemsize < 4
    buf = np.empty(min(flat.size, SCAN_BLOCK), utype if bits else bool)
    for start in range(0, flat.size, SCAN_BLOCK):
        block = flat[start:start + SCAN_BLOCK]
        out = buf[:block.size]
        if bits:
            np.bitwise_and(block.view(utype), utype(mask), out=out)
            if int(out.max()) == mask:
                return False
        elif not np.isfinite(block, out=out).all():
            return False
    return True


#: True while :func:`nonfinite_safe` computes a result with non-finite terms: kernels must then
#: take their exact paths (no Winograd-style mixing of elements; counts must stay exact).
_EXACT = contextvars.ContextVar("gradblocks_exact_required", default=False)


def exact_required() -> bool:
    """True inside the NaN/Inf path of :func:`nonfinite_safe` (see :data:`_EXACT`)."""
    return _EXACT.get()


def _float_or_none(value: object) -> np.ndarray | None:
    """``value`` as an array of a supported float dtype, or None (the kernel then validates)."""
    if isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, (list, tuple)):
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, OverflowError, RecursionError):
            return None
    else:
        return None
    return arr if dtype_name(arr.dtype) in _EXPONENT else None


def _indicator(a: np.ndarray, kind: str) -> np.ndarray:
    """0/1 float32 indicator of one element class of ``a`` (see :data:`TERM_RULES`)."""
    with np.errstate(invalid="ignore"):
        if kind == "one":
            mask = np.ones(a.shape, bool)
        elif kind == "nan":
            mask = np.isnan(a)
        elif kind == "inf":
            mask = np.isinf(a)
        elif kind == "zero":
            mask = a == 0
        elif kind in ("+inf", "-inf"):
            mask = a == (np.inf if kind == "+inf" else -np.inf)
        elif kind in ("pos", "+fin"):
            mask = (a > 0) & (np.isfinite(a) if kind == "+fin" else True)
        else:  # "neg", "-fin"
            mask = (a < 0) & (np.isfinite(a) if kind == "-fin" else True)
    return mask.astype(np.float32)


#: The products of factor classes whose term is NaN, +Inf or -Inf.
TERM_RULES: dict[str, tuple[tuple[str, str], ...]] = {
    "nan": (("nan", "one"), ("one", "nan"), ("inf", "zero"), ("zero", "inf")),
    "+inf": (("+inf", "pos"), ("-inf", "neg"), ("+fin", "+inf"), ("-fin", "-inf")),
    "-inf": (("+inf", "neg"), ("-inf", "pos"), ("+fin", "-inf"), ("-fin", "+inf")),
}


# The kernels' float warnings are off: a non-finite result is the answer (the contract above),
# and a call on NaN/Inf operands runs before they are found (a vouching kernel, see
# nonfinite_safe), so NumPy's "invalid value encountered" would only be noise.
def _quiet() -> np.errstate:
    """A fresh ``errstate`` (one instance must not be entered by two threads at once)."""
    return np.errstate(invalid="ignore", over="ignore")


def nonfinite_safe(a_name: str, b_name: str,
                   vouching: Callable[[np.ndarray, np.ndarray], bool] | None = None
                   ) -> Callable[[F], F]:
    """Decorate a conv kernel, bilinear in its arguments ``a_name`` and ``b_name``, so that it
    follows the NaN/Inf contract of this module.

    ``vouching(a, b)`` True says the kernel will probably take a path that can vouch for its
    own result (:func:`engine.kernels.path_record.vouch_finite`): the kernel then runs first, and
    when it vouches the two input scans are skipped (for memory-bound kernels they cost as
    much as the kernel). A result larger than the two inputs is not scanned to vouch
    (:func:`engine.kernels.path_record.limit_result_scan`): scanning the inputs costs less. A kernel
    that does not vouch is followed by the scans as usual, so a wrong guess costs time (an
    extra call when an input is not finite), never a result."""

    def wrap(kernel: F) -> F:
        signature = inspect.signature(kernel)
        a_at, b_at = (_position(signature, name) for name in (a_name, b_name))

        @functools.wraps(kernel)
        def safe(*args, **kwargs):
            a = _float_or_none(args[a_at] if a_at < len(args) else kwargs.get(a_name))
            b = _float_or_none(args[b_at] if b_at < len(args) else kwargs.get(b_name))
            if a is None or b is None:
                return kernel(*args, **kwargs)
            out = None
            if vouching is not None and vouching(a, b):
                path_record.limit_result_scan(a.size + b.size)
                try:
                    with _quiet():  # NaN/Inf inputs or overflow: the result says so
                        out = kernel(*args, **kwargs)
                finally:
                    path_record.limit_result_scan(None)
                if path_record.vouched_finite():
                    return out
            if all_finite(a) and all_finite(b):
                if out is None:
                    with _quiet():
                        out = kernel(*args, **kwargs)
                return out
            bound = signature.bind(*args, **kwargs)  # a wrong call: TypeError says why
            token = _EXACT.set(True)
            try:
                with _quiet():
                    return _with_nonfinite_terms(kernel, bound, a_name, a, b_name, b)
            finally:
                _EXACT.reset(token)

        return safe  # type: ignore[return-value]

    return wrap


def _position(signature: inspect.Signature, name: str) -> int:
    """Where the parameter ``name`` (positional or keyword) sits among the positional ones,
    found once per signature (not ``Signature.bind`` on every call)."""
    names = list(signature.parameters)
    kind = signature.parameters[name].kind
    assert kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, (name, kind)
    return names.index(name)


def _with_nonfinite_terms(kernel, bound: inspect.BoundArguments, a_name: str, a: np.ndarray,
                          b_name: str, b: np.ndarray) -> np.ndarray:
    """The kernel's result by the rule of the module docstring (some element is not finite)."""

    def call(av: np.ndarray, bv: np.ndarray) -> np.ndarray:
        arguments = dict(bound.arguments)
        arguments[a_name], arguments[b_name] = av, bv
        return kernel(**arguments)

    zero = a.dtype.type(0)
    out = call(np.where(np.isfinite(a), a, zero), np.where(np.isfinite(b), b, zero))
    if out.size == 0:
        return out
    flagged: dict[str, np.ndarray] = {}
    for kind, rules in TERM_RULES.items():  # two indicators and one count alive at a time
        count = np.zeros(out.shape, np.float32)
        for fa, fb in rules:
            ind_a = _indicator(a, fa)
            if not ind_a.any():
                continue
            ind_b = _indicator(b, fb)
            if ind_b.any():
                count += call(ind_a, ind_b)
        flagged[kind] = count > 0
    nan = flagged["nan"] | (flagged["+inf"] & flagged["-inf"])
    out[flagged["+inf"]] = np.inf
    out[flagged["-inf"]] = -np.inf
    out[nan] = np.nan
    return out
