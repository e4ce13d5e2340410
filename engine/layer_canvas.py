"""A canvas of one imported conv layer: its forward op and both gradients, with fixed ids.

Blocks: ``input`` (the given array, else random_normal of the layer's input shape), ``filter``
(the layer's weights in TensorFlow's layout, a .npy file), ``forward`` (Conv2D or
DepthwiseConv2D with the translated attributes), ``out_backprop`` (random_normal shaped like the
forward output), ``grad_filter`` and ``grad_input`` (the matching backprop blocks, sized by the
ShapeOf blocks ``filter_sizes`` and ``input_sizes``), and ``bias`` (a Tensor of the layer's bias,
not connected: TensorFlow's conv op has no bias) when the layer has one.

Arrays are written as ``<canvas stem>.<id>.npy`` next to the canvas and referenced by relative
path; every file is written atomically (:mod:`engine.atomic`).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.atomic import write_atomically
from engine.canvas import Canvas, save_canvas
from engine.conv_shapes import conv2d_geometry
from engine.errors import InvalidArgumentError
from engine.keras_reader import read_keras
from engine.model_import import ConvLayer, ModelImportError, ModelLayers, TfConv, translate
from engine.onnx_reader import read_onnx
from engine.targets import target_problem
from engine.weights_reader import parse_attrs, read_weights

MODEL_SUFFIXES = (".onnx", ".keras", ".h5", ".hdf5", ".safetensors", ".npz")
CANVAS_SUFFIX = ".gbc.json"


def read_model(path: str, attrs_text: str | None = None) -> ModelLayers:
    """The conv layers of a model file, by its suffix; ``attrs_text`` (``--attrs``) is for
    weight files only."""
    suffix = Path(path).suffix.lower()
    if suffix not in MODEL_SUFFIXES:
        raise ModelImportError(f"{path}: unknown model format {suffix or '(no suffix)'!r} "
                               f"(expected one of {', '.join(MODEL_SUFFIXES)})")
    if not os.path.isfile(path):
        raise ModelImportError(f"{path}: no such file")
    if suffix in (".safetensors", ".npz"):
        return read_weights(path, parse_attrs(attrs_text or ""))
    if attrs_text:
        raise ModelImportError(f"--attrs is for .safetensors and .npz files: {path} carries "
                               "its layers' attributes")
    return read_onnx(path) if suffix == ".onnx" else read_keras(path)


@dataclass(frozen=True)
class Imported:
    """What :func:`write_layer_canvas` wrote."""

    canvas: Canvas
    conv: TfConv
    output_shape: tuple[int, ...]
    files: list[str]  # every file written, the canvas last


def _stem(canvas_path: str) -> str:
    name = Path(canvas_path).name
    return name[: -len(CANVAS_SUFFIX)] if name.endswith(CANVAS_SUFFIX) else Path(name).stem


def _input_array(layer: ConvLayer, path: str, layout: str) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise ModelImportError(f"--input {path}: not a readable .npy file ({err})") from None
    channels = arr.shape[3] if layout == "NHWC" and arr.ndim == 4 else (
        arr.shape[1] if arr.ndim == 4 else None)
    if arr.ndim != 4 or channels != layer.in_channels or arr.dtype.kind not in "fiu":
        want = "[N, H, W, %d]" if layout == "NHWC" else "[N, %d, H, W]"
        raise ModelImportError(f"--input {path}: shape {list(arr.shape)} dtype {arr.dtype}, "
                               f"expected numbers of shape {want % layer.in_channels} "
                               f"(layer {layer.name!r}, {layout})")
    return arr


def plan_layer(layer: ConvLayer, input_hw: tuple[int, int] | None = None, batch: int = 1,
               layout: str | None = None, input_array: np.ndarray | None = None
               ) -> tuple[TfConv, tuple[int, ...]]:
    """The TF op for ``layer`` and its output shape, checked (one-line error naming the layer
    when the input is too small or the size unknown)."""
    fmt = layout or layer.data_format
    if input_array is not None:
        batch = input_array.shape[0]
        input_hw = input_array.shape[1:3] if fmt == "NHWC" else input_array.shape[2:4]
    input_hw = input_hw or layer.input_hw
    if input_hw is None:
        raise ModelImportError(f"layer {layer.name!r}: the model does not say its input size: "
                               "give --input-size H,W or --input FILE.npy")
    conv = translate(layer, tuple(int(v) for v in input_hw), int(batch), fmt)
    try:
        g = conv2d_geometry(conv.input_shape, layer.weights.shape, depthwise=layer.depthwise,
                            **conv.attrs)
    except InvalidArgumentError as err:
        raise ModelImportError(f"layer {layer.name!r} on input {list(conv.input_shape)}: "
                               f"{err}") from None
    if 0 in g.output_shape:
        raise ModelImportError(f"layer {layer.name!r} on input {list(conv.input_shape)}: the "
                               f"output {list(g.output_shape)} is empty (the input is smaller "
                               "than the dilated kernel)")
    return conv, g.output_shape


def build_canvas(layer: ConvLayer, conv: TfConv, output_shape: tuple[int, ...],
                 paths: dict[str, str]) -> Canvas:
    """The canvas (see the module docstring); ``paths`` maps ``filter``, ``bias`` and maybe
    ``input`` to their .npy paths relative to the canvas."""
    dtype = str(layer.weights.dtype)
    c = Canvas()
    shape = "x".join(map(str, conv.input_shape))
    if "input" in paths:
        c.add_node("Tensor", (0, 0), {"fill": "file", "path": paths["input"], "dtype": dtype},
                   id="input", title=f"input {shape} ({Path(paths['input']).name})")
    else:
        c.add_node("Tensor", (0, 0), {"fill": "random_normal", "shape": list(conv.input_shape),
                                      "dtype": dtype, "seed": 0},
                   id="input", title=f"input {shape} (random_normal)")
    c.add_node("Tensor", (0, 160), {"fill": "file", "path": paths["filter"], "dtype": dtype},
               id="filter", title=f"{layer.name} filter "
                                  f"{'x'.join(map(str, layer.weights.shape))}")
    c.add_node("Tensor", (0, 320), {"fill": "random_normal", "shape": list(output_shape),
                                    "dtype": dtype, "seed": 1},
               id="out_backprop",
               title=f"out_backprop {'x'.join(map(str, output_shape))} (random_normal)")
    depthwise = conv.op == "DepthwiseConv2D"
    c.add_node(conv.op, (600, 0), conv.attrs, id="forward", title=f"{layer.name} ({layer.op})")
    c.add_node("ShapeOf", (330, 220), id="filter_sizes", title="filter_sizes")
    c.add_node("ShapeOf", (330, 420), id="input_sizes", title="input_sizes")
    c.add_node("DepthwiseBackpropFilter" if depthwise else "Conv2DBackpropFilter", (600, 180),
               conv.attrs, id="grad_filter", title=f"{layer.name} grad_filter")
    c.add_node("DepthwiseBackpropInput" if depthwise else "Conv2DBackpropInput", (600, 360),
               conv.attrs, id="grad_input", title=f"{layer.name} grad_input")
    for src, dst in (("input", "forward.input"), ("filter", "forward.filter"),
                     ("filter", "filter_sizes.input"), ("input", "input_sizes.input"),
                     ("input", "grad_filter.input"), ("filter_sizes", "grad_filter.filter_sizes"),
                     ("out_backprop", "grad_filter.out_backprop"),
                     ("input_sizes", "grad_input.input_sizes"), ("filter", "grad_input.filter"),
                     ("out_backprop", "grad_input.out_backprop")):
        node, port = dst.split(".")
        c.connect((src, "output"), (node, port))
    if "bias" in paths:
        c.add_node("Tensor", (0, 480), {"fill": "file", "path": paths["bias"], "dtype": dtype},
                   id="bias", title=f"{layer.name} bias (not part of the conv op)")
    return c


def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    return buf.getvalue()


def write_layer_canvas(layer: ConvLayer, canvas_path: str, *, input_hw=None, batch: int = 1,
                       layout: str | None = None, input_path: str | None = None,
                       protected: tuple[str, ...] = ()) -> Imported:
    """Check everything, then write the arrays and the canvas (each atomically)."""
    fmt = layout or layer.data_format
    arr = _input_array(layer, input_path, fmt) if input_path else None
    conv, output_shape = plan_layer(layer, input_hw, batch, fmt, arr)
    stem = _stem(canvas_path)
    arrays = {"filter": layer.weights}
    if arr is not None:
        arrays["input"] = arr.astype(layer.weights.dtype)
    if layer.bias is not None:
        arrays["bias"] = layer.bias.astype(layer.weights.dtype)
    folder = Path(canvas_path).parent
    targets = {k: str(folder / f"{stem}.{k}.npy") for k in arrays}
    keep = (*protected, *([input_path] if input_path else []))
    for target in (canvas_path, *targets.values()):
        problem = target_problem(target, keep)
        if problem:
            raise ModelImportError(f"{target!r} {problem}")
    canvas = build_canvas(layer, conv, output_shape, {k: Path(t).name for k, t in targets.items()})
    for key, target in targets.items():
        data = _npy_bytes(arrays[key])
        write_atomically(target, lambda f, data=data: f.write(data))
    save_canvas(canvas, canvas_path)
    return Imported(canvas, conv, output_shape, [*targets.values(), canvas_path])
