"""The headless command line: check, run, export; exit codes and messages."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.cli import main
from engine.graph.canvas_file import load_canvas, save_canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor
from tests.export_support import assert_same_result

EXAMPLES = sorted((Path(__file__).parents[1] / "assets" / "examples").glob("*.gbc.json"))


def test_every_example_checks_and_runs(capsys):
    assert len(EXAMPLES) == 6
    for path in EXAMPLES:
        assert main(["check", str(path)]) == 0
        assert main(["run", str(path)]) == 0
    out = capsys.readouterr()
    assert out.err == ""


def test_training_step_example_agrees_across_layouts():
    plan = compile_canvas(load_canvas(EXAMPLES[-1]), EXAMPLES[-1].parent)
    result = Executor().run(plan)
    assert bool(result.outputs[("check", "agree")])
    assert float(result.outputs[("check", "max_abs_error")]) < 1e-4


def test_enuspace_example_gives_the_hand_computed_gradient():
    """input 1..9 (3x3), out_backprop ones (2x2), VALID: dw[i,j] = sum of the 2x2 window."""
    path = next(p for p in EXAMPLES if p.name == "enuspace_style.gbc.json")
    result = Executor().run(compile_canvas(load_canvas(path), path.parent))
    dw = result.outputs[("result", "output")][:, :, 0, 0]
    np.testing.assert_array_equal(dw, [[12, 16], [24, 28]])


def test_run_prints_min_max_mean_of_each_output(capsys):
    """The enuSpace example's gradient is [[12, 16], [24, 28]]: min 12, max 28, mean 20."""
    path = next(p for p in EXAMPLES if p.name == "enuspace_style.gbc.json")
    assert main(["run", str(path)]) == 0
    row = next(line.split() for line in capsys.readouterr().out.splitlines()
               if line.startswith("result "))
    assert row[:10] == ["result", "Output", "output", "[2,", "2,", "1,", "1]", "float32",
                        "12", "28"] and row[10] == "20"


def test_check_prints_shapes(capsys):
    path = next(p for p in EXAMPLES if p.name == "conv2d_backprop_filter.gbc.json")
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "grad_filter" in out and "[3, 3, 2, 4]" in out and "float32" in out


def test_run_writes_every_output_to_npz(tmp_path, capsys):
    path = EXAMPLES[0]
    out = tmp_path / "r.npz"
    assert main(["run", str(path), "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "min" in table and "mean" in table and "ms" in table
    data = np.load(out)
    plan = compile_canvas(load_canvas(path), path.parent)
    # no Output blocks: every block's (single) output under its title
    assert set(data.files) == {"input 1x6x6x2 (arange)", "filter_sizes [3,3,2,4]",
                               "out_backprop 1x3x3x4 (ones)", "Conv2DBackpropFilter"}
    result = Executor().run(plan)
    for (n, p), v in result.outputs.items():
        np.testing.assert_array_equal(data[plan.labels[n]], v)


def test_invalid_canvas_exits_2_with_json_path_and_no_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.gbc.json"
    doc = json.loads(EXAMPLES[0].read_text())
    doc["nodes"][3]["attrs"]["strides"] = [1, 2, 2]
    bad.write_text(json.dumps(doc))
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    # named as the compiler names it: the block's title and the attribute (issue 24)
    assert "Conv2DBackpropFilter.strides: strides must have 4 elements" in err
    assert "Traceback" not in err


def test_inference_error_exits_2_naming_node_and_attribute(tmp_path, capsys):
    c = load_canvas(EXAMPLES[0])
    c.set_attr("grad_filter", "strides", [1, 1, 1, 1])  # out_backprop no longer fits
    save_canvas(c, tmp_path / "c.gbc.json")
    assert main(["run", str(tmp_path / "c.gbc.json")]) == 2
    err = capsys.readouterr().err
    assert "Conv2DBackpropFilter.out_backprop: out_backprop height 3 does not match the " \
           "computed output height 6" in err  # the block's title, not its id grad_filter


def test_block_failing_at_run_time_exits_1(tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.ones((1, 4, 4, 1), np.float32))
    c = load_canvas(EXAMPLES[0])
    c.add_node("Tensor", attrs={"fill": "file", "path": "a.npy"}, id="f")
    path = tmp_path / "c.gbc.json"
    save_canvas(c, path)
    from engine.cli import commands

    real = commands.Executor.run

    def run_after_breaking_file(self, plan, **kw):
        (tmp_path / "a.npy").write_bytes(b"not npy any more")
        return real(self, plan, **kw)

    commands.Executor.run = run_after_breaking_file
    try:
        assert main(["run", str(path)]) == 1
    finally:
        commands.Executor.run = real
    err = capsys.readouterr().err
    assert "1 block(s) failed" in err and "f: " in err and "Traceback" not in err


def test_usage_errors_exit_2(capsys):
    assert main(["run"]) == 2
    capsys.readouterr()
    assert main(["check", "/nonexistent/x.gbc.json"]) == 2
    assert capsys.readouterr().err == ("gradblocks: cannot open /nonexistent/x.gbc.json: "
                                       "no such file\n")


def test_console_script_entry_point_runs_headless(tmp_path):
    out = subprocess.run([sys.executable, "-m", "engine.cli", "check", str(EXAMPLES[0])],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0 and "ok, 4 block(s)" in out.stdout


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_export_script_reproduces_the_outputs(path, tmp_path):
    script = tmp_path / "script.py"
    assert main(["export", str(path), "-o", str(script)]) == 0
    npz = tmp_path / "out.npz"
    repo = str(Path(__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": repo}
    proc = subprocess.run([sys.executable, str(script), str(npz)], capture_output=True,
                          text=True, cwd=tmp_path, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert main(["run", str(path), "--out", str(tmp_path / "run.npz")]) == 0
    with np.load(npz) as data, np.load(tmp_path / "run.npz") as run:
        assert data.files == run.files  # the same keys, in the same order
        for key in run.files:
            assert_same_result(data[key], run[key], key)


def test_app_without_a_screen_says_so_instead_of_aborting(monkeypatch, capsys):
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert main([]) == 2
    assert "no screen to open the app on" in capsys.readouterr().err
