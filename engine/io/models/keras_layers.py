"""Keras layer configs read strictly, and the layers beyond Conv2D / DepthwiseConv2D:
``SeparableConv2D`` (one layer: its depthwise conv with the pointwise conv in
:attr:`ConvLayer.pointwise`), ``Conv2DTranspose`` (TensorFlow's Conv2DBackpropInput) and
``Conv1D`` / ``DepthwiseConv1D`` / ``SeparableConv1D`` / ``Conv1DTranspose`` (2-D convs of
height 1, :func:`as_2d`), plus the activation a
layer applies after its conv. ``Conv3DTranspose`` is read as Conv2DTranspose is, with three
spatial axes (TensorFlow's Conv3DBackpropInputV2).

SeparableConv2D is Keras's depthwise conv (its strides, dilation and padding, kernel
``depthwise_kernel`` [kh, kw, in, multiplier]) followed by a 1x1 conv with stride 1 and no
padding (``pointwise_kernel`` [1, 1, in * multiplier, filters]) and the bias: one canvas with
both ops; the pointwise conv's input is the depthwise conv's output, and its grad_input is the
gradient the depthwise conv receives.

A 1-D conv of kernel k, stride s, dilation d on [N, W, C] is the 2-D conv of kernel (1, k),
strides (1, s), dilations (1, d) on [N, 1, W, C]; Keras's ``causal`` padding is d * (k - 1)
zeros on the left (keras ``ops.conv`` after ``pad`` in ``BaseConv``; Keras 2's SeparableConv1D
pads its depthwise conv so too, Keras 3's refuses causal). A SeparableConv1D's kernels
[k, in, m] and [1, in * m, f] become [1, k, in, m] and [1, 1, in * m, f]; a Conv1DTranspose's
[k, filters, in] becomes [1, k, filters, in], its output_padding op (0, op).

Conv2DTranspose (kernel [kh, kw, filters, in], TensorFlow's conv2d_transpose layout) is the input
gradient of the conv whose input is its output: with k = (kernel - 1) * dilation + 1, Keras pads
its stride-dilated input by (left, right) (keras ``backend_utils.
_convert_conv_transpose_padding_args_from_keras_to_jax``), so that conv's pads are
(k - 1 - left, k - 1 - right); a negative right pad is output rows no input reaches (zeros),
given here as ``output_padding``.
"""

from __future__ import annotations

import numpy as np

from engine.base.names import shown
from engine.io.models.keras_shapes import conv_length, transpose_length
from engine.io.models.model_import import ConvLayer, check_layer, float_weights

#: A config key that is absent (what :func:`found_text` calls "missing").
MISSING = object()
#: Activations that are no activation.
LINEAR = (None, "linear")

def found_text(value: object) -> str:
    """A config value as a message shows what was found: ``a string '3'``, ``null``..."""
    if value is MISSING:
        return "missing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {'true' if value else 'false'}"
    kind = {int: "the integer", float: "the number", str: "the string", list: "the list",
            dict: "the object"}.get(type(value), type(value).__name__)
    return f"{kind} {shown(value, 60)}"


def is_count(value: object) -> bool:
    """A positive int (never a boolean)."""
    return type(value) is int and value >= 1


class LayerProblem(Exception):
    """A reason one layer cannot be imported (the reader adds the file and layer names)."""


def int_pair(config: dict, key: str, default: object = MISSING,
             rank: int = 2) -> tuple[int, ...]:
    """``config[key]``: one positive integer or a list of ``rank`` (never booleans)."""
    value = config.get(key, default)
    if is_count(value):
        return (value,) * rank
    if isinstance(value, list) and len(value) == rank and all(is_count(v) for v in value):
        return tuple(value)
    raise LayerProblem(f"{key} is {found_text(value)}, expected a positive integer or a list of "
                       f"{rank} (a {rank}-D conv)")


def positive_int(config: dict, key: str, default: object = MISSING) -> int:
    """``config[key]``: one positive integer (never a boolean), else :class:`LayerProblem`."""
    value = config.get(key, default)
    if not is_count(value):
        raise LayerProblem(f"{key} is {found_text(value)}, expected a positive integer")
    return value


def activation_of(config: dict) -> str | None:
    """The activation a layer applies after its conv (and bias), or None: Keras writes a name
    (``"relu"``) or, for a function object, ``{"class_name": ..., "config": name}``."""
    value = config.get("activation")
    if isinstance(value, dict):
        inner = value.get("config")
        value = inner if isinstance(inner, str) else value.get("class_name")
    if value in LINEAR:
        return None
    if not isinstance(value, str):
        raise LayerProblem(f"activation is {found_text(value)}, expected a name")
    return value


def common(c: dict, rank: int = 2) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...],
                                            str, str, bool]:
    """kernel_size, strides, dilation_rate, padding (SAME/VALID), data_format (NHWC/NCHW:
    channels last or first, any rank) and use_bias of a ``rank``-D conv layer's config,
    checked."""
    kernel, strides = int_pair(c, "kernel_size", rank=rank), int_pair(c, "strides", 1, rank)
    dilations = int_pair(c, "dilation_rate", 1, rank)
    padding = c.get("padding", "valid")
    if not isinstance(padding, str) or padding.lower() not in ("same", "valid"):
        raise LayerProblem(f"padding is {found_text(padding)}, expected 'same' or 'valid'")
    data_format = c.get("data_format")
    fmt = {"channels_last": "NHWC", "channels_first": "NCHW", None: "NHWC"}.get(
        data_format if isinstance(data_format, str | None) else "?")
    if fmt is None:
        raise LayerProblem(f"data_format is {found_text(data_format)}, expected "
                           "'channels_last' or 'channels_first'")
    use_bias = c.get("use_bias", True)
    if not isinstance(use_bias, bool):
        raise LayerProblem(f"use_bias is {found_text(use_bias)}, expected true or false")
    return kernel, strides, dilations, padding.upper(), fmt, use_bias


def _kernel(name: str, what: str, array: np.ndarray, want: tuple) -> np.ndarray:
    w = float_weights(name, what, array)
    if w.ndim != len(want) or any(n is not None and n != m for n, m in zip(want, w.shape, strict=False)):
        shape = ", ".join("*" if n is None else str(n) for n in want)
        raise LayerProblem(f"the {what} has shape {list(w.shape)}, expected [{shape}]")
    return np.ascontiguousarray(w)


def as_2d(c: dict, transposed: bool = False
          ) -> tuple[dict, tuple[int, int, int, int] | None]:
    """A Conv1D / DepthwiseConv1D / SeparableConv1D config as the 2-D conv of height 1 that
    computes it, and the explicit pads (top, bottom, left, right) of ``causal`` padding, else
    None; ``transposed``: a Conv1DTranspose (no causal padding; output_padding made (0, op))."""
    out = dict(c)
    if transposed and c.get("output_padding") is not None:
        op = c["output_padding"]
        op = op[0] if isinstance(op, list) and len(op) == 1 else op
        if type(op) is not int or op < 0:
            raise LayerProblem(f"output_padding is {found_text(c['output_padding'])}, expected "
                               "an integer >= 0 or a list of 1 (a 1-D conv)")
        out["output_padding"] = [0, op]
    for key in ("kernel_size", "strides", "dilation_rate"):
        value = c.get(key, MISSING if key == "kernel_size" else 1)
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not is_count(value):
            raise LayerProblem(f"{key} is {found_text(value)}, expected a positive integer or a "
                               "list of 1 (a 1-D conv)")
        out[key] = [1, value]
    padding = c.get("padding", "valid")
    if isinstance(padding, str) and padding.lower() == "causal" and not transposed:
        out["padding"] = "valid"
        return out, (0, 0, out["dilation_rate"][1] * (out["kernel_size"][1] - 1), 0)
    if not isinstance(padding, str) or padding.lower() not in ("same", "valid"):
        raise LayerProblem(f"padding is {found_text(padding)}, expected 'same', 'valid'"
                           + (" (a transposed conv has no causal padding)" if transposed
                              else " or 'causal'"))
    return out, None


def separable_layer(name: str, c: dict, weights: list[np.ndarray],
                    input_hw: tuple[int, ...] | None, unknown: str | None, one_d: bool = False,
                    causal: tuple[int, int, int, int] | None = None) -> ConvLayer:
    """A SeparableConv2D as its depthwise conv with its pointwise conv (``weights``:
    depthwise_kernel, pointwise_kernel, bias if use_bias); ``one_d``: a SeparableConv1D made
    2-D (:func:`as_2d`), its depthwise conv padded by ``causal`` when not None."""
    kernel, strides, dilations, padding, fmt, use_bias = common(c)
    multiplier, filters = positive_int(c, "depth_multiplier", 1), positive_int(c, "filters")
    dw = _kernel(name, "depthwise_kernel", weights[0], (*kernel, None, multiplier))
    cin = dw.shape[2]
    pw = _kernel(name, "pointwise_kernel", weights[1], (1, 1, cin * multiplier, filters))
    bias = float_weights(name, "bias", weights[2]) if use_bias else None
    pads = causal or (0, 0, 0, 0)
    mid = None
    if input_hw is not None:
        rows, cols = (conv_length(n + before + after, k, s, d, padding.lower())
                      for n, k, s, d, before, after in zip(
                          input_hw, kernel, strides, dilations, pads[::2], pads[1::2],
                          strict=True))
        mid = (rows, cols)
    pointwise = ConvLayer(name=name, kernel=(1, 1), strides=(1, 1),
                          dilations=(1, 1), padding="VALID", pads=(0, 0, 0, 0), groups=1,
                          in_channels=cin * multiplier, out_channels=filters, data_format=fmt,
                          weights=pw, bias=bias, input_hw=mid, input_unknown=unknown,
                          activation=activation_of(c))
    depthwise = ConvLayer(name=name, kernel=kernel, strides=strides, dilations=dilations,
                          padding="EXPLICIT" if causal else padding, pads=pads, groups=cin,
                          in_channels=cin, out_channels=cin * multiplier, data_format=fmt,
                          weights=dw, input_hw=input_hw, input_unknown=unknown,
                          pointwise=pointwise, conv1d=one_d)
    check_layer(depthwise)
    return depthwise


def _paddings(value: object, rank: int) -> tuple[int, ...]:
    """A transposed conv's ``output_padding``: one integer >= 0 or a list of ``rank``."""
    def fine(v: object) -> bool:
        return type(v) is int and v >= 0
    if fine(value):
        return (value,) * rank  # type: ignore[return-value]
    if isinstance(value, list) and len(value) == rank and all(fine(v) for v in value):
        return tuple(value)
    raise LayerProblem(f"output_padding is {found_text(value)}, expected an integer >= 0 or a "
                       f"list of {rank} (a {rank}-D conv)")


def transposed_layer(name: str, c: dict, weights: list[np.ndarray],
                     input_hw: tuple[int, ...] | None, unknown: str | None,
                     rank: int = 2, one_d: bool = False) -> ConvLayer:
    """A Conv2DTranspose (``weights``: kernel [kh, kw, filters, in], bias if use_bias) or a
    Conv3DTranspose (kernel [kd, kh, kw, filters, in]) as the input gradient of a conv (see the
    module docstring); ``one_d``: a Conv1DTranspose made 2-D (:func:`as_2d`)."""
    kernel, strides, dilations, padding, fmt, use_bias = common(c, rank)
    filters = positive_int(c, "filters")
    if c.get("groups", 1) != 1:
        raise LayerProblem(f"groups is {found_text(c.get('groups'))}: a grouped Conv{rank}"
                           "DTranspose cannot be imported")
    op = c.get("output_padding")
    op = (None,) * rank if op is None else _paddings(op, rank)
    w = _kernel(name, "kernel", weights[0], (*kernel, filters, None))
    pads, extra = [], []
    for k, s, d, o in zip(kernel, strides, dilations, op, strict=True):
        k_eff = (k - 1) * d + 1
        if padding == "VALID":
            left, right = k_eff - 1, k_eff - 1 + (max(k_eff, s) - k_eff if o is None else o)
        else:
            total = s + k_eff - 2 if o is None else k_eff + k_eff % 2 - 2 + o
            left = min(total // 2 + total % 2, k_eff - 1)
            right = total - left
        before, after = k_eff - 1 - left, max(0, k_eff - 1 - right)
        pads += [before, after]
        extra.append(transpose_length(1, k, s, d, padding.lower(), o) - (k_eff - before - after))
        if before < 0 or not 0 <= extra[-1] < s:
            cut = 1 if one_d else 0  # a 1-D layer's own values, not the height-1 axis's
            raise LayerProblem(f"padding {padding.lower()} with output_padding "
                               f"{list(op)[cut:]} and strides {list(strides)[cut:]} is not the "
                               "input gradient of a conv (output_padding must be below the "
                               "stride)")
    bias = float_weights(name, "bias", weights[1]) if use_bias else None
    layer = ConvLayer(name=name, kernel=kernel, strides=strides, dilations=dilations,
                      padding="EXPLICIT" if any(pads) else "VALID", pads=tuple(pads), groups=1,
                      in_channels=int(w.shape[-1]), out_channels=filters, data_format=fmt,
                      weights=w, bias=bias, input_hw=input_hw, input_unknown=unknown,
                      activation=activation_of(c), transposed=True,
                      output_padding=tuple(extra), conv1d=one_d)
    check_layer(layer)
    return layer
