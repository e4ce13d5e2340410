"""The tolerance rule: when a computed error is within a tolerance, and the tolerance of a
check by dtype.

One rule judges every verdict: the GradCheck and AdjointCheck blocks (with
:data:`~engine.base.dtypes.CHECK_TOLERANCE`), ``gradblocks verify``'s verdicts and diagnoses
and the cross-check (with :data:`~engine.base.dtypes.RTOL` or ``CHECK_TOLERANCE``). The numbers
are written only in :mod:`engine.base.dtypes`.

:func:`check_tolerance`, :func:`relative` and :func:`verdict` use only NumPy and
``CHECK_TOLERANCE``: exported scripts carry their source (``blocks.check_support.VERDICT_CODE``).
"""

from __future__ import annotations

import numpy as np

from engine.base.dtypes import CHECK_TOLERANCE, dtype_name


def check_tolerance(name: str) -> float:
    """:data:`CHECK_TOLERANCE` of a dtype name; any other dtype counts as float64."""
    return CHECK_TOLERANCE.get(name, CHECK_TOLERANCE["float64"])


def tolerance(dtype: np.dtype | str) -> float:
    """The check tolerance of ``dtype`` (a NumPy dtype or a TensorFlow name)."""
    return check_tolerance(dtype if isinstance(dtype, str) else dtype_name(dtype))


def relative(max_abs: float, scale: float) -> float:
    """``max_abs / scale``; 0 when both are 0, inf when only the scale is, NaN stays NaN."""
    if np.isnan(max_abs) or np.isnan(scale):
        return float("nan")
    if scale > 0:
        return max_abs / scale
    return 0.0 if max_abs == 0 else float("inf")


def verdict(max_abs: float, scale: float, rel: float, tol: float) -> bool:
    """Within tolerance: ``rel <= tol``, or ``max_abs <= tol`` where the scale is 0; never with
    a NaN or infinite ``max_abs`` or ``scale``."""
    if not (np.isfinite(max_abs) and np.isfinite(scale)):
        return False
    return bool(rel <= tol) if scale > 0 else bool(max_abs <= tol)
