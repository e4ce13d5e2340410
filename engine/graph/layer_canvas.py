"""A canvas of one imported conv layer: its forward op and both gradients, with fixed ids.

Blocks: ``input`` (the given array, else random_normal of the layer's input shape), ``filter``
(the layer's weights in TensorFlow's layout, a .npy file), ``forward`` (Conv2D,
DepthwiseConv2D or Conv3D with the translated attributes; a transposed conv's input-gradient
op), ``out_backprop`` (random_normal shaped like the forward output), ``grad_filter`` and
``grad_input`` (the matching backprop blocks, sized by the ShapeOf blocks ``filter_sizes`` and
``input_sizes``), and ``bias`` (a Tensor of the layer's bias, not connected: TensorFlow's conv
op has no bias) when the layer has one. A separable conv adds
its pointwise conv's blocks (:mod:`engine.graph.separable_canvas`).

Arrays are written as ``<canvas stem>.<id>.<hash12>.npy`` (:func:`engine.graph.import_files.array_name`: named by their
bytes) beside the canvas's real file and referenced by relative path; the canvas and its arrays
are written as one set, all or nothing (:func:`engine.base.atomic.write_file_set`), and a re-import
removes only the arrays the previous canvas named that an import wrote (:func:`engine.graph.import_files.owned_arrays`).
The canvas is written only if ``gradblocks check`` would accept it (:func:`check_imported`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.base.atomic import Member, resolve_target, write_file_set
from engine.base.errors import InvalidArgumentError
from engine.base.names import MAX_TITLE, escaped
from engine.graph.canvas import Canvas, CanvasError
from engine.graph.canvas_file import dumps
from engine.graph.compiler import DEFAULT_MEMORY_LIMIT, compile_canvas
from engine.graph.conv_blocks import conv_blocks, transposed_blocks
from engine.graph.import_files import (
    array_name,
    canvas_stem,
    npy_bytes,
    owned_arrays,
    shown_place,
)
from engine.graph.padded_canvas import op_id, padded, padded_blocks
from engine.graph.report import problem_lines
from engine.graph.separable_canvas import (
    canvas_notes,
    conv_output,
    forward_output,
    layer_arrays,
    pointwise_blocks,
    pointwise_conv,
)
from engine.graph.targets import target_problem
from engine.io import strict_json
from engine.io.models.keras_reader import read_keras
from engine.io.models.model_import import (
    ConvLayer,
    ModelImportError,
    ModelLayers,
    TfConv,
    conv_format,
    translate,
    transposed_output_hw,
)
from engine.io.models.onnx_reader import read_onnx
from engine.io.models.onnx_tensors import read_weights_npz
from engine.io.models.weights_reader import parse_attrs, read_weights
from engine.shapes.conv import channels_last

#: The names of an input's sizes in messages, by the conv's rank.
SIZE_NAMES = {2: ("height", "width"), 3: ("depth", "height", "width")}

MODEL_SUFFIXES = (".onnx", ".keras", ".h5", ".hdf5", ".safetensors", ".npz")


def read_model(path: str, attrs_text: str | None = None,
               weights_path: str | None = None) -> ModelLayers:
    """The conv layers of a model file, by its suffix; ``attrs_text`` (``--attrs``) is for
    weight files only, ``weights_path`` (``--weights FILE.npz``: arrays for graph inputs, by
    name) for ONNX models only."""
    suffix = Path(path).suffix.lower()
    if suffix not in MODEL_SUFFIXES:
        raise ModelImportError(f"{escaped(path)}: unknown model format {suffix or '(no suffix)'!r} "
                               f"(expected one of {', '.join(MODEL_SUFFIXES)})")
    if not os.path.isfile(path):
        raise ModelImportError(f"{escaped(path)}: no such file")
    if suffix in (".safetensors", ".npz"):
        return read_weights(path, parse_attrs(attrs_text or ""))
    if attrs_text:
        raise ModelImportError(f"--attrs is for .safetensors and .npz files: {escaped(path)} carries "
                               "its layers' attributes")
    if weights_path is not None and suffix != ".onnx":
        raise ModelImportError(f"--weights is for ONNX models (arrays for graph inputs): {escaped(path)} "
                               "carries its weights")
    if suffix == ".onnx":
        return read_onnx(path, read_weights_npz(weights_path) if weights_path else None)
    return read_keras(path)


@dataclass(frozen=True)
class Imported:
    """What :func:`write_layer_canvas` wrote."""

    canvas: Canvas
    conv: TfConv
    output_shape: tuple[int, ...]
    files: list[str]  # every file written, the canvas last


def _input_array(layer: ConvLayer, path: str, layout: str) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise ModelImportError(f"--input {escaped(path)}: not a readable .npy file ({err})") from None
    ndim, last = layer.rank + 2, channels_last(layout)
    channels = (arr.shape[-1] if last else arr.shape[1]) if arr.ndim == ndim else None
    if arr.ndim != ndim or channels != layer.in_channels or arr.dtype.kind not in "fiu":
        sizes = "H, W" if layer.rank == 2 else "D, H, W"
        want = f"[N, {sizes}, %d]" if last else f"[N, %d, {sizes}]"
        raise ModelImportError(f"--input {escaped(path)}: shape {list(arr.shape)} dtype {arr.dtype}, "
                               f"expected numbers of shape {want % layer.in_channels} "
                               f"(layer {layer.name!r}, {conv_format(layout, layer.rank)})")
    return arr


def plan_layer(layer: ConvLayer, input_hw: tuple[int, ...] | None = None, batch: int = 1,
               layout: str | None = None, input_array: np.ndarray | None = None,
               memory_limit: int = DEFAULT_MEMORY_LIMIT) -> tuple[TfConv, tuple[int, ...]]:
    """The TF op for ``layer`` and its output shape, checked (``input_hw`` W alone is a 1-D
    layer's 1,W): a one-line error naming the layer when the input size is unknown or its
    count is not the layer's rank, the input empty (batch, height or width 0) or smaller than
    the dilated kernel, or when ``gradblocks check`` would refuse the layer's canvas (shapes
    beyond its limits, more memory than ``memory_limit``), with check's own reason."""
    fmt = layout or layer.data_format
    if input_array is not None:
        batch = input_array.shape[0]
        input_hw = (input_array.shape[1:-1] if channels_last(fmt) else input_array.shape[2:])
    input_hw = input_hw or layer.input_hw
    if layer.conv1d and input_hw is not None and len(input_hw) == 1:  # W: a height of 1
        input_hw = (1, *input_hw)
    sizes = "H,W" if layer.rank == 2 else "D,H,W"
    if input_hw is None:
        why = f" ({layer.input_unknown})" if layer.input_unknown else ""
        raise ModelImportError(f"layer {layer.name!r}: the model does not say its input "
                               f"size{why}: give --input-size {sizes} or --input FILE.npy")
    if len(input_hw) != layer.rank:
        raise ModelImportError(size_mismatch(layer, input_hw))
    hw = tuple(int(n) for n in input_hw)
    conv = translate(layer, hw, int(batch), fmt)
    where = f"layer {layer.name!r} on input {list(conv.input_shape)}"
    for what, size in (("batch", int(batch)), *zip(SIZE_NAMES[layer.rank], hw, strict=True)):
        if size < 1:
            raise ModelImportError(f"{where}: the input {what} is {size}, so the input is empty "
                                   "(it must be at least 1)")
    try:
        if layer.transposed:  # the forward conv of which it is the input gradient, on Y
            output_shape = _transposed_output(layer, conv, int(batch), hw, where)
        else:
            output_shape = conv_output(layer, conv)
            if layer.pointwise is not None:
                output_shape = pointwise_conv(layer, conv)[1]
    except InvalidArgumentError as err:
        raise ModelImportError(f"{where}: {err}") from None
    if 0 in output_shape:
        raise ModelImportError(f"{where}: the output {list(output_shape)} is empty (the "
                               "input, padded, is smaller than the dilated kernel)")
    _check_like_check(layer, conv, output_shape, where, memory_limit)
    return conv, output_shape


def size_mismatch(layer: ConvLayer, input_hw: tuple[int, ...]) -> str:
    """The one line saying ``input_hw`` is not a size of ``layer``'s rank: H,W (2-D), D,H,W
    (3-D), 1,W or W (1-D)."""
    rank, sizes = ((1, "1,W or W") if layer.conv1d else
                   (layer.rank, "H,W" if layer.rank == 2 else "D,H,W"))
    return (f"layer {layer.name!r} is a {rank}-D conv: its input size is {sizes}, not "
            f"{','.join(map(str, input_hw))}")


def _transposed_output(layer: ConvLayer, conv: TfConv, batch: int, input_hw: tuple[int, ...],
                       where: str) -> tuple[int, ...]:
    """A transposed conv's output shape Y, checked: the forward conv on Y must give back the
    input X's shape."""
    out = transposed_output_hw(layer, input_hw)
    c = layer.out_channels
    y = ((batch, *out, c) if channels_last(conv.attrs["data_format"]) else (batch, c, *out))
    if min(out) < 1:
        raise ModelImportError(f"{where}: the output {list(y)} is empty")
    back = forward_output(layer, padded(conv, y), conv.attrs)
    if back != tuple(conv.input_shape):
        raise ModelImportError(f"{where}: the conv on the output {list(y)} gives "
                               f"{list(back)}, not the input's shape (output_padding "
                               "must be smaller than the stride)")
    return y


def _check_like_check(layer: ConvLayer, conv: TfConv, output_shape: tuple[int, ...],
                      where: str, memory_limit: int) -> None:
    """Refuse, naming the layer (``where``), what ``gradblocks check`` would refuse in the
    layer's canvas, with check's reason: the canvas, its arrays standing in as random tensors of
    the same shapes and dtype (nothing is read or written), compiled as check compiles it."""
    key = (_layer_key(layer), conv.op, json.dumps(conv.attrs, sort_keys=True),
           tuple(conv.input_shape), tuple(output_shape), memory_limit)
    if key in _PASSED:  # a model repeats its geometries: check each once
        return
    arrays = layer_arrays(layer)
    try:
        canvas = build_canvas(layer, conv, output_shape,
                              {k: f"{k}.npy" for k, a in arrays.items() if a is not None})
        for node_id, array in arrays.items():
            if array is not None:
                canvas.set_attr(node_id, "fill", "random_normal")
                canvas.set_attr(node_id, "shape", list(array.shape))
    except InvalidArgumentError as err:
        raise ModelImportError(f"{where}: {err}") from None
    lines = problem_lines(compile_canvas(canvas, None, memory_limit))
    if not lines:
        if len(_PASSED) >= PASSED_ENTRIES:
            _PASSED.pop(next(iter(_PASSED)))
        _PASSED[key] = None
    if lines:
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        raise ModelImportError(f"{where}: `gradblocks check` would refuse its canvas: "
                               f"{lines[0]}{more}")


#: Layers whose canvas compiled without a problem, by :func:`_layer_key`, op, attributes,
#: shapes and memory limit (the oldest forgotten first); a failing one is compiled again, to
#: name its own blocks.
PASSED_ENTRIES = 4096
_PASSED: dict[tuple, None] = {}


def _layer_key(layer: ConvLayer) -> tuple:
    """Every field of ``layer`` but its name (which only titles blocks), arrays by shape and
    dtype: with the op, attributes and shapes, all that the check of its canvas depends on."""
    return tuple((f.name, (v.shape, v.dtype.str) if isinstance(v, np.ndarray) else
                  _layer_key(v) if isinstance(v, ConvLayer) else v)
                 for f in dataclasses.fields(layer) if f.name != "name"
                 for v in [getattr(layer, f.name)])


#: How many characters of a layer's name a block title shows (the rest of a title, shapes
#: included, stays within :data:`engine.base.names.MAX_TITLE`).
TITLE_NAME_CHARS = 100


def build_canvas(layer: ConvLayer, conv: TfConv, output_shape: tuple[int, ...],
                 paths: dict[str, str]) -> Canvas:
    """The canvas (see the module docstring); ``paths`` maps ``filter``, ``bias`` and maybe
    ``input`` to their .npy paths relative to the canvas. Titles show the layer's name escaped
    and cut (:func:`engine.base.names.escaped`), so any name from a file makes valid titles."""
    dtype = str(layer.weights.dtype)
    c = Canvas()
    name = escaped(layer.name, TITLE_NAME_CHARS)

    def title(text: str) -> str:
        return escaped(text, MAX_TITLE)
    shape = "x".join(map(str, conv.input_shape))
    if "input" in paths:
        c.add_node("Tensor", (0, 0), {"fill": "file", "path": paths["input"], "dtype": dtype},
                   id="input", title=title(f"input {shape} ({Path(paths['input']).name})"))
    else:
        c.add_node("Tensor", (0, 0), {"fill": "random_normal", "shape": list(conv.input_shape),
                                      "dtype": dtype, "seed": 0},
                   id="input", title=f"input {shape} (random_normal)")
    c.add_node("Tensor", (0, 160), {"fill": "file", "path": paths["filter"], "dtype": dtype},
               id="filter", title=title(f"{name} filter "
                                        f"{'x'.join(map(str, layer.weights.shape))}"))
    c.add_node("Tensor", (0, 320), {"fill": "random_normal", "shape": list(output_shape),
                                    "dtype": dtype, "seed": 1},
               id="out_backprop",
               title=f"out_backprop {'x'.join(map(str, output_shape))} (random_normal)")
    c.add_node(conv.op, (600, 0), conv.attrs, id=op_id(layer, conv),
               title=title(f"{name} ({'depthwise' if layer.pointwise else layer.op})"))
    if conv.input_pads:
        padded_blocks(c, layer, conv, output_shape, name)
    elif layer.transposed:
        transposed_blocks(c, layer, conv, list(output_shape), name)
    elif layer.pointwise is not None:
        pointwise_blocks(c, layer, pointwise_conv(layer, conv)[0], paths, name)
        conv_blocks(c, layer, conv, name, upstream="pointwise_grad_input")
    else:
        conv_blocks(c, layer, conv, name)
    if "bias" in paths:
        c.add_node("Tensor", (0, 480), {"fill": "file", "path": paths["bias"], "dtype": dtype},
                   id="bias", title=title(f"{name} bias (not part of the conv op)"))
    for i, text in enumerate(canvas_notes(layer)):
        c.add_note((1800 if layer.pointwise else 900, 200 * i), text, id=f"note_{i + 1}")
    return c


def check_imported(canvas: Canvas, arrays: dict[str, Path], base_dir: Path, shown: str) -> None:
    """Refuse (:class:`ModelImportError`) a canvas ``gradblocks check`` would refuse: loaded back
    from its own text, its ``arrays`` (node id -> file) read from where they are, compiled with
    the default memory limit."""
    data, problems = strict_json.loads(dumps(canvas))
    try:
        if problems:
            raise CanvasError(problems, shown)
        trial = Canvas.from_json(data, shown)
    except CanvasError as err:
        where, message = err.problems[0]
        raise ModelImportError(f"{shown_place(shown)}: the canvas would not load: {where}: "
                               f"{message}") from None
    for node_id, path in arrays.items():
        trial.set_attr(node_id, "path", os.path.abspath(path))  # not relative to base_dir
    lines = problem_lines(compile_canvas(trial, base_dir, DEFAULT_MEMORY_LIMIT))
    if lines:
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        raise ModelImportError(f"{shown_place(shown)}: the canvas would not pass `gradblocks "
                               f"check`: {lines[0]}{more}")


def write_layer_canvas(layer: ConvLayer, canvas_path: str, *, input_hw=None, batch: int = 1,
                       layout: str | None = None, input_path: str | None = None,
                       protected: tuple[str, ...] = ()) -> Imported:
    """Check everything, then write the arrays and the canvas as one set (see the module
    docstring); never over the ``protected`` files (the model) or ``input_path``, nor over a
    file that is not a regular file."""
    fmt = layout or layer.data_format
    arr = _input_array(layer, input_path, fmt) if input_path else None
    conv, output_shape = plan_layer(layer, input_hw, batch, fmt, arr)
    arrays = layer_arrays(layer)
    if arr is not None:
        arrays["input"] = arr.astype(layer.weights.dtype)
    keep = {**dict.fromkeys(protected, "the model being read"),
            **({input_path: "the --input file"} if input_path else {})}
    problem = target_problem(canvas_path, keep)
    if problem:
        raise ModelImportError(f"{shown_place(canvas_path)} {problem}")
    real = resolve_target(canvas_path)  # the arrays go beside the real canvas file
    stem = canvas_stem(real.name)
    data = {k: npy_bytes(a) for k, a in arrays.items()}
    named = {k: array_name(stem, k, d) for k, d in data.items()}
    for name in named.values():
        problem = target_problem(str(real.parent / name), keep)
        if problem:
            raise ModelImportError(f"{shown_place(real.parent / name)} {problem}")
    canvas = build_canvas(layer, conv, output_shape, named)
    text = dumps(canvas).encode("utf-8")
    members = [Member.of_bytes(named[k], d) for k, d in data.items()]
    files = write_file_set(
        canvas_path, lambda f: f.write(text), members, owned_arrays, keep=list(keep),
        check=lambda temps: check_imported(canvas, {k: temps[n] for k, n in named.items()},
                                           real.parent, canvas_path))
    return Imported(canvas, conv, output_shape, [*map(str, files[:-1]), canvas_path])
