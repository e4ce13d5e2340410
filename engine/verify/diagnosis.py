"""The diagnosis of a minimal failure: :func:`engine.verify.diagnose.diagnose` (known mistakes,
then the pattern of wrong elements) for wrong values and non-finite outputs,
``diagnose_shape`` for a wrong shape (when that module has it), and the failure's own message
for the rest (raised, crashed, timeout, nondeterministic)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from engine.verify.report import Failure

try:  # written alongside this package; the sweep works (without ids) until it exists
    from engine.verify import diagnose as _diagnose
    from engine.verify.diagnose import Diagnosis
except ImportError:  # pragma: no cover - only before engine/verify/diagnose.py exists
    _diagnose = None

    @dataclass(frozen=True)
    class Diagnosis:  # type: ignore[no-redef]
        id: str | None
        text: str


def diagnose_failure(failure: Failure, to_tf_layout: Callable) -> Diagnosis:
    """The :class:`Diagnosis` of ``failure`` (id None when no known mistake matches)."""
    v = failure.verdict
    case, call = failure.case, failure.call
    if _diagnose is not None and v.verdict in ("wrong_values", "nonfinite") \
            and failure.got is not None:
        got = to_tf_layout(case.op, case.convention, failure.got)
        ref = to_tf_layout(case.op, case.convention, failure.reference)
        try:
            return _diagnose.diagnose(call.tf_op, call.tf_args, np.asarray(got, np.float64),
                                      np.asarray(ref, np.float64), case.dtype)
        except Exception as err:  # noqa: BLE001 - a diagnosis problem must not lose the report
            return Diagnosis(None, f"{v.message} (no diagnosis: {type(err).__name__}: {err})")
    shape_fn = getattr(_diagnose, "diagnose_shape", None)
    if v.verdict == "wrong_shape" and shape_fn is not None and failure.got is not None:
        got = failure.got
        try:
            got = to_tf_layout(case.op, case.convention, got)
        except ValueError:
            pass
        try:
            return shape_fn(call.tf_op, call.tf_args, tuple(got.shape))
        except Exception as err:  # noqa: BLE001 - as above
            return Diagnosis(None, f"{v.message} (no diagnosis: {type(err).__name__}: {err})")
    return Diagnosis(None, f"{v.verdict}: {v.message}")
