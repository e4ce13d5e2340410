"""``c += a @ b`` in place through the cblas gemm of NumPy's own BLAS, with ``beta = 1``.

NumPy's matmul always writes a fresh result, so accumulating one product per filter tap into a
shifted view of the output would cost a temporary and an extra pass over memory per tap. BLAS
gemm with ``beta = 1`` updates ``c`` where it lies. NumPy wheels bundle OpenBLAS
(``numpy.libs`` / ``numpy/.dylibs``) and export its cblas interface under a prefix and suffix
(``scipy_cblas_sgemm64_``: 64-bit integers); calling it through ctypes keeps one BLAS library in
the process and SciPy (about 150 ms of imports and a second OpenBLAS) off the import path.

The library is looked up on the first call, not at import. When it (or the symbol) is not found,
or an operand's memory layout is not one gemm can address, ``c += a @ b`` through NumPy is used:
same result within float rounding. :func:`backend` says which one runs.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112

#: (symbol prefix, suffix, integer type) tried in order: NumPy >= 2 wheels (ILP64, suffixed),
#: other ILP64 builds with the ``64_`` suffix, then plain LP64 cblas.
_SYMBOLS = (("scipy_cblas_", "64_", ctypes.c_int64), ("cblas_", "64_", ctypes.c_int64),
            ("scipy_cblas_", "", ctypes.c_int), ("cblas_", "", ctypes.c_int))


@dataclass(frozen=True)
class _Cblas:
    path: str
    sgemm: Callable[..., None]  # the library's cblas_sgemm and cblas_dgemm (ctypes)
    dgemm: Callable[..., None]
    int_type: type


def _bundled_libraries() -> list[str]:
    """OpenBLAS libraries bundled with the NumPy wheel (Linux, macOS, Windows layouts)."""
    import glob

    root = os.path.dirname(np.__file__)
    found: list[str] = []
    for folder in (os.path.join(root, os.pardir, "numpy.libs"), os.path.join(root, ".dylibs")):
        for pattern in ("*openblas*.so*", "*openblas*.dylib", "*openblas*.dll"):
            found += sorted(glob.glob(os.path.join(folder, pattern)))
    return found


def _loaded_blas_libraries() -> list[str]:
    """The BLAS libraries threadpoolctl finds loaded (NumPy built against a system BLAS)."""
    from threadpoolctl import threadpool_info

    return [i["filepath"] for i in threadpool_info() if i.get("user_api") == "blas"]


def _bind(path: str) -> _Cblas | None:
    """The cblas ``sgemm``/``dgemm`` pair of the library at ``path``, or None."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    for prefix, suffix, int_type in _SYMBOLS:
        if not suffix and "64" in os.path.basename(path):
            continue  # unsuffixed names in an ILP64 build: integer width unknown, do not guess
        try:
            s = getattr(lib, f"{prefix}sgemm{suffix}")
            d = getattr(lib, f"{prefix}dgemm{suffix}")
        except AttributeError:
            continue
        for fn, real in ((s, ctypes.c_float), (d, ctypes.c_double)):
            fn.restype = None
            fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, int_type, int_type,
                           int_type, real, ctypes.c_void_p, int_type, ctypes.c_void_p,
                           int_type, real, ctypes.c_void_p, int_type]
        return _Cblas(path, s, d, int_type)
    return None


@functools.cache
def _cblas() -> _Cblas | None:
    if os.environ.get("GRADBLOCKS_GEMM") == "numpy":  # tests of the fallback
        return None
    for candidates in (_bundled_libraries, _loaded_blas_libraries):
        for path in dict.fromkeys(os.path.realpath(p) for p in candidates()):
            if (found := _bind(path)) is not None:
                return found
    return None


def backend() -> str:
    """``"cblas <library path>"`` when gemm runs through ctypes, else ``"numpy"``."""
    lib = _cblas()
    return f"cblas {lib.path}" if lib is not None else "numpy"


def _operand(m: np.ndarray) -> tuple[int, int] | None:
    """``(transpose flag, leading dimension)`` describing row-major 2-D ``m`` to cblas."""
    rows, cols = m.shape
    s0, s1 = m.strides
    it = m.itemsize
    if s0 % it or s1 % it:
        return None
    if (s1 == it or cols == 1) and s0 >= max(1, cols) * it:
        return _NO_TRANS, s0 // it
    if (s0 == it or rows == 1) and s1 >= max(1, rows) * it:
        return _TRANS, s1 // it
    return None


def gemm_acc(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """``c += a @ b`` for 2-D ``a (T, k)``, ``b (k, n)``, ``c (T, n)`` of one float dtype."""
    if c.size == 0 or a.shape[1] == 0:
        return
    lib = _cblas()
    fits = lib is not None and c.dtype in (np.float32, np.float64) and a.dtype == b.dtype == c.dtype
    oa, ob, oc = (_operand(a), _operand(b), _operand(c)) if fits else (None, None, None)
    if (lib is None or oa is None or ob is None or oc is None or oc[0] != _NO_TRANS
            or not c.flags.writeable):
        c += a @ b
        return
    (ta, lda), (tb, ldb), (_, ldc) = oa, ob, oc
    fn = lib.sgemm if c.dtype == np.float32 else lib.dgemm
    m, k = a.shape
    fn(_ROW_MAJOR, ta, tb, m, c.shape[1], k, 1.0, a.ctypes.data, lda, b.ctypes.data, ldb,
       1.0, c.ctypes.data, ldc)


@functools.cache
def propagates_nonfinite() -> bool:
    """True when this process's BLAS multiplies every factor pair, so ``Inf * 0`` and
    ``NaN * 0`` reach the result as NaN, through both :func:`gemm_acc` and ``np.matmul``, in
    float32 and float64, at sizes that take a small-matrix and a blocked kernel, with the
    non-finite factor on either side. Reference BLAS skips the products of a zero element of
    one operand (``IF (B(L,J).NE.ZERO)``); with such a BLAS the kernels' results cannot vouch
    for their inputs (:func:`engine.kernels.path_record.vouch_finite`). Checked once per process."""
    for dtype in (np.float32, np.float64):
        for m, k, n in ((1, 1, 1), (5, 6, 7), (96, 300, 24), (300, 96, 40)):
            for bad in (np.inf, np.nan):
                a = np.ones((m, k), dtype)
                b = np.ones((k, n), dtype)
                a[:, k // 2] = bad  # column l of a meets row l of b, which is all zero
                b[k // 2] = 0
                for x, y in ((a, b), (b.T.copy(), a.T.copy())):
                    c = np.zeros((x.shape[0], y.shape[1]), dtype)
                    gemm_acc(c, x, y)
                    with np.errstate(invalid="ignore"):
                        if not (np.isnan(c).all() and np.isnan(x @ y).all()):
                            return False
    return True
