"""The conv conventions every framework export shares: one conv step as a plain geometry dict.

A framework script never sees TensorFlow's attribute encoding (4-entry strides in
data_format order, SAME/VALID/EXPLICIT padding, depthwise filters): the exporter resolves them
here, from the plan's inferred shapes, into :func:`conv_geometry`'s dict of ints and short
strings, which the script receives as a literal (:func:`engine.base.literal.literal`):

- ``op``: ``"forward"``, ``"filter"`` (gradient w.r.t. the filter) or ``"input"``;
- ``data_format`` (``"NHWC"`` or ``"NCHW"``), ``depthwise`` and ``groups`` (1 for depthwise:
  a framework without a depthwise op uses ``groups = in_channels`` itself);
- ``strides`` and ``dilations`` as ``[rows, cols]``; ``padding`` as the canvas has it and
  ``pads`` as ``[[top, bottom], [left, right]]``, TensorFlow's SAME resolved to the explicit
  amounts TensorFlow uses (the odd row after), so frameworks whose SAME differs (or that have
  none) use these;
- ``input_shape``, ``filter_shape`` and ``output_shape`` in the canvas's layout.
"""

from __future__ import annotations

from typing import Any

from blocks.conv import kernel_attrs
from engine.shapes.conv import conv2d_geometry
from engine.shapes.ops import CONV_OPS as TABLE

#: raw op name -> (what it computes, depthwise): the op table's.
CONV_OPS: dict[str, tuple[str, bool]] = {op.name: (op.kind, op.depthwise) for op in TABLE
                                          if op.rank == 2}

#: The forward op a check block names (its ``op`` attribute) -> depthwise.
CHECK_OPS = {op.name: op.depthwise for op in TABLE if op.kind == "forward" and op.rank == 2}


def geometry(op: str, depthwise: bool, attrs: dict, input_shape: tuple[int, ...],
             filter_shape: tuple[int, ...]) -> dict[str, Any]:
    """The geometry dict (module docstring) of a conv with these attributes and shapes."""
    g = conv2d_geometry(input_shape, filter_shape, **kernel_attrs(attrs, cudnn=False),
                        depthwise=depthwise)
    return {
        "op": op,
        "data_format": g.data_format,
        "depthwise": depthwise,
        "groups": g.groups,
        "strides": [g.stride_rows, g.stride_cols],
        "dilations": [g.dilation_rows, g.dilation_cols],
        "padding": g.padding,
        "pads": [[g.pad_top, g.pad_bottom], [g.pad_left, g.pad_right]],
        "input_shape": list(g.input_shape),
        "filter_shape": list(g.filter_shape),
        "output_shape": list(g.output_shape),
    }


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
