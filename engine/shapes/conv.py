"""Argument validation and shape inference for the conv ops, from shapes alone.

One rule serves every number of spatial dimensions: :func:`geometry_nd` checks the arguments
of a conv over ``k`` spatial dimensions (2 for the Conv2D family, 3 for Conv3D) and returns a
:class:`ConvGeometryNd` (per-dimension tuples of sizes, strides, dilations and paddings). The
2-D API (:class:`ConvGeometry`, :func:`conv2d_geometry`, :func:`backprop_filter_geometry`,
:func:`backprop_input_geometry`) is that rule with ``k = 2``, viewed through named fields; the
3-D ops' are :func:`conv3d_geometry`, :func:`conv3d_backprop_filter_geometry` and
:func:`conv3d_backprop_input_geometry`. The kernels call these on their arrays' shapes and the
compiler calls them on inferred shapes, so both agree by construction. The geometry types are
:mod:`engine.shapes.geometry`'s and the int and enum arguments' checks
:mod:`engine.shapes.arguments`' (both imported from here too). Every problem raises
:class:`~engine.base.errors.InvalidArgumentError` naming the argument and giving actual vs
expected values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.base.errors import InvalidArgumentError
from engine.shapes.arguments import INT32_MAX, check_enum, int_vector  # noqa: F401
from engine.shapes.geometry import (  # noqa: F401 (the rules' result types, imported from here too)
    DATA_FORMATS,
    DIM_NAMES,
    FORMATS,
    PADDINGS_3D,
    ConvGeometry,
    ConvGeometryNd,
    Shape,
    channels_last,
    layout_axes,
    spatial_axes,
)
from engine.shapes.padding import PADDINGS, windowed_output


def _check_format(data_format: str, rank: int = 2) -> None:
    check_enum("data_format", data_format, FORMATS[rank])


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
    check_enum("padding", padding, paddings)
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
