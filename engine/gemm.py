"""``c += a @ b`` in place through BLAS gemm with ``beta = 1``.

NumPy's matmul always writes a fresh result, so accumulating one product per filter tap into a
shifted view of the output would cost a temporary and an extra pass over memory per tap. SciPy
exposes BLAS gemm with ``beta`` and ``overwrite_c``: in column-major terms the row-major
``c (T, n) += a (T, k) @ b (k, n)`` is ``c.T += b.T @ a.T``, and all three transposes are
Fortran-contiguous views of row-contiguous matrices, so BLAS updates ``c`` where it lies.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import blas


def gemm_acc(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """``c += a @ b`` for 2-D ``a (T, k)``, ``b (k, n)``, ``c (T, n)`` of one float dtype."""
    if c.size == 0 or a.shape[1] == 0:
        return
    fn = blas.dgemm if c.dtype == np.float64 else blas.sgemm
    ct, at, bt = c.T, a.T, b.T
    if not (ct.flags.f_contiguous and at.flags.f_contiguous and bt.flags.f_contiguous):
        c += a @ b
        return
    res = fn(1.0, bt, at, beta=1.0, c=ct, overwrite_c=1)
    if not np.shares_memory(res, c):  # BLAS worked on a copy: write it back
        c[...] = res.T
