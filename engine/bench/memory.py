"""Benchmark of the run memory limit: ``python -m engine.bench.memory [--limit-gib L]``.

Builds canvases whose compile-time estimate (:mod:`engine.graph.budget`: every kept output plus the
running block's workspace) is just under the limit (default 1 GiB), runs each with
``gradblocks run --memory-limit-gib L`` in a fresh child process and prints the child's peak RSS
(``ru_maxrss``) against the limit and the estimate. The baseline is the peak RSS of a child that
only imports the engine (the interpreter, NumPy and the blocks), which the limit does not cover;
``RSS - base`` is what the run itself used. A last canvas, 20 outputs of 0.42 GiB under a 0.5 GiB
limit, shows a plan over the limit refused at check time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.graph.budget import GIB, gib
from engine.graph.canvas import Canvas
from engine.graph.compiler import compile_canvas

CHILD = """
import contextlib, os, resource, sys
from engine.cli import main
with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
    rc = main(sys.argv[1:]) if len(sys.argv) > 1 else 0
print(rc, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, file=sys.stderr)
"""


def child_peak(args: list[str]) -> tuple[int, int]:
    """Exit status and peak RSS in bytes of a fresh process running ``gradblocks *args``."""
    proc = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True,
                          check=False)
    rc, rss = proc.stderr.strip().splitlines()[-1].split()
    return int(rc), int(rss)


def sources(count: int, elements: int, dtype: str, fill: str = "random_normal") -> Canvas:
    """``count`` sources of about ``elements`` each (distinct, so no two share a cache entry)."""
    c = Canvas()
    for i in range(count):
        c.add_node("Tensor", attrs={"shape": [elements + i], "dtype": dtype, "seed": i,
                                    "fill": fill}, id=f"t{i}")
    return c


def conv_step(batch: int) -> Canvas:
    """Conv2D forward, its filter gradient and its input gradient on float32 sources."""
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [batch, 64, 64, 32]}, id="x")
    c.add_node("Tensor", attrs={"shape": [3, 3, 32, 32], "seed": 1}, id="w")
    c.add_node("Conv2D", id="y")
    c.connect(("x", "output"), ("y", "input"))
    c.connect(("w", "output"), ("y", "filter"))
    c.add_node("ShapeOf", id="ws")
    c.connect(("w", "output"), ("ws", "input"))
    c.add_node("ShapeOf", id="xs")
    c.connect(("x", "output"), ("xs", "input"))
    c.add_node("Conv2DBackpropFilter", id="dw")
    for src, port in (("x", "input"), ("ws", "filter_sizes"), ("y", "out_backprop")):
        c.connect((src, "output"), ("dw", port))
    c.add_node("Conv2DBackpropInput", id="dx")
    for src, port in (("xs", "input_sizes"), ("w", "filter"), ("y", "out_backprop")):
        c.connect((src, "output"), ("dx", port))
    return c


def largest_fitting(build, limit: int, fraction: float = 0.95) -> Canvas:
    """``build(k)`` for the largest ``k`` whose estimate is at most ``fraction * limit``."""
    lo, hi = 1, 1
    while compile_canvas(build(hi * 2), memory_limit=10**30).peak_bytes <= fraction * limit:
        hi *= 2
    hi *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        fits = compile_canvas(build(mid), memory_limit=10**30).peak_bytes <= fraction * limit
        lo, hi = (mid, hi) if fits else (lo, mid)
    return build(lo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.bench.memory", description=__doc__)
    ap.add_argument("--limit-gib", default="1", help="the run's memory limit in GiB")
    opts = ap.parse_args(argv)
    limit = int(float(opts.limit_gib) * GIB)
    _, base = child_peak([])
    print(f"limit {gib(limit)}; base RSS (interpreter + NumPy + engine) {gib(base)}")
    print(f"{'canvas':34} {'estimate':>10} {'peak RSS':>10} {'RSS-base':>10} {'/limit':>7}")
    cases = {
        "float32 random sources": lambda k: sources(k, 16 * 2**20, "float32"),
        "float16 random sources": lambda k: sources(k, 32 * 2**20, "float16"),
        "one float16 random source": lambda k: sources(1, k * 2**20, "float16"),
        "bfloat16 arange sources": lambda k: sources(k, 32 * 2**20, "bfloat16", "arange"),
        "conv forward + both gradients": conv_step,
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.gbc.json"
        for name, build in cases.items():
            canvas = largest_fitting(build, limit)
            estimate = compile_canvas(canvas, memory_limit=limit).peak_bytes
            path.write_text(json.dumps(canvas.to_json()), encoding="utf-8")
            rc, rss = child_peak(["run", str(path), "--memory-limit-gib", opts.limit_gib])
            status = "" if rc == 0 else f"  (exit {rc})"
            print(f"{name:34} {gib(estimate):>10} {gib(rss):>10} {gib(rss - base):>10} "
                  f"{(rss - base) / limit:7.2f}{status}", flush=True)
        over = sources(20, int(0.42 * GIB) // 4, "float32")
        path.write_text(json.dumps(over.to_json()), encoding="utf-8")
        rc, rss = child_peak(["check", str(path), "--memory-limit-gib", "0.5"])
        print(f"20 x 0.42 GiB under a 0.5 GiB limit: check exits {rc} (refused), peak RSS "
              f"{gib(rss)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
