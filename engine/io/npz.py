"""Results written as .npz: one ``<key>.npy`` member per array, as :func:`numpy.savez` does.

``np.savez(f, **arrays)`` takes keys as keyword arguments, so a result named ``file`` or
``allow_pickle`` would collide with its own parameters; :func:`write_npz` writes the same
format (uncompressed zip64 members, ``numpy.lib.format`` arrays, never pickled) with any key.
bfloat16 arrays are stored exactly as float32, since .npy has no bfloat16. ``np.load`` reads
the file back with the same keys.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np

from engine.base.dtypes import DTYPES


def npz_safe(value: Any) -> np.ndarray:
    """``value`` as an array .npz can hold: bfloat16 exactly as float32, the rest unchanged."""
    value = np.asarray(value)
    return value.astype(np.float32) if value.dtype == DTYPES["bfloat16"] else value


def write_npz(f: BinaryIO, arrays: Mapping[str, Any]) -> None:
    """Write ``arrays`` to the open binary file ``f`` as an .npz with exactly these keys.

    An exception while writing (Ctrl+C, SIGTERM unwinding) propagates as itself and leaves
    ``f`` half-written for the caller to discard: the archive is not finished, so zipfile's
    complaint about a member handle still open (when the exception struck inside
    ``ZipFile.open``) never replaces it."""
    zf = zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True)
    try:
        for key, value in arrays.items():
            with zf.open(f"{key}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, npz_safe(value), allow_pickle=False)
    except BaseException:
        zf.fp = None  # abandoned: neither close() nor the collector finishes the archive
        raise
    zf.close()
