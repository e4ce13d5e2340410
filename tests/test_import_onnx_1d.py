"""ONNX 1-D Conv and ConvTranspose nodes import as 2-D convs of height 1, as Keras Conv1D does.

One model (tests/nd_models.py) with 1-D nodes covering weights from initializers and from a
constant subgraph, pads, strides, dilations, group (grouped and depthwise), auto_pad
(SAME_UPPER, SAME_LOWER with an odd total, VALID), output_padding and output_shape. It is
imported with ``gradblocks import --list`` and ``--all`` (subprocesses); each canvas runs
headless (in-process, one also with ``gradblocks run``), its forward is compared with ONNX
Runtime (float32) and with a float64 JAX definition, its gradients with ``jax.vjp`` of that
definition, all within ``TOL`` of the largest value."""

from __future__ import annotations

import numpy as np
import pytest

from tests import nd_models as nd

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("jax")

X_SHAPE = [1, 4, 11]
#: (name, op, input, weights, bias, attributes)
NODES = [
    ("c_pads", "Conv", "X", [6, 2, 3], 6, {"group": 2, "pads": [1, 2], "strides": [2],
                                            "dilations": [2]}),
    ("c_lower", "Conv", "X", [3, 4, 4], None, {"auto_pad": "SAME_LOWER", "strides": [2]}),
    ("c_dw", "Conv", "X", ("const", [8, 1, 3]), None, {"group": 4, "auto_pad": "SAME_UPPER"}),
    ("c_valid", "Conv", "X", [2, 4, 2], 2, {"auto_pad": "VALID", "dilations": [3]}),
    ("t_pads", "ConvTranspose", "X", [4, 3, 3], 3, {"strides": [2], "pads": [1, 0],
                                                     "output_padding": [1]}),
    ("t_shape", "ConvTranspose", "X", ("const", [4, 1, 3]), None,
     {"strides": [2], "group": 2, "output_shape": [21], "auto_pad": "SAME_UPPER"}),
    ("t_dil", "ConvTranspose", "X", [4, 2, 2], None, {"dilations": [2], "auto_pad": "VALID"}),
]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx1d")
    model = folder / "one_d.onnx"
    made = nd.write_onnx(model, NODES, {"X": X_SHAPE})
    listed, index = nd.all_canvases(model, folder / "all")
    return model, made, listed, index, folder / "all"


def test_list_shows_every_1d_node_as_a_height_1_conv(imported):
    _, _, listed, index, _ = imported
    rows = {line.split()[0]: line.split() for line in listed.splitlines()[1:]}
    assert set(rows) == {name for name, *_ in NODES}, listed
    assert "cannot import" not in listed
    assert rows["c_pads"][1:6] == ["grouped", "1x3", "1,2", "1,2", "pads"]
    assert rows["c_pads"][6] == "0,0,1,2"
    assert rows["c_dw"][1:3] == ["depthwise", "1x3"]
    assert rows["t_pads"][1:3] == ["transposed", "1x3"]
    assert [item["layer"] for item in index] == [name for name, *_ in NODES]
    assert all("canvas" in item for item in index), index


@pytest.mark.parametrize("name", [n for n, *_ in NODES])
def test_1d_node_matches_onnx_runtime_and_its_gradients_jax(imported, name):
    model, made, _, index, folder = imported
    node = made[name]
    item = next(i for i in index if i["layer"] == name)
    r = nd.run_canvas(folder / item["canvas"])
    x = r["input"]
    assert x.shape[2] == 1  # NCHW of height 1
    x1 = x[:, :, 0, :]
    want = nd.ort_outputs(model, {"X": x1})[f"{name}_Y"]
    bias = 0 if node["b"] is None else node["b"][None, :, None]
    got = r["forward"][:, :, 0, :]
    assert nd.close(got + bias, want) < nd.TOL
    ref = nd.reference(node, x1, node["w"], r["out_backprop"][:, :, 0, :])
    assert nd.close(got, ref["forward"]) < nd.TOL
    assert nd.close(r["grad_input"][:, :, 0, :], ref["grad_input"]) < nd.TOL
    depthwise = node["op"] == "Conv" and node["attrs"].get("group", 1) == x1.shape[1]
    assert nd.close(r["grad_filter"], nd.tf_filter(ref["grad_filter"], node, depthwise)) < nd.TOL


def test_gradblocks_run_gives_the_same_results(imported):
    _, _, _, index, folder = imported
    canvas = folder / index[0]["canvas"]
    by_cli, in_process = nd.run_cli(canvas), nd.run_canvas(canvas)
    for key in ("forward", "grad_input", "grad_filter"):
        np.testing.assert_array_equal(by_cli[key], in_process[key])


def test_layer_line_and_note_say_1d(imported, tmp_path):
    model = imported[0]
    proc = nd.gb("import", model, "--layer", "c_pads", "-o", tmp_path / "c.gbc.json")
    assert proc.returncode == 0, proc.stderr
    assert "1-D conv: imported as a 2-D conv of height 1 (kernel 1x3, strides 1,2, " \
           "dilations 1,2" in proc.stdout
    text = (tmp_path / "c.gbc.json").read_text()
    assert "pads 1 on the left, 2 on the right" in text


def test_1d_attribute_of_the_wrong_length_is_one_line(tmp_path):
    model = tmp_path / "bad.onnx"
    nd.write_onnx(model, [("c", "Conv", "X", [2, 4, 3], None, {"strides": [1, 2]})],
                  {"X": X_SHAPE})
    proc = nd.gb("import", model, "--list")
    assert proc.returncode == 0, proc.stderr
    assert ("cannot import: layer 'c': strides [1, 2] has 2 numbers, expected 1 for a 1-D "
            "conv") in proc.stdout
