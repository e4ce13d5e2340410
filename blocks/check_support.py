"""What the GradCheck and AdjointCheck blocks share: the ops they check, their attributes, the
per-dtype tolerance of a verdict, and shape inference of the forward convolution they build on."""

from __future__ import annotations

import math

import numpy as np

from blocks.conv import CONV_ATTRS, _float_port, kernel_attrs
from blocks.spec import AttrError, AttrSpec, TensorSpec, blame
from engine.base.dtypes import dtype_name
from engine.base.errors import InvalidArgumentError
from engine.shapes.conv import ConvGeometry, conv2d_geometry

CONV2D, DEPTHWISE = "Conv2D", "DepthwiseConv2dNative"

#: The forward op's kernel, its filter-gradient and its input-gradient kernel (names in
#: :mod:`engine.kernels`, looked up at call time).
OP_KERNELS: dict[str, tuple[str, str, str]] = {
    CONV2D: ("conv2d", "conv2d_backprop_filter", "conv2d_backprop_input"),
    DEPTHWISE: ("depthwise_conv2d_native", "depthwise_conv2d_native_backprop_filter",
                "depthwise_conv2d_native_backprop_input"),
}

#: Largest relative error a check accepts, by the dtype of the values it checks.
CHECK_TOLERANCE: dict[str, float] = {"float64": 1e-7, "float32": 1e-4, "bfloat16": 3e-2,
                                     "float16": 1e-2}

OP_ATTR = AttrSpec("op", "enum", CONV2D, choices=(CONV2D, DEPTHWISE),
                   doc="The forward op whose gradient is checked: Conv2D or "
                       "DepthwiseConv2dNative (tf.raw_ops names).")

#: ``op`` and the conv attributes, with the conv blocks' validation and inactive rules.
CHECK_CONV_ATTRS: tuple[AttrSpec, ...] = (OP_ATTR, *CONV_ATTRS)

SCALAR = TensorSpec((), "float64")
VERDICT = TensorSpec((), "bool")


def tolerance(dtype: np.dtype | str) -> float:
    """The check tolerance of ``dtype`` (a NumPy dtype or a TensorFlow name)."""
    name = dtype if isinstance(dtype, str) else dtype_name(dtype)
    return CHECK_TOLERANCE.get(name, CHECK_TOLERANCE["float64"])


def conv_kwargs(attrs: dict) -> dict:
    """The conv attributes as the kernels take them (explicit_paddings only with EXPLICIT)."""
    return kernel_attrs(attrs, cudnn=False)


def forward_geometry(attrs: dict, inputs: dict[str, TensorSpec], names: set[str]) -> ConvGeometry:
    """The forward op's geometry on the ``input`` and ``filter`` ports, with ``out_backprop``
    checked against its output shape; raises :class:`AttrError` naming the port or attribute."""
    x, w = _float_port(inputs, "input"), _float_port(inputs, "filter")
    dy = _float_port(inputs, "out_backprop")
    try:
        g = conv2d_geometry(x.shape, w.shape, **conv_kwargs(attrs),
                            depthwise=attrs["op"] == DEPTHWISE)
    except InvalidArgumentError as err:
        raise blame(err, names) from None
    if tuple(dy.shape) != tuple(g.output_shape):
        raise AttrError("out_backprop", f"out_backprop shape {list(dy.shape)} does not match the "
                                        f"{attrs['op']} output shape: expected "
                                        f"{list(g.output_shape)}, got {list(dy.shape)}")
    return g


def relative(max_abs: float, scale: float) -> float:
    """``max_abs / scale``; 0 when both are 0, inf when only the scale is, NaN stays NaN."""
    if math.isnan(max_abs) or math.isnan(scale):
        return math.nan
    if scale > 0:
        return max_abs / scale
    return 0.0 if max_abs == 0 else math.inf


def verdict(max_abs: float, scale: float, rel: float, tol: float) -> bool:
    """Within tolerance: ``rel <= tol``, or ``max_abs <= tol`` where the scale is 0."""
    if not (math.isfinite(max_abs) and math.isfinite(scale)):
        return False
    return bool(rel <= tol) if scale > 0 else bool(max_abs <= tol)
