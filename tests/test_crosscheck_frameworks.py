"""The exported scripts run by the real frameworks, each test skipped when its framework is not
importable (set GRADBLOCKS_TF_PYTHON, GRADBLOCKS_TORCH_PYTHON, GRADBLOCKS_JAX_PYTHON to a venv's
python that has it, or install it in this one)."""

import subprocess
import sys

import numpy as np
import pytest

from tests.crosscheck_support import (
    ENV_VARS,
    REPO,
    conventions_canvas,
    crosscheck_cli,
    framework_python,
    report,
)

FRAMEWORKS = ("tensorflow", "pytorch", "jax")
EXAMPLES = REPO / "assets" / "examples"


def _python(name: str) -> str:
    python = framework_python(name)
    if python is None:
        pytest.skip(f"{name} is not installed (set {ENV_VARS[name]} to a python that has it)")
    return python


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_every_convention_agrees_with_the_framework(tmp_path, name):
    """NCHW, asymmetric EXPLICIT pads, dilations, strides, groups, depthwise, SAME with an odd
    pad, float64, the check blocks: every output within tolerance."""
    python = _python(name)
    proc = crosscheck_cli(conventions_canvas(tmp_path / "conv.gbc.json"), "--with", name,
                          "--python", python)
    data = report(proc)
    assert data["frameworks"] == {name: "ran"}, proc.stderr
    disagree = [r for r in data["rows"] if not r["agree"]]
    assert disagree == []
    assert len(data["rows"]) == 32
    assert proc.returncode == 0


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_the_training_step_example_agrees(name):
    python = _python(name)
    proc = crosscheck_cli(EXAMPLES / "training_step.gbc.json", "--with", name, "--python", python)
    data = report(proc)
    assert data["frameworks"] == {name: "ran"}
    assert data["rows"] and all(r["agree"] for r in data["rows"])
    assert proc.returncode == 0


def test_tensorflow_depthwise_dilations_defect_is_named_and_is_a_disagreement():
    python = _python("tensorflow")
    proc = crosscheck_cli(EXAMPLES / "pitfalls" / "depthwise_dilations.gbc.json", "--with",
                          "tensorflow", "--python", python)
    data = report(proc)
    assert proc.returncode == 1
    rows = {r["output"]: r for r in data["rows"]}
    for out in ("dw_dilated.output", "dx_dilated.output"):
        assert not rows[out]["agree"]
        assert "ignores dilations" in rows[out]["known_defect"]
    # every disagreement is explained by the defect; what TF returns undilated agrees
    assert all(r["known_defect"] for r in data["rows"] if not r["agree"])
    assert rows["dw_tf.output"]["agree"] and rows["dx_tf.output"]["agree"]


@pytest.mark.parametrize("name", ["pytorch", "jax"])
def test_dilated_depthwise_gradients_agree_in_pytorch_and_jax(name):
    python = _python(name)
    proc = crosscheck_cli(EXAMPLES / "pitfalls" / "depthwise_dilations.gbc.json", "--with",
                          name, "--python", python)
    assert proc.returncode == 0
    assert all(r["agree"] for r in report(proc)["rows"])


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_the_script_writes_the_keys_of_run_out(tmp_path, name):
    python = _python(name)
    canvas = EXAMPLES / "enuspace_style.gbc.json"
    script, ours, theirs = tmp_path / "s.py", tmp_path / "ours.npz", tmp_path / "theirs.npz"
    for args in (["export", str(canvas), "--to", name, "-o", str(script)],
                 ["run", str(canvas), "--out", str(ours)]):
        subprocess.run([sys.executable, "-m", "engine.cli", *args], check=True, cwd=REPO,
                       capture_output=True)
    subprocess.run([python, str(script), str(theirs)], check=True, cwd=tmp_path,
                   capture_output=True)
    with np.load(ours) as a, np.load(theirs) as b:
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            assert a[key].shape == b[key].shape and a[key].dtype == b[key].dtype
            np.testing.assert_allclose(b[key], a[key], rtol=1e-4, atol=1e-4 * abs(a[key]).max())
