"""The two calling conventions an implementation is verified under, and how a case maps to ONE
canonical TensorFlow call computed with :mod:`engine.kernels` (float64).

Every case is a forward-conv :class:`Geometry` (layout-free) plus values; each op reads it as:

- ``tf``: the six ``tf.raw_ops`` names, called with TF's keyword names (``input``, ``filter``,
  ``filter_sizes``, ``input_sizes``, ``out_backprop``, ``strides``, ``padding``,
  ``explicit_paddings`` only with ``padding="EXPLICIT"``, ``data_format``, ``dilations``);
  sizes, strides and paddings are lists of ints, arrays NumPy in the case's dtype. The canonical
  call is the same call with float64 arrays.
- ``torch``: ``conv2d(input, weight, bias=None, stride, padding, dilation, groups)``,
  ``conv2d_weight(input, weight_size, grad_output, stride, padding, dilation, groups)``,
  ``conv2d_input(input_size, weight, grad_output, stride, padding, dilation, groups)`` and
  ``conv_transpose2d(input, weight, bias=None, stride, padding, output_padding, groups,
  dilation)`` (``torch.nn.functional`` / ``torch.nn.grad``): NCHW, weights OIHW, transposed
  weights ``(in, out/groups, kh, kw)``, stride/padding/dilation as ``(h, w)`` tuples, sizes as
  tuples. The canonical call is NHWC with EXPLICIT symmetric padding; ``conv_transpose2d`` is
  ``Conv2DBackpropInput`` of the conv whose output it takes (``input_sizes`` from the output
  size, which ``output_padding`` fixes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from engine import kernels
from engine.base.errors import InvalidArgumentError
from engine.base.names import article
from engine.shapes.conv import ConvGeometry, conv2d_geometry
from engine.shapes.ops import CONV_OPS
from engine.verify.defaults import CONVENTIONS, OPS, TORCH_OPS

#: tf.raw_ops name -> (kernel, the arrays it takes, whether depthwise, the result's role):
#: the op table's rows.
TF_OPS: dict[str, tuple[Callable[..., np.ndarray], tuple[str, ...], bool, str]] = {
    op.name: (getattr(kernels, op.kernel), op.operands, op.depthwise, op.result)
    for op in CONV_OPS if op.rank == 2}


@dataclass(frozen=True)
class Geometry:
    """One forward convolution, layout-free. ``out_channels`` is the filter's out_channels (the
    depth multiplier for depthwise); ``groups`` = input channels / filter in_channels; ``pads``
    (top, bottom, left, right) apply with ``padding="EXPLICIT"`` (torch: always, symmetric)."""

    batch: int
    height: int
    width: int
    channels: int
    kernel: tuple[int, int]
    out_channels: int
    groups: int = 1
    strides: tuple[int, int] = (1, 1)
    dilations: tuple[int, int] = (1, 1)
    padding: str = "VALID"
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    data_format: str = "NHWC"
    depthwise: bool = False

    def with_(self, **changes: Any) -> Geometry:
        return replace(self, **changes)


def usage(convention: str, op: str) -> None:
    """Raise :class:`InvalidArgumentError` unless ``op`` is an op of ``convention``."""
    if convention not in CONVENTIONS:
        raise InvalidArgumentError(f"--convention {convention!r} is not one of tf, torch",
                                   "convention")
    if op not in OPS[convention]:
        raise InvalidArgumentError(f"--op {op!r} is not {article(convention)} op: one of "
                                   f"{', '.join(OPS[convention])}", "op")


def tf_op_of(op: str, convention: str) -> str:
    return op if convention == "tf" else TORCH_OPS[op][0]


def depthwise_op(op: str, convention: str) -> bool:
    return convention == "tf" and TF_OPS[op][2]


def _vec4(pair: tuple[int, int], data_format: str) -> list[int]:
    return [1, *pair, 1] if data_format == "NHWC" else [1, 1, *pair]


def tf_attrs(g: Geometry) -> dict[str, Any]:
    """strides, padding, explicit_paddings (EXPLICIT only), data_format, dilations."""
    attrs: dict[str, Any] = {"strides": _vec4(g.strides, g.data_format), "padding": g.padding}
    if g.padding == "EXPLICIT":
        t, b, left, r = g.pads
        attrs["explicit_paddings"] = ([0, 0, t, b, left, r, 0, 0] if g.data_format == "NHWC"
                                      else [0, 0, 0, 0, t, b, left, r])
    attrs["data_format"] = g.data_format
    attrs["dilations"] = _vec4(g.dilations, g.data_format)
    return attrs


def shapes(g: Geometry) -> ConvGeometry:
    """TensorFlow's geometry of ``g``; raises :class:`InvalidArgumentError` where TF refuses."""
    fin = g.channels if g.depthwise else g.channels // max(g.groups, 1)
    if not g.depthwise and (g.groups < 1 or g.channels % g.groups):
        raise InvalidArgumentError(f"groups {g.groups} does not divide channels {g.channels}")
    attrs = tf_attrs(g)
    return conv2d_geometry(_input_shape(g), (*g.kernel, fin, g.out_channels),
                           depthwise=g.depthwise, **attrs)


def _input_shape(g: Geometry) -> tuple[int, ...]:
    if g.data_format == "NHWC":
        return (g.batch, g.height, g.width, g.channels)
    return (g.batch, g.channels, g.height, g.width)


#: The torch ops whose ``padding`` may be one of the strings ``'valid'`` and ``'same'``
#: (``F.conv2d``; ``'same'`` with stride 1 only), given for a case of padding VALID or SAME.
TORCH_STRING_PADDING = ("conv2d",)


def torch_accepts(g: Geometry, op: str = "") -> bool:
    """What torch accepts: symmetric explicit padding (``op`` in
    :data:`TORCH_STRING_PADDING`: also VALID, and SAME at stride 1, as its strings), every
    output size >= 1 (the padded input at least the dilated kernel), channels > 0 and divisible
    by groups."""
    t, b, left, r = g.pads
    if g.data_format != "NHWC":
        return False
    if g.padding in ("VALID", "SAME") and op in TORCH_STRING_PADDING:
        if g.padding == "SAME" and g.strides != (1, 1):
            return False
        cg = shapes(g)
        t, b, left, r = cg.pad_top, cg.pad_bottom, cg.pad_left, cg.pad_right
    elif g.padding != "EXPLICIT" or t != b or left != r:
        return False
    if g.depthwise or g.channels < 1 or g.out_channels < 1 or g.groups < 1:
        return False
    if g.channels % g.groups or g.out_channels % g.groups:
        return False
    for size, k, d, before, after in ((g.height, g.kernel[0], g.dilations[0], t, b),
                                      (g.width, g.kernel[1], g.dilations[1], left, r)):
        if size + before + after < d * (k - 1) + 1:
            return False
    return True


def accepts(g: Geometry, convention: str, op: str = "") -> bool:
    """Whether the convention's framework accepts the case of ``op`` (TF's shape rules;
    torch's)."""
    try:
        if convention == "torch" and not torch_accepts(g, op):
            return False
        shapes(g)
    except InvalidArgumentError:
        return False
    return True


@dataclass(frozen=True)
class Call:
    """A case as the user's function gets it (``kwargs``) and as one float64 TF call."""

    kwargs: dict[str, Any]
    tf_op: str
    tf_args: dict[str, Any]


def _torch_pairs(g: Geometry) -> dict[str, Any]:
    padding = g.padding.lower() if g.padding in ("VALID", "SAME") else (g.pads[0], g.pads[2])
    return {"stride": tuple(g.strides), "padding": padding, "dilation": tuple(g.dilations),
            "groups": g.groups}


def make_call(op: str, convention: str, g: Geometry, x: np.ndarray, w: np.ndarray,
              dy: np.ndarray, dtype: np.dtype) -> Call:
    """The call of ``op`` on the forward input ``x``, filter ``w`` (HWIO) and output gradient
    ``dy`` (TF layout of ``g``, float64 values exact in ``dtype``)."""
    cg = shapes(g)
    attrs = tf_attrs(g)
    tf_op = tf_op_of(op, convention)
    _, arrays, _, _ = TF_OPS[tf_op]
    full = {"input": x, "filter": w, "out_backprop": dy,
            "filter_sizes": list(cg.filter_shape), "input_sizes": list(cg.input_shape)}
    tf_args = {k: full[k] for k in _tf_arg_names(tf_op)} | attrs
    cast = (lambda a: a.astype(dtype))
    if convention == "tf":
        kwargs = {k: (cast(v) if k in arrays else v) for k, v in tf_args.items()}
        return Call(kwargs, tf_op, tf_args)
    nchw = (lambda a: cast(a.transpose(0, 3, 1, 2)))
    oihw = (lambda a: cast(a.transpose(3, 2, 0, 1)))
    pairs = _torch_pairs(g)
    if op == "conv2d":
        kwargs = {"input": nchw(x), "weight": oihw(w), "bias": None, **pairs}
    elif op == "conv2d_weight":
        kh, kw, fin, fout = cg.filter_shape
        kwargs = {"input": nchw(x), "weight_size": (fout, fin, kh, kw),
                  "grad_output": nchw(dy), **pairs}
    elif op == "conv2d_input":
        n, h, wd, c = cg.input_shape
        kwargs = {"input_size": (n, c, h, wd), "weight": oihw(w), "grad_output": nchw(dy),
                  **pairs}
    else:  # conv_transpose2d: the input gradient of the conv whose output is `input`
        kwargs = {"input": nchw(dy), "weight": oihw(w), "bias": None,
                  "stride": pairs["stride"], "padding": pairs["padding"],
                  "output_padding": output_padding(g), "groups": g.groups,
                  "dilation": pairs["dilation"]}
    return Call(kwargs, tf_op, tf_args)


def _tf_arg_names(tf_op: str) -> tuple[str, ...]:
    return {"output": ("input", "filter"), "filter": ("input", "filter_sizes", "out_backprop"),
            "input": ("input_sizes", "filter", "out_backprop")}[TF_OPS[tf_op][3]]


def output_padding(g: Geometry) -> tuple[int, int]:
    """conv_transpose2d's output_padding giving the forward input size back: per dimension
    ``(size + 2p - d*(k-1) - 1) mod s``."""
    return tuple((size + 2 * p - d * (k - 1) - 1) % s for size, p, d, k, s in (
        (g.height, g.pads[0], g.dilations[0], g.kernel[0], g.strides[0]),
        (g.width, g.pads[2], g.dilations[1], g.kernel[1], g.strides[1])))  # type: ignore


def reference(call: Call) -> np.ndarray:
    """The float64 TF result of the canonical call."""
    return TF_OPS[call.tf_op][0](**call.tf_args)


def bound(call: Call) -> np.ndarray:
    """The sum of |products| of every result element: the op on the arrays' absolute values."""
    _, arrays, _, _ = TF_OPS[call.tf_op]
    args = {k: (np.abs(v) if k in arrays else v) for k, v in call.tf_args.items()}
    return TF_OPS[call.tf_op][0](**args)


def to_tf_layout(op: str, convention: str, output: np.ndarray) -> np.ndarray:
    """An output in the convention's layout as the canonical TF call's layout (float64)."""
    out = np.asarray(output, np.float64)
    if convention == "tf":
        return out
    return out.transpose(2, 3, 1, 0) if op == "conv2d_weight" else out.transpose(0, 2, 3, 1)


def from_tf_layout(op: str, convention: str, output: np.ndarray) -> np.ndarray:
    """The canonical call's result in the convention's layout (the inverse of
    :func:`to_tf_layout`)."""
    if convention == "tf":
        return output
    return output.transpose(3, 2, 0, 1) if op == "conv2d_weight" else \
        output.transpose(0, 3, 1, 2)


def array_names(op: str, convention: str) -> tuple[str, ...]:
    """The array arguments of ``op``, by the convention's names."""
    return TF_OPS[op][1] if convention == "tf" else TORCH_OPS[op][1]
