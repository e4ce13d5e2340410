"""A canonical ``tf.raw_ops`` conv call, layout-free (:class:`Call`: operands channels last,
NHWC or NDHWC, and the filter HWIO or DHWIO, in float64; one :class:`Dim` per spatial
dimension; :func:`canonical`), its exact result and any geometry evaluated: what
:mod:`engine.verify.mistakes` builds its variants of.

A geometry, as a loop implementation with the right output size and bounds-checked reads
applies it: per spatial dimension, output position ``r`` and tap ``i`` read input position
``r*stride + i*dilation - before``, zero outside ``[0, size)``; :func:`evaluate` computes any such
geometry with the kernels on a VALID "virtual input" spanning every position read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from engine import kernels
from engine.base.errors import InvalidArgumentError
from engine.shapes.conv import (
    FORMATS,
    RULES,
    ConvGeometry,
    ConvGeometryNd,
    channels_last,
)
from engine.shapes.geometry import from_channels_last, to_channels_last
from engine.shapes.ops import CONV_OPS, op_named

#: The operands in the call's data_format (the filter is HWIO in both).
ACTIVATIONS = ("input", "out_backprop")
#: Each data_format's other one, of its rank (NHWC and NCHW, NDHWC and NCDHW).
OTHER_FORMAT = {f: pair[1 - i] for pair in FORMATS.values() for i, f in enumerate(pair)}


class Dim(NamedTuple):
    """One spatial dimension as an implementation applies it: output position ``r`` and tap
    ``i`` read position ``r*stride + i*dilation - before`` of ``size`` (outside: zero)."""

    size: int
    out: int
    taps: int
    stride: int
    dilation: int
    before: int
    after: int


@dataclass(frozen=True)
class Call:
    """A canonical TF call, layout-free: ``operands`` float64 (activations channels last,
    filter HWIO or DHWIO), ``out_shape`` the result's channels-last (or filter) shape, ``dims``
    one per spatial dimension, outermost first ((rows, cols); 3-D: (planes, rows, cols))."""

    op: str
    kind: str  # the result's role: "output" (forward ops), "filter" or "input" (gradients)
    depthwise: bool
    kernel: Callable[..., np.ndarray]
    args: Mapping[str, Any]
    geometry: ConvGeometryNd
    operands: dict[str, np.ndarray]
    out_shape: tuple[int, ...]
    dims: tuple[Dim, ...]
    data_format: str

    @property
    def rank(self) -> int:
        """The number of spatial dimensions."""
        return len(self.dims)




def canonical(tf_op: str, tf_args: Mapping[str, Any]) -> Call:
    """The layout-free view of a canonical call; :class:`InvalidArgumentError` if TF refuses it."""
    try:
        row = op_named(tf_op)
    except KeyError:
        raise InvalidArgumentError(f"op {tf_op!r} is not one of "
                                   f"{', '.join(op.name for op in CONV_OPS)}", "op") from None
    kind, rank = row.result, row.rank
    fmt = tf_args.get("data_format", FORMATS[rank][0])
    attrs = {"strides": tf_args["strides"], "padding": tf_args["padding"], "data_format": fmt,
             "dilations": tf_args.get("dilations", (1,) * (rank + 2))}
    if rank == 2:
        attrs |= {"explicit_paddings": tf_args.get("explicit_paddings", ()),
                  "depthwise": row.depthwise}
    arrays = {k: np.asarray(tf_args[k], np.float64) for k in row.operands}
    rule = RULES[rank][row.kind]
    if kind == "output":
        cg = rule(arrays["input"].shape, arrays["filter"].shape, **attrs)
    elif kind == "filter":
        cg = rule(arrays["input"].shape, tf_args["filter_sizes"], arrays["out_backprop"].shape,
                  **attrs)
    else:
        cg = rule(tf_args["input_sizes"], arrays["filter"].shape, arrays["out_backprop"].shape,
                  **attrs)
    g = cg.nd if isinstance(cg, ConvGeometry) else cg
    operands = {k: (to_channels_last(v, fmt) if k in ACTIVATIONS else v) for k, v in arrays.items()}
    out_shape = {"output": (g.batch, *g.out_spatial, g.out_depth), "filter": g.filter_shape,
                 "input": (g.batch, *g.in_spatial, g.in_depth)}[kind]
    dims = tuple(Dim(*sizes, before, after) for sizes, (before, after) in zip(
        zip(g.in_spatial, g.out_spatial, g.filter_spatial, g.strides, g.dilations,
            strict=True), g.pads, strict=True))
    return Call(tf_op, kind, row.depthwise, getattr(kernels, row.kernel), dict(tf_args), g,
                operands, out_shape, dims, fmt)


def emit(call: Call, y: np.ndarray) -> np.ndarray:
    """A layout-free result in the call's own layout."""
    return y if call.kind == "filter" else from_channels_last(y, call.data_format)


def reference(call: Call, operands: Mapping[str, np.ndarray] | None = None,
              **changed: Any) -> np.ndarray:
    """The exact result (the kernel on the call's own arguments, with ``changed`` ones) on
    layout-free ``operands``."""
    ops = call.operands if operands is None else operands
    args = {k: v for k, v in call.args.items() if k not in ops} | changed
    args.update({k: (from_channels_last(v, call.data_format) if k in ACTIVATIONS else v)
                 for k, v in ops.items()})
    return np.asarray(call.kernel(**args), np.float64)


def _overlap(d: Dim, length: int) -> tuple[slice, slice]:
    """(virtual, real) slices of the positions in range of both, virtual ``v`` = real + before."""
    v0 = max(0, d.before)
    v1 = max(v0, min(length, d.size + d.before))
    return slice(v0, v1), slice(v0 - d.before, v1 - d.before)


def evaluate(call: Call, operands: Mapping[str, np.ndarray], dims: tuple[Dim, ...],
             out_shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The op on layout-free ``operands`` with the reads of ``dims`` (see the module docstring),
    layout-free, shaped ``out_shape`` (default the call's)."""
    shape = call.out_shape if out_shape is None else out_shape
    if 0 in shape or any(d.out == 0 for d in dims):
        return np.zeros(shape)
    lengths = [(d.out - 1) * d.stride + (d.taps - 1) * d.dilation + 1 for d in dims]
    spans = [_overlap(d, n) for d, n in zip(dims, lengths, strict=True)]
    virtual = (slice(None), *(v for v, _ in spans))
    real = (slice(None), *(r for _, r in spans))
    attrs = {"strides": [1, *(d.stride for d in dims), 1], "padding": "VALID",
             "dilations": [1, *(d.dilation for d in dims), 1]}
    if call.kind == "input":
        n, c = shape[0], shape[-1]
        dxv = call.kernel([n, *lengths, c], operands["filter"], operands["out_backprop"], **attrs)
        dx = np.zeros(shape)
        dx[real] = dxv[virtual]
        return dx
    xv = np.zeros((operands["input"].shape[0], *lengths, operands["input"].shape[-1]))
    xv[virtual] = operands["input"][real]
    if call.kind == "output":
        return np.asarray(call.kernel(xv, operands["filter"], **attrs), np.float64)
    return np.asarray(call.kernel(xv, list(shape), operands["out_backprop"], **attrs), np.float64)


def reinterpret(a: np.ndarray, memory: str, read_as: str) -> np.ndarray:
    """A layout-free activation whose ``memory``-layout array is read as ``read_as``."""
    n, *spatial, c = a.shape
    shape = (n, *spatial, c) if channels_last(read_as) else (n, c, *spatial)
    return to_channels_last(from_channels_last(a, memory).reshape(shape), read_as)
