"""engine.kernels._compiled.numba_simd and .tap_sums: the register-accumulating product sums
against NumPy, over channel counts that fill whole vector blocks, part of one, or none, both
float dtypes, one tap, three and tap grids, operands on and off 64-byte lines."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

numba = pytest.importorskip("numba")

from engine.kernels._compiled.numba_simd import gemm_acc, gemm_set
from engine.kernels._compiled.tap_sums import (
    acc_products,
    acc_products3,
    acc_products3x3,
    acc_products5x5,
)


@numba.njit
def _one(t, x, g, x0, g0, nq, xs, gs):
    acc_products(t, x, g, x0, g0, nq, xs, gs, 0)


@numba.njit
def _three(t, x, g, x0, g0, nq, xs, gs, xt):
    acc_products3(t, x, g, x0, g0, nq, xs, gs, xt)


def _expected(t, x, g, x0, g0, nq, xs, gs, xt):
    """The sum in float64, per tap ``a`` reading ``x`` from ``x0 + a*xt``."""
    c = t.shape[-1]
    out = t.astype(np.float64).reshape(-1, c).copy()
    for a in range(out.shape[0]):
        for q in range(nq):
            xa = x[x0 + a * xt + q * xs: x0 + a * xt + q * xs + c].astype(np.float64)
            out[a] += xa * g[g0 + q * gs: g0 + q * gs + c]
    return out.reshape(t.shape)


@settings(max_examples=120, deadline=None)
@given(taps=st.sampled_from([1, 3]), channels=st.integers(1, 70), nq=st.integers(0, 9),
       stride=st.integers(1, 3), dtype=st.sampled_from(["float32", "float64"]),
       seed=st.integers(0, 2**16))
def test_products_match_numpy(taps, channels, nq, stride, dtype, seed):
    rng = np.random.default_rng(seed)
    xs, gs, xt = stride * channels, channels, channels  # as the filter gradient calls them
    x0, g0 = 2 * channels, channels
    x = rng.standard_normal(x0 + 2 * xt + nq * xs + channels + 3).astype(dtype)
    g = rng.standard_normal(g0 + nq * gs + channels + 3).astype(dtype)
    t = rng.standard_normal((channels,) if taps == 1 else (3, channels)).astype(dtype)
    want = _expected(t, x, g, x0, g0, nq, xs, gs, xt)
    if taps == 1:
        _one(t, x, g, x0, g0, nq, xs, gs)
    else:
        _three(t, x, g, x0, g0, nq, xs, gs, xt)
    bound = _expected(np.abs(t), np.abs(x), np.abs(g), x0, g0, nq, xs, gs, xt)
    eps = np.finfo(dtype).eps
    assert np.all(np.abs(t - want) <= (nq + 2) * eps * bound)


@numba.njit
def _grid(t, x, g, x0, g0, nq, xs, gs, xr, xc):
    if t.shape[0] == 9:
        acc_products3x3(t, x, g, x0, g0, nq, xs, gs, xr, xc)
    else:
        acc_products5x5(t, x, g, x0, g0, nq, xs, gs, xr, xc)


def _grid_expected(t, x, g, x0, g0, nq, xs, gs, xr, xc):
    """``t`` plus the grid's partial sums, each summed in float64 from zero."""
    size = round(t.shape[0] ** 0.5)
    c = t.shape[1]
    part = np.zeros(t.shape)
    for a in range(t.shape[0]):
        base = x0 + (a // size) * xr + (a % size) * xc
        for q in range(nq):
            part[a] += (x[base + q * xs: base + q * xs + c].astype(np.float64)
                        * g[g0 + q * gs: g0 + q * gs + c])
    return t + part, np.abs(t) + np.abs(part)


@settings(max_examples=80, deadline=None)
@given(size=st.sampled_from([3, 5]), channels=st.integers(1, 70), nq=st.integers(0, 9),
       stride=st.integers(1, 2), dilation=st.integers(1, 2),
       dtype=st.sampled_from(["float32", "float64"]), seed=st.integers(0, 2**16))
def test_tap_grid_products_match_numpy(size, channels, nq, stride, dilation, dtype, seed):
    """As the depthwise filter gradient calls them: rows ``xr`` apart, columns ``dc*C``; the
    partial sum starts from zero and is added into ``t`` once."""
    rng = np.random.default_rng(seed)
    width = nq * stride + size * dilation + 1
    xs, gs, xc, xr = stride * channels, channels, dilation * channels, width * channels
    x = rng.standard_normal(size * dilation * xr + channels).astype(dtype)
    g = rng.standard_normal(channels + nq * gs + 3).astype(dtype)
    t = rng.standard_normal((size * size, channels)).astype(dtype)
    want, scale = _grid_expected(t, x, g, 0, channels, nq, xs, gs, xr, xc)
    _grid(t, x, g, 0, channels, nq, xs, gs, xr, xc)
    bound = _grid_expected(np.zeros_like(t), np.abs(x), np.abs(g), 0, channels, nq, xs, gs, xr,
                           xc)[0] + scale
    assert np.all(np.abs(t - want) <= (nq + 2) * np.finfo(dtype).eps * bound)


def _at_offset(rng, n, offset, dtype):
    """``n`` random values starting ``offset`` elements past a 64-byte line."""
    item = np.dtype(dtype).itemsize
    buf = np.empty(n + 128 // item, dtype)
    start = (-buf.ctypes.data % 64) // item + offset
    out = buf[start:start + n]
    out[:] = rng.standard_normal(n)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size", [3, 5])
def test_tap_grids_read_operands_at_any_offset_from_a_cache_line(size, dtype):
    """Every offset of ``x`` and ``g`` from a 64-byte line, alike and not, with channels that
    fill whole vectors or leave a last part of one (read and written as one masked vector)."""
    rng = np.random.default_rng(size)
    lanes_64 = 64 // np.dtype(dtype).itemsize
    for channels in (lanes_64, 2 * lanes_64, 3 * lanes_64 + 5, 7):
        nq, xr = 6, (6 + size) * channels
        for xoff, goff in [(o, o) for o in range(lanes_64)] + [(1, 2), (0, 3)]:
            x = _at_offset(rng, size * xr + channels, xoff, dtype)
            g = _at_offset(rng, nq * channels, goff, dtype)
            t = rng.standard_normal((size * size, channels)).astype(dtype)
            want = _grid_expected(t, x, g, 0, 0, nq, channels, channels, xr, channels)[0]
            _grid(t, x, g, 0, 0, nq, channels, channels, xr, channels)
            np.testing.assert_allclose(t, want, rtol=1e-5 if dtype == "float32" else 1e-12,
                                       atol=1e-5 if dtype == "float32" else 1e-12)


def test_a_nan_or_inf_factor_reaches_the_sum():
    """IEEE arithmetic throughout: Inf * 0 is NaN, so the result vouches for its inputs."""
    x = np.ones(40, np.float32)
    g = np.zeros(40, np.float32)
    x[17] = np.inf  # q = 1 (xs = 16), channel 1
    t = np.zeros(16, np.float32)
    _one(t, x, g, 0, 0, 2, 16, 16)
    assert np.isnan(t[1]) and np.all(t[np.arange(16) != 1] == 0)


def test_other_arrays_are_refused_when_compiling():
    with pytest.raises(numba.core.errors.TypingError):
        _one(np.zeros(4, np.float32), np.zeros(8, np.float64), np.zeros(8, np.float32),
             0, 0, 1, 4, 4)


def test_every_cached_loop_is_keyed_by_the_sources_of_the_whole_compiled_package():
    """numba checks a cache against the defining file only, but the loops inline intrinsics of
    other files: every cache=True loop of engine/kernels/_compiled is stamped with the hash of
    all its sources instead (engine.kernels._compiled.cache_key), in the directory numba picks."""
    from engine.kernels._compiled import cache_key, conv_tiles_jit, numba_depthwise, winograd_jit

    loops = [f for m in (numba_depthwise, winograd_jit, conv_tiles_jit) for f in vars(m).values()
             if isinstance(f, numba.core.dispatcher.Dispatcher) and f._cache.__class__.__name__
             == "FunctionCache"]
    assert len(loops) >= 15
    for loop in loops:
        locator = loop._cache._impl.locator
        assert isinstance(locator, cache_key.SourcesLocator), loop
        assert locator.get_source_stamp() == cache_key.sources_sha256()
        assert loop._cache._cache_file._source_stamp == cache_key.SOURCES_SHA256
    assert cache_key.SOURCES_SHA256 == cache_key.sources_sha256()


def test_editing_any_compiled_module_even_a_docstring_changes_the_key(tmp_path):
    """No hash to paste anywhere: the key follows every byte of every module of the package."""
    from engine.kernels._compiled import cache_key

    for path in cache_key.PACKAGE.glob("*.py"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    assert cache_key.sources_sha256(tmp_path) == cache_key.SOURCES_SHA256
    seen = {cache_key.SOURCES_SHA256}
    for name in ("numba_simd.py", "tap_sums.py", "simd_runs.py", "winograd_simd.py",
                 "numba_depthwise.py"):
        original = (tmp_path / name).read_text()
        (tmp_path / name).write_text(original.replace('"""', '""" ', 1))  # the docstring only
        seen.add(cache_key.sources_sha256(tmp_path))
        (tmp_path / name).write_text(original)
    (tmp_path / "extra.py").write_text("")  # a new module too
    seen.add(cache_key.sources_sha256(tmp_path))
    assert len(seen) == 7


def test_a_cache_stamped_with_other_sources_is_never_loaded(tmp_path):
    """What the key buys: numba drops an index whose stamp differs (stale code), so a loop
    cached before an edit is compiled again."""
    from numba.core.caching import IndexDataCacheFile

    old = IndexDataCacheFile(str(tmp_path), "loop", "old sources")
    old.save(("sig",), "compiled code")
    assert old.load(("sig",)) == "compiled code"
    assert IndexDataCacheFile(str(tmp_path), "loop", "new sources").load(("sig",)) is None


@numba.njit
def _gemm(c, a, b, m, n, kd, ldc, ars, acs, brs, accumulate):
    if accumulate:
        gemm_acc(c, a, b, 0, 0, 0, m, n, kd, ldc, ars, acs, brs)
    else:
        gemm_set(c, a, b, 0, 0, 0, m, n, kd, ldc, ars, acs, brs)


@settings(max_examples=80, deadline=None)
@given(m=st.integers(1, 20), n=st.integers(1, 70), kd=st.integers(0, 40),
       transposed=st.booleans(), accumulate=st.booleans(),
       dtype=st.sampled_from(["float32", "float64"]), seed=st.integers(0, 2**16))
def test_register_tile_products_match_numpy(m, n, kd, transposed, accumulate, dtype, seed):
    """Whole tiles, single rows, single vectors and single columns, A read row- or
    column-major, C overwritten or added to."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((kd, m) if transposed else (m, kd)).astype(dtype)
    b = rng.standard_normal((kd, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(dtype)
    av = a.T if transposed else a
    want = av.astype(np.float64) @ b + (c if accumulate else 0)
    ars, acs = (1, m) if transposed else (kd, 1)
    _gemm(c.reshape(-1), a.reshape(-1), b.reshape(-1), m, n, kd, n, ars, acs, n, accumulate)
    bound = np.abs(av).astype(np.float64) @ np.abs(b) + (np.abs(c) if accumulate else 0)
    assert np.all(np.abs(c - want) <= (kd + 2) * np.finfo(dtype).eps * bound + 1e-30)


@pytest.mark.parametrize("vector_bytes", [16, 32, 64])
def test_every_vector_width_computes_the_same_sums(monkeypatch, vector_bytes):
    """The widths chosen on other CPUs (SSE, AVX2; AVX-512 here) and their tile shapes: fresh
    compiles under each width against NumPy, with sizes that leave every kind of remainder."""
    from engine.kernels._compiled import numba_simd

    monkeypatch.setattr(numba_simd, "VECTOR_BYTES", vector_bytes)

    @numba.njit
    def products3(t, x, g, nq, xs, gs, xt):  # compiled now, with this width
        acc_products3(t, x, g, 0, 0, nq, xs, gs, xt)

    @numba.njit
    def tiles(c, a, b, m, n, kd):
        gemm_acc(c, a, b, 0, 0, 0, m, n, kd, n, kd, 1, n)

    @numba.njit
    def grid(t, x, g, nq, ch, xr):  # compiled now: its channel blocks follow the width
        if t.shape[0] == 9:
            acc_products3x3(t, x, g, 0, 0, nq, ch, ch, xr, ch)
        else:
            acc_products5x5(t, x, g, 0, 0, nq, ch, ch, xr, ch)

    rng = np.random.default_rng(vector_bytes)
    for ch in (3, 16, 37, 128):
        t = rng.standard_normal((3, ch)).astype(np.float32)
        x = rng.standard_normal(5 * ch + 2 * ch).astype(np.float32)
        g = rng.standard_normal(5 * ch).astype(np.float32)
        want = _expected(t, x, g, 0, 0, 5, ch, ch, ch)
        products3(t, x, g, 5, ch, ch, ch)
        np.testing.assert_allclose(t, want, rtol=1e-5, atol=1e-5)
        for size in (3, 5):
            tg = rng.standard_normal((size * size, ch)).astype(np.float32)
            xr = (5 + size) * ch
            xg = rng.standard_normal(size * xr + ch).astype(np.float32)
            want = _grid_expected(tg, xg, g, 0, 0, 5, ch, ch, xr, ch)[0]
            grid(tg, xg, g, 5, ch, xr)
            np.testing.assert_allclose(tg, want, rtol=1e-5, atol=1e-5)
    for m, n, kd in ((13, 70, 9), (6, 64, 20), (1, 5, 3)):
        a, b = rng.standard_normal((m, kd)), rng.standard_normal((kd, n))
        c = rng.standard_normal((m, n))
        want = c + a @ b
        tiles(c.reshape(-1), a.reshape(-1), b.reshape(-1), m, n, kd)
        np.testing.assert_allclose(c, want, rtol=1e-12, atol=1e-12)
