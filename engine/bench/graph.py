"""Benchmark of graph work: ``python -m engine.bench.graph [--blocks N] [--repeat R]``.

Writes two canvases of ``N`` blocks (default 50,000) to a temporary folder: a chain
``Tensor -> Transpose -> Transpose -> ...`` and ``N`` unconnected Tensor blocks; then times
``gradblocks check`` (load + compile) and ``gradblocks run`` on each, as a user runs them: a
fresh ``python -m engine.cli`` process per call (interpreter start-up included, output sent to
/dev/null). Prints the median, min and max of ``R`` calls (default 3).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def chain_doc(n: int) -> dict:
    """A Tensor followed by ``n - 1`` Transposes, each fed by the one before."""
    nodes = [{"id": "t0", "type": "Tensor", "attrs": {"shape": [1]}}]
    nodes += [{"id": f"t{i}", "type": "Transpose", "attrs": {"perm": [0]}} for i in range(1, n)]
    edges = [{"src": [f"t{i - 1}", "output"], "dst": [f"t{i}", "input"]} for i in range(1, n)]
    return {"format": "gradblocks.canvas", "version": 1, "nodes": nodes, "edges": edges}


def loose_doc(n: int) -> dict:
    """``n`` Tensor blocks without any wire."""
    nodes = [{"id": f"t{i}", "type": "Tensor", "attrs": {"shape": [1]}} for i in range(n)]
    return {"format": "gradblocks.canvas", "version": 1, "nodes": nodes, "edges": []}


def time_cli(args: list[str], repeat: int) -> list[float]:
    """Wall seconds of ``repeat`` fresh ``python -m engine.cli *args`` processes (each must
    exit 0)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "engine.cli", *args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"gradblocks {' '.join(args)} exited {proc.returncode}: "
                             f"{proc.stderr.decode(errors='replace')[:500]}")
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.bench.graph", description=__doc__)
    ap.add_argument("--blocks", type=int, default=50_000, help="blocks per canvas")
    ap.add_argument("--repeat", type=int, default=3, help="timed calls per command")
    opts = ap.parse_args(argv)
    print(f"{'canvas':28} {'command':8} {'median s':>9} {'min s':>7} {'max s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, doc in ((f"chain of {opts.blocks}", chain_doc(opts.blocks)),
                          (f"{opts.blocks} unconnected", loose_doc(opts.blocks))):
            path = Path(tmp) / "canvas.gbc.json"
            path.write_text(json.dumps(doc), encoding="utf-8")
            for command in ("check", "run"):
                ts = time_cli([command, str(path)], max(1, opts.repeat))
                print(f"{name:28} {command:8} {statistics.median(ts):9.2f} {min(ts):7.2f} "
                      f"{max(ts):7.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
