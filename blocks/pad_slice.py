"""Blocks that grow and cut tensors: Pad (tf.raw_ops.Pad) and Slice (tf.raw_ops.Slice).

Their TensorFlow operands ``paddings``, ``begin`` and ``size`` are attributes here (as
Transpose's ``perm`` is): flat int lists, ``paddings`` = before, after per dimension (the rows
of TensorFlow's ``[rank, 2]`` tensor, in order). An imported 3-D conv whose pads are neither
SAME nor VALID is a Pad then a VALID Conv3D, its input gradient cut back by a Slice
(:mod:`engine.graph.layer_canvas`).
"""

from __future__ import annotations

import numpy as np

from blocks.spec import INT32_MAX, AttrError, AttrSpec, BlockSpec, PortSpec, TensorSpec
from engine.base.array_limits import shape_problem
from engine.base.dtypes import to_dtype
from engine.base.literal import literal


def pad_pairs(paddings: list[int], ndim: int) -> list[tuple[int, int]]:
    """``paddings`` (before, after per dimension) as pairs, checked against ``ndim``."""
    if len(paddings) != 2 * ndim:
        raise AttrError("paddings", f"paddings {paddings} has {len(paddings)} entries: the input "
                                    f"has {ndim} dimensions, so it takes {2 * ndim} (before, "
                                    "after per dimension)")
    return [(paddings[i], paddings[i + 1]) for i in range(0, 2 * ndim, 2)]


def slice_bounds(begin: list[int], size: list[int], shape: tuple[int, ...]) -> list[slice]:
    """The slices ``begin[i] : begin[i] + size[i]`` (size -1: to the end) of each dimension of
    ``shape``, checked: TensorFlow's rule 0 <= begin[i] <= begin[i] + size[i] <= shape[i]."""
    ndim = len(shape)
    for name, values in (("begin", begin), ("size", size)):
        if len(values) != ndim:
            raise AttrError(name, f"{name} {values} has {len(values)} entries: the input has "
                                  f"shape {list(shape)}, {ndim} dimensions")
    out = []
    for axis, (b, s, n) in enumerate(zip(begin, size, shape, strict=True)):
        if b > n:
            raise AttrError("begin", f"begin[{axis}] = {b} is past dimension {axis} of the input "
                                     f"{list(shape)} (at most {n})")
        end = n if s == -1 else b + s
        if s < -1 or end > n:
            raise AttrError("size", f"size[{axis}] = {s}: begin {b} + size {s} must lie within "
                                    f"dimension {axis} of the input {list(shape)} ({n}; size -1 "
                                    "takes the rest)")
        out.append(slice(b, end))
    return out


def _pad_infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    src = inputs["input"]
    pairs = pad_pairs(attrs["paddings"], len(src.shape))
    shape = tuple(n + b + a for n, (b, a) in zip(src.shape, pairs, strict=True))
    problem = shape_problem(shape, to_dtype(src.dtype).itemsize)
    if problem is not None:
        raise AttrError("paddings", f"paddings {attrs['paddings']}: the output {problem}")
    value = None if src.value is None else np.pad(src.value, pairs)
    return {"output": TensorSpec(shape, src.dtype, src.axes, value, src.bound)}


def _pad_run(attrs: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = inputs["input"]
    return {"output": np.pad(x, pad_pairs(attrs["paddings"], x.ndim))}


PAD = BlockSpec(
    type_id="Pad", title="Pad", category="Tensors", op="Pad",
    doc="tf.pad with zeros: dimension i gets paddings[2i] zeros before and paddings[2i + 1] "
        "after. [0, 0, 1, 1, 2, 2, 0, 0] pads an NHWC tensor's height by 1 and width by 2 on "
        "both sides.",
    inputs=(PortSpec("input", "Any tensor."),),
    outputs=(PortSpec("output", "The padded tensor."),),
    attrs=(AttrSpec("paddings", "int_list", [0, 0, 1, 1, 1, 1, 0, 0], minimum=0,
                    maximum=INT32_MAX,
                    doc="Zeros before and after, per dimension: [before0, after0, before1, "
                        "after1, ...] (2 entries per input dimension, each >= 0)."),),
    infer=_pad_infer, run=_pad_run,
    emit=lambda attrs, inputs, outputs: [
        (f"{outputs['output']} = np.pad({inputs['input']}, "
         f"{literal([list(p) for p in pad_pairs(attrs['paddings'], len(attrs['paddings']) // 2)])})")],
    imports=("import numpy as np",),
    size_attr=lambda attrs: "paddings",
)


def _slice_infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    src = inputs["input"]
    cut = tuple(slice_bounds(attrs["begin"], attrs["size"], src.shape))
    shape = tuple(s.stop - s.start for s in cut)
    value = None if src.value is None else src.value[cut]
    return {"output": TensorSpec(shape, src.dtype, src.axes, value, src.bound)}


def _slice_run(attrs: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = inputs["input"]
    cut = tuple(slice_bounds(attrs["begin"], attrs["size"], x.shape))
    return {"output": np.ascontiguousarray(x[cut])}


SLICE = BlockSpec(
    type_id="Slice", title="Slice", category="Tensors", op="Slice",
    doc="tf.slice: size[i] elements of dimension i from begin[i] on (size -1: all from "
        "begin[i] on). begin [0, 1, 1, 0] size [-1, 4, 4, -1] cuts a 4x4 window out of an "
        "NHWC tensor.",
    inputs=(PortSpec("input", "Any tensor."),),
    outputs=(PortSpec("output", "The slice."),),
    attrs=(AttrSpec("begin", "int_list", [0, 0, 0, 0], minimum=0, maximum=INT32_MAX,
                    doc="The first element taken, per dimension (>= 0)."),
           AttrSpec("size", "int_list", [-1, -1, -1, -1], minimum=-1, maximum=INT32_MAX,
                    doc="How many elements, per dimension; -1 takes the rest of it."),),
    infer=_slice_infer, run=_slice_run,
    emit=lambda attrs, inputs, outputs: [
        (f"{outputs['output']} = np.ascontiguousarray({inputs['input']}[tuple(slice(b, None if "
        f"s == -1 else b + s) for b, s in zip({literal(attrs['begin'])}, "
        f"{literal(attrs['size'])}))])")],
    imports=("import numpy as np",),
)

SPECS = (PAD, SLICE)
