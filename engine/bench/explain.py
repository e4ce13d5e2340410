"""Benchmark of element provenance: ``python -m engine.bench.explain [--batch N] [--repeat R]``.

For each of the six 2-D conv ops on a ResNet-sized layer (``N`` x 56 x 56 x 64, 3 x 3 x 64 x 64
filter, SAME, float32; the depthwise ops with multiplier 1), explains the element in the middle
of the output and prints its number of terms and the median milliseconds of ``R`` calls of
:func:`engine.explain.terms.explain_element`, of its float64 sum, and of building and serialising
the ``gradblocks explain --json`` object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import TextIO

import numpy as np

from engine.cli.explain import as_json
from engine.explain.terms import OPS, explain_element

ATTRS = {"strides": [1, 1, 1, 1], "padding": "SAME", "data_format": "NHWC",
         "dilations": [1, 1, 1, 1]}


def case_inputs(type_id: str, batch: int, size: int = 56, depth: int = 64) -> dict:
    """The inputs of ``type_id`` on the benchmark layer (random normal, float32)."""
    rng = np.random.default_rng(0)
    depthwise = OPS[type_id].depthwise
    x_shape = (batch, size, size, depth)
    w_shape = (3, 3, depth, 1 if depthwise else depth)
    rand = lambda shape: rng.standard_normal(shape, dtype=np.float32)
    kind = OPS[type_id].kind
    if kind == "forward":
        return {"input": rand(x_shape), "filter": rand(w_shape)}
    if kind == "filter":
        return {"input": rand(x_shape), "filter_sizes": np.array(w_shape),
                "out_backprop": rand(x_shape)}
    return {"input_sizes": np.array(x_shape), "filter": rand(w_shape),
            "out_backprop": rand(x_shape)}


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def row(type_id: str, batch: int, repeat: int, size: int = 56, depth: int = 64) -> list[str]:
    """type, terms, explain ms, sum ms, JSON ms of the benchmark element of ``type_id``."""
    inputs = case_inputs(type_id, batch, size, depth)
    index = (batch // 2, size // 2, size // 2, depth // 2)
    if OPS[type_id].kind == "filter":
        index = (1, 1, depth // 2, 0)  # the centre tap: every position, no padding
    e = explain_element(type_id, ATTRS, inputs, index)
    return [
        type_id, str(e.terms),
        f"{median_ms(lambda: explain_element(type_id, ATTRS, inputs, index), repeat):.2f}",
        f"{median_ms(lambda: e.sum, repeat):.2f}",
        f"{median_ms(lambda: json.dumps(as_json('n', 'output', 0.0, e)), repeat):.2f}",
    ]


def rows(batch: int, repeat: int, size: int = 56, depth: int = 64) -> list[list[str]]:
    """A header and one :func:`row` per op."""
    header = ["op", "terms", "explain ms", "sum ms", "json ms"]
    return [header] + [row(t, batch, repeat, size, depth) for t, op in OPS.items()
                       if op.rank == 2]


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    """Print the table to ``out`` (standard output if None)."""
    ap = argparse.ArgumentParser(prog="python -m engine.bench.explain", description=__doc__)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    opts = ap.parse_args(argv)
    table = rows(opts.batch, opts.repeat)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        print("  ".join(c.rjust(w) if i else c.ljust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))),
              file=out or sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
