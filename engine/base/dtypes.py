"""The floating dtypes the conv ops take, by TensorFlow name, and their compute types.

float16 and bfloat16 accumulate in float32 (as TensorFlow's CPU kernels do); the result is cast
back to the input's dtype.

The types NumPy lacks (bfloat16) come from ``ml_dtypes``, imported the first time one of them is
looked up (:data:`DTYPES` ``["bfloat16"]``, :func:`largest_finite`): it takes longer to import
than NumPy, and a float32 canvas never needs it. Names, ``in`` and iteration never import it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from decimal import Decimal

import numpy as np

from engine.base.errors import InvalidArgumentError

#: The supported float dtypes, TensorFlow's names, in the order messages list them.
NAMES = ("float16", "bfloat16", "float32", "float64")
#: Those NumPy itself provides.
_NUMPY: dict[str, np.dtype] = {"float16": np.dtype(np.float16),
                               "float32": np.dtype(np.float32),
                               "float64": np.dtype(np.float64)}


@functools.cache
def _ml_dtype(name: str) -> np.dtype:
    import ml_dtypes  # slow to import: only when a type NumPy lacks is first needed

    return np.dtype(getattr(ml_dtypes, name))


class _DtypeTable(Mapping[str, np.dtype]):
    """:data:`NAMES` -> NumPy dtype, a read-only mapping that imports ``ml_dtypes`` only when
    one of its types is looked up."""

    def __getitem__(self, name: str) -> np.dtype:
        found = _NUMPY.get(name)
        if found is not None:
            return found
        if name in NAMES:
            return _ml_dtype(name)
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return name in NAMES

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)

    def __repr__(self) -> str:
        return f"DTYPES{NAMES!r}"


#: TensorFlow name -> NumPy dtype of every supported float dtype.
DTYPES: Mapping[str, np.dtype] = _DtypeTable()

# The tolerance tables: the only place their numbers are written (tests/test_tolerance_once.py
# fails on a copy anywhere else). Docstrings, messages, the guide's table (kernels.md,
# "Tolerances") and exported scripts take them from here.

#: Relative tolerance of one result element against its bound (sum of |products|) per dtype:
#: the conv kernels' contract, the Compare block's ``rtol``, ``gradblocks verify``'s verdicts.
RTOL: dict[str, float] = {"float64": 1e-12, "float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2}

#: Largest relative error the GradCheck and AdjointCheck blocks accept, by the dtype of the
#: values they check (finite differences and inner products of reduced-precision ops).
CHECK_TOLERANCE: dict[str, float] = {"float64": 1e-7, "float32": 1e-4, "float16": 1e-2,
                                     "bfloat16": 3e-2}


def rtol(name: str) -> float:
    """:data:`RTOL` of a dtype name; any other dtype (integers, bool) counts as float64."""
    return RTOL.get(name, RTOL["float64"])


def tolerance_text(table: dict[str, float]) -> str:
    """A tolerance table as docstrings and messages state it: ``"float64 1e-12, float32 2e-5,
    ..."`` (each number in the shortest form that reads back as it)."""
    return ", ".join(f"{name} {Decimal(repr(value)).normalize():e}"
                     for name, value in table.items())


@functools.cache
def largest_finite(name: str) -> float:
    """The largest finite value of the float dtype ``name`` (one of :data:`NAMES`)."""
    dtype = to_dtype(name)
    if name in _NUMPY:
        return float(np.finfo(dtype).max)
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).max)


#: :data:`_NUMPY` inverted: the names of NumPy's float dtypes found without a scan.
_NAMES = {dt: name for name, dt in _NUMPY.items()}


def dtype_name(dtype: np.dtype) -> str:
    """TensorFlow's name for a NumPy dtype (``bfloat16`` included)."""
    dtype = np.dtype(dtype)
    name = _NAMES.get(dtype)
    if name is not None:
        return name
    # A type NumPy lacks is a user-defined one (isbuiltin 2): only then can it be ml_dtypes'.
    for name, dt in (DTYPES.items() if dtype.isbuiltin == 2 else _NUMPY.items()):
        if dt == dtype:
            return name
    return str(dtype)


def to_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a TensorFlow float dtype name; raises for anything else."""
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise InvalidArgumentError(
            f"dtype {name!r} is not one of {', '.join(DTYPES)}", "dtype"
        ) from None


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype arithmetic is done in: float64 stays, everything else uses float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def float_array(name: str, value: object) -> np.ndarray:
    """``value`` as an ndarray of one of the supported float dtypes, or a clear error naming
    ``name`` (ragged lists, strings, None and other types included). A masked array is
    refused: its mask would be ignored."""
    if isinstance(value, np.ma.MaskedArray):
        raise InvalidArgumentError(f"{name} is a masked array (numpy.ma): its mask would be "
                                   "ignored; pass value.filled(...) or value.data", name)
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, OverflowError, RecursionError):
            raise InvalidArgumentError(
                f"{name} must be an array of floats, got {type(value).__name__}", name
            ) from None
    if dtype_name(arr.dtype) not in DTYPES:
        raise InvalidArgumentError(
            f"{name} dtype {dtype_name(arr.dtype)} is not one of {', '.join(DTYPES)}", name
        )
    return arr


def same_dtype(**arrays: np.ndarray) -> np.dtype:
    """The common dtype of the named arrays; raises naming both when they differ."""
    items = list(arrays.items())
    first_name, first = items[0]
    for name, arr in items[1:]:
        if arr.dtype != first.dtype:
            raise InvalidArgumentError(
                f"{name} dtype {dtype_name(arr.dtype)} does not match {first_name} dtype "
                f"{dtype_name(first.dtype)}", name
            )
    return first.dtype
