"""What the GradCheck and AdjointCheck blocks share: the ops they check, their attributes, their
outputs from the engine's tolerance rule (:mod:`engine.base.tolerance`), and shape inference of
the forward convolution they build on.

The verdict functions (:data:`VERDICT_CODE`: the rule's :func:`check_tolerance`,
:func:`relative` and :func:`verdict`, and :func:`gradient_errors`, :func:`adjoint_errors`) use
only NumPy and the table :data:`CHECK_TOLERANCE`, so :mod:`engine.export.frameworks` copies
their source into the scripts it writes: an exported script judges a check with this code, not
a restatement.
"""

from __future__ import annotations

import numpy as np

from blocks.conv import CONV_ATTRS, float_port, kernel_attrs
from blocks.spec import AttrError, AttrSpec, TensorSpec, blame
from engine.base.dtypes import CHECK_TOLERANCE  # noqa: F401  (re-exported: blocks.gradcheck)
from engine.base.errors import InvalidArgumentError
from engine.base.tolerance import (  # noqa: F401  (tolerance re-exported: the check blocks)
    check_tolerance,
    relative,
    tolerance,
    verdict,
)
from engine.shapes.conv import ConvGeometry, conv2d_geometry

CONV2D, DEPTHWISE = "Conv2D", "DepthwiseConv2dNative"

#: The forward op's kernel, its filter-gradient and its input-gradient kernel (names in
#: :mod:`engine.kernels`, looked up at call time).
OP_KERNELS: dict[str, tuple[str, str, str]] = {
    CONV2D: ("conv2d", "conv2d_backprop_filter", "conv2d_backprop_input"),
    DEPTHWISE: ("depthwise_conv2d_native", "depthwise_conv2d_native_backprop_filter",
                "depthwise_conv2d_native_backprop_input"),
}

OP_ATTR = AttrSpec("op", "enum", CONV2D, choices=(CONV2D, DEPTHWISE),
                   doc="The forward op whose gradient is checked: Conv2D or "
                       "DepthwiseConv2dNative (tf.raw_ops names).")

#: ``op`` and the conv attributes, with the conv blocks' validation and inactive rules.
CHECK_CONV_ATTRS: tuple[AttrSpec, ...] = (OP_ATTR, *CONV_ATTRS)

SCALAR = TensorSpec((), "float64")
VERDICT = TensorSpec((), "bool")


def conv_kwargs(attrs: dict) -> dict:
    """The conv attributes as the kernels take them (explicit_paddings only with EXPLICIT)."""
    return kernel_attrs(attrs, cudnn=False)


def forward_geometry(attrs: dict, inputs: dict[str, TensorSpec], names: set[str]) -> ConvGeometry:
    """The forward op's geometry on the ``input`` and ``filter`` ports, with ``out_backprop``
    checked against its output shape; raises :class:`AttrError` naming the port or attribute."""
    x, w = float_port(inputs, "input"), float_port(inputs, "filter")
    dy = float_port(inputs, "out_backprop")
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


def gradient_errors(gradient: np.ndarray, flat: np.ndarray, numbers: np.ndarray,
                    tol: float) -> dict:
    """GradCheck's outputs from ``gradient`` and the float64 ``numbers`` (numeric derivatives)
    at the flat indices ``flat``: ``numeric`` and ``error`` = ``|gradient - numeric|`` (NaN
    elsewhere), ``max_abs_error``, ``max_rel_error`` over ``max |numeric|`` and ``ok``
    (:func:`verdict` with ``tol``)."""
    numeric = np.full(gradient.shape, np.nan)
    error = np.full(gradient.shape, np.nan)
    numeric.flat[flat] = numbers
    error.flat[flat] = np.abs(gradient.reshape(-1)[flat].astype(np.float64) - numbers)
    max_abs = float(np.max(error.flat[flat])) if flat.size else 0.0
    scale = float(np.max(np.abs(numbers))) if flat.size else 0.0
    rel = relative(max_abs, scale)
    ok = verdict(max_abs, scale, rel, tol)
    return {"numeric": numeric, "error": error, "max_abs_error": np.float64(max_abs),
            "max_rel_error": np.float64(rel), "ok": np.bool_(ok)}


def adjoint_errors(forward: float, via_input: float, via_filter: float, tol: float) -> dict:
    """AdjointCheck's outputs from its three inner products: ``max_rel_error`` (the largest
    pairwise difference over the largest magnitude; NaN if one is NaN) and ``ok``
    (:func:`verdict` with ``tol``)."""
    values = (forward, via_input, via_filter)
    diff = max(abs(a - b) for a in values for b in values)
    if any(np.isnan(v) for v in values):
        diff = float("nan")
    scale = max(abs(v) for v in values)
    rel = relative(diff, scale)
    ok = verdict(diff, scale, rel, tol)
    return {"forward": np.float64(forward), "via_input": np.float64(via_input),
            "via_filter": np.float64(via_filter), "max_rel_error": np.float64(rel),
            "ok": np.bool_(ok)}


#: The verdict code exported scripts carry (their source, in this order): NumPy and
#: :data:`CHECK_TOLERANCE` only.
VERDICT_CODE = (check_tolerance, relative, verdict, gradient_errors, adjoint_errors)
