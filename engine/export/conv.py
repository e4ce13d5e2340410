"""The conv conventions every framework export shares: one conv step as a plain geometry dict.

A framework script never sees TensorFlow's attribute encoding (strides of ``rank + 2`` entries
in data_format order, SAME/VALID/EXPLICIT padding, depthwise filters): the exporter resolves
them here, from the plan's inferred shapes, into :func:`geometry`'s dict of ints and short
strings, which the script receives as a literal (:func:`engine.base.literal.literal`). One dict
serves every row of the op table, whatever its number of spatial dimensions (its ``rank``: 2
for the Conv2D family, 3 for Conv3D's); each list below has one entry per spatial dimension,
in the order of the filter's (depth,) height, width axes:

- ``op``: ``"forward"``, ``"filter"`` (gradient w.r.t. the filter) or ``"input"``;
- ``data_format`` (``"NHWC"``, ``"NCHW"``, ``"NDHWC"`` or ``"NCDHW"``), ``depthwise`` and
  ``groups`` (1 for depthwise: a framework without a depthwise op uses
  ``groups = in_channels`` itself);
- ``strides`` and ``dilations`` (``[rows, cols]``, ``[planes, rows, cols]``); ``padding`` as
  the canvas has it and ``pads`` as ``[before, after]`` per spatial dimension, TensorFlow's
  SAME resolved to the explicit amounts TensorFlow uses (the odd one after), so frameworks
  whose SAME differs (or that have none) use these;
- ``input_shape``, ``filter_shape`` and ``output_shape`` in the canvas's layout.
"""

from __future__ import annotations

from typing import Any

from blocks.conv import kernel_attrs
from engine.shapes.conv import geometry_nd
from engine.shapes.ops import CONV_OPS as TABLE

#: raw op name -> (what it computes, depthwise): the op table's, every rank.
CONV_OPS: dict[str, tuple[str, bool]] = {op.name: (op.kind, op.depthwise) for op in TABLE}

#: The forward op a check block names (its ``op`` attribute) -> depthwise.
CHECK_OPS = {op.name: op.depthwise for op in TABLE if op.kind == "forward"}


def geometry(op: str, depthwise: bool, attrs: dict, input_shape: tuple[int, ...],
             filter_shape: tuple[int, ...]) -> dict[str, Any]:
    """The geometry dict (module docstring) of a conv with these attributes and shapes (its
    rank is the filter's number of axes less two)."""
    kw = kernel_attrs(attrs, cudnn=False)
    g = geometry_nd(input_shape, filter_shape, kw["strides"], kw["padding"],
                    kw.get("explicit_paddings", ()), kw["data_format"], kw["dilations"],
                    depthwise, "input", "filter", rank=len(filter_shape) - 2)
    return {
        "op": op,
        "data_format": g.data_format,
        "depthwise": depthwise,
        "groups": g.groups,
        "strides": list(g.strides),
        "dilations": list(g.dilations),
        "padding": g.padding,
        "pads": [list(p) for p in g.pads],
        "input_shape": list(g.input_shape),
        "filter_shape": list(g.filter_shape),
        "output_shape": list(g.output_shape),
    }


def dilated(g: dict[str, Any]) -> bool:
    """Whether a geometry dict has a dilation other than 1."""
    return any(d != 1 for d in g["dilations"])


def conv_step_geometry(step, specs) -> dict[str, Any]:
    """The geometry dict of a conv block's plan step (``specs``: the plan's port specs)."""
    op, depthwise = CONV_OPS[step.spec.op]
    shape = {port: tuple(specs[src].shape) for port, src in step.inputs.items()}
    result = tuple(specs[(step.node_id, "output")].shape)
    input_shape = result if op == "input" else shape["input"]
    filter_shape = result if op == "filter" else shape["filter"]
    return geometry(op, depthwise, step.attrs, input_shape, filter_shape)


def check_step_geometry(step, specs) -> dict[str, Any]:
    """The forward op's geometry dict of a GradCheck or AdjointCheck step."""
    shape = {port: tuple(specs[src].shape) for port, src in step.inputs.items()}
    depthwise = CHECK_OPS[step.attrs["op"]]
    return geometry("forward", depthwise, step.attrs, shape["input"], shape["filter"])
