"""The compiled input gradient of the per-tap conv kernels (:mod:`engine.kernels._compiled.conv_tiles`
has the tiles they share, the filter gradient and the forward): written straight into the
result one segment per phase row (:func:`backprop_input_into`, over the result's old contents
when the phases cover every pixel, :func:`covers_input`), into flat phase images
(:func:`backprop_input`), or as col2im for few channels (:func:`backprop_input_col2im`).
Call sizes and cancel checkpoints are :mod:`~engine.kernels._compiled.conv_tiles`' (read there
at call time)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from engine.kernels._compiled import conv_tiles as tiles
from engine.kernels.buffers import readonly, zeroed
from engine.kernels.layout import PhaseLayout
from engine.kernels.parallel import map_ranges
from engine.shapes.conv import ConvGeometry

#: A core's range of the col2im input gradient has at least this many input rows per filter
#: row (at its start it recomputes the output-gradient rows its neighbour shares: about one
#: per filter row).
COL2IM_MIN_ROWS = 8
#: Segments of each phase per block of :func:`_segments`: every phase writes its segments of
#: a block before the next block, so the column phases of a destination row fill its cache
#: lines while they are in cache.
SEGMENT_BLOCK = 16
def backprop_input(lay: PhaseLayout, e: np.ndarray, w: np.ndarray,
                   into: np.ndarray | None) -> tuple[np.ndarray, bool]:
    """Flat phase gradients ``(sr, sc, L, C)`` of one chunk (written into ``into`` when given;
    its contents do not matter): ``E`` ``(T, O)`` and the C-contiguous ``w``
    ``(KH, KW, C, O)``; and whether every phase row came out finite."""
    g = lay.g
    t, co = e.shape
    ci = w.shape[2]
    length = t + lay.max_offset
    d = into if into is not None else zeroed(
        (g.stride_rows, g.stride_cols, length, ci), e.dtype)
    whole = len(lay.grids) == g.stride_rows * g.stride_cols  # every phase written
    if into is not None and not whole:
        into[...] = 0
    dflat, eflat = d.reshape(-1), np.ascontiguousarray(e).reshape(-1)
    finite = True
    for grid in lay.grids:
        taps = [lay.taps[i] for i in grid.taps]
        finite &= tiles.shifted(dflat, tiles.phase(lay, grid.phase_row, grid.phase_col) * length * ci,
                           length, eflat, tiles.tap_panels(w, taps, True), co, ci,
                           [-tap.offset for tap in taps], [0] * len(taps), t, co, ci, whole)
    return d, finite


def covers_input(lay: PhaseLayout) -> bool:
    """True when the phases that taps write hold every input pixel, so
    :func:`backprop_input_into` with ``overwrite`` writes every element of its ``out``."""
    g = lay.g
    written = {(gr.phase_row, gr.phase_col) for gr in lay.grids}
    pixels = sum((rs.stop - rs.start) * (cs.stop - cs.start)
                 for pr, pc, (rs, cs), _ in lay.spans() if (pr, pc) in written)
    return pixels == g.in_rows * g.in_cols


def backprop_input_into(lay: PhaseLayout, e: np.ndarray, w: np.ndarray, out: np.ndarray,
                        flat: tuple[np.ndarray, tuple[int, int, int]],
                        overwrite: bool = False) -> bool:
    """The input gradient of one chunk added straight into the zeroed NHWC ``out`` (its
    :func:`tiles.flat_nhwc` view ``flat``) in the compute dtype, or written over whatever ``out``
    holds with ``overwrite`` (only when :func:`covers_input`): each phase's rows that hold
    input rows are segments of ``out`` with a column step of ``stride_cols`` pixels, so no
    phase buffer is zeroed, filled and merged, and the phase positions outside the input (the
    padding the layout adds) are never computed. True when every segment written came out
    finite."""
    g = lay.g
    t, co = e.shape
    base, (sn, sh, sw) = flat
    eflat = readonly(np.ascontiguousarray(e).reshape(-1))
    phases = _phase_segments(lay, w, out.shape[0], (sn, sh, sw))
    return _segments(base, eflat, phases, g.stride_cols * sw, t, co, w.shape[2], overwrite)


class _Segments(NamedTuple):
    """One stride phase's row segments of :func:`backprop_input_into`: its taps' filter
    panels and shifts, and per segment where it starts in ``E`` and in the result and which
    result row (``n * in_rows + row``) it is part of (increasing)."""

    panels: np.ndarray
    c_bases: np.ndarray
    q_starts: np.ndarray
    length: int
    shifts: np.ndarray
    rows: np.ndarray


def _phase_segments(lay: PhaseLayout, w: np.ndarray, nb: int,
                    strides: tuple[int, int, int]) -> list[_Segments]:
    """The segments of every phase a tap writes, for ``nb`` images of a result with the
    element ``strides`` ``(image, row, pixel)``."""
    g = lay.g
    sn, sh, sw = strides
    phases = []
    for pr, pc, (rs, cs), (ri, cols) in lay.spans():
        grid = next((gr for gr in lay.grids if (gr.phase_row, gr.phase_col) == (pr, pc)), None)
        if grid is None:
            continue  # no tap writes this phase: its pixels stay 0
        taps = [lay.taps[i] for i in grid.taps]
        shifts = np.array([-tap.offset for tap in taps], np.int64)
        rows = np.arange(rs.start, rs.stop)
        n_idx = np.repeat(np.arange(nb), len(rows))
        i_idx = np.tile(rows, nb)
        q_starts = ((n_idx * lay.hq + i_idx) * lay.wq + cs.start).astype(np.int64)
        out_rows = ri.start + (i_idx - rs.start) * g.stride_rows
        c_bases = (n_idx * sn + out_rows * sh + cols.start * sw).astype(np.int64)
        phases.append(_Segments(tiles.tap_panels(w, taps, True), c_bases, q_starts,
                                cs.stop - cs.start, shifts, n_idx * g.in_rows + out_rows))
    return phases


def backprop_input_planes(lay: PhaseLayout, e: np.ndarray, w: np.ndarray, planes: np.ndarray,
                          overwrite: bool = False) -> bool:
    """The input gradient of one chunk written into the C-contiguous NCHW ``planes``
    ``(N, C, H, W)`` in the compute dtype: the segments of :func:`backprop_input_into` per
    block of result rows (:func:`planes_block_rows`) computed into a core's NHWC scratch, which
    stays in its L2, and transposed from there into place, so the result is written once and
    never read back. ``overwrite`` as there; each core owns a range of rows. True when every
    segment written came out finite."""
    g = lay.g
    t, co = e.shape
    ci = w.shape[2]
    hh, row = g.in_rows, g.in_cols * ci
    eflat = readonly(np.ascontiguousarray(e).reshape(-1))
    phases = _phase_segments(lay, w, planes.shape[0], (hh * row, row, ci))
    if not phases:
        planes[...] = 0
        return True
    block = min(planes_block_rows(row * e.dtype.itemsize),
                max(1, tiles.CALL_POSITIONS // g.in_cols))
    jit, nr, dst = tiles.jit_loops(), tiles.tile_columns(e.dtype.itemsize), planes.reshape(-1)

    def offsets(parts: list[np.ndarray]) -> np.ndarray:
        return np.cumsum([0] + [len(x) for x in parts]).astype(np.int64)

    flat = [np.concatenate([getattr(p, f).reshape(-1) for p in phases])
            for f in ("panels", "shifts", "c_bases", "q_starts", "rows")]
    p_off, t_off, s_off = (offsets([getattr(p, f).reshape(-1) for p in phases])
                           for f in ("panels", "shifts", "rows"))
    lengths = np.array([p.length for p in phases], np.int64)

    def part(lo: int, hi: int) -> bool:
        scratch = np.empty(min(block, hi - lo) * row, e.dtype)
        ok = True
        for r0 in range(lo, hi, block):  # a block per call (calls of more: no faster)
            tiles.checkpoint()
            ok &= jit.planes_blocks(scratch, dst, eflat, flat[0], p_off, flat[1], t_off,
                                    flat[2], flat[3], flat[4], s_off, lengths, r0,
                                    min(hi, r0 + block), block, hh, g.in_cols,
                                    g.stride_cols * ci, t, co, co, ci, nr, overwrite)
        return ok

    return all(map_ranges(part, planes.shape[0] * hh,
                          max(1, tiles.ROW_BLOCK * 16 // max(1, g.in_cols))))


def planes_block_rows(row_bytes: int) -> int:
    """Result rows per block of :func:`backprop_input_planes`: as many as fill half this CPU's
    L2 (:mod:`engine.kernels.cpu`), at least one."""
    from engine.kernels import cpu

    return max(1, cpu.host().l2 // 2 // max(1, row_bytes))


def _segments(c: np.ndarray, a: np.ndarray, phases: list[_Segments], ldc: int, a_rows: int,
              k: int, n: int, overwrite: bool) -> bool:
    """:func:`~engine.kernels._compiled.conv_tiles_jit.segment_products` over every segment of every
    phase in one pass over the cores (each core takes the same share of each phase's segments; each
    segment has one owner), in blocks of :data:`SEGMENT_BLOCK` segments that every phase writes
    before the next block, a cancel checkpoint before each call."""
    if not phases:
        return True
    jit = tiles.jit_loops()
    nr = tiles.tile_columns(a.dtype.itemsize)
    most = max(len(p.q_starts) for p in phases)
    zeros = [np.zeros(len(p.shifts), np.int64) for p in phases]

    def part(lo: int, hi: int) -> bool:
        ok = True
        for b0 in range(lo, hi, SEGMENT_BLOCK):
            b1 = min(hi, b0 + SEGMENT_BLOCK)
            for p, a_bases in zip(phases, zeros, strict=True):
                count = len(p.q_starts)
                per_call = max(1, tiles.CALL_POSITIONS // max(1, p.length))
                for s0 in range(b0 * count // most, b1 * count // most, per_call):
                    tiles.checkpoint()
                    ok &= jit.segment_products(c, a, p.panels, p.c_bases, p.q_starts, p.length,
                                               ldc, s0, min(b1 * count // most, s0 + per_call),
                                               p.shifts, a_bases, a_rows, k, k, n, nr,
                                               overwrite)
        return ok

    return all(map_ranges(part, most, max(1, tiles.ROW_BLOCK * 16 // max(1, phases[0].length))))


def backprop_input_col2im(g: ConvGeometry, dy: np.ndarray, w: np.ndarray, out: np.ndarray,
                          flat: tuple[np.ndarray, tuple[int, int, int]]) -> None:
    """The input gradient of few channels (one group) written into NHWC ``out`` (its
    :func:`tiles.flat_nhwc` view ``flat``) in the compute dtype, from C-contiguous NHWC ``dy`` and
    ``w`` ``(KH, KW, C, O)``: per output-gradient row one register-tile product with the
    filter as an ``(O, KH*KW*C)`` matrix (columns padded to whole vectors, so no column runs
    alone), its columns added where their taps land
    (:func:`~engine.kernels._compiled.conv_tiles_jit.col2im_rows`). Input rows are split over cores,
    one owner each that zeroes and sums them (a core recomputes the few output-gradient rows it
    shares with its neighbour), so every element sums in the same order whatever the split; a cancel
    checkpoint before each call."""
    kh, kw, ci, co = w.shape
    ctype = dy.dtype
    j = kh * kw * ci
    step = tiles.lanes(ctype.itemsize)
    wm = np.zeros((co, -(-j // step) * step), ctype)
    wm[:, :j] = w.reshape(j, co).T
    wm, dyr = readonly(wm), readonly(dy)
    base, (sn, sh, sw) = flat
    rows, pt, sr, dr = g.in_rows, g.pad_top, g.stride_rows, g.dilation_rows
    per_call = max(1, tiles.CALL_POSITIONS // max(1, g.out_cols))
    jit = tiles.jit_loops()

    def part(lo: int, hi: int) -> None:
        cols = np.empty((g.out_cols, wm.shape[1]), ctype)
        for n in range(lo // rows, (hi - 1) // rows + 1):
            h0, h1 = max(lo - n * rows, 0), min(hi - n * rows, rows)
            out[n, h0:h1] = 0
            # output-gradient rows with a tap in [h0, h1): r*sr + i*dr - pt in it, i < kh
            r_lo = max(0, -((pt + h0 - (kh - 1) * dr) // -sr))
            r_hi = min(g.out_rows, (h1 - 1 + pt) // sr + 1)
            for r0 in range(r_lo, r_hi, per_call):
                tiles.checkpoint()
                jit.col2im_rows(base, sn, sh, sw, g.in_cols, dyr, wm, cols, n, r0,
                                min(r_hi, r0 + per_call), h0, h1, pt, g.pad_left, sr,
                                g.stride_cols, dr, g.dilation_cols, kh, kw, ci)

    map_ranges(part, out.shape[0] * rows, max(1, COL2IM_MIN_ROWS * kh * dr))
