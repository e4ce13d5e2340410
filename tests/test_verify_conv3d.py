"""Verify's 3-D ops (issue 33 item 6): Conv3D, Conv3DBackpropFilterV2, Conv3DBackpropInputV2
in the tf convention and conv3d, conv3d_weight, conv3d_input, conv_transpose3d in the torch
one, from the op table's rank-3 rows. Independent tap loops (tests/verify_conv3d_targets.py)
pass a sweep of each; planted 3-D bugs are caught, shrunk to a small case and named; the CLI,
the repro canvas and the framework targets take the 3-D ops."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from engine.verify import api
from engine.verify import cases as case_gen
from engine.verify.conventions import Geometry, accepts, make_call, op_rank, shapes_nd
from engine.verify.defaults import OPS
from engine.verify.diagnose import diagnose
from engine.verify.repro import write_repro
from engine.verify.support import parse_support

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
TF_3D = ("Conv3D", "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2")
TORCH_3D = ("conv3d", "conv3d_weight", "conv3d_input", "conv_transpose3d")
CLASSES_3D = ("depth_remainder_only", "stride_in_depth_only", "dilation_in_depth_only",
              "same_odd_depth_only", "non_cubic_filter", "empty_depth")


def _gb(*args, cwd=TESTS):
    env = {**os.environ, "PYTHONPATH": ROOT, "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                          check=False, text=True, cwd=cwd, env=env, timeout=600)


def _verify(fn, op, convention="tf", cases=150):
    return api.verify(f"verify_conv3d_targets:{fn}", op, convention, cases=cases, path=TESTS)


def test_the_op_lists_hold_the_3d_ops_after_the_2d_ones():
    assert OPS["tf"][-3:] == TF_3D and all(op_rank(op) == 2 for op in OPS["tf"][:-3])
    assert OPS["torch"] == ("conv2d", "conv2d_weight", "conv2d_input", "conv_transpose2d",
                            *TORCH_3D)
    assert {op_rank(op) for op in (*TF_3D, *TORCH_3D)} == {3}


@pytest.mark.parametrize(("convention", "op"), [*(("tf", op) for op in TF_3D),
                                                 *(("torch", op) for op in TORCH_3D)])
def test_a_correct_3d_implementation_passes_a_sweep(convention, op):
    report = _verify(op, op, convention, cases=120)
    assert report.ok, [m.diagnosis.text for m in report.minimal_failures]
    assert report.cases == 120
    tried = {name for name, r in report.classes.items() if r["tried"]}
    wanted = {c for c in CLASSES_3D if c in case_gen.edge_classes(op, convention)}
    assert wanted and wanted <= tried
    assert "asymmetric_explicit" not in report.classes  # 3-D: SAME and VALID only


def test_the_3d_cases_are_3d_and_the_classes_mean_their_names():
    support = parse_support(None)
    for convention, op in (("tf", "Conv3D"), ("torch", "conv_transpose3d")):
        made = list(case_gen.generate(op, convention, ["float32"], 80, 3, support))
        assert len(made) == 80
        for case in made:
            g = case.geometry
            assert g.rank == 3 and len(g.kernel) == len(g.strides) == len(g.dilations) == 3
            assert g.padding in ("SAME", "VALID") and accepts(g, convention, op)
        by = {c.edge: c.geometry for c in made}
        strided = by["stride_in_depth_only"].strides
        assert strided[0] > 1 and strided[1:] == (1, 1)
        assert by["dilation_in_depth_only"].dilations[1:] == (1, 1)
        assert len(set(by["non_cubic_filter"].kernel)) == 3
        if convention == "tf":
            cg = shapes_nd(by["empty_depth"])
            assert cg.out_spatial[0] == 0 and min(cg.out_spatial[1:]) > 0
            same = shapes_nd(by["same_odd_depth_only"]).pads
            assert [(b + a) % 2 for b, a in same] == [1, 0, 0]


def test_a_torch_3d_call_is_ncdhw_oidhw_with_int_paddings():
    g = Geometry(batch=1, height=4, width=5, channels=2, kernel=(3, 1, 3), out_channels=4,
                 groups=2, strides=(1, 1, 2), padding="SAME", planes=3)
    cg = shapes_nd(g)
    x, w, dy = (np.zeros(s) for s in (cg.input_shape, cg.filter_shape, cg.output_shape))
    c = make_call("conv_transpose3d", "torch", g, x, w, dy, np.dtype("float32"))
    assert c.tf_op == "Conv3DBackpropInputV2" and c.tf_args["data_format"] == "NDHWC"
    assert c.kwargs["input"].shape == (1, 4, 3, 4, 3)  # dy, NCDHW
    assert c.kwargs["weight"].shape == (4, 1, 3, 1, 3)  # (in, out/groups, kd, kh, kw)
    assert c.kwargs["padding"] == (1, 0, 1) and c.kwargs["stride"] == (1, 1, 2)
    assert c.kwargs["output_padding"] == (0, 0, 0)


#: planted bug -> (op, the diagnosis every group of its values is named with, what the minimal
#: case of that group must show, the largest minimal size).
BUGS = {
    "conv3d_same_pad_depth": ("Conv3D", "same_pad_extra_before",
                              lambda g: g.padding == "SAME" and g.kernel[0] > 1, 8),
    "conv3d_flip_depth": ("Conv3D", "convolution_not_correlation", lambda g: g.kernel[0] > 1,
                          16),
    "conv3d_dilation_depth_ignored": ("Conv3D", "dilation_ignored",
                                      lambda g: g.dilations[0] > 1, 8),
    "conv3d_strides_dh_swapped": ("Conv3D", "strides_swapped",
                                  lambda g: g.strides[0] != g.strides[1], 8),
    "backprop_input_same_pad_depth": ("Conv3DBackpropInputV2", "same_pad_extra_before",
                                      lambda g: g.padding == "SAME" and g.kernel[0] > 1, 8),
}


@pytest.mark.parametrize("bug", list(BUGS))
def test_each_planted_3d_bug_is_caught_shrunk_and_named(bug):
    op, mistake, shows, largest = BUGS[bug]
    report = _verify(bug, op, cases=200)
    assert not report.ok and report.failed > 0
    values = [m for m in report.minimal_failures if m.failure.verdict.verdict == "wrong_values"]
    assert values and {m.diagnosis.id for m in values} == {mistake}, \
        [m.diagnosis.text for m in values]
    smallest = min(values, key=lambda m: m.size)
    assert smallest.size <= largest and shows(smallest.failure.case.geometry)
    assert smallest.failure.case.geometry.rank == 3
    if bug == "conv3d_strides_dh_swapped":  # its wrong shapes: the same name, or a shape
        # another mistake gives too (the shrinker keeps a group's own name)
        shapes = [m for m in report.minimal_failures if m.failure.verdict.verdict ==
                  "wrong_shape"]
        assert any(m.diagnosis.id == mistake and m.size <= largest for m in shapes)
        assert all(m.diagnosis.id for m in shapes)


def test_a_depth_only_flip_is_named_with_its_dimension():
    g = Geometry(batch=1, height=3, width=3, channels=1, kernel=(2, 2, 2), out_channels=1,
                 planes=3)
    cg = shapes_nd(g)
    rng = np.random.default_rng(0)
    x, w = rng.integers(-4, 5, cg.input_shape) * 1.0, rng.integers(-4, 5, cg.filter_shape) * 1.0
    call = make_call("Conv3D", "tf", g, x, w, np.zeros(cg.output_shape), np.dtype("float64"))
    from engine import kernels
    got = kernels.conv3d(x, w[::-1], **{k: v for k, v in call.tf_args.items()
                                         if k not in ("input", "filter")})
    d = diagnose("Conv3D", call.tf_args, got, kernels.conv3d(**call.tf_args), "float32")
    assert d.id == "convolution_not_correlation" and "reversed in depth only" in d.text


def test_a_3d_failure_reproduces_on_a_canvas_of_the_3d_blocks(tmp_path):
    report = _verify("conv3d_flip_depth", "Conv3D", cases=60)
    written = write_repro(report, str(tmp_path))
    canvas = next(p for p in written if p.endswith(".gbc.json"))
    with open(canvas, encoding="utf-8") as f:
        nodes = json.load(f)["nodes"]
    assert any(n["type"] == "Conv3D" for n in nodes)
    check = _gb("check", canvas)
    assert check.returncode == 0, check.stderr


def test_the_cli_reports_the_3d_ops(tmp_path):
    out = tmp_path / "r.json"
    p = _gb("verify", "verify_conv3d_targets:conv3d_flip_depth", "--op", "Conv3D",
            "--convention", "tf", "--cases", "80", "--json", str(out))
    assert p.returncode == 1, p.stderr
    assert "diagnosis: convolution_not_correlation" in p.stdout
    data = json.loads(out.read_text())
    assert data["op"] == "Conv3D" and data["minimal"]["case"]["data_format"] in ("NDHWC",
                                                                                 "NCDHW")
    ok = _gb("verify", "verify_conv3d_targets:conv_transpose3d", "--op", "conv_transpose3d",
             "--convention", "torch", "--cases", "40")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = _gb("verify", "verify_conv3d_targets:conv3d", "--op", "Conv4D")
    assert bad.returncode == 2 and "Conv3DBackpropInputV2" in bad.stderr


def test_the_cli_runs_a_cmd_target_on_a_3d_op(tmp_path):
    script = tmp_path / "conv3d_cmd.py"
    script.write_text(
        f"import sys\nimport numpy as np\nsys.path.insert(0, {TESTS!r})\n"
        "import verify_conv3d_targets as t\n"
        "with np.load(sys.argv[1], allow_pickle=False) as d:\n"
        "    kw = {k: (d[k] if d[k].dtype.kind == 'f' else d[k].tolist()) for k in d.files\n"
        "          if k not in ('op', 'convention', 'dtype')}\n"
        "kw = {k: (v.item() if isinstance(v, np.ndarray) and v.ndim == 0 else v)\n"
        "      for k, v in kw.items()}\n"
        "np.savez(sys.argv[2], output=t.Conv3DBackpropFilterV2(**kw))\n")
    p = _gb("verify", "--cmd", f"{sys.executable} {script}", "--op", "Conv3DBackpropFilterV2",
            "--convention", "tf", "--cases", "25")
    assert p.returncode == 0, p.stdout + p.stderr


def test_tensorflow_conv3d_sweeps_and_reports_named_groups(tmp_path):
    pytest.importorskip("tensorflow")
    out = tmp_path / "tf.json"
    p = _gb("verify", "tensorflow", "--op", "Conv3D", "--cases", "60", "--json", str(out))
    assert p.returncode in (0, 1), p.stdout + p.stderr
    data = json.loads(out.read_text())
    assert data["op"] == "Conv3D" and data["cases"] == 60
    for group in data["groups"]:  # each a verdict and a diagnosis (an id, or what is wrong)
        assert group["verdict"] and group["diagnosis"]["text"]
        assert group["minimal"]["case"]["data_format"] == "NDHWC"  # TF's CPU: channels last
        assert group["minimal"]["case"]["filter"]["shape"][3] == \
            group["minimal"]["case"]["input"]["shape"][4]  # groups=1 declared


@pytest.mark.parametrize("op", TF_3D)
def test_jax_computes_the_3d_ops_exactly(op):
    pytest.importorskip("jax")
    report = api.verify("jax", op, "tf", cases=30)
    assert report.ok, [m.diagnosis.text for m in report.minimal_failures]


def test_a_torch_3d_bug_is_named_and_its_reproduce_line_runs():
    report = _verify("conv3d_weight_depth_reversed", "conv3d_weight", "torch", cases=120)
    assert not report.ok
    m = min(report.minimal_failures, key=lambda m: m.size)
    assert m.diagnosis.id == "convolution_not_correlation", m.diagnosis.text
    kernel = m.failure.case.geometry.kernel  # at the minimal case, all of the filter's
    assert kernel[0] > 1 and ("reversed in depth only" in m.diagnosis.text  # reversal there
                              or kernel[1:] == (1, 1))
    command = report.reproduce(m)
    p = subprocess.run(command, shell=True, capture_output=True, text=True, check=False,
                       timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert p.returncode == 0, p.stderr
    got = np.asarray(json.loads(p.stdout))
    assert got.ndim == 5 and got.shape == m.failure.got.shape  # OIDHW, as the sweep got it
