"""``python -m engine.bench.verify``: cases per second of ``gradblocks verify`` on small cases,
median of REPEATS sweeps, start-up included and excluded: a NumPy implementation (the tap loops
of tests/verify_zoo.py) in worker processes and in this process; then ``--cmd`` (a Python
script per case) and ``--cmd-serve`` (one long-lived process per worker: the C program
tests/verify_serve_conv2d.c, built with ``cc``, and the Python script
tests/verify_serve_conv.py), all on tf Conv2D.

``python -m engine.bench.verify --false-alarms [--cases N] [--dtypes D,D]``: the false-alarm
run of issue 22, outside the test suite: every op of both conventions on the correct
implementations of tests/verify_zoo.py (the wrapper of engine.kernels and the independent tap
loops), N cases (default :data:`FALSE_ALARM_CASES`) per op, implementation and dtype; prints
one line per sweep and the totals, exit status 1 when any case failed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

CASES = 400
#: Cases of a --cmd sweep (a process per case is slow).
CMD_CASES = 60
REPEATS = 3
FALSE_ALARM_CASES = 2000
FALSE_ALARM_DTYPES = ("float32", "float64", "float16")


def _tests_dir() -> str:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tests = os.path.join(root, "tests")
    if not os.path.exists(os.path.join(tests, "verify_zoo.py")):
        print("tests/verify_zoo.py not found (run from a source checkout)", file=sys.stderr)
        raise SystemExit(1)
    return tests


def _rate(label: str, cases: int, **options) -> None:
    from engine.verify.api import verify

    with_start, in_sweep = [], []
    op = options.pop("op", "Conv2D")
    for seed in range(REPEATS):
        start = time.perf_counter()
        report = verify(op=op, convention="tf", cases=cases, seed=seed, **options)
        wall = time.perf_counter() - start
        if report.failed:
            print(f"{label}: {report.failed} case(s) failed", file=sys.stderr)
            raise SystemExit(1)
        with_start.append(report.cases / wall)
        in_sweep.append(report.cases / report.seconds)
    print(f"{label:44} {cases} cases: {statistics.median(with_start):6.0f} cases/s with "
          f"start-up, {statistics.median(in_sweep):6.0f} cases/s in the sweep (median of "
          f"{REPEATS})", flush=True)


_CMD_SCRIPT = """import sys
import numpy as np
sys.path.insert(0, {tests!r})
from verify_serve_conv import conv2d
with np.load(sys.argv[1]) as f:
    a = {{k: f[k] for k in f.files}}
kw = {{k: (str(a[k]) if a[k].dtype.kind == "U" else a[k].tolist()) for k in
      ("strides", "padding", "data_format", "dilations", "explicit_paddings") if k in a}}
np.savez(sys.argv[2], output=conv2d(a["input"], a["filter"], **kw))
"""


def rates() -> None:
    import shutil
    import subprocess
    import tempfile

    tests = _tests_dir()
    sys.path.insert(0, tests)
    import verify_zoo as zoo

    for op, name in (("Conv2D", "loops_conv2d"),
                     ("Conv2DBackpropInput", "loops_conv2d_backprop_input")):
        _rate(f"{op} worker (verify_zoo:{name})", CASES, op=op, fn=f"verify_zoo:{name}",
              path=tests)
        fn = getattr(zoo, name)
        _rate(f"{op} in this process (a lambda)", CASES, op=op,
              fn=lambda fn=fn, **kw: fn(**kw))
    python = f"{sys.executable} {os.path.join(tests, 'verify_serve_conv.py')}"
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "cmd_conv2d.py")
        with open(script, "w") as f:
            f.write(_CMD_SCRIPT.format(tests=tests))
        _rate("Conv2D --cmd (a Python process per case)", CMD_CASES,
              cmd=f"{sys.executable} {script}")
        _rate("Conv2D --cmd-serve (Python)", CASES, cmd_serve=python)
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            print("Conv2D --cmd-serve (C): no C compiler (cc) found", flush=True)
            return
        exe = os.path.join(tmp, "serve_conv2d")
        subprocess.run([cc, "-O2", "-o", exe, os.path.join(tests, "verify_serve_conv2d.c")],
                       check=True)
        _rate("Conv2D --cmd-serve (C)", CASES, cmd_serve=exe)


def false_alarms(cases: int, dtypes: list[str], seed: int) -> int:
    """Sweep every correct zoo implementation; the number of failed cases."""
    from engine.verify.api import verify

    tests = _tests_dir()
    sys.path.insert(0, tests)
    import verify_zoo as zoo

    total = failed = unsupported = 0
    seconds = 0.0
    for convention, table in (("tf", zoo.CORRECT_TF), ("torch", zoo.CORRECT_TORCH)):
        for op, names in table.items():
            for name in names:
                for dtype in dtypes:
                    report = verify(f"verify_zoo:{name}", op=op, convention=convention,
                                    dtype=dtype, cases=cases, seed=seed, path=tests)
                    total += report.cases
                    failed += report.failed
                    unsupported += report.unsupported
                    seconds += report.seconds
                    print(f"{convention:5} {op:36} {name:34} {dtype:8} {report.cases:6} cases "
                          f"{report.failed:4} failed {report.unsupported:4} unsupported "
                          f"{report.cases / report.seconds:6.0f} cases/s", flush=True)
                    for m in report.minimal_failures:
                        f = m.failure
                        print(f"  {f.verdict.verdict}: {f.verdict.message}\n"
                              f"  minimal case: {f.to_json()['case']}", flush=True)
    print(f"total: {total} cases, {failed} false alarms, {unsupported} unsupported, "
          f"{total / seconds:.0f} cases/s in the sweeps")
    return failed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.verify")
    parser.add_argument("--false-alarms", action="store_true",
                        help="sweep the correct zoo implementations instead of timing")
    parser.add_argument("--cases", type=int, default=FALSE_ALARM_CASES)
    parser.add_argument("--dtypes", default=",".join(FALSE_ALARM_DTYPES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.false_alarms:
        raise SystemExit(1 if false_alarms(args.cases, args.dtypes.split(","), args.seed) else 0)
    rates()


if __name__ == "__main__":
    main()
