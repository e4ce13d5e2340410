"""An ONNX ``ConvTranspose`` node (2-D, or 3-D per axis alike) as a transposed
:class:`ConvLayer`: TensorFlow's ``Conv2DBackpropInput`` (``Conv3DBackpropInputV2``) with the
exact pads (a 3-D one's made SAME or VALID when the layer is translated, or refused).

ONNX ConvTranspose (opset 11+): X [N, C, H, W], W [C, M / group, kH, kW], Y [N, M, Ho, Wo] with
``Y[m, y] = sum over c, i of X[c, h] * W[c, m, i]`` where ``y = h * stride + i * dilation -
pad_begin``, per axis; ``Ho = stride * (H - 1) + output_padding + (kH - 1) * dilation + 1 -
pad_begin - pad_end``. ``output_shape`` fixes Ho (the pads then follow:
``total = stride * (H - 1) + output_padding + (kH - 1) * dilation + 1 - Ho``, the odd pad at
the end for SAME_UPPER, at the start otherwise; a negative total pads nothing, as ONNX Runtime
reads it); ``auto_pad`` SAME_UPPER / SAME_LOWER make Ho = H * stride the same way; VALID pads
nothing. This is the operator spec as ONNX Runtime 1.32 computes it (checked on 60 random
configurations); with ``output_shape`` and NOTSET the reference evaluator of onnx 1.23 keeps
the given pads instead (they agree when the total padding is 0 or -1, as in ONNX's own tests).
SAME_* with a kernel reach plus output_padding shorter than the stride is refused: the spec
(Ho = H * stride) and ONNX Runtime (no padding, a shorter Ho) disagree.

In TensorFlow terms Y is the input gradient of the Conv2D that maps Y to X with the same
strides, dilations and (begin, end) pads, filter ``W.transpose(2, 3, 1, 0)`` = [kH, kW, M /
group, C] (groups as a grouped Conv2D); output rows past the end the kernel reaches are zeros,
which Conv2DBackpropInput gives when they are fewer than the stride
(:func:`engine.io.models.model_import.transposed_pads`).
"""

from __future__ import annotations

import numpy as np

from engine.io.models.model_import import (
    ConvLayer,
    ModelImportError,
    at_input_size,
    backprop_input_op,
    check_layer,
    transposed_pads,
)
from engine.io.models.pads_3d import AXES

#: The attributes of ONNX ConvTranspose and their types, as the ONNX operator spec defines them.
TRANSPOSE_ATTRS = {"auto_pad": "STRING", "dilations": "INTS", "group": "INT",
                   "kernel_shape": "INTS", "output_padding": "INTS", "output_shape": "INTS",
                   "pads": "INTS", "strides": "INTS"}


def _pair(name: str, what: str, value, default: tuple[int, ...]) -> tuple[int, ...]:
    value = tuple(value) if value is not None else default
    rank = len(default)
    if len(value) != rank:
        raise ModelImportError(f"layer {name!r}: {what} {list(value)} has {len(value)} numbers, "
                               f"expected {rank} for a {rank}-D transposed conv")
    if min(value) < 0:
        raise ModelImportError(f"layer {name!r}: negative {what} {list(value)} cannot be "
                               "imported")
    return value


def transposed_layer(name: str, a: dict, auto_pad: str, w: np.ndarray, bias, group: int,
                     strides: tuple[int, ...], dilations: tuple[int, ...],
                     kernel: tuple[int, ...], input_hw: tuple[int, ...] | None,
                     batch: int | None) -> ConvLayer:
    """The layer of a ConvTranspose node: attributes ``a`` (checked types), weights ``w``
    [C, M / group, kH, kW] or [C, M / group, kD, kH, kW] (see the module docstring)."""
    rank = len(kernel)
    output_padding = _pair(name, "output_padding", a.get("output_padding"), (0,) * rank)
    output_shape = a.get("output_shape")
    pads = tuple(a.get("pads", (0,) * 2 * rank))
    if len(pads) != 2 * rank:
        raise ModelImportError(f"layer {name!r}: pads {list(pads)} has {len(pads)} numbers, "
                               f"expected {2 * rank} for a {rank}-D transposed conv")
    if min(pads) < 0:
        raise ModelImportError(f"layer {name!r}: negative pads {list(pads)} cannot be imported")
    for what, pair in (("strides", strides), ("dilations", dilations)):
        if min(pair) < 1:
            raise ModelImportError(f"layer {name!r}: {what} {list(pair)} must be >= 1")
    fixed = None
    if output_shape is not None:
        fixed = _pair(name, "output_shape", output_shape, (0,) * rank)
        padding, tblr, extra = ("SAME" if auto_pad == "SAME_UPPER" else "SAME_LOWER",
                                (0,) * 2 * rank, output_padding)
    else:
        per_axis = []
        for axis, k, s, d, op, (begin, end) in zip(
                AXES[rank], kernel, strides, dilations, output_padding,
                ((pads[i], pads[rank + i]) for i in range(rank)), strict=True):
            reach = (k - 1) * d + 1
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                total = op + reach - s  # for Ho = H * stride, whatever H
                if total < 0:
                    raise ModelImportError(
                        f"layer {name!r}: auto_pad {auto_pad} with a kernel reach of {reach} "
                        f"{axis} plus output_padding {op}, less than stride {s}: the ONNX spec "
                        "(output = input x stride) and ONNX Runtime (no padding) disagree; "
                        "re-export the model with explicit pads or output_shape")
                begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
                end = total - begin
            elif auto_pad == "VALID":
                begin = end = 0
            # one input row: the pads do not depend on the input size here
            per_axis.append(transposed_pads(name, axis, k, s, d, 1, begin,
                                            reach + op - begin - end, backprop_input_op(rank)))
        tblr = tuple(p for before, after, _ in per_axis for p in (before, after))
        extra = tuple(e for _, _, e in per_axis)
        padding = "EXPLICIT" if any(tblr) else "VALID"
    c_in, per_group = w.shape[0], w.shape[1]
    layer = ConvLayer(
        name=name, kernel=kernel, strides=strides, dilations=dilations, padding=padding,
        pads=tblr, groups=group, in_channels=c_in, out_channels=per_group * group,
        data_format="NCHW", weights=np.ascontiguousarray(w.transpose(*range(2, rank + 2), 1, 0)),
        bias=bias,
        input_hw=input_hw, batch=batch, transposed=True, output_padding=extra,
        output_hw=fixed)
    check_layer(layer)
    if fixed is not None and input_hw is not None:
        at_input_size(layer, input_hw)  # the pads the model's own input size gives
    return layer
