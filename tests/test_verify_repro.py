"""Reproductions that run as printed (engine.verify.command_line, engine.verify.repro): the
printed ``python -c`` command builds the case's arrays bit for bit and gives the recorded
output; the ``--cmd`` line runs on the IN.npz written next to the report; ``--repro`` writes
one canvas and one pytest file per group, each free of dead code and failing on the buggy
target (and passing on a correct one)."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from engine import api
from engine.verify import command_line
from engine.verify.conventions import Geometry
from engine.verify.report import Failure
from engine.verify.repro import write_repro
from engine.verify.values import Case, call
from engine.verify.verdicts import Verdict
from engine.verify.worker import prepared
from tests import verify_group_targets as targets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = "tests.verify_group_targets"
ENV = {**os.environ, "PYTHONPATH": ROOT}


def _shell(command: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=cwd,
                          env=ENV, timeout=120, check=False)


def _printed(p: subprocess.CompletedProcess) -> np.ndarray:
    assert p.returncode == 0, p.stderr
    return np.asarray(ast.literal_eval(p.stdout.strip()), np.float64)


BIG = Geometry(2, 5, 6, 3, (3, 2), 4)  # every array over 64 elements: drawn, not literal
SMALL = Geometry(1, 3, 3, 2, (2, 2), 1)
TORCH = Geometry(2, 5, 5, 4, (3, 3), 6, groups=2, strides=(2, 1), padding="EXPLICIT",
                 pads=(1, 1, 0, 0))


@pytest.mark.parametrize("op, convention, geometry, dtype, values, memory", [
    ("Conv2D", "tf", BIG, "float32", "random", "contiguous"),
    ("Conv2DBackpropInput", "tf", BIG, "float64", "random", "contiguous"),  # x drawn first
    ("Conv2DBackpropFilter", "tf", BIG.with_(data_format="NCHW"), "float16", "random",
     "noncontiguous"),
    ("Conv2DBackpropInput", "tf", BIG, "bfloat16", "structured", "readonly"),
    ("Conv2D", "tf", SMALL, "float32", "random", "readonly"),  # literal values
    ("conv2d", "torch", TORCH, "float32", "random", "contiguous"),
    ("conv2d_weight", "torch", TORCH, "float32", "random", "noncontiguous"),
    ("conv2d_input", "torch", TORCH, "float16", "structured", "contiguous"),
    ("conv_transpose2d", "torch", TORCH, "float32", "random", "contiguous"),
])
def test_the_printed_command_builds_the_exact_arrays(op, convention, geometry, dtype, values,
                                                     memory):
    case = Case(op, convention, geometry, dtype, seed=12345, memory=memory, values=values)
    c = call(case)
    failure = Failure(case, Verdict("wrong_values"), c, None, np.zeros(1))
    command = command_line.python_command(failure, f"{TARGETS}:echo", ROOT)
    literal = "np.array([" in command
    assert literal == (geometry is SMALL)
    got = _printed(_shell(command, cwd="/"))
    # what the worker gives the function: the same values, the same flags
    expected = targets.echo(**prepared(c.kwargs, memory))
    assert got.dtype == expected.dtype and np.array_equal(got, expected)


@pytest.fixture(scope="module")
def several():
    return api.verify(f"{TARGETS}:several_bugs", op="Conv2D", convention="tf", path=ROOT,
                      cases=60)


def test_each_groups_command_reproduces_its_failure(several):
    assert len(several.minimal_failures) >= 3
    for m in several.minimal_failures:
        p = _shell(several.reproduce(m), cwd="/")
        f = m.failure
        if f.got is None:  # raised: the same message
            assert p.returncode == 1 and f.verdict.message in p.stderr, p.stderr
        else:
            got = _printed(p)  # .tolist() keeps the shape of a nonempty array only
            assert got.shape == f.got.shape or got.size == f.got.size == 0, got.shape
            assert np.array_equal(got.reshape(f.got.shape), f.got), (several.reproduce(m), f.got)


def _pytest(path, cwd):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(path)], capture_output=True, text=True, cwd=cwd, env=ENV,
                          timeout=300, check=False)


def _ruff_clean(path):
    ruff = shutil.which("ruff") or os.path.join(os.path.dirname(sys.executable), "ruff")
    p = subprocess.run([ruff, "check", "--isolated", "--select", "F,E9,B", str(path)],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stdout


def test_repro_writes_one_set_per_group_each_failing(several, tmp_path):
    written = write_repro(several, str(tmp_path))
    canvases = [w for w in written if w.endswith(".gbc.json")]
    tests = [w for w in written if w.endswith(".py")]
    assert len(canvases) == len(tests) == len(several.minimal_failures)
    assert len(set(tests)) == len(tests)
    assert os.path.basename(tests[0]) == "test_minimal_wrong_values.py"
    for test in map(Path, tests):
        text = test.read_text()
        assert "subprocess" not in text and "CMD" not in text and "ml_dtypes" not in text
        _ruff_clean(test)
        p = _pytest(test, tmp_path)
        assert p.returncode == 1 and "1 failed" in p.stdout, p.stdout
    # the same files pass on a correct implementation: they judge, they do not just fail
    for test in map(Path, tests):
        text = test.read_text()
        fixed = text.replace(f"import_module({TARGETS!r}).several_bugs",
                             "import_module('tests.verify_zoo').loops_conv2d")
        assert fixed != text
        test.write_text(fixed)
        p = _pytest(test, tmp_path)
        assert p.returncode == 0, p.stdout


SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, {root!r})
import os
os.environ["GRADBLOCKS_KERNELS"] = "numpy"
from engine import kernels
src, dst = sys.argv[-2:]
a = np.load(src)
kw = {{k: a[k] for k in ("input", "filter")}}
kw["padding"], kw["data_format"] = str(a["padding"]), str(a["data_format"])
for k in ("strides", "dilations", "explicit_paddings"):
    if k in a:
        kw[k] = [int(v) for v in a[k]]
np.savez(dst, output=kernels.conv2d(**kw) * 2)
"""


def _gb(*args, cwd):
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=ENV, timeout=300, check=False)


@pytest.mark.parametrize("where", ["json", "repro"])
def test_the_cmd_line_runs_on_the_inputs_written_next_to_the_report(tmp_path, where):
    script = tmp_path / "impl.py"
    script.write_text(textwrap.dedent(SCRIPT.format(root=ROOT)))
    out = tmp_path / "out"
    out.mkdir()
    report_args = ["--json", str(out / "r.json")] if where == "json" else \
        ["--repro", str(out / "repro")]
    folder = out if where == "json" else out / "repro"
    p = _gb("verify", "--cmd", f"{sys.executable} {script}", "--op", "Conv2D",
            "--convention", "tf", "--cases", "3", "--support",
            "strides=1 dilations=1 groups=1 layouts=NHWC padding=SAME", *report_args,
            cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    [line] = re.findall(r"reproduce: (.*)", p.stdout)
    inputs = folder / "minimal_wrong_values.in.npz"
    assert line == f"{sys.executable} {script} {inputs} OUT.npz"
    run = _shell(line, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    from engine import kernels

    with np.load(inputs) as a, np.load(tmp_path / "OUT.npz") as o:
        x, w = a["input"], a["filter"]
        assert str(a["op"]) == "Conv2D" and str(a["dtype"]) == "float32"
        ref = kernels.conv2d(x, w, [int(v) for v in a["strides"]], str(a["padding"]),
                             data_format=str(a["data_format"]),
                             dilations=[int(v) for v in a["dilations"]])
        np.testing.assert_allclose(o["output"], 2 * ref, rtol=1e-6)
    if where == "json":
        data = json.loads((out / "r.json").read_text())
        assert data["groups"][0]["reproduce"] == line
    else:
        test = folder / "test_minimal_wrong_values.py"
        text = test.read_text()
        assert "importlib" not in text and "OTHER" not in text
        _ruff_clean(test)
        t = _pytest(test, tmp_path)
        assert t.returncode == 1 and "1 failed" in t.stdout, t.stdout


def test_a_nondeterministic_groups_test_checks_that_reruns_agree(tmp_path):
    report = api.verify(f"{TARGETS}:reads_unwritten", op="Conv2D", convention="tf",
                        path=ROOT, cases=30)
    [m] = report.minimal_failures
    assert m.failure.verdict.verdict == "nondeterministic"
    [_, test] = write_repro(report, str(tmp_path))
    assert os.path.basename(test) == "test_minimal_nondeterministic.py"
    _ruff_clean(test)
    p = _pytest(test, tmp_path)
    assert p.returncode == 1 and "np.array_equal(got, runs[0]" in p.stdout, p.stdout


def test_a_notebook_callables_reproduction_is_python_calling_fn(capsys):
    case = Case("Conv2DBackpropInput", "tf", BIG, "float32", seed=3)
    c = call(case)
    failure = Failure(case, Verdict("wrong_values"), c, None, np.zeros(1))
    code = command_line.inprocess_code(failure, "<lambda>")
    assert code.endswith("  # fn: <lambda>") and "import sys" not in code
    exec(code, {"fn": targets.echo})  # noqa: S102 - the printed statements, as a user runs them
    got = np.asarray(ast.literal_eval(capsys.readouterr().out.strip()))
    assert np.array_equal(got, targets.echo(**prepared(c.kwargs, "contiguous")))
