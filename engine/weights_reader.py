"""Conv layers from bare weight files (``.safetensors``, ``.npz``), whose attributes come from
``--attrs`` since the files carry none.

Every 4-D float tensor is a layer, named by its key without a ``.weight`` / ``.kernel`` suffix;
the tensor ``<name>.bias`` is its bias. ``--attrs`` is space-separated ``key=value`` words:

    strides=2,2  dilations=1,1  padding=SAME|VALID  pads=T,B,L,R (padding EXPLICIT)
    groups=N  weights=OIHW|HWIO  data_format=NCHW|NHWC

``weights`` is the tensor layout: OIHW (PyTorch, the default) or HWIO (TensorFlow / Keras; a
depthwise HWIO tensor is H, W, in, multiplier). ``data_format`` defaults to NCHW for OIHW and
NHWC for HWIO. ``.safetensors`` needs the ``safetensors`` package (the ``models`` extra).
"""

from __future__ import annotations

import zipfile

import numpy as np

from engine.model_import import (
    ConvLayer,
    ModelImportError,
    ModelLayers,
    check_layer,
    float_weights,
    from_oihw,
    need_module,
)

ATTR_KEYS = ("strides", "dilations", "padding", "pads", "groups", "weights", "data_format")
_SUFFIXES = (".weight", ".kernel", "/kernel", ".weights")


def parse_attrs(text: str) -> dict:
    """``--attrs`` as a dict (one-line error naming the bad word)."""
    out: dict = {}
    for word in text.split():
        key, eq, value = word.partition("=")
        if not eq or key not in ATTR_KEYS:
            raise ModelImportError(f"--attrs: {word!r} is not key=value with key one of "
                                   f"{', '.join(ATTR_KEYS)}")
        if key in ("strides", "dilations", "pads", "groups"):
            try:
                nums = tuple(int(v) for v in value.split(","))
            except ValueError:
                raise ModelImportError(f"--attrs: {key}={value!r} is not a list of integers"
                                       ) from None
            n = {"strides": 2, "dilations": 2, "pads": 4, "groups": 1}[key]
            if len(nums) != n or min(nums) < (0 if key == "pads" else 1):
                raise ModelImportError(f"--attrs: {key}={value} needs {n} "
                                       f"{'non-negative' if key == 'pads' else 'positive'} "
                                       "integer(s)")
            out[key] = nums[0] if key == "groups" else nums
        else:
            value = value.upper()
            choices = {"padding": ("SAME", "VALID", "EXPLICIT"), "weights": ("OIHW", "HWIO"),
                       "data_format": ("NCHW", "NHWC")}[key]
            if value not in choices:
                raise ModelImportError(f"--attrs: {key}={value} is not one of "
                                       f"{', '.join(choices)}")
            out[key] = value
    if out.get("padding") == "EXPLICIT" and "pads" not in out:
        raise ModelImportError("--attrs: padding=EXPLICIT needs pads=T,B,L,R")
    return out


def _tensors(path: str) -> dict[str, np.ndarray]:
    if path.lower().endswith(".safetensors"):
        st = need_module("safetensors.numpy", "a .safetensors file")
        try:
            return dict(st.load_file(path))
        except Exception as err:  # noqa: BLE001 - safetensors raises its own SafetensorError
            raise ModelImportError(f"{path}: not a readable .safetensors file ({err})") from None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise ModelImportError(f"{path}: not a readable .npz file ({err})") from None


def _stem(key: str) -> str:
    for suffix in _SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            return key[: -len(suffix)]
    return key


def read_weights(path: str, attrs: dict) -> ModelLayers:
    """The 4-D tensors of ``path`` as conv layers with the ``--attrs`` attributes."""
    tensors = _tensors(path)
    found = ModelLayers([], {}, {})
    layout = attrs.get("weights", "OIHW")
    fmt = attrs.get("data_format", "NCHW" if layout == "OIHW" else "NHWC")
    groups = attrs.get("groups", 1)
    padding = attrs.get("padding", "EXPLICIT" if "pads" in attrs else "VALID")
    pads = attrs.get("pads", (0, 0, 0, 0)) if padding == "EXPLICIT" else (0, 0, 0, 0)
    for key, array in tensors.items():
        name = _stem(key)
        if array.ndim != 4:
            if not key.endswith(".bias"):
                found.others[key] = (f"tensor {key!r}: shape {list(array.shape)} is not 4-D "
                                     "conv weights")
            continue
        try:
            w = float_weights(name, "weights", array)
            bias = tensors.get(f"{name}.bias")
            bias = None if bias is None else float_weights(name, "bias", bias)
            if layout == "OIHW":
                in_channels, out = w.shape[1] * groups, w.shape[0]
                if out % groups:
                    raise ModelImportError(f"layer {name!r}: groups {groups} does not divide "
                                           f"out_channels {out}")
                tf_w, kernel = from_oihw(w, groups), w.shape[2:]
            else:
                depthwise = groups > 1 and groups == w.shape[2]
                in_channels = w.shape[2] if depthwise else w.shape[2] * groups
                out = w.shape[2] * w.shape[3] if depthwise else w.shape[3]
                tf_w, kernel = w, w.shape[:2]
            layer = ConvLayer(name=name, kernel=tuple(int(k) for k in kernel),
                              strides=attrs.get("strides", (1, 1)),
                              dilations=attrs.get("dilations", (1, 1)), padding=padding,
                              pads=pads, groups=groups, in_channels=int(in_channels),
                              out_channels=int(out), data_format=fmt,
                              weights=np.ascontiguousarray(tf_w), bias=bias)
            check_layer(layer)
            found.layers.append(layer)
        except ModelImportError as err:
            found.refused[name] = str(err)
    return found
