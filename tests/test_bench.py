"""The benchmark's timing helpers (timing itself is never asserted; only what gets called)."""

import io

import numpy as np

from engine.bench import kernels as bench


def test_paired_timing_alternates_warmed_up_rounds(monkeypatch):
    calls = []

    def ours():
        calls.append("ours")

    def tf():
        calls.append("tf")

    monkeypatch.setattr(bench, "warm_up", lambda fn: calls.append(f"warm-up {fn.__name__}"))
    a, b = bench.paired_median_ms(ours, tf, repeat=5, rounds=3)
    # 3 rounds: each side warmed up, then 2 timed calls (ceil(5 / 3) = 2)
    assert calls == ["warm-up ours", "ours", "ours", "warm-up tf", "tf", "tf"] * 3
    assert a >= 0 and b >= 0


def test_cases_have_the_issue_shapes_and_flops():
    by_name = {case.name: case for case in bench.CASES}
    conv = by_name["filter 56x56x64 3x3x64 s1 SAME"]
    assert conv.shapes() == ((8, 56, 56, 64), (8, 56, 56, 64))
    assert conv.gflop() == 1.849688064  # 2 * 8*56*56 * 3*3*64*64 / 1e9
    assert by_name["input  224x224x3 7x7x64 s2 SAME"].shapes()[1] == (4, 112, 112, 64)
    dw = by_name["dw filter 32x32x32 5x5 m2 VALID"]
    assert dw.shapes()[1] == (4, 28, 28, 64)
    assert round(dw.gflop(), 6) == round(2 * 4 * 28 * 28 * 5 * 5 * 32 * 2 / 1e9, 6)
    nchw = by_name["filter NCHW 56x56x64 3x3x64 s1"]
    assert nchw.shapes() == ((8, 64, 56, 56), (8, 64, 56, 56))


def test_warm_up_calls_until_the_time_has_passed():
    calls = []
    bench.warm_up(lambda: calls.append(1), seconds=0.0)
    assert calls == [1]  # at least once
    t0 = bench.time.perf_counter()
    bench.warm_up(lambda: calls.append(1), seconds=0.02)
    assert bench.time.perf_counter() - t0 >= 0.02 and len(calls) > 2


def test_main_prints_a_row_per_selected_case_and_says_when_tensorflow_is_missing(
        monkeypatch):
    monkeypatch.setattr(bench, "tensorflow_available", lambda: False)
    monkeypatch.setattr(bench, "matmul_peak", lambda repeat: 100.0)
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numpy")  # the NumPy path's name below
    out = io.StringIO()  # its own stream: no other test's handling of sys.stdout can reach it
    assert bench.main(["--compare", "--only", "dw filter 32x32", "--repeat", "5"], out) == 0
    lines = out.getvalue().splitlines()
    env = bench.cpu_lines() + bench.blas_lines()
    assert lines[: len(env)] == env
    lines = lines[len(env):]
    assert lines[0] == "NumPy float32 matmul peak (2048^3): 100.0 GFLOP/s"
    assert lines[1] == "TensorFlow is not importable here: --compare skipped"
    assert "TF ms" not in lines[2] and lines[2].split()[-2:] == ["cancel", "path"]
    row = lines[3].split()
    assert row[-2:] == ["numpy", "tiles"]  # the depthwise filter gradient's path
    assert float(row[-3]) >= 0  # cancel latency, ms
    assert row[:6] == ["dw", "filter", "32x32x32", "5x5", "m2", "VALID"]
    gflop, ms, gflops, peak = float(row[6]), float(row[7]), float(row[8]), row[9]
    assert gflop == 0.01 and ms > 0 and abs(gflops - 2 * 4 * 28 * 28 * 25 * 64 / 1e9 / ms * 1e3) < 0.2
    assert abs(float(peak.rstrip("%")) - gflops) <= 0.1  # a peak of 100 GFLOP/s: % == GFLOP/s
    assert len(lines) == 4


def test_make_args_gives_each_op_its_tensorflow_arguments():
    rng = np.random.default_rng(0)
    by_name = {case.name: case for case in bench.CASES}
    fwd = bench.make_args(by_name["dw forward 56x56x128 3x3 s1 SAME"], rng)
    assert sorted(fwd) == ["data_format", "filter", "input", "padding", "strides"]
    assert fwd["input"].shape == (8, 56, 56, 128) and fwd["filter"].shape == (3, 3, 128, 1)
    inp = bench.make_args(by_name["dw input 56x56x128 3x3 s2 SAME"], rng)
    assert sorted(inp) == ["data_format", "filter", "input_sizes", "out_backprop", "padding",
                           "strides"]
    assert list(inp["input_sizes"]) == [8, 56, 56, 128]
    assert inp["out_backprop"].shape == (8, 28, 28, 128) and inp["strides"] == [1, 2, 2, 1]
    filt = bench.make_args(by_name["filter 56x56x64 3x3x64 s1 SAME"], rng)
    assert sorted(filt) == ["data_format", "filter_sizes", "input", "out_backprop", "padding",
                            "strides"]


def test_the_3d_cases_have_the_issue_shapes_and_tensorflows_arguments():
    """Issue 33 item 8: forward, filter and input gradient of two NDHWC shapes, in group 3-D."""
    cases = [c for c in bench.CASES if c.group == "3-D"]
    assert [c.op for c in cases] == ["Conv3D", "Conv3DBackpropFilterV2",
                                     "Conv3DBackpropInputV2"] * 2
    big, few = cases[0], cases[3]
    assert (big.input_shape, big.filter_shape, big.strides, big.padding) == (
        (2, 16, 56, 56, 64), (3, 3, 3, 64, 64), (1, 1, 1), "SAME")
    assert (few.input_shape, few.filter_shape, few.strides, few.padding) == (
        (1, 32, 112, 112, 3), (3, 7, 7, 3, 64), (1, 2, 2), "SAME")
    assert few.output_shape() == (1, 32, 56, 56, 64)
    assert few.gflop() == 2 * 32 * 56 * 56 * 3 * 7 * 7 * 3 * 64 / 1e9
    rng = np.random.default_rng(0)
    fwd, filt, inp = (bench.make_args(c, rng) for c in cases[3:])
    assert sorted(fwd) == ["data_format", "filter", "input", "padding", "strides"]
    assert fwd["strides"] == [1, 1, 2, 2, 1] and fwd["data_format"] == "NDHWC"
    assert sorted(filt) == ["data_format", "filter_sizes", "input", "out_backprop", "padding",
                            "strides"]
    assert list(filt["filter_sizes"]) == [3, 7, 7, 3, 64]
    assert sorted(inp) == ["data_format", "filter", "input_sizes", "out_backprop", "padding",
                           "strides"]
    assert list(inp["input_sizes"]) == [1, 32, 112, 112, 3]
    assert inp["out_backprop"].shape == (1, 32, 56, 56, 64)
    assert [bench.OURS[c.op].__name__ for c in cases[:3]] == [
        "conv3d", "conv3d_backprop_filter", "conv3d_backprop_input"]


def test_blas_lines_name_the_library_threads_core_type_and_coretype(monkeypatch):
    from threadpoolctl import threadpool_info

    info = next(i for i in threadpool_info() if i["user_api"] == "blas")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    lines = bench.blas_lines()
    assert lines[0].startswith(f"BLAS: {info['internal_api']} {info['version']}, "
                               f"{info['num_threads']} threads, core type ")
    assert "OPENBLAS_CORETYPE=Haswell" in lines
    assert lines[-1] == "in-place gemm: cblas through ctypes"
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    assert "OPENBLAS_CORETYPE not set" in bench.blas_lines()


def test_cpu_lines_name_the_cpu_its_caches_and_the_kernels_vector_width(monkeypatch):
    from engine.kernels import cpu
    from engine.kernels._compiled import numba_simd

    monkeypatch.setattr(cpu, "host", lambda: cpu.Host("Test CPU 9000", 48 * 1024, 2 * 2**20))
    monkeypatch.setattr(numba_simd, "VECTOR_BYTES", 64)
    lines = bench.cpu_lines()
    assert lines[0].startswith("CPU: Test CPU 9000, ")
    assert lines[0].endswith("L1d 48 KiB, L2 2048 KiB per core")
    assert lines[1] == "compiled kernels: 512-bit vectors, register tile 6x4 (rows x vectors)"


def test_cancel_latency_cancels_a_call_that_would_never_end():
    """The call only ends when its checkpoint raises: a wrong scope would hang this test."""
    seen = []

    def forever():
        while True:
            bench.cancel.checkpoint()
            seen.append(1)
            bench.time.sleep(0.001)

    assert bench.cancel_latency_ms(forever, after_ms=5) >= 0 and seen


def test_cancel_latency_of_a_real_kernel_case_stops_it_inside(monkeypatch):
    """A cancelled kernel raises Cancelled from a checkpoint (never a wrong result)."""
    by_name = {case.name: case for case in bench.CASES}
    args = bench.make_args(by_name["input  56x56x64 3x3x64 s1 SAME"],
                           np.random.default_rng(0))
    outcomes = []

    def call():
        bench.cancel.current().wait()  # cancelled before the kernel starts: deterministic
        try:
            bench.kernels.conv2d_backprop_input(**args)
            outcomes.append("finished")
        except bench.cancel.Cancelled:
            outcomes.append("cancelled")
            raise

    assert bench.cancel_latency_ms(call, after_ms=0) >= 0
    assert outcomes == ["cancelled"]


def test_depthwise_forward_and_input_cases_are_compared_at_both_strides():
    dw = [c for c in bench.CASES if c.group == "dw forward+input"]
    ops = {(c.op, c.stride, c.input_shape, c.filter_shape) for c in dw}
    assert len(dw) == len(ops) == 16
    assert {c.op for c in dw} == {"DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput"}
    assert {c.stride for c in dw} == {1, 2}


def test_python_m_engine_bench_runs_the_kernel_benchmark():
    """``python -m engine.bench`` (the package's __main__) is the kernels' benchmark."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "engine.bench", "--help"], capture_output=True,
                          text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m engine.bench [-h] [--compare]")
