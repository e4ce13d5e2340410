"""The Conv3D family exported (issue 33 item 5): the NumPy, TensorFlow and JAX scripts of a 3-D
canvas run and equal the kernels within the documented tolerance of the float64 definition
(``RTOL[dtype] * sum |products|``, :mod:`tests.conv3d_reference`), in both layouts, with
strides, dilations and a grouped filter (which TensorFlow's CPU Conv3D kernels refuse: the
script works around them, with oneDNN and without); the PyTorch script (torch is not
installable here) is checked by its text and run by a stand-in torch (``tests/fake_torch``:
PyTorch's documented semantics of the scripts' few calls, computed with JAX), which checks the
script's glue, not PyTorch; ``gradblocks crosscheck`` of a 3-D canvas file agrees. A framework
that is not importable is skipped."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blocks.conv import relayout_attrs
from engine import kernels
from engine.api import new_canvas
from engine.base.dtypes import DTYPES, RTOL
from engine.export.crosscheck import compare, tolerance
from engine.export.frameworks import sources_path
from engine.graph.canvas_file import load_canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor
from engine.graph.result_names import result_keys
from engine.shapes.conv import conv3d_geometry
from tests import conv3d_reference as ref
from tests.crosscheck_support import conventions_canvas, crosscheck_cli, framework_python, report
from tests.export_support import (
    REPO,
    assert_bitwise_equal,
    executor_outputs,
    npz_safe,
    run_script,
)

LAYOUTS = ("NDHWC", "NCDHW")
#: Each case channels last: input and filter shapes, dtype, the attributes (strides and
#: dilations NDHWC), and whether the gradients' size vectors come from ShapeOf blocks.
#: TensorFlow 2.21's CPU Conv3D kernels refuse groups in every build; dilations and NCDHW in
#: float64 (and in every dtype without oneDNN, TF_ENABLE_ONEDNN_OPTS=0).
CASES = {
    # every refusal at once, in float64 (refused by every build): groups 2, dilations,
    # strides, SAME with an odd padding
    "a": ([2, 5, 6, 7, 4], [2, 3, 2, 2, 6], "float64",
          {"strides": [1, 2, 1, 2, 1], "dilations": [1, 1, 2, 2, 1], "padding": "SAME"}, True),
    # what the raw ops take as they are (channels last): VALID, one group, no dilation
    "b": ([1, 4, 5, 6, 3], [2, 2, 3, 3, 4], "float32",
          {"strides": [1, 1, 2, 1, 1], "dilations": [1, 1, 1, 1, 1], "padding": "VALID"}, False),
    # dilations in bfloat16 (the spread filter in that dtype), stride 1, SAME
    "c": ([1, 5, 4, 6, 2], [2, 2, 3, 2, 3], "bfloat16",
          {"strides": [1, 1, 1, 1, 1], "dilations": [1, 2, 1, 2, 1], "padding": "SAME"}, True),
}
TYPES = {"y": "Conv3D", "dw": "Conv3DBackpropFilterV2", "dx": "Conv3DBackpropInputV2"}


def _to_first(shape: list[int]) -> list[int]:
    return [shape[0], shape[-1], *shape[1:-1]]


def _attrs(case: str, fmt: str) -> dict:
    attrs = {**CASES[case][3], "data_format": "NDHWC"}
    return {**attrs, **relayout_attrs(attrs, fmt), "data_format": fmt}


def _add_case(c, case: str, fmt: str, seed: int) -> None:
    """Case ``case`` in layout ``fmt`` as blocks ``{case}_x``, ``{case}_w``, ``{case}_dy``
    (random, out_backprop of the forward's shape) and the three ops ``{case}_y``,
    ``{case}_dw``, ``{case}_dx``."""
    xshape, wshape, dtype, _, from_shapes = CASES[case]
    attrs = _attrs(case, fmt)
    xshape = xshape if fmt == "NDHWC" else _to_first(xshape)
    yshape = list(conv3d_geometry(xshape, wshape, attrs["strides"], attrs["padding"], fmt,
                                  attrs["dilations"]).output_shape)
    for k, (name, shape) in enumerate([("x", xshape), ("w", wshape), ("dy", yshape)]):
        c.add("Tensor", f"{case}_{name}", shape=shape, dtype=dtype, fill="random_normal",
              seed=seed + k)
    for node, type_id in TYPES.items():
        c.add(type_id, f"{case}_{node}", **attrs)
    sizes = {"xs": xshape, "ws": wshape}
    for name, shape in sizes.items():
        if from_shapes:
            c.add("ShapeOf", f"{case}_{name}")
            c.connect(f"{case}_{name[0]}", f"{case}_{name}.input")
        else:
            c.add("IntVector", f"{case}_{name}", values=shape)
    wires = [("x", "y.input"), ("w", "y.filter"), ("x", "dw.input"), ("ws", "dw.filter_sizes"),
             ("dy", "dw.out_backprop"), ("xs", "dx.input_sizes"), ("w", "dx.filter"),
             ("dy", "dx.out_backprop")]
    for src, dst in wires:
        c.connect(f"{case}_{src}", f"{case}_{dst}")


def _canvas(path: Path, fmt: str) -> Path:
    c = new_canvas()
    for k, case in enumerate(CASES):
        _add_case(c, case, fmt, 10 * k + 1)
    c.save(path)
    return path


def _definition(case: str, fmt: str, kind: str, got: dict) -> tuple[np.ndarray, np.ndarray]:
    """The float64 definition of ``{case}_{kind}`` and its sum of |products|, in ``fmt``, from
    the script's own source values."""
    attrs = _attrs(case, fmt)
    last = (lambda a: a) if fmt == "NDHWC" else (lambda a: np.moveaxis(a, 1, -1))
    back = (lambda a: a) if fmt == "NDHWC" else (lambda a: np.moveaxis(a, -1, 1))
    x, dy = last(got[f"{case}_x"]), last(got[f"{case}_dy"])
    w = got[f"{case}_w"]
    spatial = slice(1, 4) if fmt == "NDHWC" else slice(2, 5)
    g = ref.geo(x.shape, w.shape, attrs["strides"][spatial], attrs["dilations"][spatial],
                attrs["padding"])
    if kind == "y":
        value, bound = ref.forward(x, w, g)
        return back(value), back(bound)
    if kind == "dw":
        return ref.backprop_filter(x, dy, g)
    value, bound = ref.backprop_input(w, dy, g)
    return back(value), back(bound)


def _kernel(case: str, fmt: str, kind: str, got: dict) -> np.ndarray:
    """The kernel's result on the script's sources (in the case's dtype: an .npz stores
    bfloat16 as float32), as an .npz stores it."""
    attrs, dtype = _attrs(case, fmt), DTYPES[CASES[case][2]]
    x, w, dy = (got[f"{case}_{p}"].astype(dtype) for p in ("x", "w", "dy"))
    if kind == "y":
        out = kernels.conv3d(x, w, **attrs)
    elif kind == "dw":
        out = kernels.conv3d_backprop_filter(x, list(w.shape), dy, **attrs)
    else:
        out = kernels.conv3d_backprop_input(list(x.shape), w, dy, **attrs)
    return npz_safe(out)


def _export(canvas: Path, script: Path, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "export", str(canvas), "-o",
                           str(script), *args], check=False, capture_output=True, text=True,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return script.read_text(encoding="utf-8")


def _run_framework_script(python: str, script: Path, out: Path,
                          **env_vars: str) -> dict[str, np.ndarray]:
    """``python script.py out.npz`` without GradBlocks on the path, as crosscheck runs it."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env_vars}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([python, str(script), str(out)], capture_output=True, text=True,
                          cwd=script.parent, env=env, check=False, timeout=900)
    assert proc.returncode == 0, proc.stderr
    with np.load(out, allow_pickle=False) as f:
        return {key: f[key] for key in f.files}


def _assert_the_kernels_and_the_definition(got: dict[str, np.ndarray], fmt: str) -> None:
    """Every conv result of ``got`` (a script's) and the kernels' on the same sources: dtype and
    shape the kernels', each within ``RTOL[dtype] * sum |products|`` of the float64
    definition."""
    for case, (_, _, dtype, _, _) in CASES.items():
        for kind in TYPES:
            key = f"{case}_{kind}"
            mine = _kernel(case, fmt, kind, got)
            want, bound = _definition(case, fmt, kind, got)
            assert (got[key].dtype, got[key].shape) == (mine.dtype, mine.shape), key
            assert ref.within(mine, want, bound, RTOL[dtype]) <= 0, key
            assert ref.within(got[key], want, bound, RTOL[dtype]) <= 0, key


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_the_numpy_script_of_a_3d_canvas_is_the_run_bit_for_bit(tmp_path, fmt):
    canvas = _canvas(tmp_path / "c3.gbc.json", fmt)
    text = _export(canvas, tmp_path / "by_numpy.py")
    for name in ("conv3d", "conv3d_backprop_filter", "conv3d_backprop_input"):
        assert f"kernels.{name}(" in text
    run_script(tmp_path / "by_numpy.py", tmp_path / "out.npz")
    plan = compile_canvas(load_canvas(canvas), tmp_path)
    assert_bitwise_equal(tmp_path / "out.npz", executor_outputs(plan))
    with np.load(tmp_path / "out.npz") as f:
        _assert_the_kernels_and_the_definition({k: f[k] for k in f.files}, fmt)


#: What each framework script calls for the three ops.
CALLS = {"tensorflow": ("tf.raw_ops.Conv3D,", "tf.raw_ops.Conv3DBackpropFilterV2",
                        "tf.raw_ops.Conv3DBackpropInputV2"),
         "jax": ("jax.lax.conv_general_dilated", '"DHWIO"', "jax.vjp")}


@pytest.mark.parametrize("fmt", LAYOUTS)
@pytest.mark.parametrize("name", ["tensorflow", "jax"])
def test_the_framework_script_of_a_3d_canvas_equals_the_kernels(tmp_path, name, fmt):
    python = framework_python(name)
    if python is None:
        pytest.skip(f"{name} is not installed")
    canvas = _canvas(tmp_path / "c3.gbc.json", fmt)
    script = tmp_path / f"by_{name}.py"
    text = _export(canvas, script, "--to", name)
    for call in CALLS[name]:
        assert call in text
    assert sources_path(script).is_file()
    got = _run_framework_script(python, script, tmp_path / "out.npz")
    _assert_the_kernels_and_the_definition(got, fmt)


def test_the_tensorflow_script_of_a_3d_canvas_is_right_without_onednn_too(tmp_path):
    """Without oneDNN (TF_ENABLE_ONEDNN_OPTS=0) TensorFlow's CPU Conv3D kernels refuse
    dilations and NCDHW in every dtype, not only float64: the script still runs and agrees."""
    python = framework_python("tensorflow")
    if python is None:
        pytest.skip("tensorflow is not installed")
    canvas = _canvas(tmp_path / "c3.gbc.json", "NCDHW")
    script = tmp_path / "by_tf.py"
    _export(canvas, script, "--to", "tensorflow")
    got = _run_framework_script(python, script, tmp_path / "out.npz",
                                TF_ENABLE_ONEDNN_OPTS="0")
    _assert_the_kernels_and_the_definition(got, "NCDHW")


def _geometry_literals(text: str) -> dict[str, dict]:
    """The geometry dict each conv step of a framework script passes: ``{variable: g}``."""
    found = {}
    for node in ast.walk(ast.parse(text)):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id in ("_forward", "_backprop_filter", "_backprop_input")):
            target = node.targets[0]
            assert isinstance(target, ast.Name)
            found[target.id] = {"helper": node.value.func.id,
                                **ast.literal_eval(node.value.args[-1])}
    return found


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_the_pytorch_script_of_a_3d_canvas_calls_conv3d_with_the_geometry(tmp_path, fmt):
    """torch is not installable here: the script's text. Its helpers call F.conv3d on
    channels-first tensors with OIDHW weights and take the gradients from autograd; each of
    the three ops passes its geometry (layout, spatial strides, dilations and TF's SAME as
    explicit pads, groups) as a literal."""
    canvas = _canvas(tmp_path / "c3.gbc.json", fmt)
    text = _export(canvas, tmp_path / "by_torch.py", "--to", "pytorch")
    for call in ("F.conv3d", "torch.autograd.grad", "w.permute(r + 1, r, *range(r))",
                 "F.pad(x, tuple(p for pair in reversed(g[\"pads\"]) for p in pair))"):
        assert call in text
    steps = _geometry_literals(text)
    assert sorted(g["helper"] for g in steps.values()) == sorted(
        ["_forward", "_backprop_filter", "_backprop_input"] * len(CASES))
    a = [g for g in steps.values() if g["groups"] == 2]
    assert len(a) == 3
    for g in a:
        assert g["data_format"] == fmt
        assert (g["strides"], g["dilations"]) == ([2, 1, 2], [1, 2, 2])
        # SAME: planes 5 -> 3 (1 pad after), rows 6 -> 6 with a 5-tap window (2, 2),
        # cols 7 -> 4 with a 3-tap window (1, 1)
        assert g["pads"] == [[0, 1], [2, 2], [1, 1]]
        assert g["filter_shape"] == [2, 3, 2, 2, 6]
        assert g["input_shape"] == ([2, 5, 6, 7, 4] if fmt == "NDHWC" else [2, 4, 5, 6, 7])


#: A stand-in for torch (tests/fake_torch/torch: PyTorch's documented semantics of the calls
#: the scripts make, computed with JAX): runs a PyTorch script's glue where torch is absent.
FAKE_TORCH = REPO / "tests" / "fake_torch"


def _run_with_fake_torch(script: Path, out: Path) -> dict[str, np.ndarray]:
    pytest.importorskip("jax")  # the fake computes with JAX
    env = {**os.environ, "PYTHONPATH": str(FAKE_TORCH)}
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True,
                          text=True, cwd=script.parent, env=env, check=False, timeout=900)
    assert proc.returncode == 0, proc.stderr
    with np.load(out, allow_pickle=False) as f:
        return {key: f[key] for key in f.files}


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_the_pytorch_script_of_a_3d_canvas_run_with_a_stand_in_torch_equals_the_kernels(
        tmp_path, fmt):
    """The PyTorch script's permutes, OIDHW weights, F.pad order and groups, run by the
    stand-in torch (not PyTorch's kernels): within RTOL of the float64 definition."""
    canvas = _canvas(tmp_path / "c3.gbc.json", fmt)
    script = tmp_path / "by_torch.py"
    _export(canvas, script, "--to", "pytorch")
    _assert_the_kernels_and_the_definition(_run_with_fake_torch(script, tmp_path / "o.npz"),
                                           fmt)


def test_the_pytorch_script_of_the_2d_conventions_canvas_with_a_stand_in_torch_agrees(
        tmp_path):
    """The 2-D helpers, now shared with the 3-D ops, still get every 2-D convention right
    (NCHW, EXPLICIT pads, groups, depthwise, the check blocks), run by the stand-in torch and
    compared as crosscheck compares."""
    canvas = conventions_canvas(tmp_path / "conv.gbc.json")
    script = tmp_path / "by_torch.py"
    _export(canvas, script, "--to", "pytorch")
    got = _run_with_fake_torch(script, tmp_path / "o.npz")
    plan = compile_canvas(load_canvas(canvas), tmp_path)
    values = Executor().run(plan).outputs
    keys = result_keys(plan.steps, plan.labels)
    assert sorted(got) == sorted(keys.values())
    for ref_, key in keys.items():
        tol = tolerance(plan, values, ref_, got[key])
        *_, agree, error = compare(values[ref_], got[key], tol)
        assert agree and error is None, key


def test_crosscheck_of_a_3d_canvas_file_agrees(tmp_path):
    """``gradblocks crosscheck`` with every framework: TensorFlow and JAX run (when installed)
    and every row agrees; PyTorch, not installed here, is skipped."""
    canvas = _canvas(tmp_path / "c3.gbc.json", "NCDHW")
    proc = crosscheck_cli(canvas)
    data = report(proc)
    ran = [n for n in ("tensorflow", "pytorch", "jax") if framework_python(n)]
    if not ran:
        pytest.skip("no framework is installed")
    assert {n for n, s in data["frameworks"].items() if s == "ran"} == set(ran), proc.stderr
    assert all(s == "ran" or s.startswith("skipped") for s in data["frameworks"].values())
    rows = [r for r in data["rows"] if r["framework"] in ran]
    assert len(rows) == len(ran) * len(CASES) * 8  # x, w, dy, xs, ws, y, dw, dx
    assert [r for r in rows if not r["agree"]] == []
    assert proc.returncode == 0
