"""Benchmark of the conv kernels: ``python -m engine.bench [--compare] [--repeat N] [--only SUBSTR]``.

First it says what the numbers depend on: the BLAS library NumPy runs (threadpoolctl: library,
version, threads, the core type its kernels are built for) and ``OPENBLAS_CORETYPE`` when set,
and how the kernels reach it (:func:`engine.kernels.gemm.backend`). Per case it prints GFLOP, the
median of ``--repeat`` timed runs (after a warm-up), GFLOP/s, the fraction of this machine's NumPy
float32 matmul peak (2048^3 ``a @ b``, measured in the same run), the peak extra memory of one
call beyond its inputs and output (tracemalloc), the cancel latency (a call started on a thread
under :func:`engine.base.cancel.scope`, cancelled halfway: ms until it returns) and the kernel path
the call took (:func:`engine.kernels.last_path`). With ``--compare`` and TensorFlow importable,
it also times ``tf.raw_ops`` on the same arrays, in warmed-up rounds alternating with ours, and
prints ours/TensorFlow; the summary gives the geometric means the targets are stated in. With
``--gain`` it also times the NumPy path (``GRADBLOCKS_KERNELS=numpy``) on the same arrays, in
rounds alternating with the default path, prints NumPy/default per case and, per compiled path,
its best gain over the cases it ran (a compiled path earns its place with at least
:data:`MIN_GAIN` on one case).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

import numpy as np

from engine import kernels
from engine.base import cancel
from engine.base.dtypes import to_dtype
from engine.bench import cases3d
from engine.kernels import accel, gemm
from engine.shapes.conv import conv2d_geometry


@dataclass(frozen=True)
class Case:
    """One benchmark call: op name, NHWC/NCHW shapes and attrs."""

    name: str
    op: str  # tf.raw_ops name
    input_shape: tuple[int, int, int, int]  # always given NHWC: (N, H, W, C)
    filter_shape: tuple[int, int, int, int]
    stride: int
    padding: str
    data_format: str = "NHWC"
    dtype: str = "float32"
    group: str = "conv"  # conv | depthwise: which geometric mean it counts in

    @property
    def depthwise(self) -> bool:
        return self.op.startswith("Depthwise")

    def attrs(self) -> dict:
        s = self.stride
        strides = [1, s, s, 1] if self.data_format == "NHWC" else [1, 1, s, s]
        return {"strides": strides, "padding": self.padding, "data_format": self.data_format}

    def shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(input shape, out_backprop shape) in the case's data_format."""
        n, h, w, c = self.input_shape
        x = (n, h, w, c) if self.data_format == "NHWC" else (n, c, h, w)
        g = conv2d_geometry(x, self.filter_shape, self.attrs()["strides"], self.padding,
                            (), self.data_format, depthwise=self.depthwise)
        return x, g.output_shape

    def gflop(self) -> float:
        _, y = self.shapes()
        kh, kw, ci, co = self.filter_shape
        n, oh, ow = y[0], *(y[1:3] if self.data_format == "NHWC" else y[2:4])
        macs = n * oh * ow * kh * kw * ci * co
        return 2 * macs / 1e9


#: (batch, size, channels, kernel, multiplier, padding) of the depthwise forward and input
#: gradient cases, each at stride 1 and 2: the filter-gradient shapes plus a 28x28x256 one.
DEPTHWISE_SHAPES = [(8, 56, 128, 3, 1, "SAME"), (8, 112, 64, 3, 1, "SAME"),
                    (4, 32, 32, 5, 2, "VALID"), (8, 28, 256, 3, 1, "SAME")]

CASES: list[Case | cases3d.Case3d] = [
    Case("filter 56x56x64 3x3x64 s1 SAME", "Conv2DBackpropFilter", (8, 56, 56, 64), (3, 3, 64, 64), 1, "SAME"),
    Case("input  56x56x64 3x3x64 s1 SAME", "Conv2DBackpropInput", (8, 56, 56, 64), (3, 3, 64, 64), 1, "SAME"),
    Case("filter 56x56x128 3x3x128 s2 SAME", "Conv2DBackpropFilter", (8, 56, 56, 128), (3, 3, 128, 128), 2, "SAME"),
    Case("input  56x56x128 3x3x128 s2 SAME", "Conv2DBackpropInput", (8, 56, 56, 128), (3, 3, 128, 128), 2, "SAME"),
    Case("filter 224x224x3 7x7x64 s2 SAME", "Conv2DBackpropFilter", (4, 224, 224, 3), (7, 7, 3, 64), 2, "SAME"),
    Case("input  224x224x3 7x7x64 s2 SAME", "Conv2DBackpropInput", (4, 224, 224, 3), (7, 7, 3, 64), 2, "SAME"),
    Case("filter 28x28x256 1x1x128 VALID", "Conv2DBackpropFilter", (16, 28, 28, 256), (1, 1, 256, 128), 1, "VALID"),
    Case("input  28x28x256 1x1x128 VALID", "Conv2DBackpropInput", (16, 28, 28, 256), (1, 1, 256, 128), 1, "VALID"),
    Case("filter 28x28x192 3x3x192 VALID", "Conv2DBackpropFilter", (4, 28, 28, 192), (3, 3, 192, 192), 1, "VALID"),
    Case("input  28x28x192 3x3x192 VALID", "Conv2DBackpropInput", (4, 28, 28, 192), (3, 3, 192, 192), 1, "VALID"),
    Case("dw filter 56x56x128 3x3 s1 SAME", "DepthwiseConv2dNativeBackpropFilter", (8, 56, 56, 128), (3, 3, 128, 1), 1, "SAME", group="depthwise"),
    Case("dw filter 112x112x64 3x3 s2 SAME", "DepthwiseConv2dNativeBackpropFilter", (8, 112, 112, 64), (3, 3, 64, 1), 2, "SAME", group="depthwise"),
    Case("dw filter 32x32x32 5x5 m2 VALID", "DepthwiseConv2dNativeBackpropFilter", (4, 32, 32, 32), (5, 5, 32, 2), 1, "VALID", group="depthwise"),
    Case("input  f16 56x56x64 3x3x64 s1", "Conv2DBackpropInput", (8, 56, 56, 64), (3, 3, 64, 64), 1, "SAME", dtype="float16", group="extra"),
    Case("forward 224x224x3 7x7x64 s2 SAME", "Conv2D", (4, 224, 224, 3), (7, 7, 3, 64), 2, "SAME", group="extra"),
    Case("filter N=32 56x56x64 (memory)", "Conv2DBackpropFilter", (32, 56, 56, 64), (3, 3, 64, 64), 1, "SAME", group="extra"),
    *[Case(f"{kind} NCHW {n}x{n}x{c} 3x3x{c} s{s}", op, (8, n, n, c), (3, 3, c, c), s, "SAME",
           data_format="NCHW", group="conv NCHW")
      for n, c, s in ((56, 64, 1), (56, 128, 2), (14, 256, 1))
      for kind, op in (("filter", "Conv2DBackpropFilter"), ("input ", "Conv2DBackpropInput"))],
    *[Case(f"dw {kind} NCHW 56x56x128 3x3 s{s} SAME", op, (8, 56, 56, 128), (3, 3, 128, 1), s,
           "SAME", data_format="NCHW", group="dw NCHW")
      for kind, op in (("filter", "DepthwiseConv2dNativeBackpropFilter"),
                       ("forward", "DepthwiseConv2dNative"),
                       ("input", "DepthwiseConv2dNativeBackpropInput"))
      for s in (1, 2)],
    *[Case(f"dw {kind} {n}x{n}x{c} {k}x{k}{' m2' if m == 2 else ''} s{s} {pad}", op,
           (b, n, n, c), (k, k, c, m), s, pad, group="dw forward+input")
      for b, n, c, k, m, pad in DEPTHWISE_SHAPES
      for kind, op in (("forward", "DepthwiseConv2dNative"),
                       ("input", "DepthwiseConv2dNativeBackpropInput"))
      for s in (1, 2)],
    *cases3d.CASES,  # the Conv3D family (group "3-D")
]

#: With ``--compare``, ours and TensorFlow are timed in this many alternating rounds.
ROUNDS = 3
#: Untimed calls for this long before each timed round (the CPUs wake slowly after idling;
#: no pause between the two sides).
WARM_S = 0.1

#: The gain over the NumPy path a compiled path needs on at least one case (issue 21).
MIN_GAIN = 1.5

OURS: dict[str, Callable[..., np.ndarray]] = {
    "Conv2D": kernels.conv2d,
    "Conv2DBackpropFilter": kernels.conv2d_backprop_filter,
    "Conv2DBackpropInput": kernels.conv2d_backprop_input,
    "DepthwiseConv2dNativeBackpropFilter": kernels.depthwise_conv2d_native_backprop_filter,
    "DepthwiseConv2dNative": kernels.depthwise_conv2d_native,
    "DepthwiseConv2dNativeBackpropInput": kernels.depthwise_conv2d_native_backprop_input,
    **cases3d.OURS,
}


def make_args(case: Case | cases3d.Case3d, rng: np.random.Generator) -> dict:
    """The op's keyword arguments on random data of the case's dtype."""
    if isinstance(case, cases3d.Case3d):
        return case.make_args(rng)
    dtype = to_dtype(case.dtype)
    x_shape, y_shape = case.shapes()
    if not case.op.startswith(("Conv2DBackprop", "DepthwiseConv2dNativeBackprop")):  # forward
        return dict(case.attrs(), input=rng.standard_normal(x_shape).astype(dtype),
                    filter=rng.standard_normal(case.filter_shape).astype(dtype))
    dy = rng.standard_normal(y_shape).astype(dtype)
    args = dict(case.attrs(), out_backprop=dy)
    if case.op.endswith("BackpropInput"):
        args.update(input_sizes=np.array(x_shape, np.int32),
                    filter=rng.standard_normal(case.filter_shape).astype(dtype))
    else:
        args.update(input=rng.standard_normal(x_shape).astype(dtype),
                    filter_sizes=np.array(case.filter_shape, np.int32))
    return args


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``repeat`` calls after :func:`warm_up`, in ms."""
    warm_up(fn)
    return statistics.median(samples_ms(fn, repeat))


def samples_ms(fn: Callable[[], object], count: int) -> list[float]:
    """Wall times of ``count`` calls, in ms."""
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t0))
    return times


def warm_up(fn: Callable[[], object], seconds: float = WARM_S) -> None:
    """Call ``fn`` (at least once) until ``seconds`` have passed, untimed."""
    end = time.perf_counter() + seconds
    fn()
    while time.perf_counter() < end:
        fn()


def paired_median_ms(ours: Callable[[], object], theirs: Callable[[], object], repeat: int,
                     rounds: int = ROUNDS) -> tuple[float, float]:
    """Medians of ``ours`` and ``theirs`` timed in alternating rounds, each round after a
    :func:`warm_up`, so a slow spell of this shared machine hits both sides alike; at least
    ``repeat`` calls each."""
    per = -(-repeat // rounds)
    a: list[float] = []
    b: list[float] = []
    for _ in range(rounds):
        warm_up(ours)
        a += samples_ms(ours, per)
        warm_up(theirs)
        b += samples_ms(theirs, per)
    return statistics.median(a), statistics.median(b)


def tf_call(case: Case | cases3d.Case3d, args: dict) -> Callable[[], object] | str:
    """A zero-argument call of TensorFlow's op on the same arrays (TensorFlow importable), or
    the first line of TensorFlow's refusal (its Eigen kernels take NHWC only; its oneDNN ones,
    see :func:`tf_lines`, take NCHW too)."""
    import tensorflow as tf

    tf_args = {k: tf.constant(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    op = getattr(tf.raw_ops, case.op)
    try:
        op(**tf_args)
    except tf.errors.OpError as e:
        return (e.message or type(e).__name__).strip().splitlines()[0]
    return lambda: op(**tf_args).numpy()


def tf_lines() -> list[str]:
    """Which TensorFlow the comparison runs: its version and whether its oneDNN kernels are on
    (TensorFlow turns them on by itself only on CPUs with AVX-512 VNNI, BF16 or AMX;
    ``TF_ENABLE_ONEDNN_OPTS=1`` turns them on anywhere, ``0`` off)."""
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_util_port

    onednn = "on" if _pywrap_util_port.IsMklEnabled() else "off"
    env = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    how = f"TF_ENABLE_ONEDNN_OPTS={env}" if env is not None else "chosen by TensorFlow"
    return [f"TensorFlow {tf.__version__}, oneDNN kernels {onednn} ({how})"]


def tensorflow_available() -> bool:
    """True when ``tensorflow`` can be imported (checked without importing it)."""
    return importlib.util.find_spec("tensorflow") is not None


def matmul_peak(repeat: int) -> float:
    """GFLOP/s of a 2048^3 float32 ``a @ b`` (the yardstick for every case)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2048, 2048), dtype=np.float32)
    b = rng.standard_normal((2048, 2048), dtype=np.float32)
    return 2 * 2048**3 / 1e9 / (median_ms(lambda: a @ b, repeat) / 1e3)


def extra_memory_mib(fn: Callable[[], np.ndarray]) -> float:
    """Peak memory one call allocates beyond its output, in MiB (tracemalloc)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    out = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (peak - base - out.nbytes) / 2**20


def cancel_latency_ms(fn: Callable[[], object], after_ms: float) -> float:
    """Run ``fn`` on a thread under a cancel scope, set the cancel event ``after_ms`` later, and
    return the ms from setting it until the call has returned (cancelled or finished)."""
    event = threading.Event()

    def run() -> None:
        with cancel.scope(event):
            try:
                fn()
            except cancel.Cancelled:
                pass

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    time.sleep(after_ms / 1e3)
    t0 = time.perf_counter()
    event.set()
    worker.join()
    return 1e3 * (time.perf_counter() - t0)


def cpu_lines() -> list[str]:
    """The CPU the figures come from: its model, cores, the vector width and register tile the
    compiled kernels chose for it, and the cache sizes their blocks follow."""
    from engine.kernels import cpu

    info = cpu.host()
    bits, rows, vectors = accel.register_tile()
    cpu_line = (f"CPU: {info.model}, {os.cpu_count()} logical cores, L1d {info.l1d // 1024} "
                f"KiB, L2 {info.l2 // 1024} KiB per core")
    tile_line = (f"compiled kernels: {bits}-bit vectors, register tile "
                 f"{rows}x{vectors} (rows x vectors)")
    return [cpu_line, tile_line]


def blas_lines() -> list[str]:
    """What the timings depend on: each BLAS library loaded (threadpoolctl), the core type
    override when set, and how the kernels call BLAS."""
    from threadpoolctl import threadpool_info

    lines = []
    for info in threadpool_info():
        if info.get("user_api") != "blas":
            continue
        lines.append(f"BLAS: {info.get('internal_api')} {info.get('version')}, "
                     f"{info.get('num_threads')} threads, core type "
                     f"{info.get('architecture') or 'unknown'} "
                     f"({os.path.basename(info.get('filepath', ''))})")
    if not lines:
        lines.append("BLAS: none reported by threadpoolctl")
    core = os.environ.get("OPENBLAS_CORETYPE")
    lines.append(f"OPENBLAS_CORETYPE={core}" if core else "OPENBLAS_CORETYPE not set")
    backend = gemm.backend()
    lines.append("in-place gemm: " + ("cblas through ctypes" if backend != "numpy" else backend))
    return lines


def on_numpy(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` called with ``GRADBLOCKS_KERNELS=numpy`` (the NumPy path), the setting restored."""
    def call() -> object:
        old = os.environ.get(accel.ENV)
        os.environ[accel.ENV] = "numpy"
        try:
            return fn()
        finally:
            if old is None:
                del os.environ[accel.ENV]
            else:
                os.environ[accel.ENV] = old
    return call


def gain_lines(gains: dict[str, list[float]]) -> list[str]:
    """Per compiled path: its best gain over NumPy and whether it reaches :data:`MIN_GAIN`."""
    return [f"{path}: best gain over NumPy {max(gs):.2f}x over {len(gs)} case(s)"
            + ("" if max(gs) >= MIN_GAIN else f"  BELOW {MIN_GAIN}x")
            for path, gs in sorted(gains.items())]


def geomean(xs: list[float]) -> float:
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    """The benchmark; its table goes to ``out`` (default: ``sys.stdout`` at call time)."""
    out = out if out is not None else sys.stdout
    ap = argparse.ArgumentParser(prog="python -m engine.bench", description=__doc__)
    ap.add_argument("--compare", action="store_true", help="also time TensorFlow's CPU op")
    ap.add_argument("--repeat", type=int, default=7, help="timed runs per case (>= 5)")
    ap.add_argument("--only", default="", help="run only cases whose name contains this")
    ap.add_argument("--gain", action="store_true",
                    help="also time the NumPy path: each compiled path's gain over it")
    opts = ap.parse_args(argv)
    repeat = max(5, opts.repeat)
    peak = matmul_peak(repeat)
    compare = opts.compare and tensorflow_available()
    lines = [*cpu_lines(), *blas_lines(), f"NumPy float32 matmul peak (2048^3): {peak:.1f} GFLOP/s"]
    if opts.compare and not compare:
        lines.append("TensorFlow is not importable here: --compare skipped")
    print("\n".join(lines + (tf_lines() if compare else [])), file=out)
    head = f"{'case':36} {'GFLOP':>6} {'ms':>8} {'GFLOP/s':>8} {'peak':>6} {'MiB':>7}"
    head += f" {'TF ms':>8} {'ours/TF':>8}" if compare else ""
    head += f" {'NumPy ms':>8} {'gain':>6}" if opts.gain else ""
    print(head + f" {'cancel':>7}  path", file=out)
    ratios: dict[str, list[float]] = {}
    gains: dict[str, list[float]] = {}
    rng = np.random.default_rng(0)
    for case in CASES:
        if opts.only not in case.name:
            continue
        args = make_args(case, rng)
        ours = functools.partial(OURS[case.op], **args)
        theirs = tf_call(case, args) if compare else None
        refused = theirs if isinstance(theirs, str) else ""
        if callable(theirs):
            ms, tf_ms = paired_median_ms(ours, theirs, repeat)
            ratios.setdefault(case.group, []).append(ms / tf_ms)
        else:
            ms = median_ms(ours, repeat)
        mem = extra_memory_mib(ours)
        path = kernels.last_path() or "none"  # set by the calls above
        latency = cancel_latency_ms(ours, ms / 2)
        gf = case.gflop()
        line = (f"{case.name:36} {gf:6.2f} {ms:8.2f} {gf / ms * 1e3:8.1f} "
                f"{gf / ms * 1e3 / peak:6.1%} {mem:7.1f}")
        if compare:
            line += f" {'refused':>8} {'-':>8}" if refused else f" {tf_ms:8.2f} {ms / tf_ms:8.2f}"
        if opts.gain:
            ours_ms, numpy_ms = paired_median_ms(ours, on_numpy(ours), repeat)
            line += f" {numpy_ms:8.2f} {numpy_ms / ours_ms:6.2f}"
            if not path.startswith(("numpy", "empty")):
                gains.setdefault(path, []).append(numpy_ms / ours_ms)
        print(line + f" {latency:7.1f}  {path}", flush=True, file=out)
        if refused:
            print(f"    TensorFlow refuses this case: {refused}", file=out)
    for group, rs in ratios.items():
        print(f"{group}: geometric mean ours/TF {geomean(rs):.2f}, max {max(rs):.2f} "
              f"over {len(rs)} cases", file=out)
    for line in gain_lines(gains):
        print(line, file=out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
