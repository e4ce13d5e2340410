"""The six kernels come from one factory over the op table (engine.kernels.ops._conv_op): each
keeps TensorFlow's signature, which the table's row and the typed signature must agree on, and
is one function whether called by position or by keyword."""

import inspect

import numpy as np
import pytest

from engine import kernels
from engine.kernels import ops
from engine.shapes.ops import CONV_OPS

ATTRS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")
#: The 3-D ops' attributes (``tf.raw_ops``: no explicit_paddings) and defaults.
ATTRS_3D = ("strides", "padding", "data_format", "dilations")


@pytest.mark.parametrize("op", CONV_OPS, ids=lambda op: op.name)
def test_each_kernel_has_its_rows_tensor_arguments_then_tfs_attributes(op):
    kernel = getattr(kernels, op.kernel)
    params = inspect.signature(kernel).parameters
    attrs = ATTRS if op.rank == 2 else ATTRS_3D
    assert tuple(params) == op.ports + attrs + (("use_cudnn_on_gpu",) if op.cudnn else ())
    if op.rank == 2:
        assert [params[a].default for a in ATTRS[2:]] == [(), "NHWC", (1, 1, 1, 1)]
    else:
        assert [params[a].default for a in ATTRS_3D[2:]] == ["NDHWC", (1, 1, 1, 1, 1)]
    assert kernel.__name__ == op.kernel and kernel.__doc__.startswith(f"tf.raw_ops.{op.name}:")


def test_the_factory_refuses_a_signature_that_is_not_the_rows():
    with pytest.raises(TypeError, match="not the signature of Conv2D"):
        ops._conv_op("Conv2D", ops.Forward, "")  # Conv2D takes use_cudnn_on_gpu
    with pytest.raises(TypeError, match="not the signature of Conv2DBackpropInput"):
        ops._conv_op("Conv2DBackpropInput", ops.FilterGradCudnn, "")


def test_a_wrong_call_is_a_type_error_naming_the_kernel():
    x = np.ones((1, 3, 3, 1), np.float32)
    with pytest.raises(TypeError, match=r"depthwise_conv2d_native\(\) .*use_cudnn_on_gpu"):
        kernels.depthwise_conv2d_native(x, x, [1, 1, 1, 1], "VALID", use_cudnn_on_gpu=True)
    with pytest.raises(TypeError, match=r"conv2d\(\) .*padding"):
        kernels.conv2d(x, x, [1, 1, 1, 1])


def test_keywords_in_any_order_give_the_positional_result():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 4, 3)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 2)).astype(np.float32)
    dy = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    args = ([1, 2, 2, 1], "SAME")
    y = kernels.conv2d(x, w, *args)
    assert y.shape == (2, 3, 2, 2)
    # SAME, stride 2, 2x3 filter: pad_top 0, pad_left 0 (one on the right); y[0, 1, 1] by the
    # definition
    ref = sum(x[0, 2 + i, 2 + j] @ w[i, j] for i in range(2) for j in range(3) if 2 + j < 4)
    np.testing.assert_allclose(y[0, 1, 1], ref, rtol=1e-5)
    assert np.array_equal(kernels.conv2d(padding="SAME", strides=[1, 2, 2, 1], filter=w,
                                         input=x), y)
    dw = kernels.conv2d_backprop_filter(x, w.shape, dy, *args)
    assert np.array_equal(kernels.conv2d_backprop_filter(
        out_backprop=dy, filter_sizes=list(w.shape), input=x, padding="SAME",
        strides=(1, 2, 2, 1)), dw)
    # the adjoint identity <conv(x, w), dy> = <x, dx(dy)> = <w, dw(dy)>
    dx = kernels.conv2d_backprop_input(x.shape, w, dy, *args)
    inner = float(np.vdot(y.astype(np.float64), dy))
    assert np.isclose(float(np.vdot(x.astype(np.float64), dx)), inner, rtol=1e-4)
    assert np.isclose(float(np.vdot(w.astype(np.float64), dw)), inner, rtol=1e-4)
