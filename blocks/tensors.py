"""Blocks that make and reshape tensors: Tensor, IntVector, ShapeOf, Transpose."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from blocks.spec import (
    INT32_MAX,
    INT32_MIN,
    AttrError,
    AttrSpec,
    BlockSpec,
    PortSpec,
    TensorSpec,
)
from engine.literal import literal
from engine.sources import FILLS, generate, values_array

_SHAPED = tuple(f for f in FILLS if f not in ("values", "file"))


def _npy_header(path: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of a .npy file from its header alone (no data read, no pickle)."""
    p = Path(path)
    if not p.is_file():
        raise AttrError("path", f"path {path!r}: no such .npy file")
    try:
        with p.open("rb") as f:
            version = np.lib.format.read_magic(f)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read(f)
    except (ValueError, OSError) as err:
        raise AttrError("path", f"path {path!r} is not a readable .npy file: {err}") from None
    return tuple(shape), np.dtype(dtype)


def _tensor_infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    fill = attrs["fill"]
    if fill == "values":
        shape = values_array(attrs["values"]).shape
    elif fill == "file":
        if not attrs["path"]:
            raise AttrError("path", "path is empty: choose a .npy file for fill=file")
        shape, dtype = _npy_header(attrs["path"])
        if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)):
            raise AttrError("path", f"path {attrs['path']!r} holds {dtype}, not numbers")
    else:
        shape = tuple(attrs["shape"])
    return {"output": TensorSpec(tuple(int(s) for s in shape), attrs["dtype"])}


def _tensor_run(attrs: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if attrs["fill"] == "file":
        _npy_header(attrs["path"])
    return {"output": generate(attrs["fill"], attrs["shape"], attrs["dtype"], attrs["seed"],
                               attrs["values"], attrs["path"])}


def _tensor_emit(attrs: dict, inputs: dict[str, str], outputs: dict[str, str]) -> list[str]:
    """``sources.generate`` as the run calls it (inactive attributes, which it ignores, left
    out)."""
    args = [f"{k}={literal(attrs[k])}" for k in ("fill", "shape", "dtype")]
    args += [f"{k}={literal(attrs[k])}" for k in ("seed", "values", "path")
             if TENSOR.attr(k).is_active(attrs)]
    return [f"{outputs['output']} = sources.generate({', '.join(args)})"]


TENSOR = BlockSpec(
    type_id="Tensor", title="Tensor", category="Tensors", op="",
    doc="A source tensor: zeros, ones, arange (1, 2, ..., n in row-major order), seeded "
        "random values, literal values, or a .npy file.",
    inputs=(),
    outputs=(PortSpec("output", "The tensor."),),
    attrs=(
        AttrSpec("shape", "shape", [1, 5, 5, 2], visible_if=("fill", _SHAPED),
                 doc="The tensor's shape, e.g. [batch, height, width, channels]."),
        AttrSpec("dtype", "dtype", "float32", doc="float16, bfloat16, float32 or float64."),
        AttrSpec("fill", "enum", "random_normal", choices=FILLS,
                 doc="How to fill the tensor: zeros, ones, arange = 1, 2, ..., n in row-major "
                     "order, random_normal (mean 0, std 1), random_uniform in [-1, 1), values "
                     "(the literal values), file (a .npy file)."),
        AttrSpec("seed", "int", 0, minimum=0,
                 visible_if=("fill", ("random_normal", "random_uniform")),
                 doc="Seed of the random generator: the same seed gives the same values."),
        AttrSpec("values", "values", [[0.0]], visible_if=("fill", ("values",)),
                 doc="Literal values as a nested list; their nesting gives the shape."),
        AttrSpec("path", "path", "", visible_if=("fill", ("file",)),
                 doc="A .npy file, relative to the canvas file's folder (loaded without "
                     "pickle)."),
    ),
    infer=_tensor_infer, run=_tensor_run, emit=_tensor_emit,
    imports=("from engine import sources",),
)


def _intvector_infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    value = np.asarray(attrs["values"], np.int32)
    return {"output": TensorSpec(value.shape, "int32", None, value)}


INT_VECTOR = BlockSpec(
    type_id="IntVector", title="IntVector", category="Tensors", op="",
    doc="A 1-D int32 vector, e.g. filter_sizes or input_sizes.",
    inputs=(),
    outputs=(PortSpec("output", "The int32 vector."),),
    attrs=(AttrSpec("values", "int_list", [3, 3, 2, 2], minimum=INT32_MIN, maximum=INT32_MAX,
                    doc="The integers, e.g. filter_sizes [height, width, in, out]."),),
    infer=_intvector_infer,
    run=lambda attrs, inputs: {"output": np.asarray(attrs["values"], np.int32)},
    emit=lambda attrs, inputs, outputs: [
        f"{outputs['output']} = np.asarray({literal(attrs['values'])}, np.int32)"],
    imports=("import numpy as np",),
)


def _shapeof_infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    value = np.asarray(inputs["input"].shape, np.int32)
    return {"output": TensorSpec(value.shape, "int32", None, value)}


SHAPE_OF = BlockSpec(
    type_id="ShapeOf", title="ShapeOf", category="Tensors", op="Shape",
    doc="tf.shape: the shape of its input as an int32 vector (known before running).",
    inputs=(PortSpec("input", "Any tensor."),),
    outputs=(PortSpec("output", "int32 shape vector."),),
    attrs=(),
    infer=_shapeof_infer,
    run=lambda attrs, inputs: {"output": np.asarray(inputs["input"].shape, np.int32)},
    emit=lambda attrs, inputs, outputs: [
        f"{outputs['output']} = np.asarray({inputs['input']}.shape, np.int32)"],
    imports=("import numpy as np",),
)


def _check_perm(perm: list[int], ndim: int) -> None:
    if sorted(perm) != list(range(ndim)):
        raise AttrError("perm", f"perm {perm} is not a permutation of 0..{ndim - 1} "
                                f"(input has {ndim} dimensions)")


def _transpose_infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    src, perm = inputs["input"], attrs["perm"]
    _check_perm(perm, len(src.shape))
    axes = tuple(src.axes[p] for p in perm) if src.axes else None
    value = None if src.value is None else np.transpose(src.value, perm)
    return {"output": TensorSpec(tuple(src.shape[p] for p in perm), src.dtype, axes, value)}


def _transpose_run(attrs: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    _check_perm(attrs["perm"], inputs["input"].ndim)
    return {"output": np.ascontiguousarray(np.transpose(inputs["input"], attrs["perm"]))}


TRANSPOSE = BlockSpec(
    type_id="Transpose", title="Transpose", category="Tensors", op="Transpose",
    doc="tf.transpose: output dimension i is input dimension perm[i]. [0, 3, 1, 2] turns NHWC "
        "into NCHW, [0, 2, 3, 1] turns NCHW into NHWC.",
    inputs=(PortSpec("input", "Any tensor."),),
    outputs=(PortSpec("output", "The transposed tensor."),),
    attrs=(AttrSpec("perm", "int_list", [0, 3, 1, 2], minimum=0, maximum=63,
                    doc="The permutation: output dimension i is input dimension perm[i]. "
                        "[0, 3, 1, 2]: NHWC -> NCHW; [0, 2, 3, 1]: NCHW -> NHWC."),),
    infer=_transpose_infer, run=_transpose_run,
    emit=lambda attrs, inputs, outputs: [
        (f"{outputs['output']} = np.ascontiguousarray(np.transpose({inputs['input']}, "
        f"{literal(attrs['perm'])}))")],
    imports=("import numpy as np",),
)

SPECS = (TENSOR, INT_VECTOR, SHAPE_OF, TRANSPOSE)
