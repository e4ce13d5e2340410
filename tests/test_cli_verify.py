"""``gradblocks verify`` as a subprocess: exit codes, --json, --repro (then gradblocks check on
the canvas), --cmd with a Python script as the other-language command, usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")


def _gb(*args, cwd=TESTS):
    env = {**os.environ, "PYTHONPATH": ROOT, "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, check=False,
                          text=True, cwd=cwd, env=env, timeout=300)


def test_a_correct_implementation_exits_0_with_json(tmp_path):
    out = tmp_path / "r.json"
    p = _gb("verify", "verify_zoo:loops_conv2d", "--op", "Conv2D", "--convention", "tf",
            "--cases", "20", "--json", str(out))
    assert p.returncode == 0, p.stderr
    data = json.loads(out.read_text())
    assert data["ok"] is True and data["cases"] == 20 and data["failed"] == 0
    assert data["minimal"] is None and data["diagnosis"] is None


def test_a_bug_exits_1_with_json_repro_and_a_canvas_check_accepts(tmp_path):
    out, repro = tmp_path / "r.json", tmp_path / "repro"
    p = _gb("verify", "verify_zoo:groups_ignored", "--op", "Conv2D", "--convention", "tf",
            "--cases", "20", "--json", str(out), "--repro", str(repro))
    assert p.returncode == 1, p.stderr
    assert "diagnosis: groups_ignored" in p.stdout and "reproduce:" in p.stdout
    data = json.loads(out.read_text())
    assert data["ok"] is False and data["diagnosis"]["id"] == "groups_ignored"
    assert data["minimal"]["verdict"] == "wrong_values"
    canvas = repro / "minimal_wrong_values.gbc.json"
    check = _gb("check", str(canvas))
    assert check.returncode == 0, check.stderr
    assert "Compare" in check.stdout
    run = _gb("run", str(canvas))
    assert "FAIL" in run.stdout  # the Compare block's verdict: the implementation disagrees
    test = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(repro / "test_minimal_wrong_values.py")], capture_output=True, check=False,
                          text=True, cwd=TESTS, env={**os.environ, "PYTHONPATH": ROOT})
    assert test.returncode == 1 and "AssertionError" in test.stdout


def test_cmd_runs_another_program_per_case(tmp_path):
    script = tmp_path / "impl.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        import numpy as np
        sys.path.insert(0, {ROOT!r})
        import os
        os.environ["GRADBLOCKS_KERNELS"] = "numpy"  # no numba to load in each short process
        from engine import kernels
        src, dst = sys.argv[-2:]
        a = np.load(src)
        kw = {{k: a[k] for k in ("input", "filter", "padding", "data_format")}}
        kw["padding"], kw["data_format"] = str(kw["padding"]), str(kw["data_format"])
        kw["strides"] = [int(v) for v in a["strides"]]
        kw["dilations"] = [int(v) for v in a["dilations"]]
        if "explicit_paddings" in a:
            kw["explicit_paddings"] = [int(v) for v in a["explicit_paddings"]]
        if kw["dilations"] != [1, 1, 1, 1]:
            sys.exit(3)  # unsupported
        factor = 2 if "bug" in sys.argv[1:-2] else 1
        np.savez(dst, output=kernels.conv2d(**kw) * factor)
    """))
    # every case is a new process: the catalogue's first 5 classes (the 4th has dilations > 1)
    ok = _gb("verify", "--cmd", f"{sys.executable} {script}", "--op", "Conv2D",
             "--convention", "tf", "--cases", "5")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "unsupported" in ok.stdout
    bad = _gb("verify", "--cmd", f"{sys.executable} {script} bug", "--op", "Conv2D",
              "--convention", "tf", "--cases", "2", "--support",
              "strides=1 dilations=1 groups=1 layouts=NHWC padding=SAME",  # small, non-empty
              "--json", str(tmp_path / "b.json"))
    assert bad.returncode == 1
    assert json.loads((tmp_path / "b.json").read_text())["minimal"]["verdict"] == "wrong_values"


@pytest.mark.parametrize("args, words", [
    (["verify_zoo:loops_conv2d", "--op", "conv2d", "--convention", "tf"], "not a tf op"),
    (["--op", "Conv2D", "--convention", "tf"], "TARGET"),
    (["verify_zoo:loops_conv2d", "--op", "Conv2D", "--convention", "tf", "--support",
      "strides<<2"], "strides<<2"),
    (["no_such_module:f", "--op", "Conv2D", "--convention", "tf"], "no_such_module"),
    (["verify_zoo:loops_conv2d", "--op", "Conv2D", "--convention", "jax"], "jax"),
    (["verify_zoo:loops_conv2d", "--op", "Conv2D", "--convention", "tf", "--cases", "0"],
     "--cases"),
])
def test_usage_errors_are_one_line_exit_2(args, words):
    p = _gb("verify", *args)
    assert p.returncode == 2
    assert words in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "Traceback" not in p.stderr
