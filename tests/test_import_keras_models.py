"""Keras models as Keras writes them (tests/keras_files.py): every conv layer of a functional
model with ZeroPadding2D, BatchNormalization, pooling, Add, Concatenate, SeparableConv2D,
Conv2DTranspose and fused activations imports from .keras and .h5 without --input-size, and each
canvas's forward equals a float64 NumPy definition of the Keras layer written here."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from engine import api
from engine.graph.layer_canvas import read_model, write_layer_canvas
from engine.io.models.keras_graph import layer_inputs
from engine.io.models.keras_shapes import ShapeStop, output_shape
from tests import keras_files as kf
from tests.model_files import conv_nchw

#: float32 canvas against the float64 definition (sums of at most ~150 products of N(0,1)).
TOL = 2e-5


@pytest.fixture(scope="module", params=["keras", "h5"])
def model(request, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("keras_models")
    write = kf.write_keras if request.param == "keras" else kf.write_h5
    return write(folder / f"small.{request.param}")


def _same_pads(size: int, k: int, s: int, d: int = 1) -> list[int]:
    total = max(0, (math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size)
    return [total // 2, total - total // 2]


def keras_conv(name: str, x: np.ndarray, kernel: np.ndarray, depthwise: bool = False,
               strides=None, padding=None) -> np.ndarray:
    """Keras Conv2D / DepthwiseConv2D without bias and activation, NHWC, by definition."""
    cfg = kf.CONFIGS[name]
    strides = strides or cfg.get("strides", [1, 1])
    padding = padding or cfg["padding"]
    kh, kw = kernel.shape[:2]
    if depthwise:
        c, m = kernel.shape[2:]
        oihw, group = kernel.transpose(2, 3, 0, 1).reshape(c * m, 1, kh, kw), c
    else:
        oihw, group = kernel.transpose(3, 2, 0, 1), 1
    pads = [0, 0, 0, 0]
    if padding == "same":
        pads = _same_pads(x.shape[1], kh, strides[0]) + _same_pads(x.shape[2], kw, strides[1])
    out = conv_nchw(x.transpose(0, 3, 1, 2), oihw, group, strides, [1, 1], pads)
    return out.transpose(0, 2, 3, 1)


def keras_conv_transpose(name: str, x: np.ndarray) -> np.ndarray:
    """Keras Conv2DTranspose without bias, NHWC: every input pixel scatters kernel * x at
    i * s + t (the full output), then Keras's crop: the JAX padding (left, right) of keras
    backend_utils, so output j is full[j + k - 1 - left] (zero outside)."""
    cfg = kf.CONFIGS[name]
    w = kf.WEIGHTS[name]["kernel"].astype(np.float64)  # kh, kw, out, in
    (sh, sw), op = cfg["strides"], cfg.get("output_padding")
    n, h, wd, _ = x.shape
    kh, kw, cout, _ = w.shape
    full = np.zeros((n, (h - 1) * sh + kh, (wd - 1) * sw + kw, cout))
    for i in range(h):
        for j in range(wd):
            full[:, i * sh:i * sh + kh, j * sw:j * sw + kw] += np.einsum(
                "nc,abdc->nabd", x[:, i, j].astype(np.float64), w)
    out_sizes, starts = [], []
    for size, k, s, o in zip((h, wd), (kh, kw), (sh, sw), op or (None, None), strict=True):
        if cfg["padding"] == "valid":
            extra = max(k, s) - k if o is None else o
            left, out = k - 1, (size - 1) * s + k + extra
        else:
            total = s + k - 2 if o is None else k + k % 2 - 2 + o
            left = min(total // 2 + total % 2, k - 1)
            out = size * s if o is None else (size - 1) * s + k % 2 + o
        out_sizes.append(out)
        starts.append(k - 1 - left)
    y = np.zeros((n, *out_sizes, cout))
    rows = min(out_sizes[0], full.shape[1] - starts[0])
    cols = min(out_sizes[1], full.shape[2] - starts[1])
    y[:, :rows, :cols] = full[:, starts[0]:starts[0] + rows, starts[1]:starts[1] + cols]
    return y


def reference(layer: str, x: np.ndarray) -> np.ndarray:
    w = kf.WEIGHTS
    if layer in ("c1", "c2"):
        return keras_conv(layer, x, w[layer]["kernel"])
    if layer == "dw":
        return keras_conv(layer, x, w[layer]["depthwise_kernel"], depthwise=True)
    if layer == "sep":  # the depthwise conv, then the 1x1 pointwise conv
        mid = keras_conv("sep", x, w["sep"]["depthwise_kernel"], depthwise=True)
        return keras_conv("sep", mid, w["sep"]["pointwise_kernel"], strides=[1, 1],
                          padding="valid")
    return keras_conv_transpose(layer, x)


EXPECTED_LAYERS = ["c1", "dw", "c2", "sep", "tconv", "tconv_valid"]
#: The input shapes by hand (keras_files.CONV_INPUTS).
INPUTS = kf.CONV_INPUTS


@pytest.mark.parametrize("name", EXPECTED_LAYERS)
def test_every_conv_layer_imports_without_input_size_and_matches_keras(model, name, tmp_path):
    found = read_model(str(model))
    assert [la.name for la in found.layers] == EXPECTED_LAYERS
    layer = found.find(name, str(model))
    done = write_layer_canvas(layer, str(tmp_path / "c.gbc.json"))
    assert list(done.conv.input_shape) == INPUTS[name]
    results = api.load(tmp_path / "c.gbc.json").run()
    x, y = results["input"], results["pointwise_forward" if name == "sep" else "forward"]
    want = reference(name, x)
    assert y.shape == want.shape
    assert np.max(np.abs(y - want)) <= TOL * max(1.0, np.max(np.abs(want)))
    # the gradients are the adjoints of forward: <forward(x), dy> = <x, grad_input>
    dy = results["out_backprop"].astype(np.float64)
    lhs = float(np.sum(want * dy))
    assert float(np.sum(x.astype(np.float64) * results["grad_input"])) == pytest.approx(
        lhs, rel=1e-4, abs=1e-3)
    assert float(np.sum(results["filter"].astype(np.float64) * results["grad_filter"])) == \
        pytest.approx(lhs, rel=1e-4, abs=1e-3)
    if name == "sep":  # the whole layer is linear in the pointwise kernel too
        assert float(np.sum(results["pointwise_filter"].astype(np.float64)
                            * results["pointwise_grad_filter"])) == pytest.approx(
            lhs, rel=1e-4, abs=1e-3)


@pytest.mark.parametrize("name, activation", [("c1", "relu"), ("dw", "sigmoid"),
                                              ("sep", "silu"), ("c2", None),
                                              ("tconv", None)])
def test_a_fused_activation_is_said_on_the_canvas(model, name, activation, tmp_path):
    layer = read_model(str(model)).find(name, str(model))
    assert layer.final.activation == activation
    done = write_layer_canvas(layer, str(tmp_path / "c.gbc.json"))
    notes = [n.text for n in done.canvas.notes.values()]
    said = [t for t in notes if "activation" in t]
    if activation is None:
        assert said == []
    else:
        assert said == [(f"The model applies the activation {activation!r} after this conv "
                         "(and its bias); the canvas computes the conv alone.")]
    assert any("Conv2DBackpropInput" in t for t in notes) == name.startswith("tconv")


def test_the_walk_agrees_with_the_shapes_keras_records():
    """The Keras 2 spelling (no shapes on the edges) walks to the same input shapes as the
    Keras 3 tensors state, for every layer."""
    k3, k2 = kf.model_config(), kf.model_config(keras2=True)
    a, b = layer_inputs(k3), layer_inputs(k2)
    for e3, e2 in zip(k3["config"]["layers"][1:], k2["config"]["layers"][1:], strict=True):
        assert a[id(e3)] == b[id(e2)], e3["name"]
        if e3["name"] in kf.CONV_INPUTS:
            assert list(b[id(e2)])[1:] == kf.CONV_INPUTS[e3["name"]][1:]


@pytest.mark.parametrize("key", ["batch_shape", "batch_input_shape"])
def test_nested_and_plain_input_shapes(key, tmp_path):
    config = kf.model_config(keras2=True, input_shape_key=key)
    found = read_model(str(kf.write_h5(tmp_path / "m.h5", config)))
    assert found.find("c1", "m").input_hw == (10, 10)


def test_an_unknown_layer_type_names_the_layer_and_input_size_still_works(tmp_path):
    config = kf.model_config(keras2=True)
    config["config"]["layers"][1]["class_name"] = "Lambda"  # pad becomes a Lambda
    path = kf.write_h5(tmp_path / "m.h5", config)
    layer = read_model(str(path)).find("c1", str(path))
    with pytest.raises(Exception) as err:
        write_layer_canvas(layer, str(tmp_path / "c.gbc.json"))
    assert str(err.value) == (
        "layer 'c1': the model does not say its input size (the walk stopped at layer 'pad' "
        "('Lambda'): its type 'Lambda' is not one whose output shape the import computes): "
        "give --input-size H,W or --input FILE.npy")
    done = write_layer_canvas(layer, str(tmp_path / "c.gbc.json"), input_hw=(10, 10))
    assert list(done.output_shape) == [1, 4, 4, 4]


@pytest.mark.parametrize("kind, config, shapes, want", [
    ("ZeroPadding2D", {"padding": 2}, [(None, 5, 6, 3)], (None, 9, 10, 3)),
    ("Cropping2D", {"cropping": [[1, 0], [2, 1]]}, [(None, 5, 6, 3)], (None, 4, 3, 3)),
    ("MaxPooling2D", {"pool_size": 3, "strides": 2, "padding": "same"}, [(1, 7, 7, 2)],
     (1, 4, 4, 2)),
    ("AveragePooling2D", {"pool_size": [2, 2]}, [(1, 7, 6, 2)], (1, 3, 3, 2)),
    ("GlobalAveragePooling2D", {"keepdims": True, "data_format": "channels_first"},
     [(1, 4, 7, 7)], (1, 4, 1, 1)),
    ("Reshape", {"target_shape": [1, 1, -1]}, [(None, 32)], (None, 1, 1, 32)),
    ("Multiply", {}, [(None, 7, 7, 32), (None, 1, 1, 32)], (None, 7, 7, 32)),
    ("Concatenate", {"axis": 1}, [(None, 2, 5, 5), (None, 3, 5, 5)], (None, 5, 5, 5)),
    ("UpSampling2D", {"size": [2, 3]}, [(None, 2, 2, 1)], (None, 4, 6, 1)),
    ("Conv2D", {"filters": 4, "kernel_size": 3, "dilation_rate": 2, "padding": "valid"},
     [(None, 9, 9, 3)], (None, 5, 5, 4)),
    ("Conv2DTranspose", {"filters": 2, "kernel_size": 3, "strides": 2, "padding": "same"},
     [(None, 5, 5, 3)], (None, 10, 10, 2)),
    ("Dense", {"units": 10}, [(None, 7)], (None, 10)),
    ("Flatten", {}, [(None, 2, 3, 4)], (None, 24)),
])
def test_shape_rules(kind, config, shapes, want):
    assert output_shape(kind, config, shapes) == want


def test_a_shape_rule_refuses_what_does_not_fit():
    with pytest.raises(ShapeStop, match="do not broadcast"):
        output_shape("Add", {}, [(None, 4, 4, 3), (None, 4, 4, 5)])
    with pytest.raises(ShapeStop, match="target_shape"):
        output_shape("Reshape", {"target_shape": [5, -1]}, [(None, 12)])
