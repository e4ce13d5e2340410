"""Blocks that make and reshape tensors: Tensor, IntVector, ShapeOf, Transpose."""

from __future__ import annotations

import math

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
from engine.base.array_limits import shape_problem
from engine.base.dtypes import largest_finite, to_dtype
from engine.base.errors import InvalidArgumentError
from engine.base.literal import literal
from engine.io import image_source, npy
from engine.io.sources import FILLS, generate, values_array, workspace_bytes

_SHAPED = tuple(f for f in FILLS if f not in ("values", "file"))
#: The Tensor block's fills: those of :mod:`engine.io.sources` and a PNG/JPEG ``image``
#: (:mod:`engine.io.image_source`).
TENSOR_FILLS = (*FILLS, "image")
_IMAGE_ATTRS = ("color", "scale", "data_format")


#: Every value numpy's standard_normal can return is below this in magnitude (its ziggurat tail
#: is at most r - log(2**-53) / r = 13.7 with r = 3.654).
NORMAL_BOUND = 16.0


def _check_range(arr: np.ndarray, dtype: str) -> None:
    """A finite literal that ``dtype`` would round to an infinity is an error on ``values``
    (``Infinity`` written as such is kept)."""
    with np.errstate(over="ignore"):
        overflow = np.isinf(arr.astype(to_dtype(dtype))) & np.isfinite(arr)
    if overflow.any():
        value = arr[overflow].flat[0]
        limit = largest_finite(dtype)
        raise AttrError("values", f"values: {value:g} is beyond the {dtype} range (largest "
                                  f"finite {limit:g}); write Infinity for an infinite value")


def _tensor_infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    fill, bound, axes = attrs["fill"], math.inf, None
    if fill == "values":
        arr = values_array(attrs["values"])
        shape = arr.shape
        _check_range(arr, attrs["dtype"])
        with np.errstate(invalid="ignore"):
            bound = float(np.max(np.abs(arr))) if arr.size else 0.0
        bound = bound if math.isfinite(bound) else math.inf  # NaN too
    elif fill == "file":
        if not attrs["path"]:
            raise AttrError("path", "path is empty: choose a .npy file for fill=file")
        try:  # every rule of the run's read (the integers' exact conversion too)
            shape = npy.check_values(attrs["path"], attrs["dtype"]).shape
        except InvalidArgumentError as err:
            raise AttrError("path", str(err)) from None
    elif fill == "image":
        if not attrs["path"]:
            raise AttrError("path", "path is empty: choose a PNG or JPEG file for fill=image")
        try:
            header = image_source.read_header(attrs["path"])
        except InvalidArgumentError as err:
            raise AttrError("path", str(err)) from None
        shape = image_source.tensor_shape(header, attrs["color"], attrs["data_format"])
        bound = image_source.bound(attrs["scale"])
        axes = tuple(attrs["data_format"])  # N, H, W, C: the viewer shows H x W
    else:
        shape = tuple(attrs["shape"])
        problem = shape_problem(shape, to_dtype(attrs["dtype"]).itemsize)
        if problem is not None:
            raise AttrError("shape", problem)
        bound = {"zeros": 0.0, "ones": 1.0, "arange": float(math.prod(shape)),
                 "random_normal": NORMAL_BOUND, "random_uniform": 1.0}[fill]
    return {"output": TensorSpec(tuple(int(s) for s in shape), attrs["dtype"], axes,
                                 bound=bound)}


def _tensor_workspace(attrs: dict, inputs: dict[str, TensorSpec],
                      outputs: dict[str, TensorSpec]) -> int:
    if attrs["fill"] == "image":
        return image_source.read_workspace(image_source.read_header(attrs["path"]),
                                           attrs["color"])
    return workspace_bytes(attrs["fill"], outputs["output"].shape, attrs["dtype"],
                           attrs["values"], attrs["path"])


def _image_args(attrs: dict) -> tuple:
    return (attrs["path"], *(attrs[k] for k in _IMAGE_ATTRS), attrs["dtype"])


def _tensor_run(attrs: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if attrs["fill"] == "image":
        return {"output": image_source.read_image(*_image_args(attrs))}
    return {"output": generate(attrs["fill"], attrs["shape"], attrs["dtype"], attrs["seed"],
                               attrs["values"], attrs["path"])}


def _tensor_emit(attrs: dict, inputs: dict[str, str], outputs: dict[str, str]) -> list[str]:
    """``sources.generate`` as the run calls it (inactive attributes, which it ignores, left
    out); an image is read by ``image_source.read_image`` as the run reads it."""
    if attrs["fill"] == "image":
        image_args = ", ".join(literal(a) for a in _image_args(attrs))
        return [f"{outputs['output']} = image_source.read_image({image_args})"]
    args = [f"{k}={literal(attrs[k])}" for k in ("fill", "shape", "dtype")]
    args += [f"{k}={literal(attrs[k])}" for k in ("seed", "values", "path")
             if TENSOR.attr(k).is_active(attrs)]
    return [f"{outputs['output']} = sources.generate({', '.join(args)})"]


def _tensor_size_attr(attrs: dict) -> str:
    return {"values": "values", "file": "path", "image": "path"}.get(attrs["fill"], "shape")


TENSOR = BlockSpec(
    type_id="Tensor", title="Tensor", category="Tensors", op="",
    doc="A source tensor: zeros, ones, arange (1, 2, ..., n in row-major order), seeded "
        "random values, literal values, a .npy file, or a PNG/JPEG image (shape [1, H, W, C] "
        "or [1, C, H, W], known from the file's header before running).",
    inputs=(),
    outputs=(PortSpec("output", "The tensor.", kind="float"),),
    attrs=(
        AttrSpec("shape", "shape", [1, 5, 5, 2], visible_if=("fill", _SHAPED),
                 doc="The tensor's shape, e.g. [batch, height, width, channels]."),
        AttrSpec("dtype", "dtype", "float32", doc="float16, bfloat16, float32 or float64."),
        AttrSpec("fill", "enum", "random_normal", choices=TENSOR_FILLS,
                 doc="How to fill the tensor: zeros, ones, arange = 1, 2, ..., n in row-major "
                     "order, random_normal (mean 0, std 1), random_uniform in [-1, 1), values "
                     "(the literal values), file (a .npy file), image (a PNG or JPEG "
                     "file)."),
        AttrSpec("seed", "int", 0, minimum=0,
                 visible_if=("fill", ("random_normal", "random_uniform")),
                 doc="Seed of the random generator: the same seed gives the same values."),
        AttrSpec("values", "values", [[0.0]], visible_if=("fill", ("values",)),
                 doc="Literal values as a nested list; their nesting gives the shape."),
        AttrSpec("path", "path", "", visible_if=("fill", ("file", "image")),
                 doc="The file, relative to the canvas file's folder. fill=file: a .npy file "
                     "(loaded without pickle): float16, float32 or float64 values, or integers "
                     "that convert exactly to dtype; a 0-d array (a scalar) becomes shape [1]. "
                     "fill=image: a PNG or JPEG of at most 64 megapixels (EXIF orientation "
                     "applied, alpha dropped)."),
        AttrSpec("color", "enum", "rgb", choices=image_source.COLORS,
                 visible_if=("fill", ("image",)),
                 doc="gray: Pillow's luma (ITU-R 601-2), 1 channel; rgb: 3 channels."),
        AttrSpec("scale", "enum", "unit", choices=image_source.SCALES,
                 visible_if=("fill", ("image",)),
                 doc="unit: values in [0, 1] (v / 255; a 16-bit PNG v / 65535); byte: 0..255 "
                     "(a 16-bit PNG v / 257)."),
        AttrSpec("data_format", "enum", "NHWC", choices=image_source.DATA_FORMATS,
                 visible_if=("fill", ("image",)),
                 doc="NHWC: shape [1, H, W, C]; NCHW: shape [1, C, H, W]."),
    ),
    infer=_tensor_infer, run=_tensor_run, emit=_tensor_emit,
    imports=("from engine.io import image_source", "from engine.io import sources"),
    workspace=_tensor_workspace,
    size_attr=_tensor_size_attr,
)


def _intvector_infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    value = np.asarray(attrs["values"], np.int32)
    return {"output": TensorSpec(value.shape, "int32", None, value)}


INT_VECTOR = BlockSpec(
    type_id="IntVector", title="IntVector", category="Tensors", op="",
    doc="A 1-D int32 vector, e.g. filter_sizes or input_sizes.",
    inputs=(),
    outputs=(PortSpec("output", "The int32 vector.", kind="int_vector"),),
    attrs=(AttrSpec("values", "int_list", [3, 3, 2, 2], minimum=INT32_MIN, maximum=INT32_MAX,
                    doc="The integers, e.g. filter_sizes [height, width, in, out]."),),
    infer=_intvector_infer,
    run=lambda attrs, inputs: {"output": np.asarray(attrs["values"], np.int32)},
    emit=lambda attrs, inputs, outputs: [
        f"{outputs['output']} = np.asarray({literal(attrs['values'])}, np.int32)"],
    imports=("import numpy as np",),
    size_attr=lambda attrs: "values",
)


def _shapeof_infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    shape = inputs["input"].shape
    big = [s for s in shape if s > INT32_MAX]
    if big:
        raise InvalidArgumentError(f"input shape {list(shape)}: dimension {big[0]} does not fit "
                                   f"the int32 shape vector (at most {INT32_MAX})", "input")
    value = np.asarray(shape, np.int32)
    return {"output": TensorSpec(value.shape, "int32", None, value)}


SHAPE_OF = BlockSpec(
    type_id="ShapeOf", title="ShapeOf", category="Tensors", op="Shape",
    doc="tf.shape: the shape of its input as an int32 vector (known before running).",
    inputs=(PortSpec("input", "Any tensor."),),
    outputs=(PortSpec("output", "int32 shape vector.", kind="int_vector"),),
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
    return {"output": TensorSpec(tuple(src.shape[p] for p in perm), src.dtype, axes, value,
                                 src.bound)}


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
