"""The geometry of one convolution, layout-free: :class:`ConvGeometryNd` over any number of
spatial dimensions and its 2-D view :class:`ConvGeometry` (what :mod:`engine.shapes.conv`'s rules
return), with the data formats and their axes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DATA_FORMATS = ("NHWC", "NCHW")
#: The data formats of each number of spatial dimensions: channels last, channels first.
FORMATS: dict[int, tuple[str, str]] = {2: DATA_FORMATS, 3: ("NDHWC", "NCDHW")}
#: What messages call each spatial dimension (the channels are the "depth").
DIM_NAMES: dict[int, tuple[str, ...]] = {2: ("height", "width"), 3: ("planes", "height", "width")}
#: The paddings Conv3D and its gradients take (``tf.raw_ops``: no EXPLICIT).
PADDINGS_3D = ("SAME", "VALID")

Shape = tuple[int, ...]


class _Channels:
    """The channel counts both geometries derive: output depth and groups."""

    depthwise: bool
    in_depth: int
    filter_in_depth: int
    filter_out: int

    @property
    def out_depth(self) -> int:
        return self.in_depth * self.filter_out if self.depthwise else self.filter_out

    @property
    def groups(self) -> int:
        return 1 if self.depthwise else self.in_depth // self.filter_in_depth


@dataclass(frozen=True)
class ConvGeometryNd(_Channels):
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
class ConvGeometry(_Channels):
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


def to_channels_last(a: np.ndarray, data_format: str) -> np.ndarray:
    """An activation of ``data_format`` as a channels-last view (:func:`from_channels_last`
    the reverse)."""
    return a if channels_last(data_format) else np.moveaxis(a, 1, -1)


def from_channels_last(a: np.ndarray, data_format: str) -> np.ndarray:
    """A channels-last activation as a view in ``data_format`` (:func:`to_channels_last` the
    reverse)."""
    return a if channels_last(data_format) else np.moveaxis(a, -1, 1)


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
