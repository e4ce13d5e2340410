"""Frameworks as verify targets (engine.verify.frameworks): the registry's support and refusals
without any framework, each adapter against engine.kernels on hand-made cases, and a short
sweep of each through the CLI (skipped where the framework is not installed; CI has none)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from engine import kernels
from engine.base.errors import InvalidArgumentError
from engine.cli.commands import main
from engine.verify.frameworks.registry import FRAMEWORKS, combined_support, resolve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gb(*args):
    env = {**os.environ, "PYTHONPATH": ROOT, "QT_QPA_PLATFORM": "offscreen",
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                          check=False, text=True, env=env, timeout=600)


# --- the registry (no framework needed) ---

def test_a_framework_layout_narrows_the_users_support_and_numbers_of_both_apply():
    ort = FRAMEWORKS["onnxruntime"]
    assert combined_support(ort, "Conv2D", "strides<=2 layouts=NHWC,NCHW").split() == [
        "strides<=2", "layouts=NCHW"]
    tf = FRAMEWORKS["tensorflow"]
    assert sorted(combined_support(tf, "Conv2DBackpropInput", "kernel<=3").split()) == [
        "dilations=1", "groups=1", "kernel<=3", "layouts=NHWC"]
    assert combined_support(tf, "Conv2D", None) == "layouts=NHWC"


def test_a_user_support_the_framework_excludes_is_one_error_naming_both():
    with pytest.raises(InvalidArgumentError, match=r"--support layouts=NHWC: onnxruntime "
                                                   r"supports layouts=NCHW only"):
        combined_support(FRAMEWORKS["onnxruntime"], "Conv2D", "layouts=NHWC")


def test_an_op_the_framework_lacks_and_another_convention_are_refused():
    with pytest.raises(InvalidArgumentError, match="onnxruntime has no Conv2DBackpropFilter "
                                                   r"\(ONNX Conv and ConvTranspose"):
        resolve("onnxruntime", "Conv2DBackpropFilter", "tf", None)
    with pytest.raises(InvalidArgumentError, match="jax is verified under the tf convention"):
        resolve("jax", "conv2d", "torch", None)


def test_a_missing_framework_is_one_line_and_exit_2(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorflow" else real(name, *a))
    assert main(["verify", "tensorflow", "--op", "Conv2D"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [("gradblocks: verify: tensorflow is not installed (pip install "
                   "tensorflow-cpu)")]


def test_the_cli_refuses_a_missing_op_and_a_missing_convention_in_one_line():
    p = _gb("verify", "onnx.reference", "--op", "DepthwiseConv2dNativeBackpropFilter")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        ("gradblocks: verify: onnx.reference has no DepthwiseConv2dNativeBackpropFilter (ONNX "
        "Conv and ConvTranspose: Conv2D, Conv2DBackpropInput, DepthwiseConv2dNative, "
        "DepthwiseConv2dNativeBackpropInput)")]
    p = _gb("verify", "verify_zoo:loops_conv2d", "--op", "Conv2D")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        ("gradblocks: verify: --convention is required (tf or torch) unless TARGET is a "
        "framework")]


# --- the adapters against engine.kernels ---

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 7, 6, 4))
W = RNG.standard_normal((3, 2, 2, 6))  # groups 2
W1 = RNG.standard_normal((3, 2, 4, 6))  # groups 1
WD = RNG.standard_normal((3, 2, 4, 2))  # depthwise, multiplier 2
ATTRS = [{"strides": [1, 2, 1, 1], "padding": "SAME", "dilations": [1, 1, 2, 1]},
         {"strides": [1, 2, 3, 1], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 2, 0, 1, 0, 0],
              "dilations": [1, 1, 1, 1]},
         {"strides": [1, 3, 2, 1], "padding": "VALID", "dilations": [1, 2, 1, 1]}]


def _nchw(attrs):
    out = {k: ([v[0], v[3], v[1], v[2]] if k in ("strides", "dilations") else v)
           for k, v in attrs.items()}
    if "explicit_paddings" in attrs:
        p = attrs["explicit_paddings"]
        out["explicit_paddings"] = [0, 0, 0, 0, *p[2:6]]
    return out | {"data_format": "NCHW"}


def _calls(depthwise: bool, attrs: dict, w=W):
    """(op, NHWC kwargs, the reference) of the forward op and its input gradient."""
    w = WD if depthwise else w
    fwd = kernels.depthwise_conv2d_native if depthwise else kernels.conv2d
    y = fwd(input=X, filter=w, **attrs)
    dy = RNG.standard_normal(y.shape)
    bwd = kernels.depthwise_conv2d_native_backprop_input if depthwise else \
        kernels.conv2d_backprop_input
    name = "DepthwiseConv2dNative" if depthwise else "Conv2D"
    return [(name, {"input": X, "filter": w}, y),
            (name + "BackpropInput", {"input_sizes": list(X.shape), "filter": w,
                                      "out_backprop": dy},
             bwd(input_sizes=list(X.shape), filter=w, out_backprop=dy, **attrs))]


# onnx.reference 1.23's grouped ConvTranspose slices the filter by output channels, not input
# channels (op_conv_transpose.py: group_W = W[group_id * num_output_channels // group ...]): a
# bug of the framework, so its grouped input gradients are left to the sweep
@pytest.mark.parametrize(("framework", "w"), [("onnx.reference", W1), ("onnxruntime", W1),
                                              ("onnxruntime", W)])
@pytest.mark.parametrize("depthwise", [False, True])
@pytest.mark.parametrize("attrs", ATTRS)
def test_the_onnx_adapters_give_the_kernels_result(framework, w, depthwise, attrs):
    pytest.importorskip(FRAMEWORKS[framework].module)
    module = importlib.import_module(f"engine.verify.frameworks.{FRAMEWORKS[framework].adapter}")
    calls = _calls(depthwise, attrs, w)
    if depthwise and framework == "onnx.reference":
        calls = calls[:1]  # the grouped ConvTranspose (above)
    # onnxruntime has no float64 Conv (NOT_IMPLEMENTED) and no dilated SAME Conv
    dtype, tol = (np.float32, 1e-4) if framework == "onnxruntime" else (np.float64, 1e-10)
    for op, kw, want in calls:
        nchw = {k: (v.transpose(0, 3, 1, 2) if k in ("input", "out_backprop") else v)
                for k, v in kw.items()}
        nchw = {k: (v.astype(dtype) if isinstance(v, np.ndarray) else v)
                for k, v in nchw.items()}
        if "input_sizes" in kw:
            n, h, wd, c = kw["input_sizes"]
            nchw["input_sizes"] = [n, c, h, wd]
        if framework == "onnxruntime" and op in ("Conv2D", "DepthwiseConv2dNative") and \
                attrs["padding"] == "SAME" and max(attrs["dilations"]) > 1:
            with pytest.raises(NotImplementedError, match="Dilation not supported for "
                                                          "AutoPadType::SAME_UPPER"):
                getattr(module, op)(**nchw, **_nchw(attrs))
            continue
        got = getattr(module, op)(**nchw, **_nchw(attrs))
        np.testing.assert_allclose(got, want.transpose(0, 3, 1, 2), rtol=tol, atol=tol)
        with pytest.raises(NotImplementedError, match="NCHW"):
            getattr(module, op)(**kw, **attrs, data_format="NHWC")


@pytest.mark.parametrize("attrs", ATTRS)
def test_the_jax_adapter_gives_the_kernels_result_for_all_six_ops(attrs):
    pytest.importorskip("jax")
    from engine.verify.frameworks import jax_ops

    for depthwise in (False, True):
        w = WD if depthwise else W
        for op, kw, want in _calls(depthwise, attrs):
            np.testing.assert_allclose(getattr(jax_ops, op)(**kw, **attrs, data_format="NHWC"),
                                       want, rtol=1e-10, atol=1e-10)
        dy = RNG.standard_normal(_calls(depthwise, attrs)[0][2].shape)
        name = ("DepthwiseConv2dNative" if depthwise else "Conv2D") + "BackpropFilter"
        ref = (kernels.depthwise_conv2d_native_backprop_filter if depthwise else
               kernels.conv2d_backprop_filter)
        np.testing.assert_allclose(
            getattr(jax_ops, name)(input=X, filter_sizes=list(w.shape), out_backprop=dy,
                                   **attrs, data_format="NHWC"),
            ref(input=X, filter_sizes=list(w.shape), out_backprop=dy, **attrs),
            rtol=1e-10, atol=1e-10)


def test_the_tensorflow_adapter_turns_tfs_own_refusals_into_not_implemented():
    """TF's Eigen CPU kernels refuse NCHW and unequal depthwise strides; where TF runs oneDNN
    (its default on AVX-512 VNNI CPUs) both are computed, and the adapter returns TF's
    result."""
    tf = pytest.importorskip("tensorflow")
    from engine.verify.frameworks import tensorflow_ops as tfo

    x, w = np.ones((1, 3, 5, 5), np.float32), np.ones((2, 2, 3, 1), np.float32)
    nchw = {"strides": [1, 1, 1, 1], "padding": "VALID", "data_format": "NCHW"}
    try:
        tf.raw_ops.Conv2D(input=x, filter=w, **nchw)
    except tf.errors.OpError:
        with pytest.raises(NotImplementedError, match="only supports the NHWC tensor format"):
            tfo.Conv2D(input=x, filter=w, **nchw)
    else:
        np.testing.assert_allclose(tfo.Conv2D(input=x, filter=w, **nchw),
                                   kernels.conv2d(x, w, **nchw), rtol=1e-6)
    unequal = {"input": x.transpose(0, 2, 3, 1), "filter": w, "strides": [1, 1, 2, 1],
               "padding": "VALID"}
    try:
        tf.raw_ops.DepthwiseConv2dNative(**unequal)
    except tf.errors.OpError:
        with pytest.raises(NotImplementedError, match="equal length strides"):
            tfo.DepthwiseConv2dNative(**unequal)
    else:  # oneDNN computes unequal strides too
        np.testing.assert_allclose(tfo.DepthwiseConv2dNative(**unequal),
                                   kernels.depthwise_conv2d_native(**unequal), rtol=1e-6)
    got = tfo.Conv2D(input=X.astype(np.float32), filter=W.astype(np.float32), **ATTRS[0])
    np.testing.assert_allclose(got, kernels.conv2d(input=X.astype(np.float32).astype(float),
                                                   filter=W.astype(np.float32).astype(float),
                                                   **ATTRS[0]), rtol=1e-4, atol=1e-4)


# --- a short sweep of each through the CLI ---

@pytest.mark.parametrize(("framework", "op", "must_pass"), [
    ("tensorflow", "Conv2D", False), ("jax", "Conv2DBackpropFilter", True),
    ("onnxruntime", "Conv2DBackpropInput", False), ("onnx.reference", "Conv2D", True)])
def test_a_framework_sweep_through_the_cli_reports(tmp_path, framework, op, must_pass):
    pytest.importorskip(FRAMEWORKS[framework].module)
    out = tmp_path / "r.json"
    p = _gb("verify", framework, "--op", op, "--cases", "40", "--json", str(out))
    assert p.returncode in ((0,) if must_pass else (0, 1)), p.stdout + p.stderr
    adapter = FRAMEWORKS[framework].adapter
    assert p.stdout.startswith(f"verify engine.verify.frameworks.{adapter}:{op} as tf {op} "
                               "(float32): 40 case(s)")
    data = json.loads(out.read_text())
    assert data["op"] == op and data["cases"] == 40 and data["ok"] is (p.returncode == 0)


def test_tensorflows_depthwise_trio_declares_equal_strides():
    """TF documents "Current implementation only supports equal length strides in the row and
    column dimensions" for its depthwise kernels: no such case is generated for them."""
    from engine.verify import cases
    from engine.verify.frameworks.registry import FRAMEWORKS, combined_support
    from engine.verify.support import parse_support

    tf = FRAMEWORKS["tensorflow"]
    for op in ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter",
               "DepthwiseConv2dNativeBackpropInput"):
        support = parse_support(combined_support(tf, op, None))
        drawn = list(cases.generate(op, "tf", ["float32"], 120, 0, support))
        assert drawn and all(c.geometry.strides[0] == c.geometry.strides[1] for c in drawn)
    support = parse_support(combined_support(tf, "Conv2D", None))
    assert any(c.geometry.strides[0] != c.geometry.strides[1]
               for c in cases.generate("Conv2D", "tf", ["float32"], 120, 0, support))
