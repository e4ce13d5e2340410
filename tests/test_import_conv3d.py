"""3-D convs import onto the Conv3D blocks: Keras Conv3D / Conv3DTranspose (.keras and .h5,
channels_last and channels_first, dilation, groups, output_padding) and ONNX 3-D Conv /
ConvTranspose (initializers and a constant subgraph, pads, auto_pad, group, output_padding,
output_shape).

Each model is imported with ``gradblocks import --list`` and ``--all`` (subprocesses); every
canvas runs headless (in-process, one per model also with ``gradblocks run``). Keras layers:
forward against the Keras layer itself (float32, bias added to the canvas's conv), forward and
gradients against ``tf.GradientTape`` of the same layer built in float64. ONNX nodes: forward
against ONNX Runtime (float32), forward and gradients against ``jax.vjp`` of a float64
definition (tests/nd_models.py). All within ``nd.TOL`` of the largest value. Pads that are
neither SAME nor VALID import as VALID ops around a Pad (and a Slice cutting the gradient or
the transposed output back)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests import nd_models as nd

# -- ONNX ----------------------------------------------------------------------------------------

ONNX_INPUTS = {"X": [1, 4, 5, 6, 7], "X8": [1, 2, 8, 8, 8], "T": [1, 4, 3, 4, 5]}
#: (name, op, input, weights, bias, attributes)
ONNX_NODES = [
    ("c_same", "Conv", "X", [6, 2, 3, 3, 3], 6, {"group": 2, "pads": [1, 1, 1, 1, 1, 1]}),
    ("c_valid", "Conv", "X", ("const", [3, 4, 2, 3, 2]), None,
     {"strides": [1, 2, 2], "dilations": [2, 1, 1]}),
    ("c_upper", "Conv", "X", [2, 4, 3, 3, 3], None, {"strides": [2, 2, 2],
                                                     "auto_pad": "SAME_UPPER"}),
    ("c_dw", "Conv", "X", [8, 1, 3, 3, 3], None, {"group": 4, "auto_pad": "SAME_LOWER"}),
    ("c_sameish", "Conv", "X8", [2, 2, 3, 3, 3], None,  # SAME's own pads, stride 2: 0,1
     {"strides": [2, 2, 2], "pads": [0, 0, 0, 1, 1, 1]}),
    ("c_bad", "Conv", "X8", [2, 2, 3, 3, 3], None, {"strides": [2, 2, 2],
                                                    "pads": [1, 1, 1, 1, 1, 1]}),
    ("c_uneven", "Conv", "X", [3, 4, 2, 3, 2], 3, {"strides": [1, 2, 3],
                                                   "pads": [0, 2, 1, 1, 0, 2]}),
    ("t_valid", "ConvTranspose", "T", [4, 2, 3, 2, 3], 2,
     {"strides": [2, 2, 2], "pads": [0, 0, 0, 1, 1, 1], "output_padding": [1, 1, 1]}),
    ("t_same", "ConvTranspose", "T", ("const", [4, 3, 3, 3, 3]), None,
     {"strides": [2, 2, 2], "auto_pad": "SAME_UPPER"}),
    ("t_shape", "ConvTranspose", "T", [4, 1, 3, 3, 3], None,
     {"strides": [2, 2, 2], "group": 2, "output_shape": [6, 8, 10], "auto_pad": "SAME_UPPER"}),
    ("t_dil", "ConvTranspose", "T", [4, 2, 2, 2, 2], None, {"dilations": [2, 1, 1],
                                                              "group": 2}),
    ("t_bad", "ConvTranspose", "T", [4, 2, 3, 3, 3], None,  # SAME's pads are 0,1 on 6x8x10
     {"strides": [2, 2, 2], "pads": [1, 1, 1, 0, 0, 0]}),
    ("t_uneven", "ConvTranspose", "T", [4, 2, 3, 3, 2], None,  # output_padding past pad after
     {"strides": [2, 2, 3], "pads": [1, 2, 0, 0, 1, 1], "output_padding": [1, 0, 2]}),
]
#: Pads neither SAME nor VALID: imported as VALID ops with a Pad block.
PADDED = ("c_bad", "c_uneven", "t_bad", "t_uneven")


@pytest.fixture(scope="module")
def onnx_imported(tmp_path_factory):
    pytest.importorskip("onnx")
    folder = tmp_path_factory.mktemp("onnx3d")
    model = folder / "three_d.onnx"
    made = nd.write_onnx(model, ONNX_NODES, ONNX_INPUTS)
    listed, index = nd.all_canvases(model, folder / "all")
    return model, made, listed, index, folder / "all"


def test_onnx_list_shows_the_3d_nodes_and_imports_pads_neither_same_nor_valid(onnx_imported):
    _, _, listed, index, _ = onnx_imported
    lines = listed.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {n for n, *_ in ONNX_NODES}, listed
    assert rows["c_same"][1:5] == ["grouped", "3x3x3", "1,1,1", "1,1,1"]
    assert rows["c_valid"][1:2] == ["Conv3D"]
    assert rows["t_same"][1:3] == ["transposed", "3x3x3"]
    assert rows["c_bad"][5:7] == ["pads", "1,1,1,1,1,1"]
    assert not any(line.startswith("cannot import") for line in lines)
    assert [i["layer"] for i in index if "canvas" in i] == [n for n, *_ in ONNX_NODES]
    attrs = {i["layer"]: i["attrs"] for i in index if "canvas" in i}
    assert attrs["c_same"]["padding"] == "SAME" and attrs["c_sameish"]["padding"] == "SAME"
    assert attrs["c_valid"]["padding"] == "VALID" and attrs["t_valid"]["padding"] == "VALID"
    assert attrs["t_same"]["padding"] == "SAME" and attrs["t_shape"]["padding"] == "SAME"
    assert attrs["c_dw"]["padding"] == "SAME" and attrs["t_dil"]["padding"] == "VALID"
    assert attrs["c_same"]["data_format"] == "NCDHW"
    assert all(attrs[n]["padding"] == "VALID" for n in PADDED)


def _blocks(folder, index, name) -> dict:
    import json

    item = next(i for i in index if i["layer"] == name)
    data = json.loads((folder / item["canvas"]).read_text())
    return {n["id"]: n for n in data["nodes"]}


def test_onnx_pads_neither_same_nor_valid_become_pad_and_slice_blocks(onnx_imported):
    _, _, _, index, folder = onnx_imported
    conv = _blocks(folder, index, "c_uneven")  # X [1, 4, 5, 6, 7] NCDHW
    assert conv["padded_input"]["type"] == "Pad"
    assert conv["padded_input"]["attrs"]["paddings"] == [0, 0, 0, 0, 0, 1, 2, 0, 1, 2]
    assert (conv["forward"]["type"], conv["grad_padded_input"]["type"]) == (
        "Conv3D", "Conv3DBackpropInputV2")
    assert conv["grad_input"]["type"] == "Slice"
    assert conv["grad_input"]["attrs"] == {"begin": [0, 0, 0, 2, 1], "size": [1, 4, 5, 6, 7]}
    t = _blocks(folder, index, "t_uneven")  # pads after 0,1,1 minus output_padding 1,0,2
    assert t["padded_out_backprop"]["attrs"]["paddings"] == [0, 0, 0, 0, 1, 0, 2, 1, 0, 0]
    assert (t["forward"]["type"], t["full_output"]["type"]) == ("Slice", "Conv3DBackpropInputV2")
    assert t["grad_input"]["type"] == "Conv3D"


def test_onnx_layer_with_pads_neither_same_nor_valid_imports_by_name(onnx_imported, tmp_path):
    proc = nd.gb("import", onnx_imported[0], "--layer", "c_bad", "-o", tmp_path / "b.gbc.json")
    assert proc.returncode == 0, proc.stderr
    assert ("Conv3D NCDHW padding VALID after a Pad of [1, 1, 1, 1, 1, 1] (before, after per "
            "D,H,W), input [1, 2, 8, 8, 8] -> output [1, 2, 4, 4, 4]") in proc.stdout
    assert nd.gb("check", tmp_path / "b.gbc.json").returncode == 0


@pytest.mark.parametrize("name", [n for n, *_ in ONNX_NODES])
def test_onnx_3d_node_matches_onnx_runtime_and_its_gradients_jax(onnx_imported, name):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("jax")
    model, made, _, index, folder = onnx_imported
    node = made[name]
    item = next(i for i in index if i["layer"] == name)
    r = nd.run_canvas(folder / item["canvas"])
    x = r["input"]
    feeds = {k: np.zeros(v, np.float32) for k, v in ONNX_INPUTS.items()}
    feeds[node["x"]] = x
    want = nd.ort_outputs(model, feeds)[f"{name}_Y"]
    bias = 0 if node["b"] is None else node["b"][None, :, None, None, None]
    assert nd.close(r["forward"] + bias, want) < nd.TOL
    ref = nd.reference(node, x, node["w"], r["out_backprop"])
    assert nd.close(r["forward"], ref["forward"]) < nd.TOL
    assert nd.close(r["grad_input"], ref["grad_input"]) < nd.TOL
    assert nd.close(r["grad_filter"], nd.tf_filter(ref["grad_filter"], node, False)) < nd.TOL


def test_onnx_canvas_runs_with_gradblocks_run(onnx_imported):
    _, _, _, index, folder = onnx_imported
    canvas = folder / next(i["canvas"] for i in index if i["layer"] == "t_shape")
    by_cli, in_process = nd.run_cli(canvas), nd.run_canvas(canvas)
    for key in ("forward", "grad_input", "grad_filter"):
        np.testing.assert_array_equal(by_cli[key], in_process[key])


def test_onnx_input_size_takes_d_h_w(onnx_imported, tmp_path):
    model = onnx_imported[0]
    proc = nd.gb("import", model, "--layer", "c_upper", "--input-size", "4,4,4", "-o",
                 tmp_path / "u.gbc.json")
    assert proc.returncode == 0, proc.stderr
    assert "Conv3D NCDHW padding SAME, input [1, 4, 4, 4, 4] -> output [1, 2, 2, 2, 2]" in \
        proc.stdout
    from tests.cli_support import one_error

    one_error(nd.gb("import", model, "--layer", "c_upper", "--input-size", "4,4", "-o",
                    tmp_path / "v.gbc.json"),
              "layer 'c_upper' is a 3-D conv: its input size is D,H,W, not 4,4")


# -- Keras ---------------------------------------------------------------------------------------

#: (name, class, config): a channels_last chain on [5, 6, 7, 3] and a channels_first one on
#: [3, 4, 5, 6].
KERAS_LAST = [
    ("k_same", "Conv3D", {"filters": 4, "kernel_size": 3, "padding": "same"}),
    ("k_grp", "Conv3D", {"filters": 4, "kernel_size": 2, "groups": 2,
                         "dilation_rate": (2, 1, 1), "use_bias": False}),
    ("k_stride", "Conv3D", {"filters": 2, "kernel_size": (3, 2, 3), "strides": 2,
                            "padding": "same"}),
    ("k_t", "Conv3DTranspose", {"filters": 3, "kernel_size": 3, "strides": 2,
                                "padding": "same"}),
    ("k_tv", "Conv3DTranspose", {"filters": 2, "kernel_size": (2, 3, 2), "strides": (1, 2, 2),
                                 "output_padding": (0, 1, 1)}),
    ("k_td", "Conv3DTranspose", {"filters": 2, "kernel_size": 2, "dilation_rate": 2,
                                 "use_bias": False}),
]
KERAS_FIRST = [
    ("f_conv", "Conv3D", {"filters": 4, "kernel_size": 3, "strides": 2, "padding": "same",
                          "data_format": "channels_first"}),
    ("f_t", "Conv3DTranspose", {"filters": 2, "kernel_size": 3, "strides": 2,
                                "data_format": "channels_first"}),
]


def _keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    pytest.importorskip("tensorflow")
    return pytest.importorskip("keras")


@pytest.fixture(scope="module")
def keras_imported(tmp_path_factory):
    keras = _keras()
    folder = tmp_path_factory.mktemp("keras3d")
    keras.utils.set_random_seed(3)
    out = {}
    for model_name, layers, shape in (("last", KERAS_LAST, (5, 6, 7, 3)),
                                      ("first", KERAS_FIRST, (3, 4, 5, 6))):
        x = inp = keras.Input(shape)
        for name, kind, config in layers:
            x = getattr(keras.layers, kind)(name=name, **config)(x)
        model = keras.Model(inp, x)
        for fmt in ("keras", "h5"):
            path = folder / f"{model_name}.{fmt}"
            model.save(path)
            listed, index = nd.all_canvases(path, folder / f"{model_name}_{fmt}")
            out[(model_name, fmt)] = (model, listed, index, folder / f"{model_name}_{fmt}")
    return out


@pytest.mark.parametrize("fmt", ["keras", "h5"])
def test_keras_list_shows_every_3d_layer(keras_imported, fmt):
    rows = {}
    for model_name in ("last", "first"):
        _, listed, index, _ = keras_imported[(model_name, fmt)]
        assert "cannot import" not in listed, listed
        assert all("canvas" in item for item in index), index
        rows.update({line.split()[0]: line.split() for line in listed.splitlines()[1:]})
    assert rows["k_same"][1:6] == ["Conv3D", "3x3x3", "1,1,1", "1,1,1", "SAME"]
    assert rows["k_grp"][1:6] == ["grouped", "2x2x2", "1,1,1", "2,1,1", "VALID"]
    assert rows["k_t"][1:3] == ["transposed", "3x3x3"]
    assert rows["f_conv"][1:6] == ["Conv3D", "3x3x3", "2,2,2", "1,1,1", "SAME"]


def _float64_layer(keras, layer):
    """``layer`` built again in float64 with the same weights, channels_last (TensorFlow's CPU
    Conv3D ops take NDHWC only in float64; Keras keeps a kernel in one layout for both)."""
    shape = tuple(layer.input.shape)
    if layer.get_config()["data_format"] == "channels_first":
        shape = (shape[0], *shape[2:], shape[1])
    twin = type(layer).from_config({**layer.get_config(), "dtype": "float64",
                                    "data_format": "channels_last"})
    twin.build(shape)
    twin.set_weights([w.astype(np.float64) for w in layer.get_weights()])
    return twin


def _dilated_transpose_reference(layer, x: np.ndarray, dy: np.ndarray):
    """Keras Conv3DTranspose (channels_last, VALID, stride 1, no bias) by its definition in
    float64: the input gradient (``jax.vjp``) of the VALID dilated conv with the layer's kernel
    [k..., filters, in] that maps its output to its input; the forward and both gradients."""
    jax = nd._jax()
    from jax import lax

    config = layer.get_config()
    assert config["padding"] == "valid" and tuple(config["strides"]) == (1, 1, 1)
    d = tuple(config["dilation_rate"])
    kernel = layer.get_weights()[0].astype(np.float64)
    k = kernel.shape[:3]
    y_shape = (x.shape[0], *(n + (kn - 1) * dn for n, kn, dn in zip(x.shape[1:4], k, d,
                                                                       strict=True)),
               kernel.shape[3])

    def f(v, w):
        def conv(y):
            return lax.conv_general_dilated(y, w, (1, 1, 1), "VALID", rhs_dilation=d,
                                            dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))
        return jax.vjp(conv, np.zeros(y_shape))[1](v)[0]
    y, vjp = jax.vjp(f, x.astype(np.float64), kernel)
    gx, gw = vjp(dy.astype(np.float64))
    return np.asarray(y), np.asarray(gx), np.asarray(gw)


@pytest.mark.parametrize("fmt", ["keras", "h5"])
@pytest.mark.parametrize("name", [n for n, *_ in KERAS_LAST + KERAS_FIRST])
def test_keras_3d_layer_matches_keras_and_its_gradients_tf(keras_imported, fmt, name):
    keras = _keras()
    import tensorflow as tf

    model_name = "last" if name in {n for n, *_ in KERAS_LAST} else "first"
    model, _, index, folder = keras_imported[(model_name, fmt)]
    layer = model.get_layer(name)
    item = next(i for i in index if i["layer"] == name)
    r = nd.run_canvas(folder / item["canvas"])
    x, dy = r["input"], r["out_backprop"]
    weights = layer.get_weights()
    channels_first = layer.get_config()["data_format"] == "channels_first"
    bias = 0
    if len(weights) > 1:
        bias = weights[1].reshape((-1, 1, 1, 1) if channels_first else (-1,))
    want = np.asarray(layer(x))  # the Keras layer itself, float32
    assert nd.close(r["forward"] + bias, want) < nd.TOL
    if name == "k_td":  # TensorFlow's CPU Conv3DBackpropInputV2 refuses dilations
        y64, gx, gw = _dilated_transpose_reference(layer, x, dy)
    else:
        twin = _float64_layer(keras, layer)
        last, first = (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)  # NCDHW -> NDHWC and back
        x64 = tf.constant((x.transpose(last) if channels_first else x).astype(np.float64))
        dy64 = (dy.transpose(last) if channels_first else dy).astype(np.float64)
        with tf.GradientTape() as tape:
            tape.watch(x64)
            y = twin(x64)
            loss = tf.reduce_sum(y * dy64)
        gx, gw = (g.numpy() for g in tape.gradient(loss, [x64, twin.kernel]))
        y64 = y.numpy()
        if channels_first:
            y64, gx = y64.transpose(first), gx.transpose(first)
        y64 = y64 - bias
    assert nd.close(r["forward"], y64) < nd.TOL
    assert nd.close(r["grad_input"], gx) < nd.TOL
    assert nd.close(r["grad_filter"], gw) < nd.TOL
    np.testing.assert_array_equal(r["filter"], weights[0])  # the kernel, as Keras keeps it


def test_keras_canvas_runs_with_gradblocks_run(keras_imported):
    _, _, index, folder = keras_imported[("first", "h5")]
    canvas = folder / index[1]["canvas"]
    by_cli, in_process = nd.run_cli(canvas), nd.run_canvas(canvas)
    for key in ("forward", "grad_input", "grad_filter"):
        np.testing.assert_array_equal(by_cli[key], in_process[key])


def test_keras_input_sizes_walk_through_3d_pooling(tmp_path):
    """A Conv3D after MaxPooling3D and BatchNormalization gets its input size from the config
    walk (no --input-size)."""
    keras = _keras()
    inp = keras.Input((8, 8, 6, 2))
    x = keras.layers.Conv3D(3, 3, padding="same", name="a")(inp)
    x = keras.layers.MaxPooling3D(2, name="p")(x)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.Conv3D(2, 2, name="b")(x)
    path = tmp_path / "pool.keras"
    keras.Model(inp, x).save(path)
    _, index = nd.all_canvases(path, tmp_path / "all")
    assert [(i["layer"], i["input_shape"], i["output_shape"]) for i in index] == [
        ("a", [1, 8, 8, 6, 2], [1, 8, 8, 6, 3]), ("b", [1, 4, 4, 3, 3], [1, 3, 3, 2, 2])]


def test_keras_output_padding_entries_of_zero_import_in_2d_too(tmp_path):
    """output_padding (0, 1) is a valid Keras Conv2DTranspose (it was refused as "not a positive
    integer"): the canvas's forward plus the bias is the Keras layer's output."""
    keras = _keras()
    inp = keras.Input((5, 6, 3))
    layer = keras.layers.Conv2DTranspose(2, 3, strides=2, padding="same", output_padding=(0, 1),
                                         name="t")
    path = tmp_path / "op.keras"
    keras.Model(inp, layer(inp)).save(path)
    listed, index = nd.all_canvases(path, tmp_path / "all")
    assert "cannot import" not in listed, listed
    r = nd.run_canvas(tmp_path / "all" / index[0]["canvas"])
    want = np.asarray(layer(r["input"]))
    assert nd.close(r["forward"] + layer.get_weights()[1], want) < nd.TOL
