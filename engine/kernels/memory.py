"""Upper bounds of the memory one conv kernel call needs besides its operands and its result.

Read off :mod:`engine.kernels`, :mod:`engine.kernels.compute` and :mod:`engine.kernels.nonfinite`
(and checked against tracemalloc by ``tests/test_memory.py``):

- the finite check reads each operand's exponent bits into a temporary of its size;
- geometries the kernels compute tap by tap (:func:`engine.kernels.sparse.select`: huge strides,
  dilations or paddings) need per batch chunk the gathered input and output slices of one tap
  pair and their product, plus the result in the compute dtype;
- otherwise the compute buffers of one batch chunk are at most ``max(CHUNK_BYTES, one image's phase
  images)`` (and never more than the whole batch's), in the compute dtype (float32 for the half types); few-channel convolutions add
  their im2col matrix per image, cache-sized blocks add a few per core (the stride-1 input
  gradient's gathered blocks among them);
- results are accumulated in the compute dtype, per core for filter gradients, and cast or
  re-laid out at the end; the filter is cast once or twice;
- Winograd (:func:`engine.kernels._compiled.winograd.chosen`):
  :func:`engine.kernels._compiled.winograd.workspace_bytes`, or the phase-layout path's bound when
  operands are out of its range (the larger of both);
- when an operand may hold NaN or Inf (:attr:`blocks.spec.TensorSpec.finite`), the NaN/Inf path
  first runs the kernel on finite copies of both operands, then on float32 0/1 indicator arrays
  while an output-sized count and three flag arrays are alive.

The bound is deliberately generous (factors of 2 where a buffer's size depends on details the
kernels may change); it only has to be safe and of the right order.
"""

from __future__ import annotations

import math

from engine.base.dtypes import compute_dtype, to_dtype
from engine.kernels import accel, compute, sparse
from engine.kernels._compiled import winograd
from engine.kernels.layout import PhaseLayout
from engine.kernels.parallel import workers
from engine.shapes.conv import ConvGeometry

KINDS = ("forward", "filter", "input")
#: Small temporaries (index lists, reductions, per-call bookkeeping) on top of the arrays.
SLACK = 2**20


def _sizes(g: ConvGeometry) -> tuple[int, int, int]:
    """Elements of the input, the filter and the output of the forward convolution."""
    x = g.batch * g.in_rows * g.in_cols * g.in_depth
    w = g.filter_rows * g.filter_cols * g.filter_in_depth * g.filter_out
    y = g.batch * g.out_rows * g.out_cols * g.out_depth
    return x, w, y


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


def _sparse_bytes(g: ConvGeometry, kind: str, ct: int) -> int:
    """The tap-span path: per chunk the gathered slices, their (group-transposed) product and
    its add, plus the result accumulated in the compute dtype."""
    x, w, y = _sizes(g)
    per_image = ct * (x + y) // max(1, g.batch)
    chunk = min(g.batch * per_image, max(sparse.CHUNK_BYTES, per_image))
    result = {"forward": y, "filter": w, "input": x}[kind] * ct
    return 4 * chunk + 2 * result + 3 * w * ct


def _compiled_bytes(g: ConvGeometry, ct: int) -> int:
    """The compiled depthwise kernels (:mod:`engine.kernels._compiled.numba_depthwise`): per batch
    chunk the contiguous compute-dtype copies of its operands (the input's channels repeated ``M``
    times) and its input-gradient parts, plus one filter partial per core and the sum."""
    _, w, _ = _sizes(g)
    per_image = ct * (g.in_rows * g.in_cols + g.out_rows * g.out_cols) * g.out_depth
    chunk = min(g.batch * per_image, max(accel.CHUNK_BYTES, per_image))
    return 3 * chunk + (workers() + 2) * w * ct


def _kernel_bytes(g: ConvGeometry, kind: str, ct: int) -> int:
    """Compute buffers, result accumulators and filter casts of one finite-path call."""
    if sparse.select(g) is not None:
        return _sparse_bytes(g, kind, ct)
    if winograd.chosen(g):  # finite operands (in range) take it; the others the path below
        return max(winograd.workspace_bytes(g, kind, ct), _phase_bytes(g, kind, ct))
    return _phase_bytes(g, kind, ct)


def _phase_bytes(g: ConvGeometry, kind: str, ct: int) -> int:
    """The phase-layout (and depthwise tile) paths of :mod:`engine.kernels.compute`."""
    _, w, y = _sizes(g)
    out = {"forward": y, "filter": w, "input": 0}[kind]
    cores = workers()
    taps = g.filter_rows * g.filter_cols
    if g.depthwise:  # either path may run (engine.kernels.accel decides at call time)
        body = max(cores * _tile_bytes(g, ct), _compiled_bytes(g, ct))
    else:
        lay = PhaseLayout.of(g)
        cg, og = g.filter_in_depth, g.filter_out // g.groups
        few = 1 + taps * (cg < compute.IM2COL_MAX_CHANNELS)
        phases = g.stride_rows * g.stride_cols * lay.hq * lay.wq * cg * few
        per_image = ct * (phases + lay.hq * lay.wq * og * few)
        chunk = 2 * min(g.batch * per_image, max(compute.CHUNK_BYTES, per_image))
        positions = min(compute.FILTER_GRAD_BLOCK, g.batch * lay.hq * lay.wq)
        blocks = cores * 2 * ct * (positions + og) * taps * cg
        if kind == "input" and compute.input_strategy(lay, cg) == "gather":
            block = compute.gather_block(lay, og, ct) * taps * og * ct
            blocks += cores * 2 * block  # each core's gathered block and BLAS's packing of it
        body = chunk + blocks
    results = (cores + 3) * out * ct + (2 * y * ct if kind == "forward" else 0)
    return body + results + 3 * w * ct


def conv_workspace(g: ConvGeometry, kind: str, dtype: str, operands_finite: bool) -> int:
    """Bytes one call of the ``kind`` (forward, filter or input gradient) kernel of geometry
    ``g`` on ``dtype`` operands may need besides its operands and result (an upper bound)."""
    it = to_dtype(dtype).itemsize
    ct = compute_dtype(to_dtype(dtype)).itemsize
    x, w, y = _sizes(g)
    a, b = {"forward": (x, w), "filter": (x, y), "input": (w, y)}[kind]
    out = {"forward": y, "filter": w, "input": x}[kind]
    check = max(a, b) * it
    finite_path = _kernel_bytes(g, kind, ct)
    if operands_finite:
        return SLACK + max(check, finite_path)
    copies = (a + b) * it + max(a, b) + finite_path
    indicators = 12 * out + 8 * (a + b) + _kernel_bytes(g, kind, 4)
    return SLACK + max(check, copies, indicators)


def product_bound(a: float, b: float, terms: int) -> float:
    """A bound of ``|sum of terms products|`` given bounds of both factors (inf stays inf)."""
    if a == 0 or b == 0 or terms == 0:
        return 0.0
    return math.inf if math.isinf(a) or math.isinf(b) else a * b * terms * (1 + 1e-6)


def terms_per_output(g: ConvGeometry, kind: str) -> int:
    """Products summed into one output element."""
    taps = g.filter_rows * g.filter_cols
    if kind == "forward":
        return taps * (1 if g.depthwise else g.filter_in_depth)
    if kind == "filter":
        return g.batch * g.out_rows * g.out_cols
    return taps * (g.filter_out if g.depthwise else g.filter_out // g.groups)
