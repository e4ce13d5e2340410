"""Argument validation and shape inference for the conv ops, from shapes alone.

One rule serves every number of spatial dimensions: :func:`geometry_nd` checks the arguments
of a conv over ``k`` spatial dimensions (2 for the Conv2D family, 3 for Conv3D) and returns a
:class:`ConvGeometryNd` (per-dimension tuples of sizes, strides, dilations and paddings). The
2-D API (:class:`ConvGeometry`, :func:`conv2d_geometry`, :func:`backprop_filter_geometry`,
:func:`backprop_input_geometry`) is that rule with ``k = 2``, viewed through named fields; the
3-D ops' are :func:`conv3d_geometry`, :func:`conv3d_backprop_filter_geometry` and
:func:`conv3d_backprop_input_geometry`. The kernels call these on their arrays' shapes and the
compiler calls them on inferred shapes, so both agree by construction. Every problem raises
:class:`~engine.base.errors.InvalidArgumentError` naming the argument and giving actual vs
expected values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.base.errors import InvalidArgumentError
from engine.base.names import shown
from engine.shapes.padding import PADDINGS, windowed_output

DATA_FORMATS = ("NHWC", "NCHW")
#: The data formats of each number of spatial dimensions: channels last, channels first.
FORMATS: dict[int, tuple[str, str]] = {2: DATA_FORMATS, 3: ("NDHWC", "NCDHW")}
#: What messages call each spatial dimension (the channels are the "depth").
DIM_NAMES: dict[int, tuple[str, ...]] = {2: ("height", "width"), 3: ("planes", "height", "width")}
#: The paddings Conv3D and its gradients take (``tf.raw_ops``: no EXPLICIT).
PADDINGS_3D = ("SAME", "VALID")

Shape = tuple[int, ...]


@dataclass(frozen=True)
class ConvGeometryNd:
    """Sizes of one convolution over ``k = len(in_spatial)`` spatial dimensions.

    With ``p`` a spatial index tuple, ``t`` a tap tuple and channels last, the forward op is
    ``out[n, p, o] = sum_{t, q} in_pad[n, p*s + t*d, g*qin + q] * filter[t, q, o]`` (products
    per dimension; ``g = o // (out_depth / groups)``); depthwise as in :class:`ConvGeometry`.
    ``pads`` holds (before, after) per spatial dimension.
    """

    data_format: str
    padding: str
    depthwise: bool
    batch: int
    in_spatial: Shape
    in_depth: int
    filter_spatial: Shape
    filter_in_depth: int
    filter_out: int  # out_channels for conv, the depth multiplier for depthwise
    strides: Shape
    dilations: Shape
    out_spatial: Shape
    pads: tuple[tuple[int, int], ...]

    @property
    def rank(self) -> int:
        """The number of spatial dimensions."""
        return len(self.in_spatial)

    @property
    def out_depth(self) -> int:
        return self.in_depth * self.filter_out if self.depthwise else self.filter_out

    @property
    def groups(self) -> int:
        return 1 if self.depthwise else self.in_depth // self.filter_in_depth

    def layout(self, spatial: Sequence[int], depth: int) -> Shape:
        """A (batch, spatial..., depth) shape in ``data_format`` order."""
        if channels_last(self.data_format):
            return (self.batch, *spatial, depth)
        return (self.batch, depth, *spatial)

    @property
    def input_shape(self) -> Shape:
        return self.layout(self.in_spatial, self.in_depth)

    @property
    def output_shape(self) -> Shape:
        return self.layout(self.out_spatial, self.out_depth)

    @property
    def filter_shape(self) -> Shape:
        return (*self.filter_spatial, self.filter_in_depth, self.filter_out)

    def plane_geometry(self, batch: int) -> ConvGeometry:
        """The NHWC 2-D geometry of the last two spatial dimensions over ``batch`` stacked
        planes (a 3-D conv's depth tap as a 2-D conv): their sizes, strides, dilations and
        pads, copied, not recomputed."""
        (h, w), (kh, kw) = self.in_spatial[-2:], self.filter_spatial[-2:]
        (sh, sw), (dh, dw), (oh, ow) = self.strides[-2:], self.dilations[-2:], self.out_spatial[-2:]
        (top, bottom), (left, right) = self.pads[-2:]
        return ConvGeometry("NHWC", self.padding, False, batch, h, w, self.in_depth, kh, kw,
                            self.filter_in_depth, self.filter_out, sh, sw, dh, dw, oh, ow, top,
                            bottom, left, right)


@dataclass(frozen=True)
class ConvGeometry:
    """Sizes of one 2-D convolution, in layout-free terms: :class:`ConvGeometryNd` with two
    spatial dimensions, by name (:meth:`from_nd`, :attr:`nd`).

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

    @classmethod
    def from_nd(cls, g: ConvGeometryNd) -> ConvGeometry:
        """The 2-D view of an N-d geometry with two spatial dimensions."""
        assert g.rank == 2, g.rank
        (rows, cols), (frows, fcols) = g.in_spatial, g.filter_spatial
        (srows, scols), (drows, dcols), (orows, ocols) = g.strides, g.dilations, g.out_spatial
        (top, bottom), (left, right) = g.pads
        return cls(g.data_format, g.padding, g.depthwise, g.batch, rows, cols, g.in_depth,
                   frows, fcols, g.filter_in_depth, g.filter_out, srows, scols, drows, dcols,
                   orows, ocols, top, bottom, left, right)

    @property
    def nd(self) -> ConvGeometryNd:
        """The same geometry as a :class:`ConvGeometryNd`."""
        return ConvGeometryNd(
            self.data_format, self.padding, self.depthwise, self.batch,
            (self.in_rows, self.in_cols), self.in_depth, (self.filter_rows, self.filter_cols),
            self.filter_in_depth, self.filter_out, (self.stride_rows, self.stride_cols),
            (self.dilation_rows, self.dilation_cols), (self.out_rows, self.out_cols),
            ((self.pad_top, self.pad_bottom), (self.pad_left, self.pad_right)))

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


def channels_last(data_format: str) -> bool:
    """True for NHWC-style formats (channels last), False for NCHW-style ones."""
    return data_format.endswith("C")


def layout_axes(data_format: str) -> tuple[int, tuple[int, ...], int]:
    """(batch axis, spatial axes, depth axis) of an array or vector in ``data_format``."""
    spatial = len(data_format) - 2
    if channels_last(data_format):
        return 0, tuple(range(1, spatial + 1)), spatial + 1
    return 0, tuple(range(2, spatial + 2)), 1


def spatial_axes(data_format: str) -> tuple[int, int, int, int]:
    """Indices of (batch, rows, cols, depth) in a 4-vector of ``data_format``."""
    n, (r, c), d = layout_axes(data_format)
    return n, r, c, d


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


def _check_format(data_format: str, rank: int = 2) -> None:
    _check_enum("data_format", data_format, FORMATS[rank])


def window_attr_nd(name: str, value: object, data_format: str) -> tuple[int, ...]:
    """The spatial entries of ``strides`` or ``dilations`` (``len(data_format)`` entries in
    ``data_format`` order); the batch and depth entries must be 1, the others > 0."""
    vec = int_vector(name, value, (len(data_format),))
    n, spatial, d = layout_axes(data_format)
    if vec[n] != 1 or vec[d] != 1:
        raise InvalidArgumentError(
            f"{name} {list(vec)}: {name} in the batch and depth dimensions must be 1 "
            f"({data_format})", name)
    if min(vec[a] for a in spatial) < 1:
        raise InvalidArgumentError(f"{name} {list(vec)}: every entry must be > 0", name)
    return tuple(vec[a] for a in spatial)


def window_attr(name: str, value: object, data_format: str) -> tuple[int, int]:
    """(rows, cols) of ``strides`` or ``dilations``; batch and depth entries must be 1."""
    rows, cols = window_attr_nd(name, value, data_format)
    return rows, cols


def explicit_pads_nd(padding: str, explicit_paddings: object, data_format: str,
                     paddings: Sequence[str] = PADDINGS) -> tuple[tuple[int, int], ...]:
    """(before, after) per spatial dimension from TF's ``2 * len(data_format)`` explicit
    paddings in data_format order; zeros unless ``padding`` is EXPLICIT."""
    _check_enum("padding", padding, paddings)
    full = 2 * len(data_format)
    n, spatial, d = layout_axes(data_format)
    pads = int_vector("explicit_paddings", explicit_paddings, (0, full))
    if padding != "EXPLICIT":
        if pads:
            raise InvalidArgumentError(
                f"explicit_paddings {list(pads)} given with padding {padding}: "
                "explicit_paddings must be empty unless padding is EXPLICIT", "explicit_paddings")
        return tuple((0, 0) for _ in spatial)
    if not pads:
        raise InvalidArgumentError(
            f"padding EXPLICIT needs explicit_paddings with {full} elements", "explicit_paddings")
    if min(pads) < 0:
        raise InvalidArgumentError(
            f"explicit_paddings {list(pads)}: every element must be nonnegative",
            "explicit_paddings")
    if pads[2 * n] or pads[2 * n + 1] or pads[2 * d] or pads[2 * d + 1]:
        raise InvalidArgumentError(
            f"explicit_paddings {list(pads)}: padding in the batch and depth dimensions must be "
            f"0 ({data_format})", "explicit_paddings")
    return tuple((pads[2 * a], pads[2 * a + 1]) for a in spatial)


def explicit_pads(
    padding: str, explicit_paddings: object, data_format: str
) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) from TF's 8 explicit paddings in data_format order."""
    (top, bottom), (left, right) = explicit_pads_nd(padding, explicit_paddings, data_format)
    return top, bottom, left, right


def _shape_of_rank(name: str, shape: Sequence[int], rank: int) -> Shape:
    shape = tuple(int(s) for s in shape)
    if len(shape) != rank:
        raise InvalidArgumentError(f"{name} must be {rank}-D, got shape {list(shape)}", name)
    return shape


def _filter_dims(name: str, shape: Sequence[int], rank: int, zero_out: bool) -> Shape:
    """A filter shape of ``rank`` dims: the spatial sizes and in_channels > 0; out_channels
    (the depth multiplier for depthwise) may be 0 when ``zero_out`` (the 2-D ops: empty
    results, TensorFlow's own tests ask for it; TensorFlow's Conv3D refuses it)."""
    shape = _shape_of_rank(name, shape, rank)
    names = ", ".join(DIM_NAMES[rank - 2])
    if zero_out:
        if min(shape[:-1]) <= 0 or shape[-1] < 0:
            raise InvalidArgumentError(
                f"{name} {list(shape)}: filter {names} and in_channels must be > 0 and "
                "out_channels >= 0", name)
    elif min(shape) <= 0:
        raise InvalidArgumentError(
            f"{name} {list(shape)}: filter {names}, in_channels and out_channels must be > 0",
            name)
    return shape


def geometry_nd(
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
    rank: int = 2,
) -> ConvGeometryNd:
    """The conv rule over ``rank`` spatial dimensions (2: the Conv2D family, with EXPLICIT
    padding and zero out_channels allowed; 3: Conv3D, SAME/VALID only): every argument
    checked in TensorFlow's order, the output size and padding of each dimension from
    :func:`~engine.shapes.padding.windowed_output`."""
    _check_format(data_format, rank)
    pads = explicit_pads_nd(padding, explicit_paddings, data_format,
                            PADDINGS if rank == 2 else PADDINGS_3D)
    strides_ = window_attr_nd("strides", strides, data_format)
    dilations_ = window_attr_nd("dilations", dilations, data_format)
    ishape = _shape_of_rank(input_name, input_shape, rank + 2)
    if min(ishape) < 0:
        raise InvalidArgumentError(f"{input_name} {list(ishape)}: sizes must be >= 0",
                                   input_name)
    fshape = _filter_dims(filter_name, filter_shape, rank + 2, zero_out=rank == 2)
    fspatial, fin, fout = fshape[:-2], fshape[-2], fshape[-1]
    n, spatial, d = layout_axes(data_format)
    batch, sizes, depth = ishape[n], tuple(ishape[a] for a in spatial), ishape[d]
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
    for dim, size, k, dil, s, (before, after) in zip(
            DIM_NAMES[rank], sizes, fspatial, dilations_, strides_, pads):
        try:
            wins.append(windowed_output(size, k, dil, s, padding, before, after))
        except InvalidArgumentError as err:
            raise InvalidArgumentError(
                f"{filter_name} {dim} {k} (dilation {dil}) does not fit {input_name} {dim} "
                f"{size} with {padding} padding: {err}", filter_name) from None
    return ConvGeometryNd(
        data_format, padding, depthwise, batch, sizes, depth, tuple(fspatial), fin, fout,
        strides_, dilations_, tuple(w.out for w in wins),
        tuple((w.pad_before, w.pad_after) for w in wins))


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
    return ConvGeometry.from_nd(geometry_nd(
        input_shape, filter_shape, strides, padding, explicit_paddings, data_format, dilations,
        depthwise, input_name, filter_name))


def check_out_backprop(g: ConvGeometryNd, out_backprop_shape: Sequence[int]) -> None:
    """out_backprop must have exactly the forward op's output shape."""
    shape = _shape_of_rank("out_backprop", out_backprop_shape, g.rank + 2)
    n, spatial, d = layout_axes(g.data_format)
    checks = [("batch", shape[n], g.batch, f"input batch {g.batch}")]
    for i, (dim, axis) in enumerate(zip(DIM_NAMES[g.rank], spatial)):
        checks.append((dim, shape[axis], g.out_spatial[i],
                       (f"input {g.in_spatial[i]}, filter {g.filter_spatial[i]}, dilation "
                        f"{g.dilations[i]}, stride {g.strides[i]}, {g.padding}")))
    checks.append(("depth", shape[d], g.out_depth,
                   f"filter in_channels {g.filter_in_depth} x multiplier {g.filter_out}"
                   if g.depthwise else f"filter out_channels {g.filter_out}"))
    for dim, actual, expected, why in checks:
        if actual != expected:
            what = ("expected " if dim in ("batch", "depth") else "computed output ") + dim
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
    g = geometry_nd(input_shape, sizes, strides, padding, explicit_paddings, data_format,
                    dilations, depthwise, "input", "filter_sizes")
    check_out_backprop(g, out_backprop_shape)
    return ConvGeometry.from_nd(g)


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
        ob = _shape_of_rank("out_backprop", out_backprop_shape, 4)
        fshape = _filter_dims("filter", filter_shape, 4, zero_out=True)
        n, r, c, d = spatial_axes(data_format)
        full = [0, 0, 0, 0]
        full[n], full[r], full[c], full[d] = ob[n], sizes[0], sizes[1], fshape[2]
        sizes = tuple(full)
    g = geometry_nd(sizes, filter_shape, strides, padding, explicit_paddings, data_format,
                    dilations, depthwise, "input_sizes", "filter")
    check_out_backprop(g, out_backprop_shape)
    return ConvGeometry.from_nd(g)


#: The default dilations of the 3-D ops.
UNIT_5 = (1, 1, 1, 1, 1)


def conv3d_geometry(
    input_shape: Sequence[int],
    filter_shape: Sequence[int],
    strides: object,
    padding: str,
    data_format: str = "NDHWC",
    dilations: object = UNIT_5,
) -> ConvGeometryNd:
    """Geometry of Conv3D: :func:`geometry_nd` with three spatial dimensions, filter
    ``[kd, kh, kw, in, out]``, SAME or VALID padding."""
    return geometry_nd(input_shape, filter_shape, strides, padding, (), data_format, dilations,
                       False, "input", "filter", rank=3)


def conv3d_backprop_filter_geometry(
    input_shape: Sequence[int],
    filter_sizes: object,
    out_backprop_shape: Sequence[int],
    strides: object,
    padding: str,
    data_format: str = "NDHWC",
    dilations: object = UNIT_5,
) -> ConvGeometryNd:
    """Geometry of Conv3DBackpropFilterV2; its output is ``filter_shape``."""
    sizes = int_vector("filter_sizes", filter_sizes, (5,))
    g = geometry_nd(input_shape, sizes, strides, padding, (), data_format, dilations, False,
                    "input", "filter_sizes", rank=3)
    check_out_backprop(g, out_backprop_shape)
    return g


def conv3d_backprop_input_geometry(
    input_sizes: object,
    filter_shape: Sequence[int],
    out_backprop_shape: Sequence[int],
    strides: object,
    padding: str,
    data_format: str = "NDHWC",
    dilations: object = UNIT_5,
) -> ConvGeometryNd:
    """Geometry of Conv3DBackpropInputV2 (``input_sizes``: 5 entries in ``data_format``
    order); its output is ``input_shape``."""
    _check_format(data_format, 3)
    sizes = int_vector("input_sizes", input_sizes, (5,))
    if min(sizes) < 0:
        raise InvalidArgumentError(f"input_sizes {list(sizes)}: every size must be >= 0",
                                   "input_sizes")
    g = geometry_nd(sizes, filter_shape, strides, padding, (), data_format, dilations, False,
                    "input_sizes", "filter", rank=3)
    check_out_backprop(g, out_backprop_shape)
    return g


#: The shape rule of each kind of op (``forward``, ``filter``, ``input``: the op table's kinds),
#: by its number of spatial dimensions: the blocks, explain and verify look their rule up here.
RULES: dict[int, dict[str, Callable[..., ConvGeometry | ConvGeometryNd]]] = {
    2: {"forward": conv2d_geometry, "filter": backprop_filter_geometry,
        "input": backprop_input_geometry},
    3: {"forward": conv3d_geometry, "filter": conv3d_backprop_filter_geometry,
        "input": conv3d_backprop_input_geometry},
}
