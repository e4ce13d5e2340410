"""Per-path bounds of the memory one conv kernel call needs besides its operands and its result
(bytes, ``ct`` the compute itemsize): the ``workspace`` column of :data:`engine.kernels.dispatch`'s
table. :func:`engine.kernels.memory.conv_workspace` adds the finite check and the NaN/Inf path.

- the tap-span path (:func:`engine.kernels.sparse.select`: huge strides, dilations or paddings):
  per batch chunk the gathered input and output slices of one tap pair and their product, plus
  the result in the compute dtype;
- the phase-layout paths (NumPy, and the compiled per-tap tiles, which use less): the compute
  buffers of one batch chunk, at most ``max(CHUNK_BYTES, one image's phase images)`` (never more
  than the whole batch's), few-channel convolutions adding their im2col matrix per image,
  cache-sized blocks a few per core (the stride-1 input gradient's gathered blocks among them);
- the depthwise tiles (NumPy) and the compiled depthwise loops (their operand chunks);
- Winograd: :func:`engine.kernels._compiled.winograd.workspace_bytes` (and its stride-2
  polyphase input gradient's, :func:`engine.kernels._compiled.winograd_phases.workspace_bytes`);
- results are accumulated in the compute dtype, per core for filter gradients, and cast or
  re-laid out at the end; the filter is cast once or twice.

The bounds are deliberately generous (factors of 2 where a buffer's size depends on details the
kernels may change); they only have to be safe and of the right order (``tests/test_memory.py``
checks them against tracemalloc).
"""

from __future__ import annotations

import math

from engine.kernels import accel, compute, conv_nd, im2col_nd, sparse
from engine.kernels._compiled import winograd, winograd_phases
from engine.kernels.layout import PhaseLayout
from engine.kernels.parallel import workers
from engine.shapes.conv import ConvGeometry, ConvGeometryNd


def sizes(g: ConvGeometry | ConvGeometryNd) -> tuple[int, int, int]:
    """Elements of the input, the filter and the output of the forward convolution."""
    return math.prod(g.input_shape), math.prod(g.filter_shape), math.prod(g.output_shape)


def _tile_bytes(g: ConvGeometry, ct: int) -> int:
    """One core's depthwise tile buffer and per-tile results (forward and transposed tiles)."""
    taps_rows = (g.filter_rows - 1) * g.dilation_rows + 1
    taps_cols = (g.filter_cols - 1) * g.dilation_cols + 1
    channels = g.in_depth * g.filter_out
    worst = 0
    for out_cols, stride_rows, stride_cols, in_cols in (
            (g.out_cols, g.stride_rows, g.stride_cols, g.in_cols),
            (g.in_cols, 1, 1, g.out_cols * g.stride_cols)):
        step = max(1, compute.DEPTHWISE_TILE_POSITIONS // max(1, out_cols))
        rows = (step - 1) * stride_rows + taps_rows
        cols = max(in_cols, (out_cols - 1) * stride_cols + 1) + taps_cols
        worst = max(worst, rows * cols * channels + 2 * step * out_cols * channels)
    return worst * ct


def tap_spans(g: ConvGeometry, kind: str, ct: int) -> int:
    """The tap-span path: per chunk the gathered slices, their (group-transposed) product and
    its add, plus the result accumulated in the compute dtype."""
    x, w, y = sizes(g)
    per_image = ct * (x + y) // max(1, g.batch)
    chunk = min(g.batch * per_image, max(sparse.CHUNK_BYTES, per_image))
    result = {"forward": y, "filter": w, "input": x}[kind] * ct
    return 4 * chunk + 2 * result + 3 * w * ct


def _compiled_depthwise_body(g: ConvGeometry, ct: int) -> int:
    """The compiled depthwise kernels (:mod:`engine.kernels._compiled.numba_depthwise`): per batch
    chunk the contiguous compute-dtype copies of its operands (the input's channels repeated ``M``
    times) and its input-gradient parts, plus one filter partial per core and the sum."""
    _, w, _ = sizes(g)
    per_image = ct * (g.in_rows * g.in_cols + g.out_rows * g.out_cols) * g.out_depth
    chunk = min(g.batch * per_image, max(accel.CHUNK_BYTES, per_image))
    return 3 * chunk + (workers() + 2) * w * ct


def _results(g: ConvGeometry, kind: str, ct: int) -> int:
    """Result accumulators (per core for filter gradients), casts and the filter's casts."""
    _, w, y = sizes(g)
    out = {"forward": y, "filter": w, "input": 0}[kind]
    return (workers() + 3) * out * ct + (2 * y * ct if kind == "forward" else 0) + 3 * w * ct


def depthwise_tiles(g: ConvGeometry, kind: str, ct: int) -> int:
    """The NumPy depthwise tiles of :mod:`engine.kernels.compute`: one tile buffer per core."""
    return workers() * _tile_bytes(g, ct) + _results(g, kind, ct)


def compiled_depthwise(g: ConvGeometry, kind: str, ct: int) -> int:
    """The compiled depthwise loops (:mod:`engine.kernels._compiled.numba_depthwise`)."""
    return _compiled_depthwise_body(g, ct) + _results(g, kind, ct)


def phase_layout(g: ConvGeometry, kind: str, ct: int) -> int:
    """The phase-layout paths of :mod:`engine.kernels.compute` (and, within the same bound, the
    compiled per-tap paths of :mod:`engine.kernels.tiled`)."""
    lay = PhaseLayout.of(g)
    taps = g.filter_rows * g.filter_cols
    cg, og = g.filter_in_depth, g.filter_out // g.groups
    few = 1 + taps * (cg < compute.IM2COL_MAX_CHANNELS)
    phases = g.stride_rows * g.stride_cols * lay.hq * lay.wq * cg * few
    per_image = ct * (phases + lay.hq * lay.wq * og * few)
    chunk = 2 * min(g.batch * per_image, max(compute.CHUNK_BYTES, per_image))
    positions = min(compute.FILTER_GRAD_BLOCK, g.batch * lay.hq * lay.wq)
    cores = workers()
    blocks = cores * 2 * ct * (positions + og) * taps * cg
    if kind == "input" and compute.input_strategy(lay, cg) == "gather":
        block = compute.gather_block(lay, og, ct) * taps * og * ct
        blocks += cores * 2 * block  # each core's gathered block and BLAS's packing of it
    return chunk + blocks + _results(g, kind, ct)


def im2col(g: ConvGeometry, kind: str, ct: int) -> int:
    """The few-channel compiled forward and filter gradient (:mod:`engine.kernels.im2col_nd`,
    one group at a time): each group's own bound, its operands sliced out and copied, the
    groups' results joined."""
    v = im2col_nd.volume(g, g.filter_in_depth, g.filter_out // g.groups)
    x, _, y = sizes(g)
    return im2col_nd.workspace_bytes(v, kind, ct) + 2 * ct * (x + y) + _results(g, kind, ct)


def winograd_tiles(g: ConvGeometry, kind: str, ct: int) -> int:
    """Winograd F(2x2, 3x3) (:func:`engine.kernels._compiled.winograd.workspace_bytes`)."""
    return winograd.workspace_bytes(g, kind, ct)


def winograd_phase_tiles(g: ConvGeometry, kind: str, ct: int) -> int:
    """The stride-2 polyphase Winograd input gradient
    (:func:`engine.kernels._compiled.winograd_phases.workspace_bytes`)."""
    return winograd_phases.workspace_bytes(g, kind, ct)


def nothing(g: ConvGeometry, kind: str, ct: int) -> int:
    """No kernel runs (an empty sum)."""
    return 0


def nd_workspace_bytes(g: ConvGeometryNd, kind: str, ct: int) -> int:
    """A bound of the memory a ``kind`` call of :mod:`engine.kernels.conv_nd` on ``g`` needs
    besides its operands and result (``ct`` the compute itemsize): the padded input (or the padded input gradient), one block's
    columns twice (a group's slice is copied), the operands and the result in the compute
    dtype, and a block's products and their concatenation."""
    rows = max(1, g.out_spatial[0])
    row_bytes = math.prod(g.out_spatial) // rows * math.prod(g.filter_spatial) * g.in_depth * ct
    cols = min(g.batch * rows * row_bytes, max(conv_nd.BLOCK_BYTES, row_bytes))
    padded = math.prod(conv_nd.padded_shape(g)) * ct
    x, w, y = sizes(g)
    result = {"forward": y, "filter": w, "input": x}[kind] * ct
    return padded + 2 * cols + (x + w + y) * ct + 3 * result
