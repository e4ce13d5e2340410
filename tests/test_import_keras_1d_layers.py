"""Keras SeparableConv1D and Conv1DTranspose import as 2-D convs of height 1 (a SeparableConv2D
and a Conv2DTranspose): real Keras models (channels_last and channels_first; strides, dilation,
padding same and valid, depth_multiplier, output_padding, bias, an activation), saved as .keras
and .h5.

Each layer is imported through ``read_model`` / ``write_layer_canvas`` (the engine's import) and
run headless; its forward plus the bias (and the activation) is the Keras layer's own output on
the canvas's input (float32), and its forward and gradients (input, kernels) are those of
``tf.GradientTape`` on the same layer built in float64 (channels_last, no bias, no activation).
``gradblocks import --list`` / ``--all`` (subprocesses) list every one as importable. Keras 2's
causal SeparableConv1D (Keras 3 refuses causal there) is its depthwise conv on the input with
d * (k - 1) zeros on the left; a causal Conv1DTranspose is refused in one line."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests import keras_files as kf
from tests import nd_models as nd

#: float32 canvas against the float64 TensorFlow layer (tests/test_import_keras_separable.py).
TOL = 3e-5

#: (name, class, config): a channels_last chain on [24, 3] (24x3 -> 12x4 -> 8x5 -> 16x4 ->
#: 48x3 -> 48x2 -> 24x3) and a channels_first one on [3, 20] (3x20 -> 4x10 -> 2x20 -> 3x18).
LAST = [
    ("s_same", "SeparableConv1D", {"filters": 4, "kernel_size": 3, "strides": 2,
                                   "padding": "same", "depth_multiplier": 2,
                                   "activation": "relu"}),
    ("s_dil", "SeparableConv1D", {"filters": 5, "kernel_size": 3, "dilation_rate": 2,
                                  "use_bias": False}),
    ("t_same", "Conv1DTranspose", {"filters": 4, "kernel_size": 3, "strides": 2,
                                   "padding": "same", "output_padding": 1}),
    ("t_valid", "Conv1DTranspose", {"filters": 3, "kernel_size": 2, "strides": 3,
                                    "use_bias": False}),
    ("t_dil", "Conv1DTranspose", {"filters": 2, "kernel_size": 3, "dilation_rate": 2,
                                  "padding": "same"}),
    ("s_after", "SeparableConv1D", {"filters": 3, "kernel_size": 2, "strides": 2,
                                    "depth_multiplier": 3}),
]
FIRST = [
    ("f_sep", "SeparableConv1D", {"filters": 4, "kernel_size": 3, "strides": 2,
                                  "padding": "same", "depth_multiplier": 2,
                                  "data_format": "channels_first"}),
    ("f_t", "Conv1DTranspose", {"filters": 2, "kernel_size": 3, "strides": 2, "padding": "same",
                                "output_padding": 1, "data_format": "channels_first"}),
    ("f_sep2", "SeparableConv1D", {"filters": 3, "kernel_size": 3, "use_bias": False,
                                   "data_format": "channels_first"}),
]
MODELS = {"last": (LAST, (24, 3)), "first": (FIRST, (3, 20))}
#: Each layer's canvas input and output shapes, by hand from Keras's output-shape rules.
SHAPES = {"s_same": ([1, 1, 24, 3], [1, 1, 12, 4]), "s_dil": ([1, 1, 12, 4], [1, 1, 8, 5]),
          "t_same": ([1, 1, 8, 5], [1, 1, 16, 4]), "t_valid": ([1, 1, 16, 4], [1, 1, 48, 3]),
          "t_dil": ([1, 1, 48, 3], [1, 1, 48, 2]), "s_after": ([1, 1, 48, 2], [1, 1, 24, 3]),
          "f_sep": ([1, 3, 1, 20], [1, 4, 1, 10]), "f_t": ([1, 4, 1, 10], [1, 2, 1, 20]),
          "f_sep2": ([1, 2, 1, 20], [1, 3, 1, 18])}
NAMES = [n for n, *_ in LAST + FIRST]
FORMATS = ("keras", "h5")


def _keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    pytest.importorskip("tensorflow")
    return pytest.importorskip("keras")


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict:
    """(model name, format) -> (the Keras model, its file)."""
    keras = _keras()
    folder = tmp_path_factory.mktemp("keras1d")
    keras.utils.set_random_seed(11)
    out = {}
    for model_name, (layers, shape) in MODELS.items():
        x = inp = keras.Input(shape)
        for name, kind, config in layers:
            layer = getattr(keras.layers, kind)(name=name, **config)
            x = layer(x)
            if layer.use_bias:  # Keras initializes the bias to zeros
                layer.bias.assign(np.random.default_rng(len(name)).standard_normal(
                    layer.bias.shape).astype(np.float32))
        model = keras.Model(inp, x)
        for fmt in FORMATS:
            path = folder / f"{model_name}.{fmt}"
            model.save(path)
            out[(model_name, fmt)] = (model, path)
    return out


def _model_of(name: str) -> str:
    return "last" if name in {n for n, *_ in LAST} else "first"


def _to_last(a: np.ndarray, channels_first: bool) -> np.ndarray:
    """A canvas array [1, 1, W, C] (or [1, C, 1, W]) as Keras's channels_last [1, W, C]."""
    if channels_first:
        return a.reshape(a.shape[0], a.shape[1], a.shape[3]).transpose(0, 2, 1)
    return a.reshape(a.shape[0], a.shape[2], a.shape[3])


def _tf_reference(keras, layer, x: np.ndarray, dy: np.ndarray) -> dict[str, np.ndarray]:
    """``layer`` built again in float64, channels_last, no bias, no activation, with the same
    kernels: its output on ``x`` and the gradients of <output, dy> (tf.GradientTape), all
    channels_last ([1, W, C])."""
    import tensorflow as tf

    config = {**layer.get_config(), "dtype": "float64", "data_format": "channels_last",
              "use_bias": False, "activation": None}
    twin = type(layer).from_config(config)
    kernels = [w.astype(np.float64) for w in layer.get_weights()[:2 if "Separable" in
                                                                   type(layer).__name__ else 1]]
    twin.build((None, *x.shape[1:]))
    twin.set_weights(kernels)
    x64 = tf.constant(x.astype(np.float64))
    with tf.GradientTape() as tape:
        tape.watch(x64)
        y = twin(x64)
        loss = tf.reduce_sum(y * dy.astype(np.float64))
    grads = tape.gradient(loss, [x64, *twin.trainable_weights])
    return {"forward": y.numpy(), "grad_input": grads[0].numpy(),
            **{w.name: g.numpy() for w, g in zip(twin.trainable_weights, grads[1:], strict=True)}}


def _dilated_transpose_reference(layer, x: np.ndarray, dy: np.ndarray) -> dict[str, np.ndarray]:
    """A dilated Conv1DTranspose (stride 1, no bias) in float64 by its definition, since
    TensorFlow's CPU Conv2DBackpropInput refuses dilations in float64: the input gradient of the
    dilated conv with the layer's kernel [k, filters, in] that maps its output to its input (an
    inner tf.GradientTape); its gradients by an outer one."""
    import tensorflow as tf

    config = layer.get_config()
    assert tuple(config["strides"]) == (1,) and config["padding"] in ("same", "valid")
    (d,), (k,) = config["dilation_rate"], config["kernel_size"]
    kernel = tf.constant(layer.get_weights()[0].astype(np.float64))
    x64 = tf.constant(x.astype(np.float64))
    size = x.shape[1] + ((k - 1) * d if config["padding"] == "valid" else 0)
    z = tf.zeros((x.shape[0], size, config["filters"]), tf.float64)
    with tf.GradientTape() as outer:
        outer.watch([x64, kernel])
        with tf.GradientTape() as inner:
            inner.watch(z)
            conv = tf.nn.convolution(z, kernel, padding=config["padding"].upper(),
                                     dilations=[d])
            total = tf.reduce_sum(conv * x64)
        y = inner.gradient(total, z)
        loss = tf.reduce_sum(y * dy.astype(np.float64))
    gx, gk = outer.gradient(loss, [x64, kernel])
    return {"forward": y.numpy(), "grad_input": gx.numpy(), "kernel": gk.numpy()}


@pytest.fixture(scope="module")
def errors() -> dict:
    """The largest error of each comparison, by (layer, format, what), printed at the end."""
    found: dict = {}
    yield found
    worst: dict[str, float] = {}
    for (_, _, what), err in found.items():
        worst[what] = max(worst.get(what, 0.0), err)
    if worst:
        print("\nlargest relative errors:", {k: f"{v:.1e}" for k, v in sorted(worst.items())})


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", NAMES)
def test_each_layer_matches_keras_forward_and_tf_gradients(saved, errors, fmt, name, tmp_path):
    from engine.graph.layer_canvas import read_model, write_layer_canvas

    keras = _keras()
    model, path = saved[(_model_of(name), fmt)]
    found = read_model(str(path))
    assert found.refused == {}
    layer = model.get_layer(name)
    separable = isinstance(layer, keras.layers.SeparableConv1D)
    imported = found.find(name, str(path))
    assert imported.conv1d and imported.op == ("separable" if separable else "transposed")
    done = write_layer_canvas(imported, str(tmp_path / "c.gbc.json"))
    assert [list(done.conv.input_shape), list(done.output_shape)] == list(SHAPES[name])
    r = nd.run_canvas(tmp_path / "c.gbc.json")
    first = layer.get_config()["data_format"] == "channels_first"
    x, dy = _to_last(r["input"], first), _to_last(r["out_backprop"], first)
    got = _to_last(r["pointwise_forward" if separable else "forward"], first)
    weights = layer.get_weights()
    # the Keras layer itself (float32): the canvas's conv, then the bias and the activation
    with_bias = got + (weights[-1] if layer.use_bias else 0)
    if layer.get_config()["activation"] == "relu":
        with_bias = np.maximum(with_bias, 0)
    keras_x = x.transpose(0, 2, 1) if first else x
    want = np.asarray(layer(keras_x))
    errors[(name, fmt, "keras")] = err = nd.close(with_bias, want.transpose(0, 2, 1) if first
                                                  else want)
    assert err < nd.TOL
    # float64 TensorFlow: forward and the gradients
    if not separable and max(layer.get_config()["dilation_rate"]) > 1:
        ref = _dilated_transpose_reference(layer, x, dy)
    else:
        ref = _tf_reference(keras, layer, x, dy)
    kernel = "depthwise_kernel" if separable else "kernel"
    pairs = [("forward", got, ref["forward"]),
             ("grad_input", _to_last(r["grad_input"], first), ref["grad_input"]),
             ("grad_filter", r["grad_filter"].reshape(ref[kernel].shape), ref[kernel])]
    if separable:
        pairs.append(("pointwise_grad_filter", r["pointwise_grad_filter"].reshape(
            ref["pointwise_kernel"].shape), ref["pointwise_kernel"]))
    for what, a, b in pairs:
        errors[(name, fmt, what)] = err = nd.close(a, b)
        assert err < TOL, what
    # the canvas's kernels are the file's, widened to height 1
    np.testing.assert_array_equal(r["filter"], weights[0][None])
    if separable:
        np.testing.assert_array_equal(r["pointwise_filter"], weights[1][None])
    assert ("bias" in r) == layer.use_bias


@pytest.mark.parametrize("fmt", FORMATS)
def test_list_and_all_show_every_1d_layer_as_importable(saved, fmt, tmp_path):
    rows = {}
    for model_name in MODELS:
        _, path = saved[(model_name, fmt)]
        listed, index = nd.all_canvases(path, tmp_path / model_name)
        assert "cannot import" not in listed, listed
        assert all("canvas" in item for item in index), index
        rows.update({line.split()[0]: line.split() for line in listed.splitlines()[1:]})
        for item in index:
            assert [item["input_shape"], item["output_shape"]] == list(SHAPES[item["layer"]])
    assert sorted(rows) == sorted(NAMES)
    assert rows["s_same"][1:6] == ["separable", "1x3", "1,2", "1,1", "SAME"]
    assert rows["s_dil"][1:6] == ["separable", "1x3", "1,1", "1,2", "VALID"]
    assert rows["t_same"][1:3] == ["transposed", "1x3"]
    assert rows["f_t"][1:3] == ["transposed", "1x3"]


def test_the_single_import_says_it_is_a_1d_conv(saved, tmp_path):
    _, path = saved[("last", "h5")]
    done = nd.gb("import", path, "--layer", "t_same", "-o", tmp_path / "t.gbc.json")
    assert done.returncode == 0, done.stderr
    assert ("1-D conv: imported as a 2-D conv of height 1 (kernel 1x3, strides 1,2, dilations "
            "1,1; a note on the canvas says so)") in done.stdout.splitlines()
    run = nd.run_cli(tmp_path / "t.gbc.json")
    np.testing.assert_array_equal(run["forward"], nd.run_canvas(tmp_path / "t.gbc.json")[
        "forward"])


# -- Keras 2's causal SeparableConv1D; a causal Conv1DTranspose --------------------------------

def _w(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


CAUSAL = ("s_causal", "SeparableConv1D", {"filters": 3, "kernel_size": [3], "strides": [2],
                                          "dilation_rate": [1], "padding": "causal",
                                          "depth_multiplier": 2, "use_bias": True},
          [("depthwise_kernel", _w(3, 4, 2)), ("pointwise_kernel", _w(1, 8, 3)),
           ("bias", _w(3))])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_causal_separable_conv1d_pads_its_depthwise_conv_on_the_left(fmt, errors, tmp_path):
    """Keras 2 wrote causal SeparableConv1D layers: the depthwise conv on the input with
    d * (k - 1) zeros on the left (against Keras 3's valid layer on that padded input)."""
    from engine.graph.layer_canvas import read_model, write_layer_canvas

    keras = _keras()
    path = kf.write_sequential(tmp_path / f"causal.{fmt}", [CAUSAL], [None, 11, 4])
    layer = read_model(str(path)).find("s_causal", str(path))
    done = write_layer_canvas(layer, str(tmp_path / "c.gbc.json"))
    assert done.conv.attrs["explicit_paddings"] == [0, 0, 0, 0, 2, 0, 0, 0]
    assert list(done.output_shape) == [1, 1, 6, 3]
    r = nd.run_canvas(tmp_path / "c.gbc.json")
    x, dy = _to_last(r["input"], False), _to_last(r["out_backprop"], False)
    weights = dict(CAUSAL[3])
    valid = keras.layers.SeparableConv1D(3, 3, strides=2, depth_multiplier=2, use_bias=False)
    valid.build((None, 13, 4))
    valid.set_weights([weights["depthwise_kernel"], weights["pointwise_kernel"]])
    padded = np.pad(x, [(0, 0), (2, 0), (0, 0)])
    ref = _tf_reference(keras, valid, padded, dy)
    pairs = [("forward", _to_last(r["pointwise_forward"], False), ref["forward"]),
             ("grad_input", _to_last(r["grad_input"], False), ref["grad_input"][:, 2:]),
             ("grad_filter", r["grad_filter"][0], ref["depthwise_kernel"]),
             ("pointwise_grad_filter", r["pointwise_grad_filter"][0], ref["pointwise_kernel"])]
    for what, a, b in pairs:
        errors[("s_causal", fmt, what)] = err = nd.close(a, b)
        assert err < TOL, what
    notes = [n.text for n in done.canvas.notes.values()]
    assert any(t.endswith("causal padding = 2 zeros on the left.") for t in notes), notes


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_causal_conv1d_transpose_is_refused_in_one_line(fmt, tmp_path):
    from tests.cli_support import one_error

    layers = [("t_causal", "Conv1DTranspose", {"filters": 2, "kernel_size": 3,
                                               "padding": "causal"},
               [("kernel", _w(3, 2, 4)), ("bias", _w(2))])]
    path = kf.write_sequential(tmp_path / f"tc.{fmt}", layers, [None, 9, 4])
    listed = nd.gb("import", path, "--list")
    assert listed.returncode == 0, listed.stderr
    assert ("layer 't_causal': padding is the string 'causal', expected 'same', 'valid' (a "
            "transposed conv has no causal padding)") in listed.stdout, listed.stdout
    one_error(nd.gb("import", path, "--layer", "t_causal", "-o", tmp_path / "t.gbc.json"),
              "t_causal", "causal")


@pytest.mark.parametrize("config, words", [
    ({"strides": 2, "output_padding": [2]},
     ("padding valid with output_padding [2] and strides [2] is not the input gradient of a "
      "conv (output_padding must be below the stride)")),
    ({"output_padding": "x"},
     "output_padding is the string 'x', expected an integer >= 0 or a list of 1 (a 1-D conv)"),
    ({"kernel_size": [3, 3]},
     ("kernel_size is the list [3, 3], expected a positive integer or a list of 1 (a 1-D "
      "conv)")),
])
def test_a_bad_conv1d_transpose_config_is_one_line_naming_it(config, words, tmp_path):
    from engine.graph.layer_canvas import read_model

    layers = [("t_bad", "Conv1DTranspose", {"filters": 2, "kernel_size": 3, "use_bias": False,
                                            **config},
               [("kernel", _w(3, 2, 4))])]
    path = kf.write_sequential(tmp_path / "bad.h5", layers, [None, 9, 4])
    assert read_model(str(path)).refused == {"t_bad": f"layer 't_bad': {words} (in {path})"}


@pytest.mark.parametrize("kind, config, shape, want", [
    ("SeparableConv1D", {"filters": 4, "kernel_size": 3, "strides": 2, "padding": "same"},
     (None, 9, 3), (None, 5, 4)),
    ("SeparableConv1D", {"filters": 4, "kernel_size": [3], "dilation_rate": [2],
                         "data_format": "channels_first"}, (None, 3, 9), (None, 4, 5)),
    ("Conv1DTranspose", {"filters": 2, "kernel_size": 3, "strides": 2, "padding": "same"},
     (None, 5, 3), (None, 10, 2)),
    ("Conv1DTranspose", {"filters": 2, "kernel_size": [3], "strides": [2], "padding": "same",
                         "output_padding": [0], "data_format": "channels_first"},
     (None, 3, 5), (None, 2, 9)),
    ("Conv1DTranspose", {"filters": 2, "kernel_size": 2, "strides": 3, "output_padding": None},
     (None, 4, 3), (None, 12, 2)),
])
def test_shape_rules_of_the_1d_layers(kind, config, shape, want):
    from engine.io.models.keras_shapes import output_shape

    assert output_shape(kind, config, [shape]) == want
