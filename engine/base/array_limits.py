"""What NumPy can make: the shape rules an array must pass before anything is allocated, so a
canvas that ``check`` accepts never fails in ``run`` on them.

NumPy (``PyArray_NewFromDescr``) refuses more than :data:`MAX_DIMS` dimensions, a negative
dimension, and a shape whose nonzero dimensions times the item size exceed the largest
``intp`` (zero dimensions are skipped in that product: ``[0, 2**62, 2**62]`` is refused too).
"""

from __future__ import annotations

from collections.abc import Sequence

#: Most dimensions of a NumPy array (``numpy.ndarray``'s NPY_MAXDIMS since NumPy 2.0).
MAX_DIMS = 64
#: Largest byte count NumPy indexes (``np.iinfo(np.intp).max`` on 64-bit platforms).
MAX_BYTES = 2**63 - 1


def shape_problem(shape: Sequence[int], itemsize: int) -> str | None:
    """Why NumPy cannot make an array of ``shape`` with items of ``itemsize`` bytes (None when
    it can); the sentence names the shape."""
    dims = [int(s) for s in shape]
    if len(dims) > MAX_DIMS:
        return f"shape has {len(dims)} dimensions; an array has at most {MAX_DIMS}"
    if any(d < 0 for d in dims):
        return f"shape {dims} has a negative dimension"
    nbytes = itemsize
    for d in dims:
        if d:
            nbytes *= d
    if nbytes > MAX_BYTES:
        empty = " (though it has a zero dimension)" if 0 in dims else ""
        return (f"shape {_short(dims)} is too big{empty}: its nonzero dimensions times "
                f"{itemsize} byte(s) exceed the largest array NumPy makes (2**63 - 1 bytes)")
    return None


def _short(dims: list[int]) -> str:
    text = str(dims)
    return text if len(text) <= 120 else text[:117] + "..."
