"""Small model files for the import tests: an ONNX model built with onnx.helper, Keras .keras
and .h5 files written with h5py from a config, and the models' own arithmetic in NumPy (NCHW
direct sums with each format's padding rule written here, not the engine's)."""

from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path

import numpy as np

RNG = np.random.default_rng(7)


def _w(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


#: ONNX Conv nodes: name -> (weights OIHW, bias or None, attributes). Input X is [1, 4, 9, 8].
ONNX_CONVS = {
    "conv_grouped": (_w(6, 2, 3, 3), _w(6), {"group": 2, "strides": [2, 1], "dilations": [1, 2],
                                               "pads": [1, 0, 2, 1]}),
    "conv_dw_lower": (_w(8, 1, 2, 3), None, {"group": 4, "strides": [2, 2],
                                                 "auto_pad": "SAME_LOWER"}),
    "conv_upper": (_w(3, 4, 3, 3), _w(3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "conv_valid": (_w(2, 4, 1, 2), None, {"auto_pad": "VALID", "dilations": [1, 3]}),
    "conv_same_dilated": (_w(2, 4, 3, 3), None, {"auto_pad": "SAME_UPPER", "dilations": [2, 2]}),
}
ONNX_INPUT = (1, 4, 9, 8)


def write_onnx(path: Path) -> Path:
    from onnx import TensorProto, helper, numpy_helper, save

    nodes, inits, outputs = [], [], []
    for name, (w, b, attrs) in ONNX_CONVS.items():
        inits.append(numpy_helper.from_array(w, f"{name}_W"))
        ins = ["X", f"{name}_W"]
        if b is not None:
            inits.append(numpy_helper.from_array(b, f"{name}_B"))
            ins.append(f"{name}_B")
        nodes.append(helper.make_node("Conv", ins, [f"{name}_Y"], name=name, **attrs))
        outputs.append(helper.make_tensor_value_info(f"{name}_Y", TensorProto.FLOAT, None))
    nodes.append(helper.make_node("Relu", ["conv_upper_Y"], ["R"], name="relu"))
    outputs.append(helper.make_tensor_value_info("R", TensorProto.FLOAT, None))
    inits.append(numpy_helper.from_array(_w(2, 1, 2, 2, 2), "conv3d_W"))
    # pads 1 on every side of a 2x2x2 kernel: neither SAME nor VALID (a Pad, then a VALID Conv3D)
    nodes.append(helper.make_node("Conv", ["X3", "conv3d_W"], ["Y3"], name="conv3d",
                                  pads=[1, 1, 1, 1, 1, 1]))
    outputs.append(helper.make_tensor_value_info("Y3", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ONNX_INPUT),
                         helper.make_tensor_value_info("X3", TensorProto.FLOAT, [1, 1, 3, 4, 4])],
        outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    save(model, str(path))
    return path


def conv_nchw(x: np.ndarray, w: np.ndarray, group: int, strides, dilations,
              pads_tblr) -> np.ndarray:
    """ONNX Conv without bias, by its definition: zero-pad, then for every output element the
    sum over the group's input channels and kernel taps (float64)."""
    t, b, left, r = pads_tblr
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, b), (left, r)))
    n, _c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (wd - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, m, oh, ow))
    per = m // group
    for o in range(m):
        g = o // per
        for i in range(kh):
            for j in range(kw):
                patch = x[:, g * cg:(g + 1) * cg, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                          j * dw:j * dw + (ow - 1) * sw + 1:sw]
                out[:, o] += np.einsum("nqrc,q->nrc", patch, w[o, :, i, j].astype(np.float64))
    return out


def onnx_pads(name: str, hw: tuple[int, int]) -> tuple[int, int, int, int]:
    """The ONNX spec's padding (top, bottom, left, right) of a node on an input of ``hw``."""
    w, _, attrs = ONNX_CONVS[name]
    auto = attrs.get("auto_pad", "NOTSET")
    if auto == "NOTSET":
        p = attrs.get("pads", [0, 0, 0, 0])
        return p[0], p[2], p[1], p[3]
    if auto == "VALID":
        return 0, 0, 0, 0
    out = []
    for size, k, s in zip(hw, w.shape[2:], attrs.get("strides", [1, 1]), strict=True):
        total = max(0, (math.ceil(size / s) - 1) * s + k - size)
        small = total // 2
        out += [small, total - small] if auto == "SAME_UPPER" else [total - small, small]
    return tuple(out)


def onnx_forward(name: str, x: np.ndarray) -> np.ndarray:
    w, _, attrs = ONNX_CONVS[name]
    return conv_nchw(x, w, attrs.get("group", 1), attrs.get("strides", [1, 1]),
                     attrs.get("dilations", [1, 1]), onnx_pads(name, x.shape[2:]))


# Keras: a Sequential config. Layer name -> (class, config, build input shape, weights).
KERAS_LAYERS = {
    "conv_same": ("Conv2D", {"filters": 4, "kernel_size": [3, 3], "strides": [2, 2], "padding": "same",
                                 "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1,
                                 "use_bias": True}, [None, 7, 6, 3], [_w(3, 3, 3, 4), _w(4)]),
    "dw": ("DepthwiseConv2D", {"kernel_size": [3, 2], "strides": [1, 1], "padding": "valid",
                                   "depth_multiplier": 2, "data_format": "channels_last",
                                   "dilation_rate": [2, 1], "use_bias": False},
           [None, 7, 6, 3], [_w(3, 2, 3, 2)]),
    "grouped": ("Conv2D", {"filters": 6, "kernel_size": [2, 2], "strides": [1, 2], "padding": "same",
                               "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 2,
                               "use_bias": True}, [None, 5, 5, 4], [_w(2, 2, 2, 6), _w(6)]),
    "cfirst": ("Conv2D", {"filters": 2, "kernel_size": [2, 3], "strides": [1, 1], "padding": "same",
                              "data_format": "channels_first", "dilation_rate": [1, 1], "groups": 1,
                              "use_bias": False}, [None, 3, 5, 6], [_w(2, 3, 3, 2)]),
    "c3d": ("Conv3D", {"filters": 1, "kernel_size": [1, 1, 1], "use_bias": False},
            [None, 2, 2, 2, 1],
            [_w(1, 1, 1, 1, 1)]),
    "flat": ("Flatten", {}, [None, 5, 5, 4], []),
}


#: Where Keras 3 saves each layer's variables: by class in list order, not by layer name.
KERAS3_PATHS = ("layers/conv2d", "layers/depthwise_conv2d", "layers/conv2d_1", "layers/conv2d_2",
                "layers/conv3d", "layers/flatten")


def keras_config() -> dict:
    layers = [{"module": "keras.layers", "class_name": "InputLayer",
               "config": {"name": "input_layer", "batch_shape": [None, 7, 6, 3]}}]
    for name, (cls, cfg, shape, _) in KERAS_LAYERS.items():
        layers.append({"module": "keras.layers", "class_name": cls,
                       "config": {"name": name, **cfg},
                       "build_config": {"input_shape": shape}})
    return {"module": "keras", "class_name": "Sequential",
            "config": {"name": "small", "layers": layers}}


def write_keras(path: Path) -> Path:
    """Keras 3 ``.keras``: a zip of config.json, metadata.json and model.weights.h5."""
    import h5py

    buf = io.BytesIO()
    with h5py.File(buf, "w") as h5:
        for where, (*_, weights) in zip(KERAS3_PATHS, KERAS_LAYERS.values(), strict=True):
            group = h5.create_group(f"{where}/vars")  # Flatten too: an empty vars group
            for k, arr in enumerate(weights):
                group.create_dataset(str(k), data=arr)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.6.0"}))
        z.writestr("config.json", json.dumps(keras_config()))
        z.writestr("model.weights.h5", buf.getvalue())
    return path


def write_h5(path: Path) -> Path:
    """Legacy Keras 2 ``.h5``: model_config attribute and model_weights/<layer>/<layer>/...:0."""
    import h5py

    config = keras_config()
    for entry in config["config"]["layers"]:  # Keras 2 spelling
        entry["config"]["batch_input_shape"] = entry.pop("build_config", {}).get("input_shape")
    with h5py.File(path, "w") as h5:
        h5.attrs["model_config"] = json.dumps(config)
        root = h5.create_group("model_weights")
        for name, (cls, cfg, _, weights) in KERAS_LAYERS.items():
            group = root.create_group(name)
            kernel = "depthwise_kernel:0" if cls == "DepthwiseConv2D" else "kernel:0"
            names = [kernel, "bias:0"][: len(weights)]
            for wname, arr in zip(names, weights, strict=True):
                group.create_dataset(f"{name}/{wname}", data=arr)
            group.attrs["weight_names"] = [f"{name}/{n}".encode() for n in names]
    return path


def keras_forward(name: str, x: np.ndarray) -> np.ndarray:
    """The Keras layer (no bias) on ``x`` in the layer's data_format, as Keras defines it:
    padding same = output ceil(in / stride), the odd pad after."""
    cls, cfg, _, weights = KERAS_LAYERS[name]
    first = cfg["data_format"] == "channels_first"
    xc = x if first else x.transpose(0, 3, 1, 2)
    k = weights[0]
    if cls == "DepthwiseConv2D":
        c, m = k.shape[2], k.shape[3]
        oihw, group = k.transpose(2, 3, 0, 1).reshape(c * m, 1, *k.shape[:2]), c
    else:
        oihw, group = k.transpose(3, 2, 0, 1), cfg["groups"]
    strides, dil = cfg["strides"], cfg["dilation_rate"]
    pads = [0, 0, 0, 0]
    if cfg["padding"] == "same":
        pads = []
        for size, kk, s, d in zip(xc.shape[2:], oihw.shape[2:], strides, dil, strict=True):
            total = max(0, (math.ceil(size / s) - 1) * s + (kk - 1) * d + 1 - size)
            pads += [total // 2, total - total // 2]
    out = conv_nchw(xc, oihw, group, strides, dil, pads)
    return out if first else out.transpose(0, 2, 3, 1)
