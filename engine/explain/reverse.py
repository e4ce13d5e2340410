"""The reverse of element provenance: every output element whose defining sum reads one input
element (the inverse relation of :func:`engine.explain.terms.explain_element`'s terms).

For an element ``index`` of operand ``port`` of a conv block, :func:`feeds` returns the output
indices ``y`` such that some term of ``explain_element(..., y)`` has that element as its
``port`` factor. Terms that would read padding are not terms, so they feed nothing; a term whose
value is 0 still is one. Per spatial dimension the positions are found with the same closed forms
as :mod:`engine.explain.terms` (array operations, no loop over a tensor), then crossed with the
batch and channel ranges. Notation as in :mod:`engine.explain.terms`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from engine.base.errors import InvalidArgumentError
from engine.explain.element_index import (
    activation_indices,
    check_index,
    filter_indices,
    layout_free,
    op_geometry,
    result_shape,
)
from engine.explain.terms import OPS
from engine.shapes.conv import ConvGeometryNd
from engine.shapes.ops import ConvOp


def _shaped(shape: Sequence[int]) -> np.ndarray:
    """A zero-byte array of ``shape`` (the geometry reads only shapes)."""
    return np.broadcast_to(np.zeros((), dtype=np.bool_), tuple(int(s) for s in shape))


def geometry_of(type_id: str, attrs: Mapping[str, object],
                input_shapes: Mapping[str, Sequence[int]]) -> tuple[ConvOp, ConvGeometryNd]:
    """The op form and geometry of a ``type_id`` block from its inputs' shapes (the size-vector
    ports ``filter_sizes`` / ``input_sizes`` give the sizes they hold)."""
    form = OPS.get(type_id)
    if form is None:
        raise InvalidArgumentError(
            f"{type_id} is not a conv block: explain takes {', '.join(OPS)}", "type")
    inputs = {p: (np.asarray(s, dtype=np.int64) if p.endswith("_sizes") else _shaped(s))
              for p, s in input_shapes.items()}
    return form, op_geometry(form, attrs, inputs)


def _operand_shape(form: ConvOp, g: ConvGeometryNd, port: str) -> tuple[int, ...]:
    return {"input": g.input_shape, "filter": g.filter_shape,
            "out_backprop": g.output_shape}[port]


def _reached(pos: int, taps: int, stride: int, dil: int, pad: int, count: int) -> np.ndarray:
    """Output positions ``r`` with ``r*stride + t*dil - pad = pos`` for some tap ``t``."""
    t = np.arange(taps, dtype=np.int64)
    num = pos + pad - t * dil
    ok = (num >= 0) & (num % stride == 0) & (num // stride < count)
    return np.unique(num[ok] // stride)


def _taps_of(pos: int, taps: int, stride: int, dil: int, pad: int, count: int) -> np.ndarray:
    """Taps ``t`` that pair input position ``pos`` with some output position in
    ``[0, count)``."""
    t = np.arange(taps, dtype=np.int64)
    num = pos + pad - t * dil
    ok = (num >= 0) & (num % stride == 0) & (num // stride < count)
    return t[ok]


def _read(pos: int, taps: int, stride: int, dil: int, pad: int, size: int) -> np.ndarray:
    """Real input positions ``pos*stride + t*dil - pad`` read by output position ``pos``."""
    x = pos * stride + np.arange(taps, dtype=np.int64) * dil - pad
    return x[(x >= 0) & (x < size)]


def _real_taps(pos: int, taps: int, stride: int, dil: int, pad: int, size: int) -> np.ndarray:
    """Taps ``t`` whose input position ``pos*stride + t*dil - pad`` is real."""
    t = np.arange(taps, dtype=np.int64)
    x = pos * stride + t * dil - pad
    return t[(x >= 0) & (x < size)]


def _positions(tap: int, count: int, stride: int, dil: int, pad: int, size: int) -> np.ndarray:
    """Output positions ``r < count`` whose tap ``tap`` reads a real input position."""
    r = np.arange(count, dtype=np.int64)
    x = r * stride + tap * dil - pad
    return r[(x >= 0) & (x < size)]


def _cross(*axes: np.ndarray) -> tuple[np.ndarray, ...]:
    """Flat C-order coordinates of the product of ``axes`` (1-D arrays)."""
    grids = np.meshgrid(*axes, indexing="ij")
    return tuple(a.ravel().astype(np.int64) for a in grids)


def _group_outputs(g: ConvGeometryNd, ch: int) -> np.ndarray:
    """Conv2D / Conv3D: the output channels of the group that input channel ``ch`` belongs
    to."""
    per = g.filter_out // g.groups
    first = (ch // g.filter_in_depth) * per
    return np.arange(first, first + per, dtype=np.int64)


def _per_dim(rule, g: ConvGeometryNd, at: Sequence[int], bound: Sequence[int]) -> list:
    """``rule(at[d], taps, stride, dilation, pad_before, bound[d])`` for each spatial
    dimension ``d``."""
    return [rule(p, k, s, d, before, b) for p, k, s, d, (before, _), b in
            zip(at, g.filter_spatial, g.strides, g.dilations, g.pads, bound, strict=True)]


def _per_tap(rule, g: ConvGeometryNd, taps: Sequence[int], bound: Sequence[int]) -> list:
    """``rule(taps[d], out[d], stride, dilation, pad_before, bound[d])`` per dimension."""
    return [rule(t, o, s, d, before, b) for t, o, s, d, (before, _), b in
            zip(taps, g.out_spatial, g.strides, g.dilations, g.pads, bound, strict=True)]


def feeds(type_id: str, attrs: Mapping[str, object], input_shapes: Mapping[str, Sequence[int]],
          port: str, index: Sequence[object]) -> np.ndarray:
    """The output indices (``(k, rank + 2)`` int64, ascending, each in the output's own layout)
    whose defining sum has element ``index`` of operand ``port`` as a factor of some term.

    ``input_shapes`` maps every input port of the block to its array's shape, and the
    size-vector ports to the sizes they hold. Raises :class:`InvalidArgumentError` for an
    unknown type, a port that is not one of the block's two array operands, or a bad index.
    """
    form = OPS.get(type_id)
    width = (form.rank if form is not None else 2) + 2
    return _ascending(_feeds(type_id, attrs, input_shapes, port, index), width)


def _ascending(rows: np.ndarray, width: int) -> np.ndarray:
    rows = rows.reshape(-1, width).astype(np.int64)
    return rows[np.lexsort(rows.T[::-1])] if len(rows) else rows


def _feeds(type_id: str, attrs: Mapping[str, object],
           input_shapes: Mapping[str, Sequence[int]], port: str,
           index: Sequence[object]) -> np.ndarray:
    """The output indices element ``index`` of operand ``port`` feeds (see :func:`feeds`)."""
    form, g = geometry_of(type_id, attrs, input_shapes)
    if port not in form.operands:
        raise InvalidArgumentError(
            f"{type_id} has no array operand {port!r}: its operands are "
            f"{', '.join(form.operands)}", "port")
    idx = check_index(index, _operand_shape(form, g, port))
    reach = {"forward": _forward_feeds, "filter": _filter_grad_feeds,
             "input": _input_grad_feeds}[form.kind]
    return reach(form, g, port, idx)


def _forward_feeds(form: ConvOp, g: ConvGeometryNd, port: str,
                   idx: tuple[int, ...]) -> np.ndarray:
    """Conv2D, Conv3D and DepthwiseConv2dNative: the outputs an input or filter element
    feeds."""
    fmt, M = g.data_format, g.filter_out
    if port == "input":
        n, pos, ch = layout_free(idx, fmt)
        reached = _per_dim(_reached, g, pos, g.out_spatial)
        chans = (np.arange(ch * M, ch * M + M, dtype=np.int64) if form.depthwise
                 else _group_outputs(g, ch))
        *spatial, outs = _cross(*reached, chans)
        return activation_indices(n, spatial, outs, fmt)
    *taps, q, o = idx
    at = _per_tap(_positions, g, taps, g.in_spatial)
    ch = q * M + o if form.depthwise else o
    nn, *spatial = _cross(np.arange(g.batch, dtype=np.int64), *at)
    return activation_indices(nn, spatial, ch, fmt)


def _filter_grad_feeds(form: ConvOp, g: ConvGeometryNd, port: str,
                       idx: tuple[int, ...]) -> np.ndarray:
    """The filter gradients: the elements of ``dw[taps..., q, o]`` an input or out_backprop
    element feeds."""
    M = g.filter_out
    _n, pos, ch = layout_free(idx, g.data_format)
    if port == "input":
        taps = _per_dim(_taps_of, g, pos, g.out_spatial)
        if form.depthwise:
            qs, outs = np.array([ch]), np.arange(M, dtype=np.int64)
        else:
            qs, outs = np.array([ch % g.filter_in_depth]), _group_outputs(g, ch)
    else:  # out_backprop[n, positions..., ch]
        taps = _per_dim(_real_taps, g, pos, g.in_spatial)
        if form.depthwise:
            qs, outs = np.array([ch // M]), np.array([ch % M])
        else:
            qs, outs = np.arange(g.filter_in_depth, dtype=np.int64), np.array([ch])
    *tt, qq, oo = _cross(*taps, qs, outs)
    return filter_indices(tt, qq, oo)


def _input_grad_feeds(form: ConvOp, g: ConvGeometryNd, port: str,
                      idx: tuple[int, ...]) -> np.ndarray:
    """The input gradients: the elements of ``dx[n, positions..., ch]`` a filter or
    out_backprop element feeds."""
    fmt, M = g.data_format, g.filter_out
    if port == "filter":
        *taps, q, o = idx
        at = _per_tap(_positions, g, taps, g.in_spatial)
        xs = [s * r + t * d - before for r, s, t, d, (before, _) in
              zip(at, g.strides, taps, g.dilations, g.pads, strict=True)]
        ch = q if form.depthwise else (o // (M // g.groups)) * g.filter_in_depth + q
        nn, *spatial = _cross(np.arange(g.batch, dtype=np.int64), *xs)
        return activation_indices(nn, spatial, ch, fmt)
    n, pos, ch = layout_free(idx, fmt)  # out_backprop
    read = _per_dim(_read, g, pos, g.in_spatial)
    if form.depthwise:
        chans = np.array([ch // M])
    else:
        first = (ch // (M // g.groups)) * g.filter_in_depth
        chans = np.arange(first, first + g.filter_in_depth, dtype=np.int64)
    *spatial, k = _cross(*read, chans)
    return activation_indices(n, spatial, k, fmt)


def output_shape(type_id: str, attrs: Mapping[str, object],
                 input_shapes: Mapping[str, Sequence[int]]) -> tuple[int, ...]:
    """The shape of the block's output (as :func:`feeds` indexes it)."""
    form, g = geometry_of(type_id, attrs, input_shapes)
    return result_shape(form, g)
