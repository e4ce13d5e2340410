"""Which compute path the last kernel call of this thread took (for benchmarks and reports).

Each dispatch in :mod:`engine.kernels` records a name such as ``"numpy gather"`` (engine, then
strategy); compiled paths record their own (``"numba ..."``, ``"winograd ..."``). Thread-local,
so concurrent runs do not mix their answers.
"""

from __future__ import annotations

import threading

_local = threading.local()


def record(name: str) -> None:
    """Note that this thread's current kernel call computes through ``name``."""
    _local.name = name
    _local.vouched = False


def vouch_finite() -> None:
    """Say that this thread's current kernel call let every term of every output element reach
    that element through IEEE products and sums (no term skipped; no BLAS that skips zero
    factors; extra products with padding zeros, and Winograd's transforms, which carry a
    non-finite tile element into every output it is a term of, are fine) and that its whole
    result is finite. Then no term had a NaN or Inf factor (such a product is NaN or ±Inf,
    and a sum with one stays NaN or ±Inf), so the result already follows
    :mod:`engine.kernels.nonfinite`'s contract without scanning the inputs."""
    _local.vouched = True


def vouched_finite() -> bool:
    """True when this thread's last kernel call called :func:`vouch_finite`."""
    return getattr(_local, "vouched", False)


def limit_result_scan(elements: int | None) -> None:
    """Let this thread's next kernel calls scan a result to vouch for it only when it has at
    most ``elements`` elements (None: any size). :func:`engine.kernels.nonfinite.nonfinite_safe`
    passes the inputs' size: a larger result costs more to scan than the two inputs do."""
    _local.scan_limit = elements


def result_scan_pays(size: int) -> bool:
    """True when scanning a result of ``size`` elements is within :func:`limit_result_scan`."""
    limit = getattr(_local, "scan_limit", None)
    return limit is None or size <= limit


def last() -> str | None:
    """The path recorded by this thread's last kernel call (None before any)."""
    return getattr(_local, "name", None)
