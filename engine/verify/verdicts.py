"""The verdict of one case, against the float64 reference.

Words (:data:`VERDICTS`; the failures in order of severity, the order reports list them in):
``pass``, ``wrong_values``, ``wrong_shape``, ``nonfinite``, ``nondeterministic``, ``crashed``,
``timeout``, ``raised``, ``unsupported``. An output is judged by its shape first, then its
values, then whether a second run gave the same bits: a wrong shape is ``wrong_shape`` even when
its garbage also differs between runs, and wrong values are ``wrong_values`` until the sweep's
reruns of the minimal case (:mod:`engine.verify.sweep`) show them changing. Values are compared element by
element with the tolerance of :data:`engine.base.dtypes.RTOL` (relative to each element's bound,
the sum of the absolute values of its terms) under the check blocks' rule
(:func:`engine.base.tolerance.verdict`): ``max_rel_error`` is the largest ``|got - ref| / bound``
(``inf`` where an element with no terms is not exactly 0), ``max_abs_error`` the largest
``|got - ref|``. The output's own rounding is allowed first: an element within half a unit in
the last place of the case's dtype (at the reference value) counts as exact, so a
low-precision implementation returning the correctly rounded reference passes, subnormal
results included (where that half unit exceeds RTOL x the bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from engine.base.dtypes import DTYPES, RTOL
from engine.base.tolerance import verdict as within_tolerance

VERDICTS = ("pass", "wrong_values", "wrong_shape", "nonfinite", "nondeterministic", "crashed",
            "timeout", "raised", "unsupported")
#: Verdicts that are failures (``pass`` and ``unsupported`` are not), the most severe first.
FAILURES = VERDICTS[1:-1]


@dataclass(frozen=True)
class Verdict:
    verdict: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    message: str = ""


def half_ulp(ref: np.ndarray, dtype: str) -> np.ndarray:
    """Half a unit in the last place of ``dtype`` at each (finite) value of ``ref``: the
    rounding error of a correctly rounded result (the smallest subnormal's half at 0)."""
    info = ml_dtypes.finfo(DTYPES[dtype])
    _mantissa, exponent = np.frexp(np.abs(ref))
    ulp = np.ldexp(1.0, exponent - 1 - int(info.nmant))
    return np.maximum(ulp, float(info.smallest_subnormal)) / 2


def errors(got: np.ndarray, ref: np.ndarray, bound: np.ndarray,
           dtype: str = "float64") -> tuple[float, float, float]:
    """``(max_abs, max_rel, scale)`` of ``got`` against ``ref`` (see the module docstring)."""
    if ref.size == 0:
        return 0.0, 0.0, 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.abs(got - ref)
        beyond = np.where(err <= half_ulp(ref, dtype), 0.0, err)  # the output's own rounding
        rel = np.where(bound > 0, beyond / np.where(bound > 0, bound, 1.0),
                       np.where(beyond > 0, np.inf, 0.0))
    max_abs = float(np.max(err))
    return max_abs, float(np.max(rel)), float(np.max(bound))


def judge(kind: str, first, second, ref: np.ndarray, bound: np.ndarray,
          dtype: str) -> Verdict:
    """The verdict of a worker's outcome (``kind``: ok/raised/unsupported/crashed/timeout)."""
    if kind != "ok":
        return Verdict(kind, message=str(first))
    got = first
    if got.shape != ref.shape:
        return Verdict("wrong_shape", message=f"output shape {list(got.shape)}, expected "
                                              f"{list(ref.shape)}")
    bad = ~np.isfinite(got) & np.isfinite(ref)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        return Verdict("nonfinite", math.inf, math.inf,
                       f"{int(bad.sum())} non-finite element(s) where the reference is finite, "
                       f"first at {list(idx)}")
    max_abs, rel, scale = errors(got, ref, bound, dtype)
    if within_tolerance(max_abs, scale, rel, RTOL[dtype]):
        if second is not None and (second.shape != got.shape
                                   or not np.array_equal(got, second, equal_nan=True)):
            return Verdict("nondeterministic", max_abs, rel,
                           "the same inputs twice gave different outputs")
        return Verdict("pass", max_abs, rel)
    worst = np.unravel_index(int(np.argmax(np.abs(got - ref))), ref.shape)
    at = [int(i) for i in worst]
    return Verdict("wrong_values", max_abs, rel,
                   f"max abs error {max_abs:.3g} (relative {rel:.3g}, tolerance "
                   f"{RTOL[dtype]:g}) at {at}: got {got[worst]:.6g}, expected {ref[worst]:.6g}")
