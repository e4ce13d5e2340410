"""Output indices of a conv op and its geometry: an index checked against the result's shape
(what is wrong with it, said in one line), the geometry from the block's attributes and
inputs, and activation and filter indices in either data format, for any number of spatial
dimensions (index tuples of ``rank + 2`` entries). Shared by :mod:`engine.explain.terms` (the
terms of one element) and :mod:`engine.explain.reverse` (what an element feeds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from engine.base.errors import InvalidArgumentError
from engine.base.names import shown
from engine.shapes.conv import (
    FORMATS,
    RULES,
    ConvGeometry,
    ConvGeometryNd,
    channels_last,
)
from engine.shapes.ops import ConvOp


def _is_int(v: object) -> bool:
    """An integer index entry (not a bool)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


#: Digits up to which a message writes an index entry out (a longer one: its sign and length).
SHOWN_DIGITS = 20


def _int_text(v: int) -> str:
    """An index entry for a message: the number, or for a huge one its sign and about how many
    digits it has (Python refuses to print ints of more than 4300 digits)."""
    if abs(v) < 10**SHOWN_DIGITS:
        return str(v)
    return f"a {'negative ' if v < 0 else ''}number of about {int(math.log10(abs(v))) + 1} digits"


def _index_text(items: Sequence[object], limit: int = 80) -> str:
    """``items`` as a list for a message, cut to ``limit`` characters like
    :func:`engine.base.names.shown` (ints of any size written by :func:`_int_text`)."""
    text = "[" + ", ".join(_int_text(int(v)) if _is_int(v) else shown(v, limit)  # type: ignore
                           for v in items) + "]"
    return text if len(text) <= limit else f"{text[: limit - 3]}... ({len(text)} characters)"


def check_index(index: Sequence[object], shape: Sequence[int]) -> tuple[int, ...]:
    """``index`` as a tuple of ints addressing an element of an array of ``shape``; otherwise
    :class:`InvalidArgumentError` saying what is wrong (length, type, sign, range)."""
    shape = tuple(int(s) for s in shape)
    items = list(index)
    if len(items) != len(shape):
        raise InvalidArgumentError(
            f"index {_index_text(items)} has {len(items)} entries, the output has {len(shape)} "
            f"dimensions (shape {list(shape)})", "index")
    if not all(_is_int(v) for v in items):
        raise InvalidArgumentError(f"index {_index_text(items)} must be integers", "index")
    idx = tuple(int(v) for v in items)  # type: ignore[call-overload]
    for axis, (v, size) in enumerate(zip(idx, shape, strict=True)):
        if v < 0:
            raise InvalidArgumentError(
                f"index {_index_text(idx)}: entry {axis} is {_int_text(v)}, indices must be "
                ">= 0", "index")
        if v >= size:
            raise InvalidArgumentError(
                f"index {_index_text(idx)}: entry {axis} is {_int_text(v)}, out of range for "
                f"size {size} (output shape {list(shape)})", "index")
    return idx


def op_geometry(form: ConvOp, attrs: Mapping[str, object],
                inputs: Mapping[str, np.ndarray]) -> ConvGeometryNd:
    """The geometry of ``form`` with the block's ``attrs`` (TensorFlow's defaults where absent)
    and ``inputs`` (the size-vector ports give the sizes they hold); InvalidArgumentError as the
    kernel would raise it. Any rank: the 2-D ops' geometry is given as its :attr:`~ConvGeometry.nd`
    view."""
    unit = [1] * (form.rank + 2)
    padding = attrs.get("padding", "VALID")
    kw: dict[str, Any] = {
        "strides": attrs.get("strides", unit),
        "padding": padding,
        "data_format": attrs.get("data_format", FORMATS[form.rank][0]),
        "dilations": attrs.get("dilations", unit),
    }
    if form.rank == 2:
        kw["explicit_paddings"] = (attrs.get("explicit_paddings", []) if padding == "EXPLICIT"
                                   else [])
        kw["depthwise"] = form.depthwise
    g = RULES[form.rank][form.kind](*_rule_args(form, inputs), **kw)
    return g.nd if isinstance(g, ConvGeometry) else g


def _rule_args(form: ConvOp, inputs: Mapping[str, np.ndarray]) -> tuple:
    """The shape rule's positional arguments: the array ports' shapes, the size ports'
    values."""
    return tuple(np.asarray(inputs[p]) if p.endswith("_sizes") else np.shape(inputs[p])
                 for p in form.ports)


def result_shape(form: ConvOp, g: ConvGeometryNd) -> tuple[int, ...]:
    """The shape of the op's result: the output, the filter gradient or the input gradient."""
    return {"forward": g.output_shape, "filter": g.filter_shape, "input": g.input_shape}[form.kind]


def layout_free(index: tuple[int, ...], data_format: str) -> tuple[int, tuple[int, ...], int]:
    """(n, spatial positions, channel) of an activation index in ``data_format`` (any rank)."""
    if channels_last(data_format):
        return index[0], tuple(index[1:-1]), index[-1]
    return index[0], tuple(index[2:]), index[1]


def activation_indices(n: Any, spatial: Sequence[Any], ch: Any, data_format: str) -> np.ndarray:
    """(terms, rank + 2) indices in ``data_format`` from broadcastable n, spatial and channel
    arrays."""
    cols = (n, *spatial, ch) if channels_last(data_format) else (n, ch, *spatial)
    return _stacked(cols)


def filter_indices(taps: Sequence[Any], q: Any, o: Any) -> np.ndarray:
    """(terms, rank + 2) filter indices ``[taps..., q, o]`` from broadcastable arrays."""
    return _stacked((*taps, q, o))


def _stacked(cols: Sequence[Any]) -> np.ndarray:
    stacked = np.stack(np.broadcast_arrays(*cols), axis=1)
    return stacked.astype(np.int64, copy=False).reshape(-1, len(cols))
