"""TensorFlow's conv ops (the op table's, 2-D and 3-D) as verify targets: each calls
``tf.raw_ops.<op>`` with the case's keyword arguments unchanged and returns the result as
NumPy. TensorFlow's ``UnimplementedError`` (its own "not supported", e.g. NCHW on the CPU) and
an ``InvalidArgumentError`` whose message states a limit of the implementation
(:data:`REFUSALS`: "Current implementation only supports equal length strides", "Current CPU
implementations do not yet support dilation rates larger than 1", "Gradients for grouped
convolutions are not supported on CPU") are ``NotImplementedError``; every other error keeps
its type, its message without the ``{{function_node ...}}`` prefix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

_NODE = re.compile(r"\{\{function_node [^}]*\}\}\s*")
#: Words of TensorFlow's messages that state a limit of its kernels, not a bad argument.
REFUSALS = re.compile(r"only supports|do(es)? not yet support|not supported on CPU")


def _raw_op(name: str) -> Callable[..., np.ndarray]:
    op = getattr(tf.raw_ops, name)

    def call(**kwargs: Any) -> np.ndarray:
        try:
            return op(**kwargs).numpy()
        except tf.errors.UnimplementedError as err:
            raise NotImplementedError(_NODE.sub("", err.message)) from None
        except tf.errors.OpError as err:
            message = _NODE.sub("", err.message)
            if isinstance(err, tf.errors.InvalidArgumentError) and REFUSALS.search(message):
                raise NotImplementedError(message) from None
            raise type(err)(err.node_def, err.op, message) from None

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"tf.raw_ops.{name}(**kwargs) as a NumPy array."
    return call


Conv2D = _raw_op("Conv2D")
Conv2DBackpropFilter = _raw_op("Conv2DBackpropFilter")
Conv2DBackpropInput = _raw_op("Conv2DBackpropInput")
DepthwiseConv2dNative = _raw_op("DepthwiseConv2dNative")
DepthwiseConv2dNativeBackpropFilter = _raw_op("DepthwiseConv2dNativeBackpropFilter")
DepthwiseConv2dNativeBackpropInput = _raw_op("DepthwiseConv2dNativeBackpropInput")
Conv3D = _raw_op("Conv3D")
Conv3DBackpropFilterV2 = _raw_op("Conv3DBackpropFilterV2")
Conv3DBackpropInputV2 = _raw_op("Conv3DBackpropInputV2")
