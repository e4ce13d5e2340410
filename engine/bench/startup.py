"""Start-up benchmark: ``python -m engine.bench.startup [--runs N] [--examples] [EXAMPLE]``.

Prints the median (and range) wall time of ``N`` (default 10) fresh processes for each of
``python -c "import numpy"`` (the floor), ``python -c "import engine.kernels"`` and
``gradblocks check EXAMPLE`` (run as ``python -m engine.cli check``), next to the targets, and
whether SciPy got imported along the way (it must not: one BLAS library per process).

With ``--examples`` it then times ``gradblocks run`` of every shipped example
(``assets/examples/*.gbc.json``) three ways, each a median of fresh processes next to
:data:`RUN_TARGET_S`: NumPy forced (``GRADBLOCKS_KERNELS=numpy``), the default on a fresh
install (``NUMBA_CACHE_DIR`` an empty temporary directory for every process: nothing compiled
yet) and the default after (a cache directory every compiled kernel was loaded into first), and
whether the default run imported numba.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: name -> (argument list after the interpreter, target seconds or None)
COMMANDS = {
    "python -c 'import numpy'": (["-c", "import numpy"], None),
    "python -c 'import engine.kernels'": (["-c", "import engine.kernels"], 0.15),
}
CHECK_TARGET_S = 0.25
EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples"
DEFAULT_EXAMPLE = EXAMPLES / "conv2d_backprop_input.gbc.json"
#: ``gradblocks run`` of a shipped example, fresh install or not (issue 24).
RUN_TARGET_S = 0.4
#: Imports numba? printed by a run (the last stderr line) for the table's last column.
_NUMBA_PROBE = ("import runpy, sys; sys.argv = ['gradblocks', *sys.argv[1:]]\n"
                "try:\n    runpy.run_module('engine.cli', run_name='__main__')\n"
                "except SystemExit:\n    pass\n"
                "print('numba' in sys.modules, file=sys.stderr)")


def wall_times(args: list[str], runs: int, env: dict | None = None,
               fresh_cache: bool = False) -> list[float]:
    """Wall seconds of ``runs`` fresh ``python args`` processes (each must succeed), with
    ``env`` (default: this one) and, with ``fresh_cache``, an empty ``NUMBA_CACHE_DIR`` each."""
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            run_env = dict(env or os.environ, **({"NUMBA_CACHE_DIR": cache} if fresh_cache
                                                 else {}))
            t0 = time.perf_counter()
            subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL,
                           env=run_env)
            times.append(time.perf_counter() - t0)
    return times


def run_table(runs: int) -> int:
    """Print the ``gradblocks run`` table of every shipped example (see the module doc)."""
    base = {k: v for k, v in os.environ.items() if k != "GRADBLOCKS_KERNELS"}
    with tempfile.TemporaryDirectory() as warm_dir:
        warm = dict(base, NUMBA_CACHE_DIR=warm_dir)
        subprocess.run([sys.executable, "-c", "from engine.kernels import accel; accel.warm_up()"],
                       check=True, env=warm)
        print(f"gradblocks run, median wall seconds over {runs} fresh processes "
              f"(target {RUN_TARGET_S})")
        print(f"{'example':36} {'NumPy':>7} {'cold':>7} {'warm':>7}  numba imported")
        for example in sorted(EXAMPLES.glob("*.gbc.json")):
            args = ["-m", "engine.cli", "run", str(example)]
            try:
                cols = [statistics.median(wall_times(args, runs, dict(
                            base, GRADBLOCKS_KERNELS="numpy"))),
                        statistics.median(wall_times(args, runs, base, fresh_cache=True)),
                        statistics.median(wall_times(args, runs, warm))]
            except subprocess.CalledProcessError as err:
                print(f"gradblocks run {example.name}: exited with status {err.returncode}",
                      file=sys.stderr)
                return 1
            probe = subprocess.run([sys.executable, "-c", _NUMBA_PROBE, "run", str(example)],
                                   capture_output=True, text=True, env=warm, check=False)
            imported = probe.stderr.strip().splitlines()[-1:] == ["True"]
            marks = " ".join(f"{c:7.3f}" for c in cols)
            late = "" if max(cols) <= RUN_TARGET_S else "  MISSED"
            print(f"{example.name:36} {marks}  {'yes' if imported else 'no'}{late}",
                  flush=True)
    return 0


def imports_scipy(args: list[str]) -> bool:
    """True when running ``args`` (a check) loads SciPy."""
    code = ("import runpy, sys; sys.argv = ['gradblocks', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('engine.cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('scipy' in sys.modules, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code, *args], check=False, capture_output=True,
                         text=True)
    return out.stderr.strip().endswith("True")


def bytecode_line(package: Path | None = None) -> str:
    """Whether the figures include compiling the project's sources: Python reads cached
    bytecode (``__pycache__``) unless ``PYTHONDONTWRITEBYTECODE`` kept it from being written
    (see the guide's performance page for what that costs)."""
    import engine

    package = package or Path(engine.__file__).parent
    cached = any(package.glob("__pycache__/*.pyc"))
    off = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    state = "cached" if cached else "not cached"
    return f"bytecode of {package.name}/: {state}" + (
        " (PYTHONDONTWRITEBYTECODE is set: no new bytecode is written)" if off else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.bench.startup", description=__doc__)
    ap.add_argument("example", nargs="?", default=str(DEFAULT_EXAMPLE), help="canvas to check")
    ap.add_argument("--runs", type=int, default=10, help="fresh processes per command")
    ap.add_argument("--examples", action="store_true",
                    help="also time gradblocks run of every shipped example (NumPy, cold, warm)")
    opts = ap.parse_args(argv)
    commands = dict(COMMANDS)
    commands[f"gradblocks check {Path(opts.example).name}"] = (
        ["-m", "engine.cli", "check", opts.example], CHECK_TARGET_S)
    print(f"start-up, wall seconds over {opts.runs} fresh processes ({sys.executable})")
    print(bytecode_line())
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
    return run_table(max(1, opts.runs)) if opts.examples else 0


if __name__ == "__main__":
    raise SystemExit(main())
