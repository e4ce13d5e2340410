"""Helpers for the export tests: run exported scripts, compare outputs bit for bit, and the
shape of a script's code with its string literals blanked out."""

from __future__ import annotations

import ast
import dataclasses
import io
import os
import subprocess
import sys
import tokenize
from pathlib import Path

import numpy as np

from engine.base.dtypes import DTYPES, RTOL
from engine.graph.compiler import Plan
from engine.graph.executor import Executor
from engine.graph.result_names import result_keys
from engine.kernels import accel

REPO = Path(__file__).parents[1]

#: Runs ``script out.npz`` pairs from argv in one interpreter, each as ``python script out``.
_DRIVER = """
import runpy, sys
pairs = sys.argv[1:]
for script, out in zip(pairs[::2], pairs[1::2]):
    sys.argv = [script, out]
    runpy.run_path(script, run_name="__main__")
"""


#: The kernel path scripts and runs compared bit for bit both take: the NumPy one (a large call
#: runs compiled, so without this the two could round differently, and where partial sums
#: overflow even put NaN and Inf in different places).
SAME_PATH = {accel.ENV: "numpy"}


def script_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **SAME_PATH}


def run_script(script: Path, out: Path) -> None:
    """``python script.py out.npz`` as a user runs it (from the script's folder)."""
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True,
                          cwd=script.parent, env=script_env(), check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="backslashreplace")


def run_scripts(pairs: list[tuple[Path, Path]], cwd: Path) -> None:
    """Several ``(script, out.npz)`` in one subprocess (one interpreter start for all)."""
    args = [str(p) for pair in pairs for p in pair]
    proc = subprocess.run([sys.executable, "-c", _DRIVER, *args], capture_output=True,
                          cwd=cwd, env=script_env(), check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="backslashreplace")


def npz_safe(value) -> np.ndarray:
    value = np.asarray(value)
    return value.astype(np.float32) if value.dtype == DTYPES["bfloat16"] else value


def executor_outputs(plan: Plan) -> dict[str, np.ndarray]:
    """What ``gradblocks run --out`` stores: the results under their result keys."""
    saved = {k: os.environ.get(k) for k in SAME_PATH}
    os.environ.update(SAME_PATH)
    try:
        result = Executor().run(plan)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert not result.errors, result.errors
    return {key: npz_safe(result.outputs[ref])
            for ref, key in result_keys(plan.steps, plan.labels).items()}


def assert_bitwise_equal(npz: Path, expected: dict[str, np.ndarray]) -> None:
    """Same keys, and per key the same dtype, shape and bytes (NaN payloads included): the
    script and the run take the same (NumPy) kernel path, see :data:`SAME_PATH`."""
    with np.load(npz) as data:
        assert sorted(data.files) == sorted(expected)
        for key, want in expected.items():
            got = data[key]
            assert (got.dtype, got.shape) == (want.dtype, want.shape), key
            assert got.tobytes() == np.ascontiguousarray(want).tobytes(), key


def assert_same_result(got: np.ndarray, want: np.ndarray, key: str = "") -> None:
    """Same dtype and shape; integers and booleans equal, floats with NaN/Inf in the same
    places and finite values within ``RTOL[dtype]`` of the expected tensor's largest
    magnitude: for a script and a run that may take different kernel paths (a large call runs
    compiled), which round differently. Inputs of ordinary size only:
    where partial sums overflow, the place of the overflow depends on the summation order."""
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), key
    if got.dtype.kind not in "fc" and got.dtype.name not in RTOL:
        np.testing.assert_array_equal(got, want, err_msg=key)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), key
    assert np.array_equal(np.where(np.isinf(w), w, 0), np.where(np.isinf(g), g, 0)), key
    finite = np.isfinite(w)
    scale = float(np.max(np.abs(w[finite]), initial=1.0))
    np.testing.assert_allclose(g[finite], w[finite], rtol=0, atol=RTOL[got.dtype.name] * scale,
                               err_msg=key)


def code_shape(script: str) -> tuple[str | None, str, list[str]]:
    """The docstring, the AST with every other string constant blanked, and the comments:
    what must not change when only user text changes."""
    tree = ast.parse(script)
    doc = ast.get_docstring(tree, clean=False)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    comments = [t.string for t in tokenize.generate_tokens(io.StringIO(script).readline)
                if t.type == tokenize.COMMENT]
    return doc, ast.dump(tree), comments


def string_constants(script: str) -> set[str]:
    """Every string constant of the script except its docstring."""
    tree = ast.parse(script)
    doc = ast.get_docstring(tree, clean=False)
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value != doc}


def relabel(plan: Plan, ids: dict[str, str]) -> Plan:
    """``plan`` with node ids renamed (ids the loader would refuse included)."""
    steps = [dataclasses.replace(s, node_id=ids[s.node_id],
                                 inputs={p: (ids[n], q) for p, (n, q) in s.inputs.items()})
             for s in plan.steps]
    specs = {(ids[n], p): ts for (n, p), ts in plan.specs.items()}
    return Plan(steps=steps, specs=specs, order=[ids[n] for n in plan.order],
                labels={ids[n]: ids[n] for n in plan.order})
