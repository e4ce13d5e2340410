"""The diagnosis of a minimal failure: :func:`engine.verify.diagnose.diagnose` (known mistakes,
then the pattern of wrong elements; "reads memory it never wrote" for values no computation
gives) for wrong values and non-finite outputs, ``diagnose_shape`` for a wrong shape (noting
such values when the output holds them), ``diagnose_refusal`` (``refused_valid_case``, the
message quoted) for ``raised``, and the failure's own message for the rest (crashed, timeout,
nondeterministic)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from engine.verify import diagnose as _diagnose
from engine.verify.diagnose import Diagnosis
from engine.verify.unwritten import unwritten_memory, unwritten_text

if TYPE_CHECKING:
    from engine.verify.report import Failure

__all__ = ["Diagnosis", "diagnose_failure"]


def diagnose_failure(failure: Failure, to_tf_layout: Callable) -> Diagnosis:
    """The :class:`Diagnosis` of ``failure`` (id None when no known mistake matches)."""
    v = failure.verdict
    case, call = failure.case, failure.call
    if v.verdict == "raised":
        return _diagnose.diagnose_refusal(v.message)
    if v.verdict in ("wrong_values", "nonfinite") and failure.got is not None:
        got = to_tf_layout(case.op, case.convention, failure.got)
        ref = to_tf_layout(case.op, case.convention, failure.reference)
        try:
            return _diagnose.diagnose(call.tf_op, call.tf_args, np.asarray(got, np.float64),
                                      np.asarray(ref, np.float64), case.dtype)
        except Exception as err:  # noqa: BLE001 - a diagnosis problem must not lose the report
            return Diagnosis(None, f"{v.message} (no diagnosis: {type(err).__name__}: {err})")
    if v.verdict == "wrong_shape" and failure.got is not None:
        got = failure.got
        try:
            got = to_tf_layout(case.op, case.convention, got)
        except ValueError:
            pass
        try:
            d = _diagnose.diagnose_shape(call.tf_op, call.tf_args, tuple(got.shape))
            if not unwritten_memory(call.tf_op, call.tf_args, got):
                return d
            note = unwritten_text(call.tf_op, call.tf_args, got)
            return Diagnosis(d.id, f"{d.text} {note}")
        except Exception as err:  # noqa: BLE001 - as above
            return Diagnosis(None, f"{v.message} (no diagnosis: {type(err).__name__}: {err})")
    return Diagnosis(None, f"{v.verdict}: {v.message}")
