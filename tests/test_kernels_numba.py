"""The compiled depthwise kernels (engine.kernels.accel, engine.kernels._compiled.numba_depthwise)
against the NumPy ones.

Tolerance: both paths compute in the compute dtype with different summation orders, so each is
within ``RTOL[dtype] * bound`` of the exact sum (``bound`` = the op on ``|a|, |b|``, the sum of
the terms' magnitudes) and they differ by at most twice that, plus the output dtype's smallest
subnormal. The NumPy path is the reference (tests/test_kernels_properties.py checks it against
the slow twin, and runs the compiled path too when numba imports: ``auto`` is the default).
"""

import functools
import os
import subprocess
import sys
import threading
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import kernels
from engine.base import cancel
from engine.base.dtypes import DTYPES, RTOL
from engine.base.errors import InvalidArgumentError
from engine.kernels import accel, dispatch
from engine.kernels.memory import conv_workspace
from engine.shapes.conv import conv2d_geometry
from tests.golden_cases import ARRAYS, VALID, call_valid
from tests.test_kernels_nonfinite import SPECIALS
from tests.test_kernels_properties import conv_cases

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[1]
FORWARD = kernels.depthwise_conv2d_native
FILTER = kernels.depthwise_conv2d_native_backprop_filter
INPUT = kernels.depthwise_conv2d_native_backprop_input



def path_kind() -> str:
    """The last call's path as these tests name it: ``numpy``, ``numba``, ``sparse`` (the
    tap-span path), ``empty`` (engine.kernels.path_record records ``numpy <strategy>``)."""
    path = kernels.last_path() or ""
    if path == "numpy tap-spans":
        return "sparse"
    return "numpy" if path.startswith("numpy") else path

def on_path(monkeypatch, path: str, op, *args, **attrs) -> np.ndarray:
    """``op(*args, **attrs)`` with ``GRADBLOCKS_KERNELS=path``, checking which path ran."""
    monkeypatch.setenv(accel.ENV, path)
    out = op(*args, **attrs)
    assert path_kind() in (path, "sparse", "empty")
    return out


def both_paths(monkeypatch, op, *args, **attrs) -> tuple[np.ndarray, np.ndarray, str]:
    numpy_out = on_path(monkeypatch, "numpy", op, *args, **attrs)
    compiled = on_path(monkeypatch, "numba", op, *args, **attrs)
    return compiled, numpy_out, path_kind()


def _close(compiled, numpy_out, bound, dtype):
    assert compiled.shape == numpy_out.shape and compiled.dtype == numpy_out.dtype
    tiny = float(ml_dtypes.finfo(DTYPES[dtype]).smallest_subnormal)
    err = np.abs(compiled.astype(np.float64) - numpy_out.astype(np.float64))
    assert np.all(err <= 2 * RTOL[dtype] * bound + tiny), float(err.max())


def _family_args(g, dtype, seed, lo=-1.0):
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    x, w, dy = (rng.uniform(lo, 1, s).astype(dt)
                for s in (g.input_shape, g.filter_shape, g.output_shape))
    return x, w, dy


@settings(max_examples=150, deadline=None)
@given(conv_cases(depthwise=True))
def test_compiled_depthwise_family_matches_numpy(case):
    g, attrs, dtype, seed = case
    x, w, dy = _family_args(g, dtype, seed)
    ax, aw, ady = (abs(a).astype(np.float64) for a in (x, w, dy))
    mp = pytest.MonkeyPatch()
    try:
        for op, args, absargs in (
                (FORWARD, (x, w), (ax, aw)),
                (FILTER, (x, g.filter_shape, dy), (ax, g.filter_shape, ady)),
                (INPUT, (g.input_shape, w, dy), (g.input_shape, aw, ady))):
            compiled, numpy_out, _ = both_paths(mp, op, *args, **attrs)
            mp.setenv(accel.ENV, "numpy")
            _close(compiled, numpy_out, op(*absargs, **attrs), dtype)
    finally:
        mp.undo()


@settings(max_examples=60, deadline=None)
@given(conv_cases(depthwise=True), st.integers(1, 3))
def test_compiled_depthwise_nan_inf_are_exactly_the_numpy_paths(case, specials):
    """NaN, +Inf and -Inf at the same positions on both paths (padding never contributes)."""
    g, attrs, dtype, seed = case
    rng = np.random.default_rng(seed)
    x, w, dy = _family_args(g, dtype, seed)
    for a in (x, w, dy):
        flat = a.reshape(-1)
        for _ in range(specials if flat.size else 0):
            flat[rng.integers(flat.size)] = SPECIALS[rng.integers(len(SPECIALS))]
    mp = pytest.MonkeyPatch()
    try:
        with np.errstate(invalid="ignore"):
            for op, args in ((FORWARD, (x, w)), (FILTER, (x, g.filter_shape, dy)),
                             (INPUT, (g.input_shape, w, dy))):
                compiled, numpy_out, _ = both_paths(mp, op, *args, **attrs)
                a, b = compiled.astype(np.float64), numpy_out.astype(np.float64)
                for test in (np.isnan, np.isposinf, np.isneginf):
                    np.testing.assert_array_equal(test(a), test(b))
    finally:
        mp.undo()


def test_nan_next_to_the_padding_stays_out_of_the_border_on_the_compiled_path(monkeypatch):
    """A NaN in the filter tap that only ever meets padding at the corner leaves it finite."""
    x = np.ones((1, 4, 4, 2), np.float32)
    w = np.ones((3, 3, 2, 1), np.float32)
    w[0, 0, 0, 0] = np.nan  # the top-left tap reads padding for output (0, 0) under SAME
    monkeypatch.setenv(accel.ENV, "numba")
    y = FORWARD(x, w, [1, 1, 1, 1], "SAME")
    assert path_kind() == "numba"
    assert np.isfinite(y[0, 0, 0, 0]) and y[0, 0, 0, 0] == 4.0
    assert np.isnan(y[0, 1, 1, 0]) and np.isfinite(y[0, 1, 1, 1])


DEPTHWISE_GOLDEN = [c for c in VALID if c["op"].startswith("Depthwise")]


@pytest.mark.parametrize("path", ["numpy", "numba"])
@pytest.mark.parametrize("case", DEPTHWISE_GOLDEN, ids=[c["id"] for c in DEPTHWISE_GOLDEN])
def test_depthwise_golden_cases_on_both_paths(monkeypatch, case, path):
    monkeypatch.setenv(accel.ENV, path)
    out = call_valid(case)
    assert path_kind() in (path, "sparse", "empty")
    exact, bound = ARRAYS[case["id"] + ".exact"], ARRAYS[case["id"] + ".bound"]
    err = np.abs(out.astype(np.float64) - exact)
    assert np.all(err <= case["rtol"] * bound + 1e-30)


def test_golden_depthwise_cases_exist_and_some_run_compiled(monkeypatch):
    assert len(DEPTHWISE_GOLDEN) >= 10
    monkeypatch.setenv(accel.ENV, "numba")
    paths = set()
    for case in DEPTHWISE_GOLDEN:
        call_valid(case)
        paths.add(path_kind())
    assert "numba" in paths


def test_the_switch_picks_the_path_and_names_a_bad_value(monkeypatch):
    x, w = np.ones((1, 5, 5, 3), np.float32), np.ones((3, 3, 3, 2), np.float32)
    for value, path in (("numpy", "numpy"), ("numba", "numba"), ("NUMBA", "numba"),
                        ("auto", "numpy"), ("", "numpy")):  # auto: a small call runs NumPy
        monkeypatch.setenv(accel.ENV, value)
        FORWARD(x, w, [1, 1, 1, 1], "SAME")
        assert path_kind() == path, value
    monkeypatch.setenv(accel.ENV, "numba")
    kernels.conv2d(x, np.ones((3, 3, 3, 2), np.float32), [1, 1, 1, 1], "SAME")
    assert kernels.last_path() == "numba im2col"  # Conv2D on 3 channels: the compiled im2col
    monkeypatch.setenv(accel.ENV, "fast")
    with pytest.raises(InvalidArgumentError, match="GRADBLOCKS_KERNELS='fast'.*auto, numpy, numba"):
        FORWARD(x, w, [1, 1, 1, 1], "SAME")


def test_numba_forced_without_numba_is_a_clear_error_and_auto_falls_back(monkeypatch):
    monkeypatch.setattr(accel, "_module", None)
    monkeypatch.setattr(accel, "_failed", "No module named 'numba'")
    monkeypatch.setattr(accel, "_ready", set())  # nothing loaded (an earlier test may have)
    x, w = np.ones((1, 5, 5, 3), np.float32), np.ones((3, 3, 3, 1), np.float32)
    monkeypatch.setenv(accel.ENV, "numba")
    with pytest.raises(InvalidArgumentError, match=r"numba is not importable.*pip install numba"):
        FORWARD(x, w, [1, 1, 1, 1], "SAME")
    monkeypatch.setenv(accel.ENV, "auto")
    monkeypatch.setattr(accel, "COMPILED_FROM_SECONDS", 0.0)  # any call would run compiled
    assert FORWARD(x, w, [1, 1, 1, 1], "SAME")[0, 2, 2, 0] == 9
    assert path_kind() == "numpy"


def test_extreme_geometry_keeps_the_tap_span_path(monkeypatch):
    monkeypatch.setenv(accel.ENV, "numba")
    x, w = np.ones((2, 64, 48, 8), np.float32), np.ones((3, 3, 8, 2), np.float32)
    attrs = {"strides": [1, 20000, 3, 1], "dilations": [1, 1, 2**20, 1], "padding": "SAME"}
    y = FORWARD(x, w, **attrs)
    assert path_kind() == "sparse" and y.shape == (2, 1, 16, 16)
    g = conv2d_geometry(x.shape, w.shape, attrs["strides"], "SAME", (), "NHWC",
                        attrs["dilations"], depthwise=True)  # the compiled loops agree
    np.testing.assert_array_equal(accel.compiled().depthwise_conv2d(g, x, w, y.dtype), y)


@contextmanager
def warming_up(monkeypatch, ready: set[str]):
    """Inside, the app's background load is still running with only ``ready`` done."""
    release = threading.Event()
    busy = threading.Thread(target=release.wait)
    busy.start()
    try:
        monkeypatch.setattr(accel, "_warm_thread", busy)
        monkeypatch.setattr(accel, "_ready", set(ready))
        monkeypatch.setenv(accel.ENV, "auto")
        yield
    finally:
        release.set()
        busy.join()


#: A depthwise call over :data:`engine.kernels.accel.COMPILED_FROM_SECONDS` of NumPy work, and
#: one under it.
LARGE = (np.ones((1, 64, 64, 32), np.float32), np.ones((3, 3, 32, 1), np.float32))
SMALL = (np.ones((1, 5, 5, 3), np.float32), np.ones((3, 3, 3, 1), np.float32))


def test_auto_takes_the_path_of_the_call_whatever_is_loaded(monkeypatch):
    """The path is a function of the call: the same with a dtype still loading in the
    background, loaded, or never loaded; half types compute in float32."""
    for ready in (set(), {"float64"}, {"float32", "float64"}):
        with warming_up(monkeypatch, ready):
            for (x, w), path in ((SMALL, "numpy"), (LARGE, "numba")):
                for dt in (np.float32, np.float64, np.float16):
                    FORWARD(x.astype(dt), w.astype(dt), [1, 1, 1, 1], "SAME")
                    assert path_kind() == path, (ready, x.shape, dt)


def test_the_rule_is_the_estimate_of_the_numpy_time():
    for (x, w), expected in ((SMALL, False), (LARGE, True)):
        g = conv2d_geometry(x.shape, w.shape, [1, 1, 1, 1], "SAME", (), "NHWC", (1, 1, 1, 1),
                            depthwise=True)
        assert (dispatch.numpy_seconds(g) >= accel.COMPILED_FROM_SECONDS) is expected


def test_background_warm_up_marks_both_compute_dtypes_ready(monkeypatch):
    monkeypatch.setattr(accel, "_warm_thread", None)
    monkeypatch.setattr(accel, "_ready", set())
    monkeypatch.setenv(accel.ENV, "auto")
    gate = threading.Event()  # the warm-up waits for it: a cached one can end at once
    real = accel.warm_up
    monkeypatch.setattr(accel, "warm_up", lambda dtypes: (gate.wait(60), real(dtypes)))
    thread = accel.warm_up_in_background()
    assert thread is not None and thread.daemon
    assert accel.warm_up_in_background() is thread  # one thread while it runs
    gate.set()
    thread.join()
    assert accel._ready == {"float32", "float64"}
    monkeypatch.setattr(accel, "_warm_thread", None)
    monkeypatch.setenv(accel.ENV, "numpy")
    assert accel.warm_up_in_background() is None


def test_a_cancelled_run_stops_between_compiled_batch_chunks(monkeypatch):
    monkeypatch.setenv(accel.ENV, "numba")
    monkeypatch.setattr(accel, "CHUNK_BYTES", 2**11)
    from engine.kernels._compiled import numba_depthwise
    x = np.ones((6, 8, 8, 4), np.float32)
    dy = np.ones((6, 8, 8, 4), np.float32)
    calls = []
    real = numba_depthwise.checkpoint

    def counting():
        calls.append(1)
        if len(calls) == 3:
            event.set()
        real()

    event = threading.Event()
    monkeypatch.setattr(numba_depthwise, "checkpoint", counting)
    with cancel.scope(event), pytest.raises(cancel.Cancelled):
        FILTER(x, [3, 3, 4, 1], dy, [1, 1, 1, 1], "SAME")
    assert len(calls) == 3  # stopped at the third chunk of six


def _peak(fn) -> tuple[int, object]:
    """tracemalloc's peak of ``fn()`` (NumPy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, out


@pytest.mark.parametrize("kind", ["forward", "filter", "input"])
def test_compiled_extra_memory_is_bounded_as_the_batch_grows_and_within_the_estimate(
        monkeypatch, kind):
    monkeypatch.setenv(accel.ENV, "numba")
    module = accel.compiled()
    monkeypatch.setattr(accel, "CHUNK_BYTES", 2**18)
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME", "data_format": "NCHW"}
    f32 = np.dtype(np.float32)
    kernel_peaks = []
    for batch in (4, 32):
        shape = (batch, 8, 32, 32)  # NCHW: every chunk is copied to NHWC
        g = conv2d_geometry(shape, (3, 3, 8, 2), attrs["strides"], "SAME", (), "NCHW",
                            depthwise=True)
        rng = np.random.default_rng(batch)
        x, w = rng.standard_normal(shape, f32), rng.standard_normal((3, 3, 8, 2), f32)
        dy = rng.standard_normal(g.output_shape, f32)
        op, args = {"forward": (FORWARD, (x, w)), "filter": (FILTER, (x, w.shape, dy)),
                    "input": (INPUT, (x.shape, w, dy))}[kind]
        op(*args, **attrs)  # compiled before measuring
        peak, out = _peak(lambda: op(*args, **attrs))  # noqa: B023 - called at once
        assert path_kind() == "numba"
        assert peak - out.nbytes <= conv_workspace(g, kind, "float32", True)
        xv, dyv = x.transpose(0, 2, 3, 1), dy.transpose(0, 2, 3, 1)  # the op's NHWC views
        dx = np.zeros(x.shape, f32).transpose(0, 2, 3, 1)
        chunk = accel.CHUNK_BYTES  # what the dispatch passes
        call = {"forward": lambda: module.depthwise_conv2d(g, xv, w, f32, chunk),  # noqa: B023
                "filter": lambda: module.depthwise_conv2d_backprop_filter(g, xv, dyv, f32, chunk),  # noqa: B023
                "input": lambda: module.depthwise_conv2d_backprop_input(g, dyv, w, f32, dx, chunk)}  # noqa: B023
        peak, res = _peak(call[kind])
        kernel_peaks.append(peak - (res.nbytes if res is not None else 0))
    assert kernel_peaks[1] <= kernel_peaks[0] + 2**16  # 8x the batch, the same workspace
    assert kernel_peaks[1] <= 3 * 2**18 + 2**16


def _run_cli(canvas: Path, cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), GRADBLOCKS_KERNELS="numba")
    return subprocess.run([sys.executable, "-m", "engine.cli", "run", str(canvas)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600, check=False)


def test_the_cli_says_once_that_it_compiles_then_loads_from_the_cache(tmp_path):
    canvas = ROOT / "assets" / "examples" / "depthwise_backprop_filter.gbc.json"
    cold = _run_cli(canvas, tmp_path)
    assert cold.returncode == 0, cold.stderr
    assert cold.stderr.count(accel.COMPILE_NOTE) == 1, cold.stderr
    assert "DepthwiseBackpropFilter" in cold.stdout
    assert any(tmp_path.rglob("*.nbi"))  # numba's cache index was written there
    warm = _run_cli(canvas, tmp_path)
    assert warm.returncode == 0 and accel.COMPILE_NOTE not in warm.stderr, warm.stderr
    assert warm.stdout.splitlines()[-1].split()[:6] == cold.stdout.splitlines()[-1].split()[:6]


def test_the_compile_note_never_breaks_a_kernel_when_its_stream_is_gone(monkeypatch):
    """A CLI run inside a test (or a closed pipe) left the note pointing at a closed stream; the
    next cold-cache compile then raised 'I/O operation on closed file' inside a kernel call."""
    import io

    monkeypatch.setattr(accel, "_noted", False)
    monkeypatch.setattr(accel, "_note_wanted", False)
    monkeypatch.setattr(accel, "_note_stream", None)
    gone = io.StringIO()
    gone.close()
    monkeypatch.setattr(accel, "_install_note_listener", lambda: None)
    accel.announce_compiles(gone)
    accel._note()  # what numba's compile event calls: no exception
    assert accel._noted
    shown = io.StringIO()
    monkeypatch.setattr(accel, "_noted", False)
    monkeypatch.setattr("sys.stderr", shown)
    accel.announce_compiles()  # default: sys.stderr as it is when the compile happens
    accel._note()
    assert shown.getvalue().strip() == accel.COMPILE_NOTE


def _counting_scans(monkeypatch) -> list[tuple[int, ...]]:
    """Record the shape of every array nonfinite_safe scans for NaN/Inf, and of every result
    engine.kernels checks before vouching for it."""
    from engine.kernels import nonfinite
    scanned: list[tuple[int, ...]] = []
    real = nonfinite.all_finite

    def counting(a):
        scanned.append(a.shape)
        return real(a)

    monkeypatch.setattr(nonfinite, "all_finite", counting)
    monkeypatch.setattr(kernels.ops, "all_finite", counting)  # the result check of the NumPy path
    return scanned


@pytest.mark.parametrize("kind", ["forward", "filter", "input"])
def test_a_finite_compiled_result_skips_the_input_scans(monkeypatch, kind):
    """The compiled loops vouch for a finite result, so the two input scans (as costly as the
    kernel for depthwise shapes) are skipped; the NumPy path vouches only when this process's
    BLAS multiplies every factor (engine.kernels.gemm.propagates_nonfinite) and its result is no
    larger than its inputs (else scanning the inputs costs less), else it scans both."""
    from engine.kernels import gemm
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 9, 9, 4), np.float32), rng.standard_normal((3, 3, 4, 2),
                                                                              np.float32)
    attrs = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    dy = rng.standard_normal((2, 5, 5, 8), np.float32)
    op, args = {"forward": (FORWARD, (x, w)), "filter": (FILTER, (x, w.shape, dy)),
                "input": (INPUT, (x.shape, w, dy))}[kind]
    reference = on_path(monkeypatch, "numpy", op, *args, **attrs)
    scanned = _counting_scans(monkeypatch)
    assert gemm.propagates_nonfinite()  # NumPy's bundled OpenBLAS
    on_path(monkeypatch, "numpy", op, *args, **attrs)
    operands = [a.shape for a in args if isinstance(a, np.ndarray)]
    if reference.size <= sum(np.prod(s) for s in operands):
        assert scanned == [reference.shape]  # the result only (vouched)
    else:  # the input gradient: its result is larger than its inputs, which are scanned
        assert sorted(scanned) == sorted(operands) and kind == "input"
    scanned.clear()
    monkeypatch.setattr(gemm, "propagates_nonfinite", lambda: False)
    on_path(monkeypatch, "numpy", op, *args, **attrs)
    assert len(scanned) == 2  # both inputs
    scanned.clear()
    out = on_path(monkeypatch, "numba", op, *args, **attrs)
    assert path_kind() == "numba" and scanned == []
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-5)


def test_a_nan_no_term_reads_is_vouched_for_and_one_that_is_read_is_not(monkeypatch):
    """Stride 2 VALID with a 2-wide filter never reads the fifth column: a NaN there changes nothing and is never
    scanned for. A NaN in a column that is read makes the result non-finite, so the inputs
    are scanned and the NaN/Inf rules apply (the same NaN positions as the NumPy path)."""
    x = np.ones((1, 5, 5, 2), np.float32)
    w = np.ones((2, 2, 2, 1), np.float32)
    attrs = {"strides": [1, 2, 2, 1], "padding": "VALID"}
    x[0, 1, 4, 0] = np.nan  # column 4: the windows start at columns 0 and 2
    scanned = _counting_scans(monkeypatch)
    y = on_path(monkeypatch, "numba", FORWARD, x, w, **attrs)
    assert scanned == [] and np.all(y == 4.0)
    x[0, 1, 1, 0] = np.nan
    y = on_path(monkeypatch, "numba", FORWARD, x, w, **attrs)
    assert scanned == [x.shape]  # the scan stops at the first array with a NaN
    expected = np.full_like(y, 4.0)
    expected[0, 0, 0, 0] = np.nan
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(np.isnan(on_path(monkeypatch, "numpy", FORWARD, x, w,
                                                   **attrs)), np.isnan(y))


def test_a_wrong_guess_of_the_compiled_path_still_scans_the_inputs(monkeypatch):
    """Before the call's work is known the compiled path is guessed (numba imports), but
    ``auto`` runs a small call on NumPy: that path does not vouch, so a NaN read only through
    padding-free terms still gets the NaN/Inf rules (padding never contributes)."""
    monkeypatch.setenv(accel.ENV, "auto")
    assert accel.may_run_compiled()
    x, w = np.ones((1, 4, 4, 1), np.float32), np.ones((3, 3, 1, 1), np.float32)
    w[0, 0, 0, 0] = np.nan  # meets only padding at output (0, 0)
    y = FORWARD(x, w, [1, 1, 1, 1], "SAME")
    assert path_kind() == "numpy"
    assert y[0, 0, 0, 0] == 4.0 and np.isnan(y[0, 1, 1, 0])


@pytest.mark.parametrize("m", [2, 3, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_channel_repeat_is_numpys_repeat(m, dtype):
    """The forward and filter gradient read output channel ``c*M + m`` from input channel
    ``c``: the compiled repeat (its own loop for ``M = 2``) equals ``np.repeat``."""
    from engine.kernels._compiled import transpose

    x = np.random.default_rng(m).standard_normal((7, 5), dtype)
    out = np.full((7, 5 * m), np.nan, dtype)
    transpose.repeat_channels(x, out)
    np.testing.assert_array_equal(out, np.repeat(x, m, axis=1))


@functools.cache
def _window_call(size: int, unroll: int):
    """A compiled call of the ``size x size`` depthwise window with ``unroll`` pixels per
    group (a compile-time constant, as the kernels pass it)."""
    import numba as nb

    from engine.kernels._compiled.depthwise_simd import window3x3, window5x5

    window = window5x5 if size == 5 else window3x3

    @nb.njit
    def call(y, x, w, nq, ys, xs, xrow, xcol, ck):
        window(y, x, w, ys, 0, nq, ys, xs, xrow, xcol, ck, unroll)
    return call


@settings(max_examples=60, deadline=None)
@given(size=st.sampled_from([3, 5]), ck=st.integers(1, 37), nq=st.integers(1, 11),
       sc=st.integers(1, 3), dc=st.integers(1, 2), dr=st.integers(1, 2),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16),
       unroll=st.sampled_from([1, 2, 4]))
def test_the_depthwise_windows_are_their_formula(size, ck, nq, sc, dc, dr, dtype, seed,
                                                 unroll):
    """``window3x3`` / ``window5x5``: ``y[q, k] = sum_{i,j<K} x[i*dr, q*sc + j*dc, k] *
    w[i, j, k]`` for whole vectors of channels, the channels after them, groups of 1, 2 or 4
    pixels and the rest; within RTOL of the float64 sum of magnitudes; ``y`` outside its rows
    untouched."""
    rng = np.random.default_rng(seed)
    rows, cols = (size - 1) * dr + 1, (nq - 1) * sc + (size - 1) * dc + 1
    x = rng.standard_normal((rows, cols, ck)).astype(dtype)
    w = rng.standard_normal((size, size, ck)).astype(dtype)
    y = np.full((nq + 2, ck), 7.0, dtype)  # one row of margin on either side
    _window_call(size, unroll)(y.reshape(-1), x.reshape(-1), w.reshape(-1), nq, ck, sc * ck,
                               dr * cols * ck, dc * ck, ck)
    taps = [(x[i * dr, j * dc : j * dc + (nq - 1) * sc + 1 : sc].astype(np.float64), w[i, j])
            for i in range(size) for j in range(size)]
    want = sum(a * b for a, b in taps)
    bound = sum(abs(a) * abs(b) for a, b in taps)
    assert np.all(np.abs(y[1:-1] - want) <= RTOL[np.dtype(dtype).name] * bound + 1e-300)
    assert np.all(y[0] == 7.0) and np.all(y[-1] == 7.0)


@pytest.mark.parametrize("size,strides,dilations,channels", [
    (3, (1, 1), (1, 1), 20), (3, (2, 1), (1, 2), 9), (5, (1, 1), (1, 1), 16),
    (5, (1, 2), (2, 1), 11)])
def test_depthwise_windows_and_their_borders_match_numpy_with_nan_placed_alike(
        monkeypatch, size, strides, dilations, channels):
    """The forward and the stride-1 input gradient through the register windows (interior
    columns) and the per-tap border loops (SAME padding): within RTOL of the NumPy path, and a
    NaN and an Inf in x land where the NumPy path puts them."""
    rng = np.random.default_rng(size * channels)
    x = rng.uniform(-1, 1, (2, 12, 13, channels)).astype(np.float32)
    x[0, 5, 6, 3], x[1, 0, 12, 1] = np.nan, np.inf
    w = rng.uniform(-1, 1, (size, size, channels, 1)).astype(np.float32)
    attrs = {"strides": [1, *strides, 1], "dilations": [1, *dilations, 1], "padding": "SAME"}
    compiled, numpy_out, _ = both_paths(monkeypatch, FORWARD, x, w, **attrs)
    for test in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(test(compiled), test(numpy_out))
    finite = np.isfinite(numpy_out)
    bound = on_path(monkeypatch, "numpy", FORWARD, abs(np.nan_to_num(x)), abs(w), **attrs)
    _close(np.where(finite, compiled, 0), np.where(finite, numpy_out, 0), bound, "float32")
    if strides == (1, 1):
        dy = rng.uniform(-1, 1, numpy_out.shape).astype(np.float32)
        compiled, numpy_out, _ = both_paths(monkeypatch, INPUT, x.shape, w, dy, **attrs)
        bound = on_path(monkeypatch, "numpy", INPUT, x.shape, abs(w), abs(dy), **attrs)
        _close(compiled, numpy_out, bound, "float32")


EXIT_DURING_WARM_UP = """
import atexit, sys, threading
seen = []
atexit.register(lambda: print("warm-up alive at exit:", seen[0].is_alive(), flush=True))
from engine.kernels import accel
accel._ready.clear()  # so there is a warm-up to run, whatever the disk cache holds
seen.append(accel.warm_up_in_background())
sys.exit(0)  # at once, as a user closing the app right after it starts
"""


def test_exiting_during_the_background_warm_up_waits_for_it():
    """The app's warm-up thread is a daemon; left running inside numba or LLVM while the
    interpreter shuts down, it crashed the process (SIGSEGV/SIGABRT in about 1 of 8 quick
    start-and-quit runs). At exit the remaining dtypes are dropped and the running step is
    waited for: the thread has ended before the last exit handlers run, and the exit is
    clean."""
    env = {**os.environ, accel.ENV: "auto"}
    proc = subprocess.run([sys.executable, "-c", EXIT_DURING_WARM_UP], capture_output=True,
                          text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "warm-up alive at exit: False" in proc.stdout, proc.stdout + proc.stderr
