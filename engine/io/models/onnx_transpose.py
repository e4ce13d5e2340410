"""An ONNX ``ConvTranspose`` node (2-D) as a transposed :class:`ConvLayer`: TensorFlow's
``Conv2DBackpropInput`` with the exact pads.

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
    check_layer,
    transposed_pads,
)

#: The attributes of ONNX ConvTranspose and their types, as the ONNX operator spec defines them.
TRANSPOSE_ATTRS = {"auto_pad": "STRING", "dilations": "INTS", "group": "INT",
                   "kernel_shape": "INTS", "output_padding": "INTS", "output_shape": "INTS",
                   "pads": "INTS", "strides": "INTS"}


def _pair(name: str, what: str, value, default: tuple[int, int]) -> tuple[int, int]:
    value = tuple(value) if value is not None else default
    if len(value) != 2:
        raise ModelImportError(f"layer {name!r}: {what} {list(value)} has {len(value)} numbers, "
                               "expected 2 for a 2-D transposed conv")
    if min(value) < 0:
        raise ModelImportError(f"layer {name!r}: negative {what} {list(value)} cannot be "
                               "imported")
    return value


def transposed_layer(name: str, a: dict, auto_pad: str, w: np.ndarray, bias, group: int,
                     strides: tuple[int, int], dilations: tuple[int, int],
                     kernel: tuple[int, int], input_hw: tuple[int, int] | None,
                     batch: int | None) -> ConvLayer:
    """The layer of a ConvTranspose node: attributes ``a`` (checked types), weights ``w``
    [C, M / group, kH, kW] (see the module docstring)."""
    output_padding = _pair(name, "output_padding", a.get("output_padding"), (0, 0))
    output_shape = a.get("output_shape")
    pads = tuple(a.get("pads", (0, 0, 0, 0)))
    if len(pads) != 4:
        raise ModelImportError(f"layer {name!r}: pads {list(pads)} has {len(pads)} numbers, "
                               "expected 4 for a 2-D transposed conv")
    if min(pads) < 0:
        raise ModelImportError(f"layer {name!r}: negative pads {list(pads)} cannot be imported")
    for what, pair in (("strides", strides), ("dilations", dilations)):
        if min(pair) < 1:
            raise ModelImportError(f"layer {name!r}: {what} {list(pair)} must be >= 1")
    fixed = None
    if output_shape is not None:
        fixed = _pair(name, "output_shape", output_shape, (0, 0))
        padding, tblr, extra = ("SAME" if auto_pad == "SAME_UPPER" else "SAME_LOWER",
                                (0, 0, 0, 0), output_padding)
    else:
        per_axis = []
        for axis, k, s, d, op, (begin, end) in zip(
                ("rows", "cols"), kernel, strides, dilations, output_padding,
                ((pads[0], pads[2]), (pads[1], pads[3])), strict=True):
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
                                            reach + op - begin - end))
        (t, b, er), (left, r, ec) = per_axis
        tblr, extra = (t, b, left, r), (er, ec)
        padding = "EXPLICIT" if any(tblr) else "VALID"
    c_in, per_group = w.shape[0], w.shape[1]
    layer = ConvLayer(
        name=name, kernel=kernel, strides=strides, dilations=dilations, padding=padding,
        pads=tblr, groups=group, in_channels=c_in, out_channels=per_group * group,
        data_format="NCHW", weights=np.ascontiguousarray(w.transpose(2, 3, 1, 0)), bias=bias,
        input_hw=input_hw, batch=batch, transposed=True, output_padding=extra,
        output_hw=fixed)
    check_layer(layer)
    if fixed is not None and input_hw is not None:
        at_input_size(layer, input_hw)  # the pads the model's own input size gives
    return layer
