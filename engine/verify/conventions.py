"""The two calling conventions an implementation is verified under, and how a case maps to ONE
canonical TensorFlow call computed with :mod:`engine.kernels` (float64).

Every case is a forward-conv :class:`Geometry` (layout-free, two or three spatial dimensions)
plus values; each op reads it as:

- ``tf``: the ``tf.raw_ops`` names of the op table (the Conv2D family and Conv3D's), called
  with TF's keyword names (``input``, ``filter``, ``filter_sizes``, ``input_sizes``,
  ``out_backprop``, ``strides``, ``padding``, ``explicit_paddings`` only with
  ``padding="EXPLICIT"``, ``data_format``, ``dilations``); sizes, strides and paddings are lists
  of ints, arrays NumPy in the case's dtype. The canonical call is the same call with float64
  arrays.
- ``torch``: ``conv2d(input, weight, bias=None, stride, padding, dilation, groups)``,
  ``conv2d_weight(input, weight_size, grad_output, stride, padding, dilation, groups)``,
  ``conv2d_input(input_size, weight, grad_output, stride, padding, dilation, groups)`` and
  ``conv_transpose2d(input, weight, bias=None, stride, padding, output_padding, groups,
  dilation)`` (``torch.nn.functional`` / ``torch.nn.grad``), and their ``3d`` twins: NCHW
  (NCDHW), weights OIHW (OIDHW), transposed weights ``(in, out/groups, *kernel)``,
  stride/padding/dilation as tuples of one entry per spatial dimension, sizes as tuples. The
  canonical call of a 2-D op is NHWC with EXPLICIT symmetric padding; a 3-D op's is NDHWC with
  SAME or VALID (tf.raw_ops' Conv3D has no EXPLICIT), so its cases are those whose padding is
  symmetric there (torch's int padding). ``conv_transpose{2,3}d`` is the input gradient of the
  conv whose output it takes (``input_sizes`` from the output size, which ``output_padding``
  fixes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from engine import kernels
from engine.base.errors import InvalidArgumentError
from engine.base.names import article
from engine.shapes.conv import FORMATS, ConvGeometry, ConvGeometryNd, geometry_nd
from engine.shapes.ops import CONV_OPS
from engine.verify.defaults import CONVENTIONS, OPS, TORCH_OPS

#: tf.raw_ops name -> (kernel, the arrays it takes, whether depthwise, the result's role):
#: the op table's rows.
TF_OPS: dict[str, tuple[Callable[..., np.ndarray], tuple[str, ...], bool, str]] = {
    op.name: (getattr(kernels, op.kernel), op.operands, op.depthwise, op.result)
    for op in CONV_OPS}
#: tf.raw_ops name -> its number of spatial dimensions (the op table's ``rank``).
TF_RANKS: dict[str, int] = {op.name: op.rank for op in CONV_OPS}


@dataclass(frozen=True)
class Geometry:
    """One forward convolution, layout-free, over two spatial dimensions (height, width) or,
    with ``planes`` set, three (planes, height, width); ``kernel``, ``strides`` and
    ``dilations`` have one entry per spatial dimension. ``out_channels`` is the filter's
    out_channels (the depth multiplier for depthwise); ``groups`` = input channels / filter
    in_channels; ``pads`` (top, bottom, left, right) apply with ``padding="EXPLICIT"`` (2-D
    only; torch 2-D: always, symmetric). ``data_format`` is ``NHWC`` (channels last) or ``NCHW``
    (channels first) whatever the rank: a 3-D call's is NDHWC or NCDHW (:func:`tf_format`)."""

    batch: int
    height: int
    width: int
    channels: int
    kernel: tuple[int, ...]
    out_channels: int
    groups: int = 1
    strides: tuple[int, ...] = (1, 1)
    dilations: tuple[int, ...] = (1, 1)
    padding: str = "VALID"
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    data_format: str = "NHWC"
    depthwise: bool = False
    planes: int | None = None

    def __post_init__(self) -> None:
        if self.planes is not None:  # the 2-D defaults of 1: 1 in every dimension
            for name in ("strides", "dilations"):
                if getattr(self, name) == (1, 1):
                    object.__setattr__(self, name, (1, 1, 1))

    def with_(self, **changes: Any) -> Geometry:
        return replace(self, **changes)

    @property
    def rank(self) -> int:
        """The number of spatial dimensions."""
        return 2 if self.planes is None else 3

    @property
    def sizes(self) -> tuple[int, ...]:
        """The input's spatial sizes, outermost first."""
        if self.planes is None:
            return self.height, self.width
        return self.planes, self.height, self.width

    def with_sizes(self, sizes: tuple[int, ...]) -> Geometry:
        """The same geometry on an input of spatial ``sizes`` (of its rank)."""
        if self.planes is None:
            return replace(self, height=sizes[0], width=sizes[1])
        return replace(self, planes=sizes[0], height=sizes[1], width=sizes[2])


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


def op_rank(op: str) -> int:
    """The number of spatial dimensions of ``op`` (a tf.raw_ops or a torch op name)."""
    return TF_RANKS[op if op in TF_RANKS else TORCH_OPS[op][0]]


def depthwise_op(op: str, convention: str) -> bool:
    return convention == "tf" and TF_OPS[op][2]


def tf_format(g: Geometry) -> str:
    """The call's data_format: ``g``'s layout word for its rank (NHWC -> NDHWC in 3-D)."""
    return FORMATS[g.rank][g.data_format != "NHWC"]


def _vector(values: tuple[int, ...], data_format: str) -> list[int]:
    return [1, *values, 1] if data_format == "NHWC" else [1, 1, *values]


def tf_attrs(g: Geometry) -> dict[str, Any]:
    """strides, padding, explicit_paddings (EXPLICIT only), data_format, dilations."""
    attrs: dict[str, Any] = {"strides": _vector(g.strides, g.data_format), "padding": g.padding}
    if g.padding == "EXPLICIT":
        t, b, left, r = g.pads
        attrs["explicit_paddings"] = ([0, 0, t, b, left, r, 0, 0] if g.data_format == "NHWC"
                                      else [0, 0, 0, 0, t, b, left, r])
    attrs["data_format"] = tf_format(g)
    attrs["dilations"] = _vector(g.dilations, g.data_format)
    return attrs


def shapes_nd(g: Geometry) -> ConvGeometryNd:
    """TensorFlow's geometry of ``g`` over its spatial dimensions; raises
    :class:`InvalidArgumentError` where TF refuses."""
    fin = g.channels if g.depthwise else g.channels // max(g.groups, 1)
    if not g.depthwise and (g.groups < 1 or g.channels % g.groups):
        raise InvalidArgumentError(f"groups {g.groups} does not divide channels {g.channels}")
    attrs = tf_attrs(g)
    return geometry_nd(_input_shape(g), (*g.kernel, fin, g.out_channels), attrs["strides"],
                       g.padding, attrs.get("explicit_paddings", ()), attrs["data_format"],
                       attrs["dilations"], g.depthwise, "input", "filter", rank=g.rank)


def shapes(g: Geometry) -> ConvGeometry | ConvGeometryNd:
    """:func:`shapes_nd`, a 2-D geometry as the named :class:`ConvGeometry`."""
    nd = shapes_nd(g)
    return ConvGeometry.from_nd(nd) if nd.rank == 2 else nd


def _input_shape(g: Geometry) -> tuple[int, ...]:
    if g.data_format == "NHWC":
        return (g.batch, *g.sizes, g.channels)
    return (g.batch, g.channels, *g.sizes)


#: The torch ops whose ``padding`` may be one of the strings ``'valid'`` and ``'same'``
#: (``F.conv2d``; ``'same'`` with stride 1 only), given for a case of padding VALID or SAME.
TORCH_STRING_PADDING = ("conv2d",)


def _torch_pads(g: Geometry, op: str) -> tuple[tuple[int, int], ...] | None:
    """(before, after) per dimension as torch pads ``g``, None where it cannot: 2-D EXPLICIT
    symmetric (or, for :data:`TORCH_STRING_PADDING`, VALID, and SAME at stride 1); 3-D SAME or
    VALID when symmetric."""
    if g.padding in ("VALID", "SAME") and (op in TORCH_STRING_PADDING or g.rank == 3):
        if g.padding == "SAME" and op in TORCH_STRING_PADDING and max(g.strides) > 1:
            return None
        pads = shapes_nd(g).pads
        if op not in TORCH_STRING_PADDING and any(b != a for b, a in pads):
            return None
        return pads
    t, b, left, r = g.pads
    if g.padding != "EXPLICIT" or t != b or left != r:
        return None
    return (t, b), (left, r)


def torch_accepts(g: Geometry, op: str = "") -> bool:
    """What torch accepts: symmetric padding as :func:`_torch_pads` says, every output size
    >= 1 (the padded input at least the dilated kernel), channels > 0 and divisible by
    groups."""
    if g.data_format != "NHWC":
        return False
    pads = _torch_pads(g, op)
    if pads is None:
        return False
    if g.depthwise or g.channels < 1 or g.out_channels < 1 or g.groups < 1:
        return False
    if g.channels % g.groups or g.out_channels % g.groups:
        return False
    for size, k, d, (before, after) in zip(g.sizes, g.kernel, g.dilations, pads, strict=True):
        if size + before + after < d * (k - 1) + 1:
            return False
    return True


def accepts(g: Geometry, convention: str, op: str = "") -> bool:
    """Whether the convention's framework accepts the case of ``op`` (TF's shape rules;
    torch's)."""
    try:
        if convention == "torch" and not torch_accepts(g, op):
            return False
        shapes_nd(g)
    except InvalidArgumentError:
        return False
    return True


@dataclass(frozen=True)
class Call:
    """A case as the user's function gets it (``kwargs``) and as one float64 TF call."""

    kwargs: dict[str, Any]
    tf_op: str
    tf_args: dict[str, Any]


def _torch_pairs(g: Geometry, cg: ConvGeometryNd) -> dict[str, Any]:
    if g.rank == 2:
        padding: Any = g.padding.lower() if g.padding in ("VALID", "SAME") else \
            (g.pads[0], g.pads[2])
    else:
        padding = tuple(before for before, _ in cg.pads)
    return {"stride": tuple(g.strides), "padding": padding, "dilation": tuple(g.dilations),
            "groups": g.groups}


def torch_axes(rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The transposes from TF's layout to torch's: an activation's (NHWC -> NCHW) and a
    weight's (HWIO -> OIHW), for ``rank`` spatial dimensions."""
    return (0, rank + 1, *range(1, rank + 1)), (rank + 1, rank, *range(rank))


def torch_kind(op: str) -> str:
    """``forward``, ``filter``, ``input`` or ``transpose`` (conv_transpose: the input gradient
    of the conv whose output it takes)."""
    _, arrays, role = TORCH_OPS[op]
    return "transpose" if role == "input" and "input" in arrays else \
        {"output": "forward"}.get(role, role)


def make_call(op: str, convention: str, g: Geometry, x: np.ndarray, w: np.ndarray,
              dy: np.ndarray, dtype: np.dtype) -> Call:
    """The call of ``op`` on the forward input ``x``, filter ``w`` (HWIO) and output gradient
    ``dy`` (TF layout of ``g``, float64 values exact in ``dtype``)."""
    cg = shapes_nd(g)
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
    act, weight = torch_axes(g.rank)
    nchw = (lambda a: cast(a.transpose(act)))
    oihw = (lambda a: cast(a.transpose(weight)))
    pairs = _torch_pairs(g, cg)
    kind = torch_kind(op)
    if kind == "forward":
        kwargs = {"input": nchw(x), "weight": oihw(w), "bias": None, **pairs}
    elif kind == "filter":
        *k, fin, fout = cg.filter_shape
        kwargs = {"input": nchw(x), "weight_size": (fout, fin, *k),
                  "grad_output": nchw(dy), **pairs}
    elif kind == "input":
        n, *spatial, c = cg.input_shape
        kwargs = {"input_size": (n, c, *spatial), "weight": oihw(w), "grad_output": nchw(dy),
                  **pairs}
    else:  # conv_transpose: the input gradient of the conv whose output is `input`
        kwargs = {"input": nchw(dy), "weight": oihw(w), "bias": None,
                  "stride": pairs["stride"], "padding": pairs["padding"],
                  "output_padding": output_padding(g, cg), "groups": g.groups,
                  "dilation": pairs["dilation"]}
    return Call(kwargs, tf_op, tf_args)


def _tf_arg_names(tf_op: str) -> tuple[str, ...]:
    return {"output": ("input", "filter"), "filter": ("input", "filter_sizes", "out_backprop"),
            "input": ("input_sizes", "filter", "out_backprop")}[TF_OPS[tf_op][3]]


def output_padding(g: Geometry, cg: ConvGeometryNd | None = None) -> tuple[int, ...]:
    """conv_transpose's output_padding giving the forward input size back: per dimension
    ``(size + 2p - d*(k-1) - 1) mod s`` (``p`` the padding before)."""
    cg = shapes_nd(g) if cg is None else cg
    return tuple((size + 2 * p - d * (k - 1) - 1) % s for size, (p, _), d, k, s in zip(
        g.sizes, cg.pads, g.dilations, g.kernel, g.strides, strict=True))


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
    act, weight = torch_axes(out.ndim - 2)
    return out.transpose(np.argsort(weight) if torch_kind(op) == "filter" else np.argsort(act))


def from_tf_layout(op: str, convention: str, output: np.ndarray) -> np.ndarray:
    """The canonical call's result in the convention's layout (the inverse of
    :func:`to_tf_layout`)."""
    if convention == "tf":
        return output
    act, weight = torch_axes(output.ndim - 2)
    return output.transpose(weight if torch_kind(op) == "filter" else act)


def array_names(op: str, convention: str) -> tuple[str, ...]:
    """The array arguments of ``op``, by the convention's names."""
    return TF_OPS[op][1] if convention == "tf" else TORCH_OPS[op][1]
