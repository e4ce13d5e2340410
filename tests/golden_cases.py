"""Loading of the TensorFlow golden cases in tests/golden/ (see its README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from engine import kernels
from engine.base.dtypes import to_dtype

GOLDEN = Path(__file__).parent / "golden"
CASES = json.loads((GOLDEN / "cases.json").read_text())["cases"]
ARRAYS = np.load(GOLDEN / "arrays.npz")

OPS = {
    "Conv2D": kernels.conv2d,
    "Conv2DBackpropFilter": kernels.conv2d_backprop_filter,
    "Conv2DBackpropInput": kernels.conv2d_backprop_input,
    "DepthwiseConv2dNative": kernels.depthwise_conv2d_native,
    "DepthwiseConv2dNativeBackpropFilter": kernels.depthwise_conv2d_native_backprop_filter,
    "DepthwiseConv2dNativeBackpropInput": kernels.depthwise_conv2d_native_backprop_input,
}
SIZE_ARGS = ("filter_sizes", "input_sizes")

VALID = [c for c in CASES if c.get("valid", True)]
INVALID = [c for c in CASES if not c.get("valid", True)]


def call_valid(case: dict) -> np.ndarray:
    """Run a valid case's op on its inputs cast to the case's dtype."""
    dtype = to_dtype(case["dtype"])
    args = {}
    for name, value in case["inputs"].items():
        args[name] = value if name in SIZE_ARGS else ARRAYS[value].astype(dtype)
    attrs = {k: v for k, v in case["attrs"].items() if k != "T"}
    return OPS[case["op"]](**args, **attrs)


def call_invalid(case: dict) -> np.ndarray:
    """Run an invalid case with arrays of its input shapes (size vectors as given)."""
    args = {}
    for name, shape in case["input_shapes"].items():
        args[name] = shape if name in SIZE_ARGS else np.ones(shape, np.float32)
    return OPS[case["op"]](**args, **case["attrs"])
