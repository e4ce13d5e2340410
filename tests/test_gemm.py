"""engine.kernels.gemm: the ctypes cblas gemm of NumPy's own OpenBLAS, its layouts and its
fallback."""

import os
import subprocess
import sys

import numpy as np
import pytest

from engine.kernels import gemm


def _case(dtype, rng, rows=300, k=37, n=29, pad=11):
    a = rng.standard_normal((rows, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    big = rng.standard_normal((rows + 2 * pad, n + 3)).astype(dtype)
    c = big[pad : pad + rows, 1 : 1 + n]  # rows with a leading dimension wider than n
    return a, b, big, c


def test_numpy_wheel_blas_is_found():
    """NumPy's wheels bundle OpenBLAS: the ctypes path must be the one that runs here."""
    assert gemm.backend().startswith("cblas "), gemm.backend()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["rows", "a_t", "b_t"])
def test_accumulates_in_place_and_leaves_the_rest(dtype, layout):
    rng = np.random.default_rng(1)
    a, b, big, c = _case(dtype, rng)
    if layout == "a_t":
        a = np.ascontiguousarray(a.T).T
    if layout == "b_t":
        b = np.asfortranarray(b)
    before = big.copy()
    want = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    gemm.gemm_acc(c, a, b)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(c, want, rtol=tol, atol=tol)
    outside = np.ones(big.shape, bool)
    outside[11:311, 1:30] = False
    np.testing.assert_array_equal(big[outside], before[outside])


def test_same_routine_as_numpy_matmul_bit_for_bit():
    """One gemm of the same library: ``c = 0; c += a @ b`` equals NumPy's ``a @ b`` exactly."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((512, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    c = np.zeros((512, 64), np.float32)
    gemm.gemm_acc(c, a, b)
    np.testing.assert_array_equal(c, a @ b)


def test_unaddressable_layouts_fall_back_to_numpy():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 8, 2)).astype(np.float32)[:, :, 0]  # no unit stride
    b = rng.standard_normal((8, 5)).astype(np.float32)
    c = np.ones((40, 5), np.float32)
    gemm.gemm_acc(c, a, b)
    np.testing.assert_allclose(c, 1 + a @ b, rtol=1e-5, atol=1e-5)
    c16 = np.ones((40, 5), np.float16)
    gemm.gemm_acc(c16, a.astype(np.float16), b.astype(np.float16))
    np.testing.assert_allclose(c16, 1 + a @ b, rtol=1e-2, atol=1e-2)


def test_fallback_when_no_cblas():
    """GRADBLOCKS_GEMM=numpy (as if no library were found): the NumPy path, same result."""
    code = ("import numpy as np; from engine.kernels import gemm; print(gemm.backend());"
            "a=np.arange(12.).reshape(4,3); b=np.ones((3,2)); c=np.ones((4,2));"
            "gemm.gemm_acc(c,a,b); print(c.sum())")
    env = dict(os.environ, GRADBLOCKS_GEMM="numpy")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["numpy", str(8 + 2 * 66.0)]


def test_engine_kernels_does_not_import_scipy():
    code = "import sys, engine.kernels, engine.cli; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_numpy_built_against_a_system_blas_is_found_through_threadpoolctl(monkeypatch):
    """No bundled library: the BLAS threadpoolctl reports loaded is used."""
    bundled = gemm._bundled_libraries()
    monkeypatch.setattr(gemm, "_bundled_libraries", list)
    monkeypatch.setattr(gemm, "_loaded_blas_libraries", lambda: bundled)
    gemm._cblas.cache_clear()
    try:
        assert gemm.backend().startswith("cblas ")
        monkeypatch.setattr(gemm, "_loaded_blas_libraries", lambda: ["/nonexistent/libblas.so"])
        gemm._cblas.cache_clear()
        assert gemm.backend() == "numpy"
        c = np.zeros((3, 2), np.float32)
        gemm.gemm_acc(c, np.ones((3, 4), np.float32), np.ones((4, 2), np.float32))
        np.testing.assert_array_equal(c, 4)
    finally:
        gemm._cblas.cache_clear()


def test_the_nonfinite_probe_accepts_this_blas_and_refuses_one_that_skips_zero_factors(
        monkeypatch):
    """NumPy's OpenBLAS multiplies every factor pair (Inf * 0 is NaN); a BLAS that skips the
    products of a zero factor (as reference BLAS's ``IF (B(L,J).NE.ZERO)`` does) is caught, so
    results are not trusted to vouch for their inputs there."""
    gemm.propagates_nonfinite.cache_clear()
    try:
        assert gemm.propagates_nonfinite()

        def skipping(c, a, b):  # reference BLAS: column l of a is skipped where b[l, j] == 0
            for j in range(b.shape[1]):
                for l in range(a.shape[1]):
                    if b[l, j] != 0:
                        c[:, j] += a[:, l] * b[l, j]

        monkeypatch.setattr(gemm, "gemm_acc", skipping)
        gemm.propagates_nonfinite.cache_clear()
        assert not gemm.propagates_nonfinite()
    finally:
        monkeypatch.undo()
        gemm.propagates_nonfinite.cache_clear()
