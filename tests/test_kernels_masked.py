"""Issue 31 point 8: a NumPy masked array given to a kernel is refused naming the argument (its
mask would be ignored), in each of the six ops; a plain array with the same data runs."""

from __future__ import annotations

import numpy as np
import pytest

from engine import kernels
from engine.base.errors import InvalidArgumentError

X = np.arange(32.0, dtype=np.float32).reshape(1, 4, 4, 2)
W = np.ones((2, 2, 2, 2), np.float32)
DY = np.ones((1, 3, 3, 2), np.float32)
DYD = np.ones((1, 3, 3, 4), np.float32)
ATTRS = {"strides": [1, 1, 1, 1], "padding": "VALID"}
CALLS = {
    "conv2d": (kernels.conv2d, {"input": X, "filter": W}),
    "conv2d_backprop_filter": (kernels.conv2d_backprop_filter,
                               {"input": X, "filter_sizes": [2, 2, 2, 2], "out_backprop": DY}),
    "conv2d_backprop_input": (kernels.conv2d_backprop_input,
                              {"input_sizes": [1, 4, 4, 2], "filter": W, "out_backprop": DY}),
    "depthwise_conv2d_native": (kernels.depthwise_conv2d_native, {"input": X, "filter": W}),
    "depthwise_conv2d_native_backprop_filter": (
        kernels.depthwise_conv2d_native_backprop_filter,
        {"input": X, "filter_sizes": [2, 2, 2, 2], "out_backprop": DYD}),
    "depthwise_conv2d_native_backprop_input": (
        kernels.depthwise_conv2d_native_backprop_input,
        {"input_sizes": [1, 4, 4, 2], "filter": W, "out_backprop": DYD}),
}
ARRAYS = [(op, arg) for op, (_, args) in CALLS.items() for arg, v in args.items()
          if isinstance(v, np.ndarray)]


@pytest.mark.parametrize("op, arg", ARRAYS)
def test_a_masked_argument_is_refused_by_name(op, arg):
    fn, args = CALLS[op]
    fn(**args, **ATTRS)  # the plain arrays run
    masked = np.ma.array(args[arg], mask=np.zeros(args[arg].shape, bool))
    with pytest.raises(InvalidArgumentError) as info:
        fn(**{**args, arg: masked}, **ATTRS)
    assert info.value.argument == arg and "masked array" in str(info.value)


def test_values_given_as_a_numpy_array_are_its_numbers():
    """Issue 31 point 8: ``values=np.array([...])`` was refused as "must hold numbers only"."""
    from engine import api

    c = api.new_canvas()
    arr = np.array([[1.5, -2.0], [3.0, 4.25]], np.float32)
    c.add("Tensor", id="t", fill="values", values=arr, dtype="float64")
    c.add("Tensor", id="i", fill="values", values=np.arange(3), dtype="float64")
    results = c.run()
    assert np.array_equal(results["t"], arr.astype(np.float64))
    assert np.array_equal(results["i"], [0.0, 1.0, 2.0])
    with pytest.raises(InvalidArgumentError, match="masked"):
        c.add("Tensor", id="m", fill="values", values=np.ma.array([1.0], mask=[True]))
