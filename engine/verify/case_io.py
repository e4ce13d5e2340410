"""A case's arguments and result as they cross a process boundary, shared by the worker
(:mod:`engine.verify.worker`: ``--cmd``'s IN.npz) and the ``--cmd-serve`` loop
(:mod:`engine.verify.serve`: its IN folder): the arguments as .npz members, a result as float64,
and how long a message may be. Imports NumPy and nothing else of the verifier, so both (and the
reproduction folder, :mod:`engine.verify.repro`) take it without importing each other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Characters of a message kept.
MESSAGE_CHARS = 300


def as_float(result: Any) -> np.ndarray:
    """A result as a float64 array; TypeError when it is not an array of numbers."""
    arr = np.asarray(result)
    if arr.dtype.kind not in "fiub" and arr.dtype.names is None and arr.dtype.kind != "V":
        raise TypeError(f"the function returned {type(result).__name__} of dtype {arr.dtype}, "
                        "not an array of numbers")
    return arr.astype(np.float64)


def npz_arguments(kwargs: dict[str, Any], meta: dict[str, str]) -> dict[str, np.ndarray]:
    """The arguments as .npz members (see the module docstring)."""
    out: dict[str, np.ndarray] = {k: np.asarray(v) for k, v in meta.items()}
    for k, v in kwargs.items():
        if v is None:
            continue
        if isinstance(v, np.ndarray):
            out[k] = v if v.dtype.kind == "f" and v.dtype.itemsize != 2 or v.dtype == np.float16 \
                else v.astype(np.float32)
        elif isinstance(v, str):
            out[k] = np.asarray(v)
        else:
            out[k] = np.asarray(v, np.int64)
    return out
