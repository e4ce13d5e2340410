"""Start-up benchmark: ``python -m engine.bench.startup [--runs N] [EXAMPLE]``.

Prints the median (and range) wall time of ``N`` (default 10) fresh processes for each of
``python -c "import numpy"`` (the floor), ``python -c "import engine.kernels"`` and
``gradblocks check EXAMPLE`` (run as ``python -m engine.cli check``), next to the targets, and
whether SciPy got imported along the way (it must not: one BLAS library per process).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: name -> (argument list after the interpreter, target seconds or None)
COMMANDS = {
    "python -c 'import numpy'": (["-c", "import numpy"], None),
    "python -c 'import engine.kernels'": (["-c", "import engine.kernels"], 0.15),
}
CHECK_TARGET_S = 0.25
DEFAULT_EXAMPLE = Path(__file__).resolve().parents[2] / "assets" / "examples" / \
    "conv2d_backprop_input.gbc.json"


def wall_times(args: list[str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` fresh ``python args`` processes (each must succeed)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return times


def imports_scipy(args: list[str]) -> bool:
    """True when running ``args`` (a check) loads SciPy."""
    code = ("import runpy, sys; sys.argv = ['gradblocks', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('engine.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('scipy' in sys.modules, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code, *args], check=False, capture_output=True,
                         text=True)
    return out.stderr.strip().endswith("True")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.bench.startup", description=__doc__)
    ap.add_argument("example", nargs="?", default=str(DEFAULT_EXAMPLE), help="canvas to check")
    ap.add_argument("--runs", type=int, default=10, help="fresh processes per command")
    opts = ap.parse_args(argv)
    commands = dict(COMMANDS)
    commands[f"gradblocks check {Path(opts.example).name}"] = (
        ["-m", "engine.cli", "check", opts.example], CHECK_TARGET_S)
    print(f"start-up, wall seconds over {opts.runs} fresh processes ({sys.executable})")
    print(f"{'command':48} {'median':>7} {'min':>7} {'max':>7} {'target':>7}")
    for name, (args, target) in commands.items():
        try:
            ts = wall_times(args, max(1, opts.runs))
        except subprocess.CalledProcessError as err:
            print(f"{name}: exited with status {err.returncode}; run it alone to see why",
                  file=sys.stderr)
            return 1
        med = statistics.median(ts)
        mark = "" if target is None else f"{target:7.2f}" + (" ok" if med <= target else " MISSED")
        print(f"{name:48} {med:7.3f} {min(ts):7.3f} {max(ts):7.3f} {mark}", flush=True)
    scipy = imports_scipy(["check", opts.example])
    print(f"scipy imported by the check: {'yes' if scipy else 'no'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
