"""TensorFlow's own CPU kernels (Eigen) for the tests that compare with TensorFlow, run in a
subprocess with oneDNN off (``TF_ENABLE_ONEDNN_OPTS=0``).

On AVX-512 VNNI CPUs TensorFlow turns oneDNN on by itself, and its Conv3D kernels then abort
the process on some invalid calls, accept others and return zeros on a strided VALID case
(``gradblocks verify tensorflow`` reports those as TensorFlow's failures). A test's verdict must
not depend on the CPU it runs on, so what "TensorFlow computes" or "TensorFlow refuses" means
here is TensorFlow's Eigen kernels, the same on every CPU.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_RUNNER = """
import pickle, sys
import numpy as np
import tensorflow as tf
with open(sys.argv[1], "rb") as f:
    calls = pickle.load(f)
out = []
for op, args in calls:
    args = {k: tf.constant(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    try:
        out.append(("ok", getattr(tf.raw_ops, op)(**args).numpy()))
    except (tf.errors.InvalidArgumentError, ValueError, TypeError) as err:
        out.append(("refused", type(err).__name__))
with open(sys.argv[2], "wb") as f:
    pickle.dump(out, f)
"""


def raw_ops(calls: list[tuple[str, dict]]) -> list[tuple[str, object]]:
    """``(op, kwargs)`` calls of ``tf.raw_ops`` on TensorFlow's Eigen CPU kernels, in one
    subprocess: ``("ok", result array)`` or ``("refused", error type name)`` each. Skips the
    test when TensorFlow is not installed."""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "calls.pkl", Path(tmp) / "out.pkl"
        src.write_bytes(pickle.dumps(calls))
        env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}
        proc = subprocess.run([sys.executable, "-c", _RUNNER, str(src), str(dst)], env=env,
                              capture_output=True, text=True, cwd=REPO, timeout=900,
                              check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return pickle.loads(dst.read_bytes())
