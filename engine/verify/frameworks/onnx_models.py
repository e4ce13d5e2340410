"""One-node ONNX models of the tf.raw_ops conv ops, for any ONNX runtime: ``Conv`` (Conv2D;
DepthwiseConv2dNative as ``group`` = input channels) and ``ConvTranspose`` (Conv2DBackpropInput
and its depthwise form, the gradient of that Conv). NCHW only, as ONNX is: an NHWC call raises
``NotImplementedError``.

Attributes from TF's: ``SAME`` is ``auto_pad=SAME_UPPER`` and ``VALID`` is ``auto_pad=VALID``
for Conv; ``EXPLICIT`` gives ``pads`` (ONNX order: top, left, bottom, right). ConvTranspose gets
TF's pads computed here (``SAME``: the total ``max((out - 1) * stride + dilated kernel - in,
0)``, its smaller half on top) and the ``output_padding`` that makes its output
``input_sizes``. The filter (HWIO) becomes ONNX's ``(out, in / group, kh, kw)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

#: ONNX opset of the models.
OPSET = 17
#: The types ONNX Conv and ConvTranspose take (no bfloat16).
_TYPES = {"float16": onnx.TensorProto.FLOAT16, "float32": onnx.TensorProto.FLOAT,
          "float64": onnx.TensorProto.DOUBLE}


def _nchw(data_format: str) -> None:
    if data_format != "NCHW":
        raise NotImplementedError(f"ONNX Conv takes NCHW tensors, not {data_format}")


def onnx_filter(filter: np.ndarray, depthwise: bool) -> np.ndarray:
    """A TF filter (HWIO; depthwise ``(kh, kw, C, M)``) as ONNX's ``(out, in / group, kh,
    kw)``."""
    if depthwise:
        kh, kw, c, m = filter.shape
        filter = filter.reshape(kh, kw, 1, c * m)
    return np.ascontiguousarray(filter.transpose(3, 2, 0, 1))


def _tf_pads(size: int, out: int, k: int, s: int, d: int, padding: str,
             explicit: tuple[int, int]) -> tuple[int, int]:
    if padding == "EXPLICIT":
        return explicit
    if padding == "VALID":
        return 0, 0
    total = max((out - 1) * s + d * (k - 1) + 1 - size, 0)
    return total // 2, total - total // 2


def model(op: str, x_shape: Sequence[int], w_shape: Sequence[int], dtype: str,
          attrs: dict[str, Any], group: int, output_hw: Sequence[int] = ()) -> onnx.ModelProto:
    """A model ``Y = op(X, W)``; ``output_hw`` (ConvTranspose) the input size it gives."""
    s, d = list(attrs["strides"][2:]), list(attrs["dilations"][2:])
    padding = attrs["padding"]
    node_attrs: dict[str, Any] = {"strides": s, "dilations": d, "group": group,
                                  "kernel_shape": list(w_shape[2:])}
    p = list(attrs.get("explicit_paddings") or [0] * 8)
    if op == "Conv":
        if padding == "EXPLICIT":
            node_attrs["pads"] = [p[4], p[6], p[5], p[7]]
        else:
            node_attrs["auto_pad"] = "SAME_UPPER" if padding == "SAME" else "VALID"
    else:
        pads = [_tf_pads(size, out, k, si, di, padding, (p[4 + 2 * i], p[5 + 2 * i]))
                for i, (size, out, k, si, di) in enumerate(zip(output_hw, x_shape[2:],
                                                               w_shape[2:], s, d))]
        node_attrs["pads"] = [pads[0][0], pads[1][0], pads[0][1], pads[1][1]]
        node_attrs["output_padding"] = [
            size - ((out - 1) * si + di * (k - 1) + 1 - lo - hi)
            for size, out, k, si, di, (lo, hi) in zip(output_hw, x_shape[2:], w_shape[2:], s, d,
                                                      pads)]
    if dtype not in _TYPES:
        raise NotImplementedError(f"ONNX {op} takes float16, float32 or float64, not {dtype}")
    t = _TYPES[dtype]
    graph = helper.make_graph(
        [helper.make_node(op, ["X", "W"], ["Y"], **node_attrs)], "conv",
        [helper.make_tensor_value_info("X", t, list(x_shape)),
         helper.make_tensor_value_info("W", t, list(w_shape))],
        [helper.make_tensor_value_info("Y", t, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


#: The tf.raw_ops attributes a model is built from (its cache key with the shapes).
MODEL_ATTRS = ("strides", "padding", "explicit_paddings", "dilations")


def model_attrs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The :data:`MODEL_ATTRS` of a tf.raw_ops call's keyword arguments (None when absent)."""
    return {k: kwargs.get(k) for k in MODEL_ATTRS}


def conv_inputs(op: str, kwargs: dict[str, Any]) -> tuple[str, np.ndarray, np.ndarray, int,
                                                         tuple[int, ...]]:
    """``(onnx op, X, W, group, output size)`` of a tf.raw_ops call's keyword arguments."""
    attrs = kwargs
    _nchw(attrs.get("data_format", "NHWC"))
    depthwise = op.startswith("Depthwise")
    if op.endswith("BackpropInput"):
        x, filter = kwargs["out_backprop"], kwargs["filter"]
        channels = kwargs["input_sizes"][1]
        out_hw = tuple(kwargs["input_sizes"][2:])
        onnx_op = "ConvTranspose"
    else:
        x, filter = kwargs["input"], kwargs["filter"]
        channels, out_hw, onnx_op = x.shape[1], (), "Conv"
    fin = filter.shape[2]
    group = channels if depthwise else (channels // fin if fin else 1)
    return onnx_op, np.ascontiguousarray(x), onnx_filter(filter, depthwise), group, out_hw
