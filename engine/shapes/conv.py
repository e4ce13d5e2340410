"""Argument validation and shape inference for the conv ops, from shapes alone.

Each ``*_geometry`` function takes the shapes (and the integer size vectors) an op would get,
checks every argument the way TensorFlow documents it, and returns a :class:`ConvGeometry`
with the input, filter and output shapes and the padding. The kernels call these on their
arrays' shapes and the compiler calls them on inferred shapes, so both agree by construction.
Every problem raises :class:`~engine.base.errors.InvalidArgumentError` naming the argument and
giving actual vs expected values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.base.errors import InvalidArgumentError
from engine.base.names import shown
from engine.shapes.padding import PADDINGS, windowed_output

DATA_FORMATS = ("NHWC", "NCHW")

Shape = tuple[int, ...]


@dataclass(frozen=True)
class ConvGeometry:
    """Sizes of one 2-D convolution, in layout-free terms.

    The forward op is ``out[n, r, c, o] = sum_{i, j, q} in_pad[n, r*sr + i*dr, c*sc + j*dc,
    g*qin + q] * filter[i, j, q, o]`` with ``g = o // (out_depth / groups)``; for depthwise,
    ``out[n, r, c, q*m + k] = sum_{i, j} in_pad[n, r*sr + i*dr, c*sc + j*dc, q] *
    filter[i, j, q, k]``.
    """

    data_format: str
    padding: str
    depthwise: bool
    batch: int
    in_rows: int
    in_cols: int
    in_depth: int
    filter_rows: int
    filter_cols: int
    filter_in_depth: int
    filter_out: int  # out_channels for conv, the depth multiplier for depthwise
    stride_rows: int
    stride_cols: int
    dilation_rows: int
    dilation_cols: int
    out_rows: int
    out_cols: int
    pad_top: int
    pad_bottom: int
    pad_left: int
    pad_right: int

    @property
    def out_depth(self) -> int:
        return self.in_depth * self.filter_out if self.depthwise else self.filter_out

    @property
    def groups(self) -> int:
        return 1 if self.depthwise else self.in_depth // self.filter_in_depth

    def _layout(self, rows: int, cols: int, depth: int) -> Shape:
        if self.data_format == "NHWC":
            return (self.batch, rows, cols, depth)
        return (self.batch, depth, rows, cols)

    @property
    def input_shape(self) -> Shape:
        return self._layout(self.in_rows, self.in_cols, self.in_depth)

    @property
    def output_shape(self) -> Shape:
        return self._layout(self.out_rows, self.out_cols, self.out_depth)

    @property
    def filter_shape(self) -> Shape:
        return (self.filter_rows, self.filter_cols, self.filter_in_depth, self.filter_out)


def spatial_axes(data_format: str) -> tuple[int, int, int, int]:
    """Indices of (batch, rows, cols, depth) in a 4-vector of ``data_format``."""
    return (0, 1, 2, 3) if data_format == "NHWC" else (0, 2, 3, 1)


#: TensorFlow's int32 attribute and size range.
INT32_MAX = 2**31 - 1


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def int_vector(name: str, value: object, lengths: Sequence[int]) -> tuple[int, ...]:
    """A list, tuple or 1-D integer array as a tuple of ints in TensorFlow's int32 range, with
    one of the allowed lengths. Booleans, floats, strings, nested or ragged lists, scalars and
    values beyond int32 are :class:`InvalidArgumentError` naming ``name``."""
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise InvalidArgumentError(
                f"{name} must be a 1-D vector, got shape {list(value.shape)}", name)
        if not (value.size == 0 or np.issubdtype(value.dtype, np.integer)):
            raise InvalidArgumentError(
                f"{name} must be integers, got {value.dtype} values {shown(value.tolist())}",
                name)
        items: Sequence[object] = value.tolist()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise InvalidArgumentError(
            f"{name} must be a list of integers, got {type(value).__name__} {shown(value)}",
            name)
    if not all(_is_int(v) for v in items):
        raise InvalidArgumentError(f"{name} must be integers, got {shown(list(items))}", name)
    vec = tuple(int(v) for v in items)  # type: ignore[call-overload]
    if len(vec) not in lengths:
        want = " or ".join(str(n) for n in lengths)
        raise InvalidArgumentError(
            f"{name} must have {want} elements, got {len(vec)}: {shown(list(vec))}", name)
    for v in vec:
        if not -INT32_MAX - 1 <= v <= INT32_MAX:
            raise InvalidArgumentError(
                f"{name} {shown(list(vec))}: every entry must be within TensorFlow's int32 "
                f"range [-2147483648, 2147483647], got {shown(v)}", name)
    return vec


def _check_enum(name: str, value: object, choices: Sequence[str]) -> None:
    if not isinstance(value, str) or value not in choices:
        raise InvalidArgumentError(
            f"{name} {shown(value)} is not one of {', '.join(choices)}", name)


def _check_format(data_format: str) -> None:
    _check_enum("data_format", data_format, DATA_FORMATS)


def window_attr(name: str, value: object, data_format: str) -> tuple[int, int]:
    """(rows, cols) of ``strides`` or ``dilations``; batch and depth entries must be 1."""
    vec = int_vector(name, value, (4,))
    n, r, c, d = spatial_axes(data_format)
    if vec[n] != 1 or vec[d] != 1:
        raise InvalidArgumentError(
            f"{name} {list(vec)}: {name} in the batch and depth dimensions must be 1 "
            f"({data_format})", name)
    if vec[r] < 1 or vec[c] < 1:
        raise InvalidArgumentError(f"{name} {list(vec)}: every entry must be > 0", name)
    return vec[r], vec[c]


def explicit_pads(
    padding: str, explicit_paddings: object, data_format: str
) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) from TF's 8 explicit paddings in data_format order."""
    _check_enum("padding", padding, PADDINGS)
    pads = int_vector("explicit_paddings", explicit_paddings, (0, 8))
    if padding != "EXPLICIT":
        if pads:
            raise InvalidArgumentError(
                f"explicit_paddings {list(pads)} given with padding {padding}: "
                "explicit_paddings must be empty unless padding is EXPLICIT", "explicit_paddings")
        return (0, 0, 0, 0)
    if not pads:
        raise InvalidArgumentError("padding EXPLICIT needs explicit_paddings with 8 elements",
                                   "explicit_paddings")
    if min(pads) < 0:
        raise InvalidArgumentError(
            f"explicit_paddings {list(pads)}: every element must be nonnegative",
            "explicit_paddings")
    n, r, c, d = spatial_axes(data_format)
    if pads[2 * n] or pads[2 * n + 1] or pads[2 * d] or pads[2 * d + 1]:
        raise InvalidArgumentError(
            f"explicit_paddings {list(pads)}: padding in the batch and depth dimensions must be "
            f"0 ({data_format})", "explicit_paddings")
    return pads[2 * r], pads[2 * r + 1], pads[2 * c], pads[2 * c + 1]


def _shape4(name: str, shape: Sequence[int]) -> Shape:
    shape = tuple(int(s) for s in shape)
    if len(shape) != 4:
        raise InvalidArgumentError(f"{name} must be 4-D, got shape {list(shape)}", name)
    return shape


def _filter_dims(name: str, shape: Sequence[int]) -> Shape:
    """A filter shape: height, width and in_channels > 0; out_channels (the depth multiplier
    for depthwise) may be 0, which gives empty results (TensorFlow's own tests ask for it)."""
    shape = _shape4(name, shape)
    if min(shape[:3]) <= 0 or shape[3] < 0:
        raise InvalidArgumentError(
            f"{name} {list(shape)}: filter height, width and in_channels must be > 0 and "
            "out_channels >= 0", name)
    return shape


def _geometry(
    input_shape: Sequence[int],
    filter_shape: Sequence[int],
    strides: object,
    padding: str,
    explicit_paddings: object,
    data_format: str,
    dilations: object,
    depthwise: bool,
    input_name: str,
    filter_name: str,
) -> ConvGeometry:
    _check_format(data_format)
    pads = explicit_pads(padding, explicit_paddings, data_format)
    sr, sc = window_attr("strides", strides, data_format)
    dr, dc = window_attr("dilations", dilations, data_format)
    ishape = _shape4(input_name, input_shape)
    if min(ishape) < 0:
        raise InvalidArgumentError(f"{input_name} {list(ishape)}: sizes must be >= 0",
                                   input_name)
    fr, fc, fin, fout = _filter_dims(filter_name, filter_shape)
    n, r, c, d = spatial_axes(data_format)
    batch, rows, cols, depth = ishape[n], ishape[r], ishape[c], ishape[d]
    if depthwise:
        if depth != fin:
            raise InvalidArgumentError(
                f"{filter_name} in_channels {fin} does not match {input_name} depth {depth} "
                f"(depthwise: they must be equal)", filter_name)
    else:
        if depth == 0 or depth % fin:
            raise InvalidArgumentError(
                f"{input_name} depth {depth} must be a positive multiple of {filter_name} "
                f"in_channels {fin}", input_name)
        groups = depth // fin
        if fout % groups:
            raise InvalidArgumentError(
                f"{filter_name} out_channels {fout} must be evenly divisible by the number of "
                f"groups {groups} ({input_name} depth {depth} / {filter_name} in_channels {fin})",
                filter_name)
    wins = []
    for dim, size, k, dil, s, before, after in (
        ("height", rows, fr, dr, sr, pads[0], pads[1]),
        ("width", cols, fc, dc, sc, pads[2], pads[3]),
    ):
        try:
            wins.append(windowed_output(size, k, dil, s, padding, before, after))
        except InvalidArgumentError as err:
            raise InvalidArgumentError(
                f"{filter_name} {dim} {k} (dilation {dil}) does not fit {input_name} {dim} "
                f"{size} with {padding} padding: {err}", filter_name) from None
    (orows, ptop, pbot), (ocols, pleft, pright) = wins
    return ConvGeometry(
        data_format, padding, depthwise, batch, rows, cols, depth, fr, fc, fin, fout,
        sr, sc, dr, dc, orows, ocols, ptop, pbot, pleft, pright,
    )


def _check_out_backprop(g: ConvGeometry, out_backprop_shape: Sequence[int]) -> None:
    """out_backprop must have exactly the forward op's output shape."""
    shape = _shape4("out_backprop", out_backprop_shape)
    n, r, c, d = spatial_axes(g.data_format)
    checks = (
        ("batch", shape[n], g.batch, f"input batch {g.batch}"),
        ("height", shape[r], g.out_rows,
         (f"input {g.in_rows}, filter {g.filter_rows}, dilation {g.dilation_rows}, "
          f"stride {g.stride_rows}, {g.padding}")),
        ("width", shape[c], g.out_cols,
         (f"input {g.in_cols}, filter {g.filter_cols}, dilation {g.dilation_cols}, "
          f"stride {g.stride_cols}, {g.padding}")),
        ("depth", shape[d], g.out_depth,
         f"filter in_channels {g.filter_in_depth} x multiplier {g.filter_out}"
         if g.depthwise else f"filter out_channels {g.filter_out}"),
    )
    for dim, actual, expected, why in checks:
        if actual != expected:
            what = "computed output " + dim if dim in ("height", "width") else "expected " + dim
            raise InvalidArgumentError(
                f"out_backprop {dim} {actual} does not match the {what} {expected} ({why}); "
                f"out_backprop shape {list(shape)}, expected {list(g.output_shape)}",
                "out_backprop")


def conv2d_geometry(
    input_shape: Sequence[int],
    filter_shape: Sequence[int],
    strides: object,
    padding: str,
    explicit_paddings: object = (),
    data_format: str = "NHWC",
    dilations: object = (1, 1, 1, 1),
    depthwise: bool = False,
) -> ConvGeometry:
    """Geometry of Conv2D (or DepthwiseConv2dNative) on an input and a filter shape."""
    return _geometry(input_shape, filter_shape, strides, padding, explicit_paddings,
                     data_format, dilations, depthwise, "input", "filter")


def backprop_filter_geometry(
    input_shape: Sequence[int],
    filter_sizes: object,
    out_backprop_shape: Sequence[int],
    strides: object,
    padding: str,
    explicit_paddings: object = (),
    data_format: str = "NHWC",
    dilations: object = (1, 1, 1, 1),
    depthwise: bool = False,
) -> ConvGeometry:
    """Geometry of Conv2DBackpropFilter (or its depthwise twin); output is ``filter_shape``."""
    sizes = int_vector("filter_sizes", filter_sizes, (4,))
    g = _geometry(input_shape, sizes, strides, padding, explicit_paddings, data_format,
                  dilations, depthwise, "input", "filter_sizes")
    _check_out_backprop(g, out_backprop_shape)
    return g


def backprop_input_geometry(
    input_sizes: object,
    filter_shape: Sequence[int],
    out_backprop_shape: Sequence[int],
    strides: object,
    padding: str,
    explicit_paddings: object = (),
    data_format: str = "NHWC",
    dilations: object = (1, 1, 1, 1),
    depthwise: bool = False,
) -> ConvGeometry:
    """Geometry of Conv2DBackpropInput (or its depthwise twin); output is ``input_shape``.

    ``input_sizes`` has 4 entries in ``data_format`` order, or (Conv2DBackpropInput only) the 2
    spatial ones, batch then coming from ``out_backprop`` and depth from the filter.
    """
    _check_format(data_format)
    sizes = int_vector("input_sizes", input_sizes, (4,) if depthwise else (2, 4))
    if min(sizes, default=0) < 0:
        raise InvalidArgumentError(f"input_sizes {list(sizes)}: every size must be >= 0",
                                   "input_sizes")
    if len(sizes) == 2:
        ob = _shape4("out_backprop", out_backprop_shape)
        fshape = _filter_dims("filter", filter_shape)
        n, r, c, d = spatial_axes(data_format)
        full = [0, 0, 0, 0]
        full[n], full[r], full[c], full[d] = ob[n], sizes[0], sizes[1], fshape[2]
        sizes = tuple(full)
    g = _geometry(sizes, filter_shape, strides, padding, explicit_paddings, data_format,
                  dilations, depthwise, "input_sizes", "filter")
    _check_out_backprop(g, out_backprop_shape)
    return g
