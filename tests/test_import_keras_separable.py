"""Keras SeparableConv2D as one canvas (the depthwise conv feeding the 1x1 pointwise conv, the
gradients of both) and Keras Conv1D / DepthwiseConv1D as 2-D convs of height 1, from .h5 and
.keras files written as Keras writes them (tests/keras_files.py).

Each layer is imported with ``gradblocks import --all`` (a subprocess, as a user runs it), its
canvas passes ``gradblocks check``, and its results are compared with a float64 NumPy definition
of the Keras layer written here: the forward output, and the whole layer's gradients (input,
depthwise kernel, pointwise kernel) against central differences of that definition (exact up to
rounding: the layer is linear in each of them)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from engine import api
from engine.graph.canvas_file import load_canvas
from tests import keras_files as kf

RNG = np.random.default_rng(2323)
#: float32 canvas against the float64 definition, relative to the largest value (sums of at
#: most a few hundred products of N(0, 1) values, two convs deep).
TOL = 3e-5


def _w(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


#: (name, class, config, weights): the separable convs, chained (9x8x3 -> 9x8x4 -> 4x4x5 ->
#: 2x4x3).
SEPARABLE = [
    ("sep_a", "SeparableConv2D", {"filters": 4, "kernel_size": [3, 3], "strides": [1, 1],
                                  "padding": "same", "depth_multiplier": 1,
                                  "activation": "relu", "use_bias": True},
     [("depthwise_kernel", _w(3, 3, 3, 1)), ("pointwise_kernel", _w(1, 1, 3, 4)),
      ("bias", _w(4))]),
    ("sep_b", "SeparableConv2D", {"filters": 5, "kernel_size": [3, 2], "strides": [2, 2],
                                  "padding": "valid", "depth_multiplier": 2,
                                  "activation": "linear", "use_bias": False},
     [("depthwise_kernel", _w(3, 2, 4, 2)), ("pointwise_kernel", _w(1, 1, 8, 5))]),
    ("sep_c", "SeparableConv2D", {"filters": 3, "kernel_size": 3, "strides": [2, 1],
                                  "padding": "same", "depth_multiplier": 2,
                                  "activation": "silu", "use_bias": True},
     [("depthwise_kernel", _w(3, 3, 5, 2)), ("pointwise_kernel", _w(1, 1, 10, 3)),
      ("bias", _w(3))]),
]
SEPARABLE_INPUT = [None, 9, 8, 3]
#: The 1-D convs, chained (24x3 -> 12x4 -> 8x5 -> 8x4 -> 8x8 -> 4x8 -> 3x16).
ONE_D = [
    ("c_same", "Conv1D", {"filters": 4, "kernel_size": [3], "strides": [2], "padding": "same",
                          "use_bias": True}, [("kernel", _w(3, 3, 4)), ("bias", _w(4))]),
    ("c_valid", "Conv1D", {"filters": 5, "kernel_size": 3, "dilation_rate": 2,
                           "padding": "valid", "use_bias": False}, [("kernel", _w(3, 4, 5))]),
    ("c_causal", "Conv1D", {"filters": 4, "kernel_size": [3], "dilation_rate": [2],
                            "padding": "causal", "activation": "relu", "use_bias": True},
     [("kernel", _w(3, 5, 4)), ("bias", _w(4))]),
    ("dw_causal", "DepthwiseConv1D", {"kernel_size": 3, "dilation_rate": 2, "padding": "causal",
                                      "depth_multiplier": 2, "use_bias": False},
     [("depthwise_kernel", _w(3, 4, 2))]),
    ("dw_same", "DepthwiseConv1D", {"kernel_size": [3], "strides": [2], "padding": "same",
                                    "depth_multiplier": 1, "use_bias": True},
     [("depthwise_kernel", _w(3, 8, 1)), ("bias", _w(8))]),
    ("dw_valid", "DepthwiseConv1D", {"kernel_size": 2, "padding": "valid",
                                     "depth_multiplier": 2, "use_bias": False},
     [("depthwise_kernel", _w(2, 8, 2))]),
]
ONE_D_INPUT = [None, 24, 3]
#: Each layer's input shape in the canvas, by hand from Keras's output-shape rules.
INPUTS = {"sep_a": [1, 9, 8, 3], "sep_b": [1, 9, 8, 4], "sep_c": [1, 4, 4, 5],
          "c_same": [1, 1, 24, 3], "c_valid": [1, 1, 12, 4], "c_causal": [1, 1, 8, 5],
          "dw_causal": [1, 1, 8, 4], "dw_same": [1, 1, 8, 8], "dw_valid": [1, 1, 4, 8]}
LAYERS = {name: (kind, cfg, dict(ws)) for name, kind, cfg, ws in SEPARABLE + ONE_D}


def gb(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)],
                          check=False, capture_output=True, text=True,
                          timeout=120)


# -- the Keras layers by definition, float64, NHWC ---------------------------------------------

def _pads(size: int, k: int, s: int, d: int, padding: str) -> tuple[int, int]:
    """Keras's padding of one axis: same as TensorFlow's SAME (the odd one after), causal
    d * (k - 1) before, valid none."""
    if padding == "causal":
        return d * (k - 1), 0
    if padding == "same":
        total = max(0, (math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size)
        return total // 2, total - total // 2
    return 0, 0


def conv(x: np.ndarray, w: np.ndarray, strides, dilations, padding: str,
         depthwise: bool) -> np.ndarray:
    """out[n, i, j, o] = sum over a, b, c of xpad[n, i*sh + a*dh, j*sw + b*dw, c] * w[a, b, c, o]
    (depthwise: output channel c * m + q = sum over a, b of xpad[..., c] * w[a, b, c, q])."""
    kh, kw = w.shape[:2]
    (sh, sw), (dh, dw) = strides, dilations
    ph, pw = _pads(x.shape[1], kh, sh, dh, padding), _pads(x.shape[2], kw, sw, dw, padding)
    xp = np.pad(x, [(0, 0), ph, pw, (0, 0)])
    oh = (xp.shape[1] - (kh - 1) * dh - 1) // sh + 1
    ow = (xp.shape[2] - (kw - 1) * dw - 1) // sw + 1
    out = 0
    for a in range(kh):
        for b in range(kw):
            patch = xp[:, a * dh:a * dh + (oh - 1) * sh + 1:sh, b * dw:b * dw + (ow - 1) * sw + 1:sw]
            if depthwise:
                out = out + (patch[..., :, None] * w[a, b]).reshape(*patch.shape[:3], -1)
            else:
                out = out + patch @ w[a, b]
    return out


def keras_layer(name: str, x: np.ndarray, weights: dict[str, np.ndarray],
                spec: tuple | None = None) -> np.ndarray:
    """The layer ``name`` (class and config: ``spec``, else from :data:`LAYERS`) without bias
    and activation on x (NHWC; a 1-D layer's x is [N, 1, W, C], its kernel [k, in, out] used as
    [1, k, in, out])."""
    kind, cfg, *_ = spec or LAYERS[name]

    def two(key: str) -> tuple[int, int]:
        v = cfg.get(key, 1)
        v = v if isinstance(v, list) else [v]
        return (1, v[0]) if kind.endswith("1D") else ((v[0], v[0]) if len(v) == 1 else tuple(v))
    if kind == "SeparableConv2D":
        mid = conv(x, weights["depthwise_kernel"], two("strides"), two("dilation_rate"),
                   cfg["padding"], depthwise=True)
        return conv(mid, weights["pointwise_kernel"], (1, 1), (1, 1), "valid", depthwise=False)
    key = "kernel" if kind == "Conv1D" else "depthwise_kernel"
    return conv(x, weights[key][None], two("strides"), two("dilation_rate"), cfg["padding"],
                depthwise=kind == "DepthwiseConv1D")


def numeric_gradient(f, value: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """d<f(value), dy>/d value by central differences in float64 (step 1: exact up to rounding
    for f linear in value)."""
    grad = np.zeros(value.shape)
    for i in np.ndindex(value.shape):
        e = np.zeros(value.shape)
        e[i] = 1.0
        grad[i] = (np.sum(f(value + e) * dy) - np.sum(f(value - e) * dy)) / 2
    return grad


def close(got: np.ndarray, want: np.ndarray) -> float:
    """The largest error relative to the largest value (at least 1)."""
    assert got.shape == want.shape
    return float(np.max(np.abs(got - want)) / max(1.0, np.max(np.abs(want))))


# -- the files and the imports -----------------------------------------------------------------

@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict:
    """For each format: the --list output and the --all folders of both models."""
    folder = tmp_path_factory.mktemp("keras_sep")
    out = {}
    for fmt in ("keras", "h5"):
        for model, layers, shape in (("sep", SEPARABLE, SEPARABLE_INPUT),
                                     ("oned", ONE_D, ONE_D_INPUT)):
            path = kf.write_sequential(folder / f"{model}.{fmt}", layers, shape)
            listed = gb("import", path, "--list")
            assert listed.returncode == 0, listed.stderr
            target = folder / f"{model}_{fmt}"
            done = gb("import", path, "--all", "-o", target)
            assert done.returncode == 0, done.stderr
            out[(model, fmt)] = (path, listed.stdout, target,
                                 json.loads((target / "index.json").read_text()))
    return out


FORMATS = ("keras", "h5")


@pytest.mark.parametrize("fmt", FORMATS)
def test_list_and_all_show_one_entry_per_layer(imported, fmt):
    for model, layers in (("sep", SEPARABLE), ("oned", ONE_D)):
        _, listed, _, index = imported[(model, fmt)]
        rows = [line.split() for line in listed.splitlines()[1:]]
        assert [r[0] for r in rows] == [item["layer"] for item in index] == [
            name for name, *_ in layers]
        for row, item in zip(rows, index, strict=True):
            assert "skipped" not in item
            assert row[1] == item["op"]  # the op column
            assert item["input_shape"] == INPUTS[item["layer"]]
            assert int(row[-1]) == item["output_shape"][-1]  # out channels: the layer's output
        if model == "sep":
            assert {item["op"] for item in index} == {"separable"}
            assert [r[2] for r in rows] == ["3x3", "3x2", "3x3"]  # the depthwise kernels
        else:
            assert [item["op"] for item in index] == ["Conv2D"] * 3 + ["depthwise"] * 3
            assert [r[2] for r in rows] == ["1x3", "1x3", "1x3", "1x3", "1x3", "1x2"]
            causal = index[2]["attrs"]
            assert causal["padding"] == "EXPLICIT"
            assert causal["explicit_paddings"] == [0, 0, 0, 0, 4, 0, 0, 0]  # d * (k - 1) left


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(LAYERS))
def test_each_layer_matches_its_keras_definition_forward_and_gradients(imported, fmt, name):
    model = "sep" if name.startswith("sep") else "oned"
    _, _, folder, index = imported[(model, fmt)]
    item = next(i for i in index if i["layer"] == name)
    canvas = folder / item["canvas"]
    check = gb("check", canvas)
    assert check.returncode == 0, check.stdout + check.stderr
    results = api.load(canvas).run()
    r = {k: np.asarray(results[k]) for k in load_canvas(canvas).nodes}
    kind, _, weights = LAYERS[name]
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    x, dy = r["input"].astype(np.float64), r["out_backprop"].astype(np.float64)
    separable = kind == "SeparableConv2D"
    want = keras_layer(name, x, w)
    got = r["pointwise_forward" if separable else "forward"]
    assert list(x.shape) == INPUTS[name] and list(got.shape) == item["output_shape"]
    assert close(got, want) <= TOL
    # the whole layer's gradients, against the definition
    dx = numeric_gradient(lambda v: keras_layer(name, v, w), x, dy)
    assert close(r["grad_input"], dx) <= TOL
    first = "depthwise_kernel" if kind != "Conv1D" else "kernel"
    dwk = numeric_gradient(lambda v: keras_layer(name, x, {**w, first: v}), w[first], dy)
    assert close(r["grad_filter"], dwk.reshape(r["grad_filter"].shape)) <= TOL
    if separable:
        dpw = numeric_gradient(lambda v: keras_layer(name, x, {**w, "pointwise_kernel": v}),
                               w["pointwise_kernel"], dy)
        assert close(r["pointwise_grad_filter"], dpw) <= TOL
    # the weights in the canvas are the file's, in TensorFlow's layout
    np.testing.assert_array_equal(r["filter"].reshape(weights[first].shape), weights[first])
    bias = weights.get("bias")
    assert (bias is None) == ("bias" not in r)
    if bias is not None:
        np.testing.assert_array_equal(r["bias"], bias)


def test_a_separable_canvas_chains_the_gradients_and_says_so(imported):
    _, _, folder, index = imported[("sep", "h5")]
    canvas = load_canvas(folder / index[0]["canvas"])
    edges = {(e.src[0], e.dst[0], e.dst[1]) for e in canvas.edges}
    assert ("forward", "pointwise_forward", "input") in edges
    assert ("out_backprop", "pointwise_grad_input", "out_backprop") in edges
    assert ("pointwise_grad_input", "grad_input", "out_backprop") in edges
    assert ("pointwise_grad_input", "grad_filter", "out_backprop") in edges
    assert canvas.nodes["forward"].type == "DepthwiseConv2D"
    assert canvas.nodes["pointwise_forward"].type == "Conv2D"
    notes = [n.text for n in canvas.notes.values()]
    assert notes[0].startswith("A separable conv: the depthwise conv (forward) feeds the 1x1 "
                               "pointwise conv")
    assert notes[1] == ("The model applies the activation 'relu' after this conv (and its "
                        "bias); the canvas computes the conv alone.")


def test_a_1d_canvas_says_it_is_a_2d_conv_of_height_1(imported):
    _, _, folder, index = imported[("oned", "keras")]
    notes = [n.text for n in load_canvas(folder / index[2]["canvas"]).notes.values()]
    assert notes[0] == ("A 1-D conv (kernel 3, stride 1, dilation 2) computed as a 2-D conv of "
                        "height 1: kernel 1x3, strides 1,1, dilations 1,2, the sequence as an "
                        "input of height 1; causal padding = 4 zeros on the left.")


def test_the_single_import_of_a_separable_and_a_1d_layer_says_what_it_wrote(imported, tmp_path):
    path = imported[("sep", "keras")][0]
    done = gb("import", path, "--layer", "sep_b", "-o", tmp_path / "s.gbc.json")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("layer sep_b: separable, DepthwiseConv2D NHWC padding VALID, input "
                        "[1, 9, 8, 4] -> output [1, 4, 4, 5]")
    assert "separable: the depthwise conv (forward) feeds the 1x1 pointwise conv " \
           "(pointwise_forward); grad_input and grad_filter are the whole layer's gradients" \
           in lines
    assert sorted(p.name.split(".")[1] for p in tmp_path.glob("*.npy")) == [
        "filter", "pointwise_filter"]
    path = imported[("oned", "h5")][0]
    done = gb("import", path, "--layer", "dw_causal", "-o", tmp_path / "d.gbc.json")
    assert done.returncode == 0, done.stderr
    assert ("1-D conv: imported as a 2-D conv of height 1 (kernel 1x3, strides 1,1, dilations "
            "1,2; a note on the canvas says so)") in done.stdout.splitlines()


def test_relative_output_paths_in_a_subfolder_import(imported, tmp_path):
    """``-o sub/c.gbc.json`` and ``--all -o sub`` relative to the working folder (the arrays'
    trial check once looked for them in sub/sub/)."""
    path = imported[("sep", "h5")][0]
    (tmp_path / "sub").mkdir()
    one = subprocess.run([sys.executable, "-m", "engine.cli", "import", str(path), "--layer",
                          "sep_a", "-o", "sub/c.gbc.json"], cwd=tmp_path, check=False,
                         capture_output=True, text=True, timeout=120)
    assert one.returncode == 0, one.stderr
    every = subprocess.run([sys.executable, "-m", "engine.cli", "import", str(path), "--all",
                            "-o", "all"], cwd=tmp_path, check=False, capture_output=True,
                           text=True, timeout=120)
    assert every.returncode == 0, every.stderr
    for canvas in ("sub/c.gbc.json", "all/sep_b.gbc.json"):
        check = gb("check", tmp_path / canvas)
        assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_channels_first_conv1d_is_nchw_of_height_1(fmt, tmp_path):
    from engine.graph.layer_canvas import read_model, write_layer_canvas

    kernel = _w(3, 3, 4)
    layers = [("cf", "Conv1D", {"filters": 4, "kernel_size": 3, "padding": "causal",
                                "data_format": "channels_first", "use_bias": False},
               [("kernel", kernel)])]
    path = kf.write_sequential(tmp_path / f"cf.{fmt}", layers, [None, 3, 12])
    layer = read_model(str(path)).find("cf", str(path))
    done = write_layer_canvas(layer, str(tmp_path / "cf.gbc.json"))
    assert list(done.conv.input_shape) == [1, 3, 1, 12]
    assert done.conv.attrs["explicit_paddings"] == [0, 0, 0, 0, 0, 0, 2, 0]
    results = api.load(tmp_path / "cf.gbc.json").run()
    x = np.asarray(results["input"], np.float64).transpose(0, 2, 3, 1)  # NHWC
    want = keras_layer("cf", x, {"kernel": kernel.astype(np.float64)}, layers[0][1:3])
    assert close(np.asarray(results["forward"]).transpose(0, 2, 3, 1), want) <= TOL
