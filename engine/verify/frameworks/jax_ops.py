"""The tf.raw_ops conv ops (2-D and Conv3D's) written with ``jax.lax.conv_general_dilated``
(in as many spatial dimensions as the input has): the forward ops
directly (depthwise as ``feature_group_count`` = input channels, the filter reshaped to
``(kh, kw, 1, channels * multiplier)``), the backprops as ``jax.vjp`` of the forward op at zeros
of ``input_sizes`` or ``filter_sizes``. TF's padding strings pass through (lax pads ``SAME`` as
TF does, from the dilated kernel); ``EXPLICIT`` becomes lax's (low, high) pairs. float64 needs
``jax_enable_x64``, set on import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_enable_x64", True)


def _pair(v: Sequence[int], data_format: str) -> tuple[int, ...]:
    """The spatial entries of an attribute vector in ``data_format``."""
    return tuple(v[1:-1]) if data_format.endswith("C") else tuple(v[2:])


def _forward(x: Any, w: Any, strides: Sequence[int], padding: str, data_format: str = "",
             dilations: Sequence[int] = (), explicit_paddings: Sequence[int] = (),
             depthwise: bool = False) -> Any:
    """Conv2D or Conv3D (grouped when the filter has fewer input channels) or
    DepthwiseConv2dNative."""
    data_format = data_format or ("NHWC" if x.ndim == 4 else "NDHWC")
    dilations = dilations or (1,) * x.ndim
    channels = x.shape[data_format.index("C")]
    if depthwise:
        kh, kw, c, m = w.shape
        w = jnp.reshape(w, (kh, kw, 1, c * m))
        groups = channels
    else:
        groups = channels // w.shape[-2] if w.shape[-2] else 1
    pads: Any = padding
    if padding == "EXPLICIT":
        p = list(explicit_paddings)
        pads = [(p[2], p[3]), (p[4], p[5])] if data_format == "NHWC" else \
            [(p[4], p[5]), (p[6], p[7])]
    return lax.conv_general_dilated(
        x, w, window_strides=_pair(strides, data_format), padding=pads,
        rhs_dilation=_pair(dilations, data_format),
        dimension_numbers=(data_format, "HWIO" if x.ndim == 4 else "DHWIO", data_format),
        feature_group_count=groups)


def _grad_input(input_sizes, filter, out_backprop, depthwise: bool, **attrs) -> np.ndarray:
    x0 = jnp.zeros(tuple(input_sizes), filter.dtype)
    _, pullback = jax.vjp(lambda x: _forward(x, filter, depthwise=depthwise, **attrs), x0)
    return np.asarray(pullback(jnp.asarray(out_backprop))[0])


def _grad_filter(input, filter_sizes, out_backprop, depthwise: bool, **attrs) -> np.ndarray:
    w0 = jnp.zeros(tuple(filter_sizes), input.dtype)
    _, pullback = jax.vjp(lambda w: _forward(input, w, depthwise=depthwise, **attrs), w0)
    return np.asarray(pullback(jnp.asarray(out_backprop))[0])


def Conv2D(input, filter, **attrs) -> np.ndarray:
    return np.asarray(_forward(input, filter, **attrs))


def Conv2DBackpropInput(input_sizes, filter, out_backprop, **attrs) -> np.ndarray:
    return _grad_input(input_sizes, filter, out_backprop, False, **attrs)


def Conv2DBackpropFilter(input, filter_sizes, out_backprop, **attrs) -> np.ndarray:
    return _grad_filter(input, filter_sizes, out_backprop, False, **attrs)


def DepthwiseConv2dNative(input, filter, **attrs) -> np.ndarray:
    return np.asarray(_forward(input, filter, depthwise=True, **attrs))


def DepthwiseConv2dNativeBackpropInput(input_sizes, filter, out_backprop,
                                       **attrs) -> np.ndarray:
    return _grad_input(input_sizes, filter, out_backprop, True, **attrs)


def DepthwiseConv2dNativeBackpropFilter(input, filter_sizes, out_backprop,
                                        **attrs) -> np.ndarray:
    return _grad_filter(input, filter_sizes, out_backprop, True, **attrs)


def Conv3D(input, filter, **attrs) -> np.ndarray:
    return np.asarray(_forward(input, filter, **attrs))


def Conv3DBackpropInputV2(input_sizes, filter, out_backprop, **attrs) -> np.ndarray:
    return _grad_input(input_sizes, filter, out_backprop, False, **attrs)


def Conv3DBackpropFilterV2(input, filter_sizes, out_backprop, **attrs) -> np.ndarray:
    return _grad_filter(input, filter_sizes, out_backprop, False, **attrs)
