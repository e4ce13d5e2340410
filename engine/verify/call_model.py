"""A canonical ``tf.raw_ops`` conv call, layout-free (:class:`Call`: operands NHWC and HWIO in
float64, one :class:`Dim` per spatial dimension), its exact result and any geometry evaluated:
what :mod:`engine.verify.mistakes` builds its variants of.

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

from engine.shapes.conv import ConvGeometry

#: The operands in the call's data_format (the filter is HWIO in both).
ACTIVATIONS = ("input", "out_backprop")
OTHER_FORMAT = {"NHWC": "NCHW", "NCHW": "NHWC"}


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
    """A canonical TF call, layout-free: ``operands`` float64 (activations NHWC, filter HWIO),
    ``out_shape`` the result's NHWC (or HWIO) shape, ``dims`` (rows, cols)."""

    op: str
    kind: str  # the result's role: "output" (forward ops), "filter" or "input" (gradients)
    depthwise: bool
    kernel: Callable[..., np.ndarray]
    args: Mapping[str, Any]
    geometry: ConvGeometry
    operands: dict[str, np.ndarray]
    out_shape: tuple[int, ...]
    dims: tuple[Dim, Dim]
    data_format: str


def to_nhwc(a: np.ndarray, data_format: str) -> np.ndarray:
    """An activation of ``data_format`` as NHWC (:func:`from_nhwc` the reverse)."""
    return a if data_format == "NHWC" else a.transpose(0, 2, 3, 1)


def from_nhwc(a: np.ndarray, data_format: str) -> np.ndarray:
    """An NHWC activation in ``data_format`` (:func:`to_nhwc` the reverse)."""
    return a if data_format == "NHWC" else a.transpose(0, 3, 1, 2)


def emit(call: Call, y: np.ndarray) -> np.ndarray:
    """A layout-free result in the call's own layout."""
    return y if call.kind == "filter" else from_nhwc(y, call.data_format)


def reference(call: Call, operands: Mapping[str, np.ndarray] | None = None,
              **changed: Any) -> np.ndarray:
    """The exact result (the kernel on the call's own arguments, with ``changed`` ones) on
    layout-free ``operands``."""
    ops = call.operands if operands is None else operands
    args = {k: v for k, v in call.args.items() if k not in ops} | changed
    args.update({k: (from_nhwc(v, call.data_format) if k in ACTIVATIONS else v)
                 for k, v in ops.items()})
    return np.asarray(call.kernel(**args), np.float64)


def _overlap(d: Dim, length: int) -> tuple[slice, slice]:
    """(virtual, real) slices of the positions in range of both, virtual ``v`` = real + before."""
    v0 = max(0, d.before)
    v1 = max(v0, min(length, d.size + d.before))
    return slice(v0, v1), slice(v0 - d.before, v1 - d.before)


def evaluate(call: Call, operands: Mapping[str, np.ndarray], dims: tuple[Dim, Dim],
             out_shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The op on layout-free ``operands`` with the reads of ``dims`` (see the module docstring),
    layout-free, shaped ``out_shape`` (default the call's)."""
    shape = call.out_shape if out_shape is None else out_shape
    if 0 in shape or any(d.out == 0 for d in dims):
        return np.zeros(shape)
    lengths = [(d.out - 1) * d.stride + (d.taps - 1) * d.dilation + 1 for d in dims]
    (rv, rh), (cv, ch) = (_overlap(d, n) for d, n in zip(dims, lengths, strict=True))
    attrs = {"strides": [1, dims[0].stride, dims[1].stride, 1], "padding": "VALID",
             "dilations": [1, dims[0].dilation, dims[1].dilation, 1]}
    if call.kind == "input":
        n, _, _, c = shape
        dxv = call.kernel([n, *lengths, c], operands["filter"], operands["out_backprop"], **attrs)
        dx = np.zeros(shape)
        dx[:, rh, ch] = dxv[:, rv, cv]
        return dx
    xv = np.zeros((operands["input"].shape[0], *lengths, operands["input"].shape[3]))
    xv[:, rv, cv] = operands["input"][:, rh, ch]
    if call.kind == "output":
        return np.asarray(call.kernel(xv, operands["filter"], **attrs), np.float64)
    return np.asarray(call.kernel(xv, list(shape), operands["out_backprop"], **attrs), np.float64)


def reinterpret(a: np.ndarray, memory: str, read_as: str) -> np.ndarray:
    """A layout-free activation whose ``memory``-layout array is read as ``read_as``."""
    n, h, w, c = a.shape
    shape = (n, h, w, c) if read_as == "NHWC" else (n, c, h, w)
    return to_nhwc(from_nhwc(a, memory).reshape(shape), read_as)
