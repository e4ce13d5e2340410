"""engine.kernels._compiled.numba_simd.gemm_taps (every tap of a conv in one register tile) and
simd_runs.finite_run (the finiteness check of the rows a loop wrote) against their formulas:
taps at any offsets (overlapping, negative steps), rows and columns that leave every kind of
remainder, both float dtypes; a NaN or Inf at any position of a run, in whole vectors or the
tail."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

numba = pytest.importorskip("numba")

from engine.kernels._compiled.numba_simd import gemm_taps, gemm_taps_set
from engine.kernels._compiled.simd_runs import finite_run


@numba.njit
def _taps(c, a, b, atab, btab, c0, a0, b0, m, n, kd, ldc, ars, brs, accumulate):
    if accumulate:
        gemm_taps(c, a, b, atab, btab, c0, a0, b0, m, n, kd, ldc, ars, 1, brs, atab.shape[0])
    else:
        gemm_taps_set(c, a, b, atab, btab, c0, a0, b0, m, n, kd, ldc, ars, 1, brs,
                      atab.shape[0])


@settings(max_examples=80, deadline=None)
@given(taps=st.integers(1, 5), m=st.integers(1, 20), n=st.integers(1, 70),
       kd=st.integers(0, 24), accumulate=st.booleans(),
       dtype=st.sampled_from(["float32", "float64"]), data=st.data())
def test_every_tap_sums_into_one_tile(taps, m, n, kd, accumulate, dtype, data):
    """``C[i, j] (+)= sum_t sum_l A[a0 + atab[t] + i*ars + l] * B[b0 + btab[t] + l*brs + j]``
    with rows of ``A`` that overlap between taps (a shift of one row or less) and ``C``'s
    rows wider than ``n``; ``C``'s other elements untouched."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    ars, ldc, brs = kd + 1, n + data.draw(st.integers(0, 3)), n + data.draw(st.integers(0, 2))
    shifts = [data.draw(st.integers(-2 * ars, 2 * ars)) for _ in range(taps)]
    a0 = 2 * ars + 1
    a = rng.standard_normal(a0 + 2 * ars + m * ars + kd + 1).astype(dtype)
    b = rng.standard_normal(taps * kd * brs + brs + 5).astype(dtype)
    btab = np.array([t * kd * brs for t in range(taps)], np.int64)[::-1].copy()  # any order
    atab = np.array(shifts, np.int64)
    c = rng.standard_normal(m * ldc + 4).astype(dtype)
    before = c.copy()
    want = c.astype(np.float64) if accumulate else np.zeros(c.shape)
    bound = np.abs(want)
    rows = np.arange(m)[:, None] * ars + np.arange(kd)[None, :]
    for t in range(taps):
        at = a[a0 + atab[t] + rows].astype(np.float64)
        bt = b[3 + btab[t] + np.arange(kd)[:, None] * brs + np.arange(n)[None, :]]
        idx = 1 + np.arange(m)[:, None] * ldc + np.arange(n)[None, :]
        want[idx] += at @ bt
        bound[idx] += np.abs(at) @ np.abs(bt)
    _taps(c, a, b, atab, btab, 1, a0, 3, m, n, kd, ldc, ars, brs, accumulate)
    touched = np.zeros(c.shape, bool)
    touched[1 + np.arange(m)[:, None] * ldc + np.arange(n)[None, :]] = True
    err = np.abs(c[touched] - want[touched])
    assert np.all(err <= (taps * kd + 2) * np.finfo(dtype).eps * bound[touched] + 1e-30)
    np.testing.assert_array_equal(c[~touched], before[~touched])


@numba.njit
def _finite(a, a0, n):
    return finite_run(a, a0, n)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 64, 65, 128, 200])
def test_a_run_is_finite_unless_one_element_is_nan_or_inf(dtype, n):
    """Each position of the run in turn holds NaN, +Inf or -Inf (the whole-vector sums and the
    tail); a NaN just outside the run is not looked at; the largest finite values are finite
    (``v - v`` is 0 for them, no overflow)."""
    a = np.full(n + 4, np.finfo(dtype).max, dtype)
    a[1::2] *= -1
    a[1], a[n + 2] = np.nan, np.inf  # outside the run [2, n + 2)
    assert _finite(a, 2, n)
    for pos in range(2, n + 2):
        for bad in (np.nan, np.inf, -np.inf):
            b = a.copy()
            b[pos] = bad
            assert not _finite(b, 2, n), (pos, bad)


@pytest.mark.parametrize("vector_bytes", [16, 32, 64])
def test_every_vector_width_sums_the_taps_alike(monkeypatch, vector_bytes):
    """The widths and tile shapes chosen on other CPUs (SSE, AVX2; AVX-512), compiled fresh
    under each: the tap sum and the finiteness check against NumPy, with rows and columns that
    leave every kind of remainder of the tile and of the vectors."""
    from engine.kernels._compiled import numba_simd

    monkeypatch.setattr(numba_simd, "VECTOR_BYTES", vector_bytes)

    @numba.njit
    def taps(c, a, b, atab, btab, m, n, kd):  # compiled now, with this width
        gemm_taps_set(c, a, b, atab, btab, 0, 0, 0, m, n, kd, n, kd, 1, n, atab.shape[0])

    @numba.njit
    def finite(a, n):
        return finite_run(a, 0, n)

    rng = np.random.default_rng(vector_bytes)
    for m, n, kd in ((13, 70, 9), (6, 64, 20), (1, 5, 3), (7, 33, 1)):
        a = rng.standard_normal(m * kd + 2 * kd)
        b = rng.standard_normal(2 * kd * n)
        atab, btab = np.array([0, 2 * kd], np.int64), np.array([0, kd * n], np.int64)
        c = np.full(m * n, np.nan)
        taps(c, a, b, atab, btab, m, n, kd)
        rows = np.arange(m)[:, None] * kd + np.arange(kd)[None, :]
        want = (a[rows] @ b[: kd * n].reshape(kd, n)
                + a[rows + 2 * kd] @ b[kd * n:].reshape(kd, n))
        np.testing.assert_allclose(c.reshape(m, n), want, rtol=1e-12, atol=1e-12)
        assert finite(c, c.size)
        c[-1] = np.inf
        assert not finite(c, c.size)


@pytest.mark.parametrize("overwrite", [True, False])
def test_taps_past_the_tile_terms_sum_in_groups(overwrite):
    """``shifted_products`` with more taps x channels than one tile sums
    (``conv_tiles_jit.TILE_TERMS``): every tap still counts once, the groups added in tap
    order, with the result written (``overwrite``) or added to."""
    from engine.kernels._compiled import conv_tiles_jit
    from engine.kernels._compiled.numba_simd import tile_columns

    k = conv_tiles_jit.TILE_TERMS // 2 + 1  # one tap per group: 3 groups
    taps, rows, n, nr = 3, 7, 19, tile_columns(4)
    rng = np.random.default_rng(3)
    shifts, a_bases = np.array([0, 1, 2], np.int64), np.zeros(taps, np.int64)
    a = rng.standard_normal((rows + 2) * k).astype(np.float32)
    bs = rng.standard_normal((taps, k, n)).astype(np.float32)
    panels = np.zeros((taps, -(-n // nr), k, nr), np.float32)
    for p in range(panels.shape[1]):
        width = min(nr, n - p * nr)
        panels[:, p, :, :width] = bs[:, :, p * nr:p * nr + width]
    c = rng.standard_normal(rows * n).astype(np.float32)
    want = np.zeros((rows, n)) if overwrite else c.reshape(rows, n).astype(np.float64)
    bound = np.abs(want)
    a2 = a.reshape(rows + 2, k).astype(np.float64)
    for t in range(taps):
        want += a2[t:t + rows] @ bs[t]
        bound += np.abs(a2[t:t + rows]) @ np.abs(bs[t].astype(np.float64))
    conv_tiles_jit.shifted_products(c, a, panels.reshape(-1), 0, 0, rows, shifts, a_bases,
                                    rows + 2, k, n, k, n, nr, 96, overwrite)
    err = np.abs(c.reshape(rows, n) - want)
    assert np.all(err <= (k + taps + 1) * np.finfo(np.float32).eps * bound)
