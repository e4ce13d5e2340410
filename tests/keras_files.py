"""A small functional Keras model written as Keras writes it, without Keras: ``.keras`` (Keras 3:
config.json with keras tensors carrying their shapes, ``batch_shape``, weights at
``layers/<class>/vars/<i>``) and ``.h5`` (Keras 2 spelling: ``batch_input_shape``, inbound
nodes as ``[[layer, node, tensor, {}]]`` with no shapes, weights listed by ``weight_names``).
The shapes below are worked out by hand from Keras's output-shape rules."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np

RNG = np.random.default_rng(23)
INPUT_SHAPE = [None, 9, 8, 3]


def _w(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


#: (name, class, config, inbound layer names, weights as (Keras 2 name, array), input shape as
#: worked out by hand (None: not a conv layer)).
LAYERS = [
    ("pad", "ZeroPadding2D", {"padding": [[1, 0], [0, 2]]}, ["input_1"], [], None),
    ("c1", "Conv2D", {"filters": 4, "kernel_size": [3, 3], "strides": [2, 2], "padding": "valid",
                      "activation": "relu", "use_bias": True}, ["pad"],
     [("kernel", _w(3, 3, 3, 4)), ("bias", _w(4))], [1, 10, 10, 3]),
    ("bn", "BatchNormalization", {"axis": -1}, ["c1"], [], None),
    ("dw", "DepthwiseConv2D", {"kernel_size": [3, 3], "padding": "same", "depth_multiplier": 2,
                               "activation": "sigmoid", "use_bias": False}, ["bn"],
     [("depthwise_kernel", _w(3, 3, 4, 2))], [1, 4, 4, 4]),
    ("pool", "MaxPooling2D", {"pool_size": [2, 2], "strides": [1, 1], "padding": "valid"},
     ["dw"], [], None),
    ("c2", "Conv2D", {"filters": 8, "kernel_size": [1, 1], "padding": "same",
                      "activation": "linear", "use_bias": False}, ["pool"],
     [("kernel", _w(1, 1, 8, 8))], [1, 3, 3, 8]),
    ("add", "Add", {}, ["pool", "c2"], [], None),
    ("cat", "Concatenate", {"axis": -1}, ["add", "pool"], [], None),
    ("sep", "SeparableConv2D", {"filters": 5, "kernel_size": [3, 2], "strides": [2, 2],
                                "padding": "same", "depth_multiplier": 1, "activation": "silu",
                                "use_bias": True}, ["cat"],
     [("depthwise_kernel", _w(3, 2, 16, 1)), ("pointwise_kernel", _w(1, 1, 16, 5)),
      ("bias", _w(5))], [1, 3, 3, 16]),
    ("tconv", "Conv2DTranspose", {"filters": 3, "kernel_size": [3, 3], "strides": [2, 2],
                                  "padding": "same", "output_padding": [1, 1],
                                  "use_bias": True}, ["sep"],
     [("kernel", _w(3, 3, 3, 5)), ("bias", _w(3))], [1, 2, 2, 5]),
    ("tconv_valid", "Conv2DTranspose", {"filters": 2, "kernel_size": [2, 3], "strides": [2, 3],
                                        "padding": "valid", "use_bias": False}, ["tconv"],
     [("kernel", _w(2, 3, 2, 3))], [1, 4, 4, 3]),
    ("gap", "GlobalAveragePooling2D", {"keepdims": False}, ["tconv_valid"], [], None),
]
#: Each layer's output shape (batch None), by hand, for the Keras 3 tensors.
OUTPUTS = {"input_1": [None, 9, 8, 3], "pad": [None, 10, 10, 3], "c1": [None, 4, 4, 4],
           "bn": [None, 4, 4, 4], "dw": [None, 4, 4, 8], "pool": [None, 3, 3, 8],
           "c2": [None, 3, 3, 8], "add": [None, 3, 3, 8], "cat": [None, 3, 3, 16],
           "sep": [None, 2, 2, 5], "tconv": [None, 4, 4, 3], "tconv_valid": [None, 8, 12, 2],
           "gap": [None, 2]}
KINDS = {name: kind for name, kind, *_ in LAYERS}
CONFIGS = {name: cfg for name, _, cfg, *_ in LAYERS}
WEIGHTS = {name: dict(ws) for name, _, _, _, ws, _ in LAYERS}
CONV_INPUTS = {name: shape for name, *_, shape in LAYERS if shape is not None}


def _tensor(name: str) -> dict:
    return {"class_name": "__keras_tensor__",
            "config": {"shape": OUTPUTS[name], "dtype": "float32",
                       "keras_history": [name, 0, 0]}}


def model_config(keras2: bool = False, input_shape_key: str | None = None) -> dict:
    """The Functional config; ``keras2``: Keras 2's spelling (no shapes on the edges)."""
    key = input_shape_key or ("batch_input_shape" if keras2 else "batch_shape")
    shape = INPUT_SHAPE if keras2 or key != "batch_shape" else {
        "class_name": "__tuple__", "config": {"value": INPUT_SHAPE}}  # Keras 3's nested tuple
    layers = [{"class_name": "InputLayer", "name": "input_1", "inbound_nodes": [],
               "config": {"name": "input_1", key: shape}}]
    for name, kind, cfg, inbound, _, _ in LAYERS:
        config = {"name": name, "data_format": "channels_last", **cfg}
        if keras2:
            nodes = [[[src, 0, 0, {}] for src in inbound]]
        else:
            args = [_tensor(s) for s in inbound]
            nodes = [{"args": args if len(args) == 1 else [args], "kwargs": {}}]
        layers.append({"class_name": kind, "name": name, "config": config,
                       "inbound_nodes": nodes})
    return {"class_name": "Functional", "config": {
        "name": "small_functional", "layers": layers, "input_layers": [["input_1", 0, 0]],
        "output_layers": [["gap", 0, 0]]}}


def _snake(kind: str) -> str:
    import re
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", kind)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def write_keras(path: Path) -> Path:
    import h5py

    buf = io.BytesIO()
    used: dict[str, int] = {}
    with h5py.File(buf, "w") as h5:
        for name, kind, *_ in [("input_1", "InputLayer")] + [(n, k) for n, k, *_ in LAYERS]:
            snake = _snake(kind)
            used[snake] = used.get(snake, -1) + 1
            where = f"layers/{snake}" + (f"_{used[snake]}" if used[snake] else "")
            group = h5.create_group(f"{where}/vars")
            for i, arr in enumerate(WEIGHTS.get(name, {}).values()):
                group.create_dataset(str(i), data=arr)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.15.1"}))
        z.writestr("config.json", json.dumps(model_config()))
        z.writestr("model.weights.h5", buf.getvalue())
    return path


def write_h5(path: Path, config: dict | None = None) -> Path:
    import h5py

    with h5py.File(path, "w") as h5:
        h5.attrs["model_config"] = json.dumps(config or model_config(keras2=True))
        _legacy_weights(h5, [(name, weights) for name, _, _, _, weights, _ in LAYERS])
    return path


def _legacy_weights(h5, layers: list) -> None:
    """Keras 2's ``model_weights``: per layer ``(name, weights as (role, array))`` a group with
    ``<name>/<role>:0`` datasets listed in its ``weight_names``."""
    root = h5.create_group("model_weights")
    for name, weights in layers:
        group = root.create_group(name)
        names = [f"{name}/{role}:0" for role, _ in weights]
        for wname, (_, arr) in zip(names, weights, strict=True):
            group.create_dataset(wname, data=arr)
        group.attrs["weight_names"] = [n.encode() for n in names]


# -- Sequential models of any layers (tests/test_import_keras_separable.py) -------------------

def sequential_config(layers: list, input_shape: list, keras2: bool = False) -> dict:
    """A Sequential config of ``layers`` (name, class, config, weights as (role, array)) on
    an InputLayer of ``input_shape`` (batch first), as Keras 3 (``batch_shape``) or Keras 2
    (``batch_input_shape``) writes it."""
    key = "batch_input_shape" if keras2 else "batch_shape"
    entries = [{"class_name": "InputLayer", "config": {"name": "input", key: input_shape}}]
    for name, kind, cfg, _ in layers:
        entries.append({"class_name": kind,
                        "config": {"name": name, "data_format": "channels_last", **cfg}})
    return {"class_name": "Sequential", "config": {"name": "sequential", "layers": entries}}


def write_sequential(path: Path, layers: list, input_shape: list) -> Path:
    """``layers`` as a Sequential model in ``path``: ``.keras`` (Keras 3: weights at
    ``layers/<class in snake case>[_<i>]/vars/<i>``) or ``.h5`` (Keras 2 spelling)."""
    import h5py

    if path.suffix == ".h5":
        with h5py.File(path, "w") as h5:
            h5.attrs["model_config"] = json.dumps(sequential_config(layers, input_shape, True))
            _legacy_weights(h5, [(name, weights) for name, _, _, weights in layers])
        return path
    buf = io.BytesIO()
    used: dict[str, int] = {}
    with h5py.File(buf, "w") as h5:
        for _, kind, _, weights in layers:
            snake = _snake(kind)
            used[snake] = used.get(snake, -1) + 1
            group = h5.create_group(f"layers/{snake}" + (f"_{used[snake]}" if used[snake] else "")
                                    + "/vars")
            for i, (_, arr) in enumerate(weights):
                group.create_dataset(str(i), data=arr)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.15.1"}))
        z.writestr("config.json", json.dumps(sequential_config(layers, input_shape)))
        z.writestr("model.weights.h5", buf.getvalue())
    return path
