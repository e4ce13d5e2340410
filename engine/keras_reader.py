"""The Conv2D and DepthwiseConv2D layers of a Keras model file, read with ``h5py`` and the
file's own config JSON (no TensorFlow; ``h5py`` is in the ``models`` extra).

Two formats:

* ``.keras`` (Keras 3): a zip with ``config.json`` and ``model.weights.h5``, where a layer's
  variables are the datasets ``layers/<class>/vars/0`` (kernel) and ``vars/1`` (bias), the
  layers named by class in list order (``conv2d``, ``conv2d_1``, ``depthwise_conv2d``; see
  :func:`_walk`), a nested model's under ``layers/<its class>/layers/``;
* ``.h5`` (legacy Keras 2 full model): an HDF5 file whose ``model_config`` attribute is the
  config JSON, a layer's variables under ``model_weights/<layer>`` as listed by that group's
  ``weight_names`` attribute (``<layer>/kernel:0``, ``<layer>/bias:0``; depthwise:
  ``depthwise_kernel:0``).

Keras kernels are already in TensorFlow's layout (HWIO with in = in_channels / groups; depthwise
H, W, in, multiplier); ``padding`` same is TensorFlow's SAME.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator

import numpy as np

from engine.model_import import (
    ConvLayer,
    ModelImportError,
    ModelLayers,
    check_layer,
    float_weights,
    need_module,
)

CONV_CLASSES = ("Conv2D", "DepthwiseConv2D")
OTHER_CONV_CLASSES = ("Conv1D", "Conv3D", "SeparableConv2D", "SeparableConv1D", "Conv2DTranspose",
                      "Conv3DTranspose", "Conv1DTranspose", "DepthwiseConv1D")
MODEL_CLASSES = ("Sequential", "Functional", "Model")
#: Size of config.json read from a .keras zip, at most.
MAX_CONFIG_BYTES = 64 * 2**20


def _pair(name: str, what: str, value) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int)
                                                                   for v in value):
        return int(value[0]), int(value[1])
    raise ModelImportError(f"layer {name!r}: {what} {value!r} is not one or two integers "
                           "(a 2-D conv)")


def snake_case(class_name: str) -> str:
    """Keras's ``naming.to_snake_case`` of a class name: Conv2D -> conv2d,
    DepthwiseConv2D -> depthwise_conv2d."""
    name = re.sub(r"\W+", "", class_name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def _walk(layers: list, prefix: str = "layers"
          ) -> Iterator[tuple[str, str, dict, dict]]:
    """(Keras 3 weight path, layer name, layer entry, previous entry), nested models flattened.

    Keras 3 addresses a model's layers list by class, not by name: ``layers/conv2d``,
    ``layers/conv2d_1``, ... in list order (keras/src/saving/saving_lib.py,
    ``_save_container_state``); a nested model's layers are under its own path + ``/layers``.
    """
    previous: dict = {}
    used: dict[str, int] = {}
    for entry in layers:
        if not isinstance(entry, dict):
            continue
        config = entry.get("config") or {}
        name = str(config.get("name", entry.get("name", "")))
        kind = snake_case(str(entry.get("class_name", "")))
        used[kind] = used.get(kind, -1) + 1
        path = f"{prefix}/{kind}" + (f"_{used[kind]}" if used[kind] else "")
        if entry.get("class_name") in MODEL_CLASSES and isinstance(config.get("layers"), list):
            yield from _walk(config["layers"], f"{path}/layers")
        else:
            yield path, name, entry, previous
        previous = entry


def _input_shape(entry: dict, previous: dict) -> list | None:
    for source in (entry, previous if previous.get("class_name") == "InputLayer" else {}):
        shape = (source.get("build_config") or {}).get("input_shape")
        config = source.get("config") or {}
        shape = shape or config.get("batch_input_shape") or config.get("batch_shape")
        if isinstance(shape, list) and len(shape) == 4:
            return shape
    return None


def _conv_layer(name: str, entry: dict, previous: dict, weights: list[np.ndarray]) -> ConvLayer:
    kind, c = entry["class_name"], entry.get("config") or {}
    kernel = _pair(name, "kernel_size", c.get("kernel_size"))
    strides = _pair(name, "strides", c.get("strides", 1))
    dilations = _pair(name, "dilation_rate", c.get("dilation_rate", 1))
    padding = str(c.get("padding", "valid")).upper()
    if padding not in ("SAME", "VALID"):
        raise ModelImportError(f"layer {name!r}: padding {c.get('padding')!r} cannot be "
                               "imported (same or valid)")
    fmt = {"channels_last": "NHWC", "channels_first": "NCHW", None: "NHWC"}.get(
        c.get("data_format"))
    if fmt is None:
        raise ModelImportError(f"layer {name!r}: unknown data_format {c.get('data_format')!r}")
    if not weights:
        raise ModelImportError(f"layer {name!r}: no weights found in the file")
    kernel_w = float_weights(name, "kernel", weights[0])
    if kernel_w.ndim != 4:
        raise ModelImportError(f"layer {name!r}: kernel has shape {list(kernel_w.shape)}, "
                               "expected 4 dimensions")
    use_bias = bool(c.get("use_bias", True))
    bias = float_weights(name, "bias", weights[1]) if use_bias and len(weights) > 1 else None
    if kind == "DepthwiseConv2D":
        in_channels = kernel_w.shape[2]
        groups, out = in_channels, in_channels * kernel_w.shape[3]
    else:
        groups = int(c.get("groups", 1) or 1)
        in_channels, out = kernel_w.shape[2] * groups, kernel_w.shape[3]
    shape = _input_shape(entry, previous)
    hw = None
    if shape is not None:
        hw = tuple(shape[1:3]) if fmt == "NHWC" else tuple(shape[2:4])
        hw = hw if all(isinstance(v, int) for v in hw) else None
    layer = ConvLayer(name=name, kernel=kernel, strides=strides, dilations=dilations,
                      padding=padding, pads=(0, 0, 0, 0), groups=groups,
                      in_channels=int(in_channels), out_channels=int(out), data_format=fmt,
                      weights=np.ascontiguousarray(kernel_w), bias=bias, input_hw=hw)
    check_layer(layer)
    return layer


def _keras_zip(path: str, h5py) -> tuple[dict, object]:
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("config.json")
        if info.file_size > MAX_CONFIG_BYTES:
            raise ModelImportError(f"{path}: config.json is larger than 64 MiB")
        config = json.loads(z.read("config.json"))
        data = z.read("model.weights.h5")
    return config, h5py.File(io.BytesIO(data), "r")


def _vars_v3(h5, path: str, name: str) -> list[np.ndarray]:
    group = h5.get(f"{path}/vars")
    if group is None:  # files written by Keras 2.13 name the list differently
        group = h5.get(path.replace("layers", "_layer_checkpoint_dependencies") + "/vars")
    if group is None:
        return []
    return [np.asarray(group[k]) for k in sorted(group.keys(), key=int)]


def _vars_legacy(h5, path: str, name: str) -> list[np.ndarray]:
    """Kernel and bias of layer ``name``: listed as ``<name>/kernel:0`` ... in the
    ``weight_names`` of its group ``model_weights/<name>``, or of a nested model's group."""
    root = h5.get("model_weights") or h5
    groups = [root[name]] if name in root else []
    groups += [root[k] for k in root if k != name and hasattr(root[k], "attrs")]
    for group in groups:
        names = [n.decode() if isinstance(n, bytes) else str(n)
                 for n in group.attrs.get("weight_names", [])]
        mine = [n for n in names if n.startswith(f"{name}/") and n in group]
        if mine:
            last = [n.rsplit("/", 1)[-1] for n in mine]
            kernels = [group[n] for n, t in zip(mine, last, strict=True) if "kernel" in t]
            biases = [group[n] for n, t in zip(mine, last, strict=True) if "bias" in t]
            return [np.asarray(a) for a in kernels[:1] + biases[:1]]
    return []


def read_keras(path: str) -> ModelLayers:
    """The Conv2D / DepthwiseConv2D layers of a ``.keras`` or ``.h5`` Keras model."""
    h5py = need_module("h5py", "a Keras model")
    try:
        if zipfile.is_zipfile(path):
            config, h5 = _keras_zip(path, h5py)
            read_vars = _vars_v3
        else:
            h5 = h5py.File(path, "r")
            raw = h5.attrs.get("model_config")
            if raw is None:
                h5.close()
                raise ModelImportError(f"{path}: an HDF5 file without a model_config attribute "
                                       "(a weights-only file has no layer attributes)")
            config = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
            read_vars = _vars_legacy
    except ModelImportError:
        raise
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as err:
        raise ModelImportError(f"{path}: not a readable Keras model ({type(err).__name__}: "
                               f"{err})") from None
    with h5:
        layers = (config.get("config") or {}).get("layers") if isinstance(config, dict) else None
        if not isinstance(layers, list):
            raise ModelImportError(f"{path}: the model config has no layer list")
        found = ModelLayers([], {}, {})
        for wpath, name, entry, previous in _walk(layers):
            kind = entry.get("class_name")
            if kind in CONV_CLASSES:
                try:
                    found.layers.append(_conv_layer(name, entry, previous,
                                                    read_vars(h5, wpath, name)))
                except ModelImportError as err:
                    found.refused[name] = str(err)
                except (OSError, KeyError, ValueError, TypeError) as err:
                    found.refused[name] = f"layer {name!r}: unreadable weights ({err})"
            elif kind in OTHER_CONV_CLASSES:
                found.refused[name] = (f"layer {name!r}: {kind} cannot be imported (Conv2D and "
                                       "DepthwiseConv2D only)")
            else:
                found.others[name] = f"layer {name!r}: {kind} is not a conv layer"
    return found
