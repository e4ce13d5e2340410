"""ONNX models GradBlocks did not write: the node tests of the installed onnx package (Conv and
ConvTranspose, 2-D), its PyTorch-converted conv tests and its 9 light model-zoo files.

The node-test models are generated from onnx's own case scripts (``onnx.backend.test.case.node``
``conv`` and ``convtranspose``) in a subprocess, written as onnx's ``cmd_tools generate-data``
writes them (``model.onnx``, ``test_data_set_0/input_*.pb``, ``output_*.pb``; onnx 1.23's
wheel does not ship ``data/node``); the PyTorch ones ship in ``data/pytorch-converted`` and
``data/pytorch-operator``. Every 2-D one is imported (weights that are graph inputs through
``--weights``), its canvas run, and ``forward`` (+ bias) compared with the stored expected
output; transposed convs' gradients are compared with their float64 definitions. Tolerance:
``RTOL`` float32 of :mod:`engine.base.dtypes` times each element's bound (the sum of
|products|, the same definition on absolute values).

Model zoo: every Conv layer imports (weights folded from ConstantOfShape) and plans (``--list``
level); a sample of layers (:data:`ZOO_SAMPLE`) runs and is compared with onnx's
ReferenceEvaluator on that Conv node (float64), the weights for it extracted by
``onnx.utils.Extractor`` (not by our folding). ``GRADBLOCKS_ZOO_FULL=1`` runs every layer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import engine
from engine.base.dtypes import RTOL
from engine.graph.layer_canvas import plan_layer, read_model, write_layer_canvas
from engine.io.models.onnx_reader import read_onnx
from tests.test_onnx_hostile import gb, one_error

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
TOL = RTOL["float32"]
#: What ``onnx.backend.test.cmd_tools generate-data`` writes, for the conv case scripts only.
GENERATE = """
import importlib, os, sys
from onnx import numpy_helper
import onnx.backend.test.case.node as node
for mod in ("conv", "convtranspose"):
    importlib.import_module("onnx.backend.test.case.node." + mod)
for case in node._NodeTestCases:
    d = os.path.join(sys.argv[1], case.name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    (inputs, outputs), = case.data_sets
    for kind, arrays, infos in (("input", inputs, case.model.graph.input),
                                ("output", outputs, case.model.graph.output)):
        for j, a in enumerate(arrays):
            with open(os.path.join(d, "test_data_set_0", f"{kind}_{j}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, infos[j].name).SerializeToString())
"""
CONV_NODE = ["test_basic_conv_with_padding", "test_basic_conv_without_padding",
             "test_conv_with_autopad_same", "test_conv_with_strides_and_asymmetric_padding",
             "test_conv_with_strides_no_padding", "test_conv_with_strides_padding"]
CONV_TORCH = ["test_Conv2d", "test_Conv2d_depthwise", "test_Conv2d_depthwise_padded",
              "test_Conv2d_depthwise_strided", "test_Conv2d_depthwise_with_multiplier",
              "test_Conv2d_dilated", "test_Conv2d_groups", "test_Conv2d_groups_thnn",
              "test_Conv2d_no_bias", "test_Conv2d_padding", "test_Conv2d_strided",
              "test_operator_conv"]
TRANSPOSE_NODE = ["test_convtranspose", "test_convtranspose_autopad_same",
                  "test_convtranspose_dilations", "test_convtranspose_group_2",
                  "test_convtranspose_group_2_image_3", "test_convtranspose_kernel_shape",
                  "test_convtranspose_output_shape", "test_convtranspose_pad",
                  "test_convtranspose_pads"]
TRANSPOSE_TORCH = ["test_ConvTranspose2d", "test_ConvTranspose2d_no_bias",
                   "test_operator_convtranspose"]
CONV_CASES, TRANSPOSE_CASES = CONV_NODE + CONV_TORCH, TRANSPOSE_NODE + TRANSPOSE_TORCH
ZOO = sorted(p.name for p in (DATA / "light").glob("light_*.onnx"))


@pytest.fixture(scope="module")
def node_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("node")
    subprocess.run([sys.executable, "-c", GENERATE, str(out)], check=True, timeout=120)
    return out


def case_dir(name: str, node_dir: Path) -> Path:
    if name.startswith("test_operator"):
        return DATA / "pytorch-operator" / name
    if name.startswith(("test_Conv", "test_ConvTranspose")):
        return DATA / "pytorch-converted" / name
    return node_dir / name


def pb(path: Path) -> np.ndarray:
    t = TensorProto()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


@dataclass
class Case:
    model: Path
    node: object  # the one NodeProto
    x: np.ndarray  # the input X
    runtime: dict[str, np.ndarray]  # the other graph inputs without initializer (weights)
    params: dict[str, np.ndarray]  # W and maybe B, wherever they come from
    expected: np.ndarray


def load_case(d: Path) -> Case:
    m = onnx.load(str(d / "model.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    fed = [i.name for i in m.graph.input if i.name not in inits]
    inputs = sorted((d / "test_data_set_0").glob("input_*.pb"))
    feeds = dict(zip(fed, map(pb, inputs), strict=True))
    (node,) = m.graph.node
    x = feeds.pop(node.input[0])
    params = {k: {**inits, **feeds}[k] for k in node.input[1:] if k}
    return Case(d / "model.onnx", node, x, feeds, params,
                pb(d / "test_data_set_0" / "output_0.pb"))


def import_case(case: Case, tmp: Path) -> tuple[object, object]:
    """The case's layer through the Python import (``--weights`` from its input .pb files),
    written with X as ``--input`` and run: (layer, results)."""
    weights = None
    if case.runtime:
        weights = tmp / "w.npz"
        np.savez(weights, **case.runtime)
    found = read_model(str(case.model), None, str(weights) if weights else None)
    assert not found.refused, found.refused
    (layer,) = found.layers
    np.save(tmp / "x.npy", case.x)
    write_layer_canvas(layer, str(tmp / "c.gbc.json"), input_path=str(tmp / "x.npy"))
    return layer, engine.load(tmp / "c.gbc.json").run()


def within(got, want, bound) -> float:
    """Max error over bound; fails when an element is off by more than TOL of its bound."""
    err = np.abs(np.asarray(got, np.float64) - want)
    assert got.shape == want.shape
    assert (err <= TOL * bound + 1e-30).all(), float((err / np.maximum(bound, 1e-30)).max())
    return float((err / np.maximum(bound, 1e-30)).max())


def conv_reference(node, x, params) -> tuple[np.ndarray, np.ndarray]:
    """ONNX Conv by onnx's reference evaluator in float64: (output, bound)."""
    names = [n for n in node.input if n]
    g = helper.make_graph([node], "ref", [helper.make_tensor_value_info(n, TensorProto.DOUBLE,
                                                                        None) for n in names],
                          [helper.make_tensor_value_info(node.output[0], TensorProto.DOUBLE,
                                                         None)])
    ref = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]))
    values = [x, *(params[n] for n in names[1:])]
    run = lambda f: ref.run(None, {n: f(np.asarray(v, np.float64))
                                   for n, v in zip(names, values, strict=True)})[0]
    return run(lambda a: a), run(np.abs)


# -- ConvTranspose by its definition (float64) ---------------------------------------------------

def transpose_geometry(node, x_hw, kernel) -> tuple[list[int], list[int]]:
    """(pad before, output size) per axis, from the ONNX ConvTranspose spec."""
    a = {at.name: helper.get_attribute_value(at) for at in node.attribute}
    s, d = a.get("strides", [1, 1]), a.get("dilations", [1, 1])
    op, pads = a.get("output_padding", [0, 0]), a.get("pads", [0, 0, 0, 0])
    auto = a.get("auto_pad", b"NOTSET").decode()
    begin, out = [], []
    for ax in range(2):
        reach = (kernel[ax] - 1) * d[ax] + 1
        full = s[ax] * (x_hw[ax] - 1) + op[ax] + reach
        if "output_shape" in a or auto.startswith("SAME"):
            o = a["output_shape"][ax] if "output_shape" in a else x_hw[ax] * s[ax]
            total = max(full - o, 0)  # ONNX Runtime: a negative total pads nothing
            begin.append(total // 2 if auto == "SAME_UPPER" else total - total // 2)
            out.append(o)
        elif auto == "VALID":
            begin.append(0)
            out.append(full)
        else:
            begin.append(pads[ax])
            out.append(full - pads[ax] - pads[ax + 2])
    return begin, out


def _taps(node, x_shape, w_shape, out_hw):
    """For each tap (i, j): the output rows and cols each input row and col feeds, and which
    are inside the output."""
    a = {at.name: helper.get_attribute_value(at) for at in node.attribute}
    s, d = a.get("strides", [1, 1]), a.get("dilations", [1, 1])
    begin, _ = transpose_geometry(node, x_shape[2:], w_shape[2:])
    for i in range(w_shape[2]):
        for j in range(w_shape[3]):
            r = np.arange(x_shape[2]) * s[0] + i * d[0] - begin[0]
            c = np.arange(x_shape[3]) * s[1] + j * d[1] - begin[1]
            rk, ck = (r >= 0) & (r < out_hw[0]), (c >= 0) & (c < out_hw[1])
            yield i, j, r[rk], c[ck], rk, ck


def transpose_forward(node, x, w, group: int) -> np.ndarray:
    """Y[n, g*Mg + m, h*s + i*d - begin, ...] += X[n, c, h, ...] * W[c, m, i, j] (c in group g)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    _, out_hw = transpose_geometry(node, x.shape[2:], w.shape[2:])
    cg, mg = x.shape[1] // group, w.shape[1]
    y = np.zeros((x.shape[0], mg * group, *out_hw))
    for i, j, r, c, rk, ck in _taps(node, x.shape, w.shape, out_hw):
        for g in range(group):
            part = np.einsum("nchw,cm->nmhw", x[:, g * cg:(g + 1) * cg][:, :, rk][:, :, :, ck],
                             w[g * cg:(g + 1) * cg, :, i, j])
            y[:, g * mg:(g + 1) * mg, r[:, None], c[None, :]] += part
    return y


def transpose_gradients(node, x, w, dy, group: int) -> tuple[np.ndarray, np.ndarray]:
    """d<Y, dY>/dX and d<Y, dY>/dW of :func:`transpose_forward`, written from the same sum."""
    x, w, dy = (np.asarray(v, np.float64) for v in (x, w, dy))
    cg, mg = x.shape[1] // group, w.shape[1]
    dx, dw = np.zeros_like(x), np.zeros_like(w)
    for i, j, r, c, rk, ck in _taps(node, x.shape, w.shape, dy.shape[2:]):
        rows, cols = np.nonzero(rk)[0], np.nonzero(ck)[0]
        for g in range(group):
            cs, ms = slice(g * cg, (g + 1) * cg), slice(g * mg, (g + 1) * mg)
            tap = dy[:, ms][:, :, r[:, None], c[None, :]]  # [n, m, rows, cols]
            dx[:, cs, rows[:, None], cols[None, :]] += np.einsum("nmhw,cm->nchw", tap,
                                                                 w[cs, :, i, j])
            dw[cs, :, i, j] += np.einsum("nchw,nmhw->cm",
                                         x[:, cs][:, :, rows[:, None], cols[None, :]], tap)
    return dx, dw


# -- the node tests ------------------------------------------------------------------------------

def test_the_case_lists_are_every_2d_conv_test_onnx_ships(node_dir):
    convs = sorted(p.name for p in node_dir.iterdir() if not p.name.startswith(
        "test_convtranspose"))
    assert convs == sorted(CONV_NODE)
    assert sorted(p.name for p in node_dir.glob("test_convtranspose*")) == sorted(
        [*TRANSPOSE_NODE, "test_convtranspose_1d", "test_convtranspose_3d"])
    torch = sorted(p.name for p in (DATA / "pytorch-converted").glob("test_Conv*2d*"))
    assert torch == sorted(n for n in CONV_TORCH + TRANSPOSE_TORCH if "operator" not in n)
    assert (len(CONV_CASES), len(TRANSPOSE_CASES)) == (18, 12)


@pytest.mark.parametrize("name", CONV_CASES)
def test_conv_node_test_imports_and_matches_its_expected_output(node_dir, tmp_path, name):
    case = load_case(case_dir(name, node_dir))
    assert bool(case.runtime) == (name in CONV_NODE)  # the node tests feed W as an input
    layer, r = import_case(case, tmp_path)
    y = np.asarray(r["forward"], np.float64)
    if layer.bias is not None:
        y = y + layer.bias.reshape(1, -1, 1, 1)
    ref, bound = conv_reference(case.node, case.x, case.params)
    print(f"{name}: {layer.op} {layer.padding_text()}: max error / bound "
          f"{within(y, case.expected.astype(np.float64), bound):.2e}")
    within(y, ref, bound)


@pytest.mark.parametrize("name", CONV_NODE)
def test_weights_fed_at_run_time_name_the_option_and_the_key(node_dir, name):
    found = read_onnx(str(case_dir(name, node_dir) / "model.onnx"))
    assert found.refused == {"y": "layer 'y': its weights 'W' are a runtime input of the graph "
                                  "(no initializer, nothing constant computes them): give them "
                                  "with --weights FILE.npz, key 'W' (one array per graph input, "
                                  "keyed by its name)"}


@pytest.mark.parametrize("name", TRANSPOSE_CASES)
def test_convtranspose_imports_matches_and_its_gradients_are_the_definitions(
        node_dir, tmp_path, name):
    case = load_case(case_dir(name, node_dir))
    layer, r = import_case(case, tmp_path)
    nodes = {n["id"]: n["type"] for n in json.loads((tmp_path / "c.gbc.json").read_text())[
        "nodes"]}
    assert (nodes["forward"], nodes["grad_input"], nodes["grad_filter"]) == (
        "Conv2DBackpropInput", "Conv2D", "Conv2DBackpropFilter")
    w, group = case.params[case.node.input[1]], layer.groups
    y = np.asarray(r["forward"], np.float64)
    if layer.bias is not None:
        y = y + layer.bias.reshape(1, -1, 1, 1)
    bound = transpose_forward(case.node, np.abs(case.x), np.abs(w), group)
    if layer.bias is not None:
        bound = bound + np.abs(layer.bias).reshape(1, -1, 1, 1)
    err = within(y, case.expected.astype(np.float64), bound)
    within(y - (layer.bias.reshape(1, -1, 1, 1) if layer.bias is not None else 0),
           transpose_forward(case.node, case.x, w, group), bound)
    # the filter in Conv2DBackpropInput's layout [kh, kw, out / groups, in]
    np.testing.assert_array_equal(r["filter"], w.transpose(2, 3, 1, 0))
    dy = np.asarray(r["out_backprop"])
    dx, dw = transpose_gradients(case.node, case.x, w, dy, group)
    bx, bw = transpose_gradients(case.node, np.abs(case.x), np.abs(w), np.abs(dy), group)
    within(r["grad_input"], dx, bx)
    within(np.asarray(r["grad_filter"]).transpose(3, 2, 0, 1), dw, bw)
    print(f"{name}: {layer.padding_text()} output_padding {layer.output_padding}: max error / "
          f"bound {err:.2e}")


def transpose_model(path: Path, x_shape, w: np.ndarray, **attrs) -> Path:
    node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], name="t", **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                                      list(x_shape))],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                          initializer=[numpy_helper.from_array(w, "W")])
    path.write_bytes(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


@pytest.mark.parametrize("auto_pad, out", [("SAME_UPPER", 8), ("NOTSET", 8), ("SAME_LOWER", 6),
                                           ("NOTSET", 5), ("SAME_UPPER", 5)])
def test_convtranspose_output_shape_splits_the_padding_as_onnx_runtime_does(
        tmp_path, auto_pad, out):
    """X 3x3, kernel 3, stride 2: 7 rows reach; an output_shape of 5 or 6 crops (the odd row
    at the start, at the end for SAME_UPPER), of 8 adds a zero row at the end (ONNX Runtime
    1.32 gives the same numbers for all five)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    w = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    path = transpose_model(tmp_path / "m.onnx", x.shape, w, strides=[2, 2],
                           output_shape=[out, out], auto_pad=auto_pad, group=2)
    case = Case(path, onnx.load(str(path)).graph.node[0], x, {}, {"W": w}, np.empty(0))
    _layer, r = import_case(case, tmp_path)
    assert r["forward"].shape == (2, 2, out, out)
    bound = transpose_forward(case.node, np.abs(x), np.abs(w), 2)
    within(r["forward"], transpose_forward(case.node, x, w, 2), bound)


def test_same_with_a_kernel_shorter_than_the_stride_is_refused(tmp_path):
    w = np.ones((1, 1, 1, 3), np.float32)
    path = transpose_model(tmp_path / "m.onnx", (1, 1, 4, 5), w, strides=[3, 1],
                           auto_pad="SAME_LOWER")
    assert read_onnx(str(path)).refused["t"] == (
        "layer 't': auto_pad SAME_LOWER with a kernel reach of 1 rows plus output_padding 0, "
        "less than stride 3: the ONNX spec (output = input x stride) and ONNX Runtime (no "
        "padding) disagree; re-export the model with explicit pads or output_shape")


def test_cli_conv_with_weights_file_and_without(node_dir, tmp_path):
    case = load_case(case_dir("test_conv_with_autopad_same", node_dir))
    np.savez(tmp_path / "w.npz", **case.runtime)
    np.save(tmp_path / "x.npy", case.x)
    one_error(gb("import", case.model, "--layer", "y", "-o", tmp_path / "a.gbc.json"),
              "its weights 'W' are a runtime input of the graph", "--weights FILE.npz, key 'W'")
    assert not (tmp_path / "a.gbc.json").exists()
    done = gb("import", case.model, "--layer", "y", "-o", tmp_path / "a.gbc.json",
              "--weights", tmp_path / "w.npz", "--input", tmp_path / "x.npy")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("layer y: Conv2D, Conv2D NCHW padding SAME")
    ran = gb("run", tmp_path / "a.gbc.json", "--out", tmp_path / "a.npz")
    assert ran.returncode == 0, ran.stderr
    with np.load(tmp_path / "a.npz") as z:
        forward = next(z[k] for k in z.files if k.startswith("y ("))
    np.testing.assert_array_equal(forward, case.expected)  # small integers: exact


@pytest.mark.parametrize("name", ["test_convtranspose_output_shape", "test_ConvTranspose2d"])
def test_cli_convtranspose(node_dir, tmp_path, name):
    case = load_case(case_dir(name, node_dir))
    args = []
    if case.runtime:
        np.savez(tmp_path / "w.npz", **case.runtime)
        args = ["--weights", tmp_path / "w.npz"]
    listed = gb("import", case.model, "--list", *args)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[1] == "transposed"
    np.save(tmp_path / "x.npy", case.x)
    layer = case.node.name or case.node.output[0]
    done = gb("import", case.model, "--layer", layer, "-o", tmp_path / "t.gbc.json",
              "--input", tmp_path / "x.npy", *args)
    assert done.returncode == 0, done.stderr
    assert "Conv2DBackpropInput NCHW" in done.stdout
    assert f"-> output {list(case.expected.shape)}" in done.stdout
    ran = gb("run", tmp_path / "t.gbc.json")
    assert ran.returncode == 0, ran.stderr


# -- the model zoo -------------------------------------------------------------------------------

#: Layers run in the fast suite: per file, the first conv (the big input) of the two smallest
#: models and the last conv of every file, plus ShuffleNet's grouped and depthwise ones.
ZOO_SAMPLE = {"light_bvlc_alexnet.onnx": (0, -1), "light_zfnet512.onnx": (-1,),
              "light_squeezenet.onnx": (-1,), "light_vgg19.onnx": (-1,),
              "light_resnet50.onnx": (-1,), "light_densenet121.onnx": (-1,),
              "light_inception_v1.onnx": (-1,), "light_inception_v2.onnx": (-1,),
              "light_shufflenet.onnx": (-1, -2, -3)}
FULL = os.environ.get("GRADBLOCKS_ZOO_FULL") == "1"


def zoo_weights(model, names: list[str]) -> list[np.ndarray]:
    """The tensors ``names``: initializers by onnx's numpy_helper, computed ones by onnx's own
    Extractor and ReferenceEvaluator (not our folding)."""
    inits = {t.name: t for t in model.graph.initializer}
    computed = [n for n in names if n not in inits]
    values = {}
    if computed:
        sub = onnx.utils.Extractor(onnx.shape_inference.infer_shapes(model)).extract_model(
            [], computed)
        values = dict(zip(computed, ReferenceEvaluator(sub).run(None, {}), strict=True))
    return [values[n] if n in values else numpy_helper.to_array(inits[n]) for n in names]


def test_every_zoo_conv_layer_imports_and_plans():
    assert len(ZOO) == 9
    total = 0
    for name in ZOO:
        path = DATA / "light" / name
        convs = [n for n in onnx.load(str(path)).graph.node if n.op_type == "Conv"]
        found = read_model(str(path))
        assert not found.refused, (name, found.refused)
        assert len(found.layers) == len(convs)
        for layer in found.layers:
            plan_layer(layer)  # the model's own input size, shapes checked as check does
        total += len(convs)
    assert total == 401


@pytest.mark.parametrize("name", ZOO)
def test_zoo_conv_layers_match_the_reference_evaluator(tmp_path, name):
    path = DATA / "light" / name
    model = onnx.load(str(path))
    nodes = {n.name or n.output[0]: n for n in model.graph.node if n.op_type == "Conv"}
    found = read_model(str(path))
    picked = found.layers if FULL else [found.layers[k] for k in ZOO_SAMPLE[name]]
    rng = np.random.default_rng(23)
    worst = 0.0
    for layer in picked:
        node = nodes[layer.name]
        params = dict(zip([n for n in node.input[1:] if n],
                          zoo_weights(model, [n for n in node.input[1:] if n]), strict=True))
        x = rng.standard_normal((1, layer.in_channels, *layer.input_hw)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        write_layer_canvas(layer, str(tmp_path / "c.gbc.json"), input_path=str(tmp_path / "x.npy"))
        r = engine.load(tmp_path / "c.gbc.json").run()
        y = np.asarray(r["forward"], np.float64)
        if layer.bias is not None:
            y = y + layer.bias.reshape(1, -1, 1, 1)
        ref, bound = conv_reference(node, x, params)
        worst = max(worst, within(y, ref, bound))
    print(f"{name}: {len(picked)} of {len(found.layers)} conv layers run, max error / bound "
          f"{worst:.2e}")


# -- folding and its guards ----------------------------------------------------------------------

I = numpy_helper.from_array
W = (np.arange(54, dtype=np.float32).reshape(3, 2, 3, 3) - 27) / 8


def fold_model(path: Path, nodes, inits=(), inputs=(), weights: str = "W") -> Path:
    """Conv 'c' on X [1, 2, 5, 5] whose weights are the tensor ``weights`` of ``nodes``."""
    conv = helper.make_node("Conv", ["X", weights], ["Y"], name="c")
    g = helper.make_graph(
        [*nodes, conv], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2, 5, 5]), *inputs],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], initializer=list(inits))
    path.write_bytes(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


def test_a_constant_chain_folds_with_the_reference_evaluator(tmp_path):
    """W = Cast(Transpose(Reshape(Unsqueeze(Reshape(Identity(w0), s), axes), s2)))."""
    w0 = W.transpose(1, 0, 2, 3).astype(np.float64).ravel()
    nodes = [helper.make_node("Identity", ["w0"], ["a"]),
             helper.make_node("Reshape", ["a", "s"], ["b"]),
             helper.make_node("Constant", [], ["axes"], value=I(np.array([0], np.int64))),
             helper.make_node("Unsqueeze", ["b", "axes"], ["c"]),
             helper.make_node("Reshape", ["c", "s2"], ["d"]),
             helper.make_node("Transpose", ["d"], ["t"], perm=[1, 0, 2, 3]),
             helper.make_node("Cast", ["t"], ["W"], to=TensorProto.FLOAT)]
    path = fold_model(tmp_path / "m.onnx", nodes, [
        I(w0, "w0"), I(np.array([2, 3, 9], np.int64), "s"),
        I(np.array([2, 3, 3, 3], np.int64), "s2")])
    (layer,) = read_onnx(str(path)).layers
    np.testing.assert_array_equal(layer.weights, W.transpose(2, 3, 1, 0))


def test_a_constant_of_shape_beyond_the_memory_limit_is_refused_before_it_runs(
        tmp_path, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the evaluator ran")
    monkeypatch.setattr("onnx.reference.ReferenceEvaluator", never)
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["W"], value=I(np.array([0.5],
                                                                                np.float32)))]
    path = fold_model(tmp_path / "m.onnx", nodes, [I(np.array([1 << 20, 1 << 20], np.int64),
                                                     "s")])
    assert read_onnx(str(path)).refused["c"] == (
        "layer 'c': weights 'W': computing it would need 4096.00 GiB or more ('W' (op "
        "ConstantOfShape) alone is 4096.00 GiB), more than the memory limit (2.00 GiB): "
        "refused before running")
    one_error(gb("import", path, "--layer", "c", "-o", tmp_path / "c.gbc.json"),
              "more than the memory limit", "refused before running")


def test_a_size_known_only_from_computed_values_is_checked_node_by_node(tmp_path, monkeypatch):
    """ConstantOfShape(Abs(s)): inference cannot tell the size from the whole subgraph; Abs
    runs, then ConstantOfShape's size is checked against its computed input before it runs."""
    ran = []
    real = onnx.reference.ReferenceEvaluator

    def counted(model, *args, **kwargs):
        ran.append([n.op_type for n in model.graph.node])
        return real(model, *args, **kwargs)
    monkeypatch.setattr("onnx.reference.ReferenceEvaluator", counted)
    nodes = [helper.make_node("Abs", ["s0"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["W"])]
    small = fold_model(tmp_path / "ok.onnx", nodes, [I(np.array([3, 2, 3, 3], np.int64), "s0")])
    (layer,) = read_onnx(str(small)).layers
    assert layer.weights.shape == (3, 3, 2, 3) and not layer.weights.any()
    assert ran == [["Abs"], ["ConstantOfShape"]]
    ran.clear()
    big = fold_model(tmp_path / "big.onnx", nodes, [I(np.array([-(1 << 20), 1 << 20, 3, 3],
                                                               np.int64), "s0")])
    assert "more than the memory limit" in read_onnx(str(big)).refused["c"]
    assert ran == [["Abs"]]


@pytest.mark.parametrize("nodes, words", [
    ([helper.make_node("RandomNormal", [], ["W"], shape=[3, 2, 3, 3])],
     "computed by RandomNormal node 'W', an op the import does not fold"),
    ([helper.make_node("MatMul", ["a", "a"], ["W"])], "computed by MatMul node 'W'"),
    ([helper.make_node("Identity", ["b"], ["W"]), helper.make_node("Identity", ["W"], ["b"])],
     "the graph computing it has a cycle"),
    ([helper.make_node("Identity", ["a"], ["W"], domain="com.evil")], "of domain 'com.evil'"),
    ([helper.make_node("Identity", ["a"], ["W"], body=helper.make_graph([], "b", [], []))],
     "attribute 'body' of type GRAPH cannot be folded"),
])
def test_subgraphs_the_import_does_not_fold_are_named(tmp_path, nodes, words):
    path = fold_model(tmp_path / "m.onnx", nodes, [I(W.reshape(3, 18)[:, :3], "a")])
    assert words in read_onnx(str(path)).refused["c"]


def test_a_constant_with_external_data_outside_the_folder_is_refused(tmp_path):
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    folder = tmp_path / "m"
    folder.mkdir()
    value = TensorProto(name="v", data_type=TensorProto.FLOAT, dims=[3, 2, 3, 3])
    value.data_location = TensorProto.EXTERNAL
    for key, v in (("location", "../secret.bin"), ("length", str(W.nbytes))):
        e = value.external_data.add()
        e.key, e.value = key, v
    path = fold_model(folder / "m.onnx", [helper.make_node("Constant", [], ["W"], value=value)])
    reason = read_onnx(str(path)).refused["c"]
    assert reason.startswith("layer 'c': weights 'W': Constant attribute 'value': external "
                             "data refused"), reason


def test_weights_computed_from_a_runtime_input_take_weights_npz(tmp_path):
    raw = helper.make_tensor_value_info("raw", TensorProto.FLOAT, [54])
    nodes = [helper.make_node("Reshape", ["raw", "s"], ["W"])]
    path = fold_model(tmp_path / "m.onnx", nodes, [I(np.array([3, 2, 3, 3], np.int64), "s")],
                      [raw])
    assert read_onnx(str(path)).refused["c"] == (
        "layer 'c': its weights 'W' are computed from the runtime input(s) 'raw' of the graph "
        "(no initializer, nothing constant computes them): give them with --weights FILE.npz, "
        "key 'raw' (one array per graph input, keyed by its name)")
    (layer,) = read_onnx(str(path), {"raw": W.ravel()}).layers
    np.testing.assert_array_equal(layer.weights, W.transpose(2, 3, 1, 0))
    np.savez(tmp_path / "bad.npz", raw=np.zeros(5, np.float32))
    one_error(gb("import", path, "--list", "--weights", tmp_path / "bad.npz"),
              "--weights: key 'raw' has shape [5], but the graph declares the input 'raw' as "
              "[54]")
    np.savez(tmp_path / "other.npz", nope=np.zeros(5, np.float32))
    one_error(gb("import", path, "--list", "--weights", tmp_path / "other.npz"),
              "--weights: key 'nope' is not an input of the graph")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    one_error(gb("import", path, "--list", "--weights", tmp_path / "junk.npz"),
              "not a readable .npz file")


def test_a_symbolic_batch_is_one_and_the_import_says_so(tmp_path):
    path = fold_model(tmp_path / "m.onnx", [], [I(W, "W")])
    done = gb("import", path, "--layer", "c", "-o", tmp_path / "c.gbc.json")
    assert done.returncode == 0, done.stderr
    assert "input [1, 2, 5, 5] -> output [1, 3, 3, 3]" in done.stdout
    assert ("batch 1: the model does not fix its batch (a symbolic or unknown size); --batch "
            "N sets it") in done.stdout
    three = gb("import", path, "--layer", "c", "-o", tmp_path / "c.gbc.json", "--batch", "3")
    assert "input [3, 2, 5, 5]" in three.stdout and "batch 1" not in three.stdout
