"""Calling conventions, dtypes, empty tensors and error messages of engine.kernels."""

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from engine import kernels
from engine.base.errors import InvalidArgumentError

ATTRS = {"strides": [1, 1, 1, 1], "padding": "SAME"}


@pytest.mark.parametrize("sizes", [[3, 3, 2, 4], (3, 3, 2, 4), np.array([3, 3, 2, 4], np.int32),
                                   np.array([3, 3, 2, 4], np.int64)])
def test_filter_sizes_as_list_tuple_or_int_array(sizes):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 5, 2)).astype(np.float32)
    dy = rng.standard_normal((2, 5, 5, 4)).astype(np.float32)
    dw = kernels.conv2d_backprop_filter(x, sizes, dy, **ATTRS)
    ref = kernels.conv2d_backprop_filter(x.astype(np.float64), [3, 3, 2, 4],
                                         dy.astype(np.float64), **ATTRS)
    assert dw.shape == (3, 3, 2, 4) and dw.dtype == np.float32
    np.testing.assert_allclose(dw, ref, rtol=1e-5, atol=1e-5)


def test_input_sizes_with_two_spatial_values():
    """Conv2DBackpropInput takes [H, W]: batch from out_backprop, depth from the filter."""
    rng = np.random.default_rng(1)
    w, dy = rng.standard_normal((3, 3, 2, 4)), rng.standard_normal((2, 6, 5, 4))
    full = kernels.conv2d_backprop_input([2, 6, 5, 2], w, dy, **ATTRS)
    short = kernels.conv2d_backprop_input([6, 5], w, dy, **ATTRS)
    np.testing.assert_array_equal(full, short)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_output_has_the_input_dtype(dtype):
    x = np.ones((1, 4, 4, 2), dtype)
    w = np.ones((2, 2, 2, 3), dtype)
    y = kernels.conv2d(x, w, **ATTRS)
    assert y.dtype == dtype
    # interior positions see all 2*2*2 taps of ones
    assert float(y[0, 0, 0, 0]) == 8.0 and float(y[0, 3, 3, 0]) == 2.0


def test_half_types_accumulate_in_float32():
    """A float16 running sum of 4096 ones stalls at 2048 (2049 rounds back); float32 does not."""
    x = np.ones((1, 1, 4096, 1), np.float16)
    dy = np.ones((1, 1, 4096, 1), np.float16)
    dw = kernels.conv2d_backprop_filter(x, [1, 1, 1, 1], dy, **ATTRS)
    assert float(dw[0, 0, 0, 0]) == 4096.0


def test_empty_batch_gives_zero_gradients_of_the_right_shape():
    x = np.zeros((0, 5, 5, 3), np.float32)
    dy = np.zeros((0, 5, 5, 4), np.float32)
    dw = kernels.conv2d_backprop_filter(x, [3, 3, 3, 4], dy, **ATTRS)
    assert dw.shape == (3, 3, 3, 4) and not dw.any()
    dx = kernels.conv2d_backprop_input([0, 5, 5, 3], np.ones((3, 3, 3, 4), np.float32), dy,
                                       **ATTRS)
    assert dx.shape == (0, 5, 5, 3)


def test_zero_output_width_gives_zero_gradient():
    """VALID with input width 2 and filter width 3: output width 0, gradients are all zero."""
    x = np.ones((1, 4, 2, 1), np.float64)
    dy = np.ones((1, 2, 0, 1), np.float64)
    attrs = {"strides": [1, 1, 1, 1], "padding": "VALID"}
    assert not kernels.conv2d_backprop_filter(x, [3, 3, 1, 1], dy, **attrs).any()
    dx = kernels.conv2d_backprop_input([1, 4, 2, 1], np.ones((3, 3, 1, 1)), dy, **attrs)
    assert dx.shape == (1, 4, 2, 1) and not dx.any()


def test_explicit_padding_of_an_empty_input_still_has_outputs():
    y = kernels.conv2d(np.zeros((1, 0, 3, 1)), np.ones((1, 1, 1, 2)), [1, 1, 1, 1], "EXPLICIT",
                       explicit_paddings=[0, 0, 1, 1, 0, 0, 0, 0])
    assert y.shape == (1, 2, 3, 2) and not y.any()


@pytest.mark.parametrize("call, match", [
    (lambda: kernels.conv2d_backprop_filter(np.ones((1, 5, 5, 2)), [3, 0, 2, 4],
                                            np.ones((1, 5, 5, 4)), **ATTRS),
     r"filter_sizes \[3, 0, 2, 4\]: filter height, width and in_channels must be > 0"),
    (lambda: kernels.conv2d(np.ones((1, 5, 5, 2), np.float32), np.ones((3, 3, 2, 4)), **ATTRS),
     "filter dtype float64 does not match input dtype float32"),
    (lambda: kernels.conv2d(np.ones((1, 5, 5, 2), np.int32), np.ones((3, 3, 2, 4)), **ATTRS),
     "input dtype int32 is not one of"),
    (lambda: kernels.conv2d_backprop_filter(np.ones((1, 5, 5, 2)), [3.0, 3, 2, 4],
                                            np.ones((1, 5, 5, 4)), **ATTRS),
     "filter_sizes must be integers"),
    (lambda: kernels.conv2d(np.ones((1, 5, 5, 4)), np.ones((3, 3, 2, 3)), **ATTRS),
     "out_channels 3 must be evenly divisible by the number of groups 2"),
    (lambda: kernels.conv2d_backprop_input([1, 7, 7, 2], np.ones((3, 3, 2, 4)),
                                           np.ones((1, 5, 7, 4)), **ATTRS),
     (r"out_backprop height 5 does not match the computed output height 7 \(input 7, "
      r"filter 3, dilation 1, stride 1, SAME\)")),
])
def test_invalid_calls_name_the_argument(call, match):
    with pytest.raises(InvalidArgumentError, match=match):
        call()


def test_engine_and_blocks_never_import_qt():
    code = ("import sys, engine.kernels, engine.bench, blocks\n"
            "import pkgutil, importlib, engine\n"
            "for pkg in (engine, blocks):\n"
            "    for m in pkgutil.iter_modules(pkg.__path__):\n"
            "        importlib.import_module(pkg.__name__ + '.' + m.name)\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('PySide6', 'NodeGraphQt', 'pyqtgraph', 'Qt', 'shiboken6')]\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""
