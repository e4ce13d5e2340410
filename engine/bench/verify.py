"""``python -m engine.bench.verify``: cases per second of ``gradblocks verify`` on a NumPy
implementation (the tap loops of tests/verify_zoo.py when present, else a wrapper of
engine.kernels) on small cases, median of REPEATS sweeps, worker start-up included and
excluded."""

from __future__ import annotations

import os
import statistics
import sys
import time

CASES = 400
REPEATS = 3


def main() -> None:
    from engine.verify.api import verify

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tests = os.path.join(root, "tests")
    target = "verify_zoo:loops_conv2d" if os.path.exists(os.path.join(tests, "verify_zoo.py")) \
        else None
    if target is None:
        print("tests/verify_zoo.py not found", file=sys.stderr)
        raise SystemExit(1)
    for op, name in (("Conv2D", "loops_conv2d"),
                     ("Conv2DBackpropInput", "loops_conv2d_backprop_input")):
        rates, sweep_rates = [], []
        for seed in range(REPEATS):
            start = time.perf_counter()
            report = verify(f"verify_zoo:{name}", op=op, convention="tf", cases=CASES, seed=seed,
                            path=tests)
            wall = time.perf_counter() - start
            rates.append(report.cases / wall)
            sweep_rates.append(report.cases / report.seconds)
        print(f"{op:22} {CASES} cases: {statistics.median(rates):6.0f} cases/s with start-up, "
              f"{statistics.median(sweep_rates):6.0f} cases/s in the sweep (median of "
              f"{REPEATS})")


if __name__ == "__main__":
    main()
