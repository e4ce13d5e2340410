"""The check blocks headless: `gradblocks run` shows each verdict as PASS or FAIL, and an
exported script reproduces GradCheck's and AdjointCheck's outputs bit for bit."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from engine.export.to_numpy import export_script
from engine.graph.canvas_file import save_canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor
from tests.export_support import (
    REPO,
    assert_bitwise_equal,
    executor_outputs,
    run_script,
    script_env,
)
from tests.test_gradcheck import check_canvas, one_wrong


def _run_cli(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", "run", str(path)],
                          capture_output=True, text=True, cwd=REPO, env=script_env(),
                          check=False)


def _rows(stdout: str) -> dict[tuple[str, str], list[str]]:
    """(block, port) -> the row's cells (split on runs of spaces; no cell here has one)."""
    lines = stdout.splitlines()
    return {(cells[0], cells[2]): cells for cells in
            (line.replace(", ", ",").split() for line in lines[1:])}


def test_run_prints_pass_for_a_right_gradient_and_fail_for_a_wrong_one(tmp_path):
    """The filter gradient is saved, one element spoiled, and read back from the .npy by a
    Tensor block: its GradCheck fails while the one on the backprop block passes."""
    c = check_canvas("Conv2D", "float32", {"strides": [1, 2, 2, 1]})
    result = Executor().run(compile_canvas(c))
    dw = result.outputs[("dw", "output")]
    np.save(tmp_path / "dw_wrong.npy", one_wrong(dw, 5))
    c.add_node("Tensor", attrs={"fill": "file", "path": "dw_wrong.npy", "dtype": "float32"},
               id="theirs")
    c.add_node("GradCheck", attrs={"wrt": "filter", "samples": 0, "strides": [1, 2, 2, 1]},
               id="gc_theirs")
    for port, src in (("input", "x"), ("filter", "w"), ("out_backprop", "dy"),
                      ("gradient", "theirs")):
        c.connect((src, "output"), ("gc_theirs", port))
    path = tmp_path / "checks.gbc.json"
    save_canvas(c, path)
    proc = _run_cli(path)
    assert proc.returncode == 0, proc.stderr
    header = proc.stdout.splitlines()[0].split()
    assert header == ["block", "type", "port", "shape", "dtype", "min", "max", "mean",
                      "verdict", "ms", "id"]
    rows = _rows(proc.stdout)
    assert rows[("gc_filter", "ok")][8] == "PASS"
    assert rows[("gc_input", "ok")][8] == "PASS"
    assert rows[("gc_theirs", "ok")][8] == "FAIL"
    assert rows[("gc_theirs", "ok")][-1] == "gc_theirs"
    # other rows have no verdict: their ms cell follows the mean
    assert rows[("gc_theirs", "max_rel_error")][-2] != "FAIL"
    assert "PASS" not in proc.stdout.split("gc_input")[0]


def test_run_without_check_blocks_keeps_its_table():
    from tests.test_cli import EXAMPLES

    path = next(p for p in EXAMPLES if p.name == "enuspace_style.gbc.json")
    proc = _run_cli(path)
    assert proc.stdout.splitlines()[0].split() == ["block", "type", "port", "shape", "dtype",
                                                   "min", "max", "mean", "ms", "id"]


def test_export_of_check_blocks_reproduces_their_outputs(tmp_path):
    c = check_canvas("DepthwiseConv2dNative", "float32", {"data_format": "NCHW",
                                                          "strides": [1, 1, 2, 2]},
                     samples=7, seed=11, epsilon=0.1 + 0.2)
    c.add_node("AdjointCheck", attrs={"op": "DepthwiseConv2dNative", "data_format": "NCHW",
                                      "strides": [1, 1, 2, 2]}, id="adj")
    for port, src in (("input", "x"), ("filter", "w"), ("out_backprop", "dy")):
        c.connect((src, "output"), ("adj", port))
    plan = compile_canvas(c)
    assert plan.ok, plan.errors
    script = export_script(plan)
    assert "grad_check(" in script and "adjoint_check(" in script
    assert "epsilon=0.30000000000000004" in script
    path = tmp_path / "s.py"
    path.write_text(script)
    run_script(path, tmp_path / "o.npz")
    expected = executor_outputs(plan)
    assert np.isnan(expected["gc_input.numeric"]).sum() > 0  # NaN where not sampled
    assert_bitwise_equal(tmp_path / "o.npz", expected)
