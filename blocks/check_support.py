"""What the GradCheck and AdjointCheck blocks share: the ops they check, their attributes, their
outputs from the engine's tolerance rule (:mod:`engine.base.tolerance`), and shape inference of
the forward convolution they build on.

The verdict functions (:data:`VERDICT_CODE`: the rule's :func:`check_tolerance`,
:func:`relative` and :func:`verdict`, and :func:`gradient_errors`, :func:`adjoint_errors`) use
only NumPy and the table :data:`CHECK_TOLERANCE`, so :mod:`engine.export.frameworks` copies
their source into the scripts it writes: an exported script judges a check with this code, not
a restatement.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from blocks.conv import CONV_ATTRS, conv_attrs, float_port, kernel_attrs
from blocks.spec import AttrError, AttrSpec, TensorSpec, blame
from engine.base.dtypes import CHECK_TOLERANCE  # noqa: F401  (re-exported: blocks.gradcheck)
from engine.base.errors import InvalidArgumentError
from engine.base.tolerance import (  # noqa: F401  (tolerance re-exported: the check blocks)
    check_tolerance,
    relative,
    tolerance,
    verdict,
)
from engine.shapes.conv import (
    FORMATS,
    PADDINGS_3D,
    ConvGeometry,
    ConvGeometryNd,
    channels_last,
    conv2d_geometry,
    conv3d_geometry,
)
from engine.shapes.ops import CONV_OPS, ConvOp

CONV2D, DEPTHWISE, CONV3D = "Conv2D", "DepthwiseConv2dNative", "Conv3D"


def _kernels(forward: ConvOp) -> tuple[str, str, str]:
    """The kernels of a forward op and of its two gradients (the op table's rows of the same
    rank and depthwise-ness)."""
    def of(kind: str) -> str:
        return next(op.kernel for op in CONV_OPS if op.kind == kind
                    and (op.rank, op.depthwise) == (forward.rank, forward.depthwise))
    return forward.kernel, of("filter"), of("input")


_FORWARD = {op.name: op for op in CONV_OPS if op.kind == "forward"}
#: The forward op's kernel, its filter-gradient and its input-gradient kernel (names in
#: :mod:`engine.kernels`, looked up at call time), for each forward op of the op table.
OP_KERNELS: dict[str, tuple[str, str, str]] = {name: _kernels(op) for name, op in _FORWARD.items()}

OP_ATTR = AttrSpec("op", "enum", CONV2D, choices=tuple(_FORWARD),
                   doc="The forward op whose gradient is checked (tf.raw_ops names): "
                       f"{', '.join(_FORWARD)}. Conv3D takes 5-D tensors and strides and "
                       "dilations of 5.")


def _either(two: AttrSpec, three: AttrSpec) -> AttrSpec:
    """An attribute of the 2-D ops that also takes its 3-D values (lengths, choices)."""
    if two.kind == "int_list":
        return replace(two, length=(*(two.length or ()), *(three.length or ())),
                       doc=f"{two.doc} For Conv3D: {len(three.default)} entries.")
    return replace(two, choices=(*two.choices, *(c for c in three.choices
                                                if c not in two.choices)))


_THREE = {a.name: a for a in conv_attrs(3)}
#: ``op`` and the conv attributes, with the conv blocks' validation and inactive rules; the
#: window attributes take 4 (2-D ops) or 5 (Conv3D) entries, and :func:`forward_geometry`
#: checks them against the op.
CHECK_CONV_ATTRS: tuple[AttrSpec, ...] = (OP_ATTR, *(
    _either(a, _THREE[a.name]) if a.name in _THREE else a for a in CONV_ATTRS))

SCALAR = TensorSpec((), "float64")
VERDICT = TensorSpec((), "bool")


def op_rank(op: str) -> int:
    """The spatial dimensions of the forward op ``op``."""
    return _FORWARD[op].rank


def rank_attrs(attrs: dict, op: str) -> dict:
    """What changes in a check block's ``attrs`` when its op becomes ``op``: for an op of
    another rank, ``data_format`` in that rank's layout of the same kind (NHWC <-> NDHWC, NCHW
    <-> NCDHW) and strides and dilations with a depth entry of 1 added (or the depth entry
    dropped): the same window on H and W. Nothing when the rank stays."""
    fmt, rank = attrs.get("data_format", "NHWC"), op_rank(op)
    old = len(fmt) - 2
    if old == rank or old not in FORMATS:
        return {}
    out: dict = {"data_format": FORMATS[rank][FORMATS[old].index(fmt)]}
    depth = 1 if channels_last(fmt) else 2  # where D sits in a 5-entry list
    for name in ("strides", "dilations"):
        value = attrs.get(name)
        if isinstance(value, list) and len(value) == old + 2:
            out[name] = (value[:depth] + [1] + value[depth:] if rank == 3
                         else value[:depth] + value[depth + 1:])
    return out


def conv_kwargs(attrs: dict) -> dict:
    """The conv attributes as the op's kernels take them (explicit_paddings only with
    EXPLICIT, and only for the 2-D ops)."""
    kw = kernel_attrs(attrs, cudnn=False)
    if op_rank(attrs["op"]) != 2:
        kw.pop("explicit_paddings", None)
    return kw


def forward_geometry(attrs: dict, inputs: dict[str, TensorSpec],
                     names: set[str]) -> ConvGeometry | ConvGeometryNd:
    """The forward op's geometry on the ``input`` and ``filter`` ports, with ``out_backprop``
    checked against its output shape; raises :class:`AttrError` naming the port or attribute."""
    x, w = float_port(inputs, "input"), float_port(inputs, "filter")
    dy = float_port(inputs, "out_backprop")
    op = attrs["op"]
    try:
        if op_rank(op) == 2:
            g: ConvGeometry | ConvGeometryNd = conv2d_geometry(
                x.shape, w.shape, **conv_kwargs(attrs), depthwise=op == DEPTHWISE)
        else:
            if attrs["padding"] not in PADDINGS_3D:
                raise InvalidArgumentError(
                    f"padding {attrs['padding']} is not one of {op}'s: "
                    f"{', '.join(PADDINGS_3D)}", "padding")
            g = conv3d_geometry(x.shape, w.shape, **conv_kwargs(attrs))
    except InvalidArgumentError as err:
        raise blame(err, names) from None
    if tuple(dy.shape) != tuple(g.output_shape):
        raise AttrError("out_backprop", f"out_backprop shape {list(dy.shape)} does not match the "
                                        f"{op} output shape: expected "
                                        f"{list(g.output_shape)}, got {list(dy.shape)}")
    return g


def gradient_errors(gradient: np.ndarray, flat: np.ndarray, numbers: np.ndarray,
                    tol: float) -> dict:
    """GradCheck's outputs from ``gradient`` and the float64 ``numbers`` (numeric derivatives)
    at the flat indices ``flat``: ``numeric`` and ``error`` = ``|gradient - numeric|`` (NaN
    elsewhere), ``max_abs_error``, ``max_rel_error`` over ``max |numeric|`` and ``ok``
    (:func:`verdict` with ``tol``)."""
    numeric = np.full(gradient.shape, np.nan)
    error = np.full(gradient.shape, np.nan)
    numeric.flat[flat] = numbers
    error.flat[flat] = np.abs(gradient.reshape(-1)[flat].astype(np.float64) - numbers)
    max_abs = float(np.max(error.flat[flat])) if flat.size else 0.0
    scale = float(np.max(np.abs(numbers))) if flat.size else 0.0
    rel = relative(max_abs, scale)
    ok = verdict(max_abs, scale, rel, tol)
    return {"numeric": numeric, "error": error, "max_abs_error": np.float64(max_abs),
            "max_rel_error": np.float64(rel), "ok": np.bool_(ok)}


def adjoint_errors(forward: float, via_input: float, via_filter: float, tol: float) -> dict:
    """AdjointCheck's outputs from its three inner products: ``max_rel_error`` (the largest
    pairwise difference over the largest magnitude; NaN if one is NaN) and ``ok``
    (:func:`verdict` with ``tol``)."""
    values = (forward, via_input, via_filter)
    diff = max(abs(a - b) for a in values for b in values)
    if any(np.isnan(v) for v in values):
        diff = float("nan")
    scale = max(abs(v) for v in values)
    rel = relative(diff, scale)
    ok = verdict(diff, scale, rel, tol)
    return {"forward": np.float64(forward), "via_input": np.float64(via_input),
            "via_filter": np.float64(via_filter), "max_rel_error": np.float64(rel),
            "ok": np.bool_(ok)}


#: The verdict code exported scripts carry (their source, in this order): NumPy and
#: :data:`CHECK_TOLERANCE` only.
VERDICT_CODE = (check_tolerance, relative, verdict, gradient_errors, adjoint_errors)
