"""TensorFlow's side of ``python -m engine.bench --compare``, timed in a child process.

Measured here: once TensorFlow has run an op in a process, our kernels in that same process
run up to 2x slower for seconds afterwards (a 56x56x128 depthwise filter gradient 4 -> 8 ms),
with TensorFlow's threads idle. A child process keeps TensorFlow's runtime away from ours; the
arrays are sent to it, so both sides still time the same data. TensorFlow is never imported in
the benchmark's own process.
"""

from __future__ import annotations

import functools
import importlib.util
import multiprocessing as mp
from typing import Any, Self

import numpy as np


def available() -> bool:
    """True when ``tensorflow`` can be imported (without importing it)."""
    return importlib.util.find_spec("tensorflow") is not None


def _run(fn, args: dict[str, Any]) -> np.ndarray:
    return fn(**args).numpy()


def _serve(conn) -> None:
    """Child: ``("load", op, args)`` builds the call; ``("time", n, warm_s)`` warms it up for
    ``warm_s`` seconds and sends back n timed calls (ms)."""
    import os
    import time

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    call = None
    while True:
        msg = conn.recv()
        if msg[0] == "load":
            _, op, args = msg
            tf_args = {k: tf.constant(v) if isinstance(v, np.ndarray) else v
                       for k, v in args.items()}
            call = functools.partial(_run, getattr(tf.raw_ops, op), tf_args)
            call()
            conn.send(None)
        elif msg[0] == "time":
            end = time.perf_counter() + msg[2]
            while time.perf_counter() < end:  # warm-up, untimed
                call()
            times = []
            for _ in range(msg[1]):
                t0 = time.perf_counter()
                call()
                times.append(1e3 * (time.perf_counter() - t0))
            conn.send(times)
        else:
            return


class TensorFlowTimer:
    """Times ``tf.raw_ops`` calls in a child process: ``load`` a case, then ``samples_ms``."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self._proc.start()

    def load(self, op: str, args: dict[str, Any]) -> None:
        self._conn.send(("load", op, args))
        self._conn.recv()

    def samples_ms(self, count: int, warm_s: float = 0.1) -> list[float]:
        self._conn.send(("time", count, warm_s))
        return self._conn.recv()

    def close(self) -> None:
        self._conn.send(("stop",))
        self._proc.join(timeout=10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
