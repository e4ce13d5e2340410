"""What a conv block's attributes mean on its real shapes: the spatial geometry, Qt-free.

:func:`conv_geometry_model` turns a block type, its attributes and its input shapes (and the
values of its size ports) into a :class:`GeometryModel`: per spatial dimension an :class:`Axis`
(input size, padding before/after as :mod:`engine.shapes.conv` computes it, filter taps,
dilation, stride, output size), and the frames of its animation:

- forward and input-gradient ops: one frame per output position ``(r, c)`` (row-major): which
  input cells the window reads (forward), or into which input-gradient cells out_backprop
  element ``(r, c)`` scatters through the taps (backprop input);
- filter-gradient ops: one frame per filter tap ``(i, j)``: the input elements and the
  out_backprop elements that tap pairs, summed over all output positions.

A tap that lands in padding reads a zero (forward), or scatters nowhere (backprop input): such
cells are listed apart (:attr:`Frame.pad_cells`). :meth:`GeometryModel.overlap` counts, for each
input element, the (output position, tap) pairs that touch it. Only the spatial dimensions are
modelled; batch and channels are summarised in :attr:`GeometryModel.caption`.

Input row ``h = r * stride + i * dilation - pad_before`` is what tap ``i`` reads for output row
``r`` (columns alike), as in :mod:`engine.explain.terms`.

A 3-D op (Conv3D and its gradients) is shown as depth slices of this 2-D picture: its planes are
a third :class:`Axis` (:attr:`GeometryModel.depth`), the rows and columns are drawn as above, and
:meth:`GeometryModel.depth_slice` says which input plane(s) each output plane reads, one per depth
tap (``plane = p * stride + a * dilation - pad_front``; a plane outside the input is padding), or
for a filter gradient which planes depth tap ``a`` pairs. The overlap map is the same 2-D map on
every plane, times the (output plane, depth tap) pairs touching it
(:meth:`GeometryModel.plane_overlap`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.explain.element_index import op_geometry
from engine.explain.terms import OPS
from engine.shapes.conv import (
    ConvGeometry,
    ConvGeometryNd,
    backprop_filter_geometry,
    backprop_input_geometry,
    conv2d_geometry,
)

#: Frames an animation holds at most; longer ones are subsampled evenly.
MAX_FRAMES = 400


@dataclass(frozen=True)
class Axis:
    """One spatial dimension: ``size`` input elements with ``pad_before``/``pad_after``
    padding, a filter of ``taps`` taps ``dilation`` apart moving by ``stride``, ``out``
    output positions."""

    name: str  # "rows" or "cols"
    size: int
    pad_before: int
    pad_after: int
    taps: int
    dilation: int
    stride: int
    out: int

    @property
    def span(self) -> int:
        """Input elements one window covers, dilation gaps included."""
        return self.dilation * (self.taps - 1) + 1

    @property
    def padded(self) -> int:
        return self.pad_before + self.size + self.pad_after

    def reads(self, position: int | np.ndarray, tap: int | np.ndarray) -> int | np.ndarray:
        """The input index tap ``tap`` reads for output ``position`` (outside
        ``[0, size)``: padding)."""
        return position * self.stride + tap * self.dilation - self.pad_before

    def counts(self) -> np.ndarray:
        """For each input index, the (position, tap) pairs reading it."""
        pos, tap = np.meshgrid(np.arange(self.out), np.arange(self.taps), indexing="ij")
        h = np.asarray(self.reads(pos, tap)).ravel()
        h = h[(h >= 0) & (h < self.size)]
        return np.bincount(h, minlength=self.size).astype(np.int64)


@dataclass(frozen=True)
class Frame:
    """One step of the animation.

    ``taps`` (i, j) are the filter taps involved; ``input_cells`` the real input (or input
    gradient) cells (h, w) touched; ``pad_cells`` the (h, w) touched in padding (outside the
    input: they add nothing); ``output_cells`` the output (or out_backprop) positions (r, c).
    For a filter-gradient frame, ``input_cells[t]`` and ``paired[t]`` are the t-th pair.
    """

    index: int
    label: str
    taps: np.ndarray  # (k, 2)
    input_cells: np.ndarray  # (m, 2)
    pad_cells: np.ndarray  # (p, 2)
    output_cells: np.ndarray  # (q, 2)
    paired: np.ndarray  # (m, 2) filter-gradient frames: the out_backprop cell of each pair


def _grid(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """All pairs (a[x], b[y]) as an (len(a) * len(b), 2) array, row-major."""
    aa, bb = np.meshgrid(a, b, indexing="ij")
    return np.stack([aa.ravel(), bb.ravel()], axis=1).astype(np.int64).reshape(-1, 2)


@dataclass(frozen=True)
class DepthSlice:
    """One depth slice of a 3-D op's picture: ``pairs[t]`` = (depth tap, input plane, output
    plane) of its t-th (tap, plane) pair, ``real[t]`` False when the input plane is padding
    (the pair adds nothing). Forward and input gradient: the depth taps of output (or
    out_backprop) plane ``index``; filter gradient: every output plane of depth tap
    ``index``."""

    index: int
    label: str
    pairs: np.ndarray  # (k, 3)
    real: np.ndarray  # (k,) bool


def _planes_text(planes: Sequence[int]) -> str:
    return ", ".join(str(int(p)) for p in planes) or "none"


def _depth_label(model: GeometryModel, s: int, pairs: np.ndarray, real: np.ndarray) -> str:
    """A depth slice in words: which planes pair with which, and which taps read padding."""
    d = model.depth
    assert d is not None
    how = f"(stride {d.stride}, dilation {d.dilation}, padding front {d.pad_before})"
    pad = pairs[~real]
    if model.kind == "filter":
        text = (f"depth tap a={s} pairs input planes {_planes_text(pairs[real, 1])} with "
                f"out_backprop planes {_planes_text(pairs[real, 2])} {how}")
        if len(pad):
            text += (f"; out_backprop plane(s) {_planes_text(pad[:, 2])} with padding (plane(s) "
                     f"{_planes_text(pad[:, 1])})")
        return text
    reads = ", ".join(f"{p} (tap a={a})" for a, p, _ in pairs[real].tolist()) or "no plane"
    if model.kind == "forward":
        text = f"output plane {s} reads input plane(s) {reads} {how}"
    else:
        text = f"out_backprop plane {s} scatters into dx plane(s) {reads} {how}"
    if len(pad):
        text += (f"; tap(s) a={_planes_text(pad[:, 0])} in padding (plane(s) "
                 f"{_planes_text(pad[:, 1])}, add nothing)")
    return text


@dataclass(frozen=True)
class GeometryModel:
    """The spatial geometry of one conv block (see the module docstring)."""

    type_id: str
    kind: str  # "forward", "input" (input gradient) or "filter" (filter gradient)
    padding: str
    rows: Axis
    cols: Axis
    caption: str
    #: The 3-D ops' planes (None for a 2-D op): the picture is one of its depth slices.
    depth: Axis | None = None

    @property
    def input_name(self) -> str:
        return "input gradient dx" if self.kind == "input" else "input"

    @property
    def output_name(self) -> str:
        return "output" if self.kind == "forward" else "out_backprop"

    @property
    def frame_count(self) -> int:
        if self.kind == "filter":
            return self.rows.taps * self.cols.taps
        return self.rows.out * self.cols.out

    def frame(self, k: int) -> Frame:
        """Frame ``k`` (0 <= k < frame_count); IndexError outside."""
        if not 0 <= k < self.frame_count:
            raise IndexError(f"frame {k} is out of range: this block has {self.frame_count} "
                             f"frame(s), 0 to {self.frame_count - 1}")
        if self.kind == "filter":
            return self._tap_frame(k)
        return self._position_frame(k)

    def _position_frame(self, k: int) -> Frame:
        r, c = divmod(k, self.cols.out)
        hs = np.asarray(self.rows.reads(r, np.arange(self.rows.taps)))
        ws = np.asarray(self.cols.reads(c, np.arange(self.cols.taps)))
        cells = _grid(hs, ws)
        real = ((cells[:, 0] >= 0) & (cells[:, 0] < self.rows.size)
                & (cells[:, 1] >= 0) & (cells[:, 1] < self.cols.size))
        taps = _grid(np.arange(self.rows.taps), np.arange(self.cols.taps))
        if self.kind == "forward":
            label = (f"output ({r}, {c}) = sum over taps of input rows {hs[0]}..{hs[-1]} step "
                     f"{self.rows.dilation}, cols {ws[0]}..{ws[-1]} step {self.cols.dilation}")
        else:
            label = (f"out_backprop ({r}, {c}) scatters through {len(taps)} taps into "
                     f"{int(real.sum())} dx cells")
        if (~real).any():
            label += f"; {int((~real).sum())} in padding (add nothing)"
        return Frame(k, label, taps, cells[real], cells[~real],
                     np.array([[r, c]], np.int64), np.zeros((0, 2), np.int64))

    def _tap_frame(self, k: int) -> Frame:
        i, j = divmod(k, self.cols.taps)
        rs, cs = np.arange(self.rows.out), np.arange(self.cols.out)
        hs, ws = np.asarray(self.rows.reads(rs, i)), np.asarray(self.cols.reads(cs, j))
        outs, cells = _grid(rs, cs), _grid(hs, ws)
        real = ((cells[:, 0] >= 0) & (cells[:, 0] < self.rows.size)
                & (cells[:, 1] >= 0) & (cells[:, 1] < self.cols.size))
        oh = i * self.rows.dilation - self.rows.pad_before
        ow = j * self.cols.dilation - self.cols.pad_before
        label = (f"dw tap ({i}, {j}) = sum of {int(real.sum())} products input[h, w] * "
                 f"out_backprop[r, c] with h = {self.rows.stride}r{oh:+d}, "
                 f"w = {self.cols.stride}c{ow:+d}")
        if (~real).any():
            label += f"; {int((~real).sum())} read padding"
        return Frame(k, label, np.array([[i, j]], np.int64), cells[real], cells[~real],
                     outs, outs[real])

    def overlap(self) -> np.ndarray:
        """(rows.size, cols.size) int64: how many (output position, tap) pairs touch each input
        element (the terms of its gradient for backprop input)."""
        return np.outer(self.rows.counts(), self.cols.counts())

    def frame_indices(self, max_frames: int = MAX_FRAMES) -> list[int]:
        """The frames an animation shows: all, or ``max_frames`` spread evenly."""
        n = self.frame_count
        if n <= max_frames:
            return list(range(n))
        return sorted({int(x) for x in np.rint(np.linspace(0, n - 1, max_frames))})

    def summary(self) -> str:
        """Attributes in words: stride, dilation, padding per side (planes first for 3-D)."""
        r, c, d = self.rows, self.cols, self.depth
        if d is None:
            return (f"stride {r.stride}x{c.stride}, dilation {r.dilation}x{c.dilation}, filter "
                    f"{r.taps}x{c.taps} (spans {r.span}x{c.span}), {self.padding} padding top "
                    f"{r.pad_before} bottom {r.pad_after} left {c.pad_before} right "
                    f"{c.pad_after}")
        return (f"stride {d.stride}x{r.stride}x{c.stride}, dilation {d.dilation}x{r.dilation}x"
                f"{c.dilation}, filter {d.taps}x{r.taps}x{c.taps} (spans {d.span}x{r.span}x"
                f"{c.span}), {self.padding} padding front {d.pad_before} back {d.pad_after} "
                f"top {r.pad_before} bottom {r.pad_after} left {c.pad_before} right "
                f"{c.pad_after}")

    @property
    def slice_count(self) -> int:
        """The depth slices a picture can show: the output (or out_backprop) planes, or for a
        filter gradient the depth taps; 1 for a 2-D op."""
        if self.depth is None:
            return 1
        return self.depth.taps if self.kind == "filter" else self.depth.out

    def depth_slice(self, s: int) -> DepthSlice:
        """Depth slice ``s`` (0 <= s < slice_count) of a 3-D op; IndexError outside, ValueError
        for a 2-D op."""
        d = self.depth
        if d is None:
            raise ValueError(f"{self.type_id} has no depth: it is a 2-D op")
        if not 0 <= s < self.slice_count:
            raise IndexError(f"slice {s} is out of range: this block has {self.slice_count} "
                             f"depth slice(s), 0 to {self.slice_count - 1}")
        if self.kind == "filter":
            outs = np.arange(d.out, dtype=np.int64)
            taps = np.full(d.out, s, np.int64)
        else:
            taps = np.arange(d.taps, dtype=np.int64)
            outs = np.full(d.taps, s, np.int64)
        planes = np.asarray(d.reads(outs, taps), dtype=np.int64)
        pairs = np.stack([taps, planes, outs], axis=1).reshape(-1, 3)
        real = (planes >= 0) & (planes < d.size)
        return DepthSlice(s, _depth_label(self, s, pairs, real), pairs, real)

    def plane_overlap(self, plane: int) -> np.ndarray:
        """The overlap map of input plane ``plane`` of a 3-D op: :meth:`overlap` (the same 2-D
        map on every plane) times the (output plane, depth tap) pairs that touch the plane."""
        assert self.depth is not None, "a 2-D op has no planes"
        return self.overlap() * int(self.depth.counts()[plane])


def _axes(g: ConvGeometry) -> tuple[Axis, Axis]:
    return (Axis("rows", g.in_rows, g.pad_top, g.pad_bottom, g.filter_rows, g.dilation_rows,
                 g.stride_rows, g.out_rows),
            Axis("cols", g.in_cols, g.pad_left, g.pad_right, g.filter_cols, g.dilation_cols,
                 g.stride_cols, g.out_cols))


def _caption(kind: str, g: ConvGeometry | ConvGeometryNd) -> str:
    chans = (f"{g.in_depth} channel(s) x multiplier {g.filter_out} -> {g.out_depth}"
             if g.depthwise else f"{g.in_depth} -> {g.out_depth} channel(s)"
             + (f" in {g.groups} groups" if g.groups > 1 else ""))
    planes = (", every depth slice the same rows x cols picture"
              if isinstance(g, ConvGeometryNd) else "")
    return (f"{g.data_format}, batch {g.batch}, {chans}: every batch element and channel "
            f"(pair) repeats this spatial picture{planes}")


def _axes_nd(g: ConvGeometryNd) -> tuple[Axis, ...]:
    """One axis per spatial dimension (planes, rows, cols)."""
    names = {2: ("rows", "cols"), 3: ("planes", "rows", "cols")}[g.rank]
    return tuple(Axis(name, size, before, after, k, d, s, out) for name, size, (before, after),
                 k, d, s, out in zip(names, g.in_spatial, g.pads, g.filter_spatial, g.dilations,
                                     g.strides, g.out_spatial, strict=True))


def model_from_geometry(type_id: str, g: ConvGeometry | ConvGeometryNd) -> GeometryModel:
    """The model of a ``type_id`` block whose shape rule gave ``g`` (a 3-D op's: an N-d
    geometry with three spatial dimensions)."""
    kind = OPS[type_id].kind
    if isinstance(g, ConvGeometryNd):
        depth, rows, cols = _axes_nd(g)
        return GeometryModel(type_id, kind, g.padding, rows, cols, _caption(kind, g), depth)
    rows, cols = _axes(g)
    return GeometryModel(type_id, kind, g.padding, rows, cols, _caption(kind, g))


def conv_geometry_model(
    type_id: str,
    attrs: Mapping[str, object],
    shapes: Mapping[str, Sequence[int]],
    sizes: Mapping[str, Sequence[int]] | None = None,
) -> GeometryModel:
    """The model of a ``type_id`` conv block (one of :data:`engine.explain.terms.OPS`) with resolved
    ``attrs``, the ``shapes`` of its array input ports and the values of its size ports
    (``filter_sizes`` or ``input_sizes``). Raises InvalidArgumentError as the shape rule does,
    KeyError for a type that is not a conv block."""
    form = OPS[type_id]
    if form.rank != 2:
        arrays = {p: np.broadcast_to(np.zeros((), np.bool_), tuple(s)) for p, s in shapes.items()}
        sized = {p: np.asarray(v, np.int64) for p, v in (sizes or {}).items()}
        return model_from_geometry(type_id, op_geometry(form, attrs, arrays | sized))
    kw: dict[str, Any] = {k: attrs[k] for k in ("strides", "padding", "data_format", "dilations")}
    kw["explicit_paddings"] = attrs["explicit_paddings"] if attrs["padding"] == "EXPLICIT" else []
    sizes = sizes or {}
    if form.kind == "forward":
        g = conv2d_geometry(shapes["input"], shapes["filter"], depthwise=form.depthwise, **kw)
    elif form.kind == "filter":
        g = backprop_filter_geometry(shapes["input"], sizes["filter_sizes"],
                                     shapes["out_backprop"], depthwise=form.depthwise, **kw)
    else:
        g = backprop_input_geometry(sizes["input_sizes"], shapes["filter"],
                                    shapes["out_backprop"], depthwise=form.depthwise, **kw)
    return model_from_geometry(type_id, g)


def model_for_step(step, specs: Mapping) -> GeometryModel:
    """The model of a compiled conv step (an :class:`engine.graph.compiler.Step`, with the plan's
    ``specs`` giving every wired port's inferred shape and, for size ports, its value)."""
    shapes, sizes = {}, {}
    for port, ref in step.inputs.items():
        spec = specs[ref]
        if port in ("filter_sizes", "input_sizes"):
            sizes[port] = [int(v) for v in np.asarray(spec.value).ravel()]
        else:
            shapes[port] = spec.shape
    return conv_geometry_model(step.spec.type_id, step.attrs, shapes, sizes)
