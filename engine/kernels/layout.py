"""The padded, stride-phase-split, flattened layout the conv kernels compute in.

Output position ``r`` of a stride-``s`` conv reads padded input row ``r*s + t*d`` for tap ``t``.
Writing ``t*d = q*s + p`` with phase ``p = t*d % s`` gives ``r*s + t*d = (r + q)*s + p``: tap
``t`` reads row ``r + q`` of the phase image ``P_p[i] = in_pad[i*s + p]``. Every tap is thus a
stride-1 shift by ``q`` of one of ``s`` phase images (``s*s`` in 2-D).

Each phase image is stored ``(N, Hq, Wq, C)`` with ``Hq = out_rows + max q`` and
``Wq = out_cols + max q``, and flattened to ``(N*Hq*Wq, C)``. Output position
``p = (n*Hq + r)*Wq + c`` then reads row ``p + q_r*Wq + q_c`` of its phase: one shift of a
contiguous matrix per tap, with no copy. Output rows with ``r >= out_rows`` or ``c >= out_cols``
are padding ("garbage" positions); the gradient w.r.t. them is embedded as zero, so they add
nothing. The last valid position is ``N*Hq*Wq - 1 - max_offset``, so every tap uses the first
``T = N*Hq*Wq - max_offset`` positions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.kernels.parallel import copy_ranges
from engine.shapes.conv import ConvGeometry

#: Largest pixel (channels x itemsize bytes) :func:`copy_pixels` moves as one item.
PIXEL_ITEM_BYTES = 64


def copy_pixels(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for NHWC-like arrays, moving each pixel's channels as one item when
    both have the same dtype, adjacent channels and few of them: NumPy's strided copy then loops
    over pixels instead of over channel values."""
    width = src.shape[-1] * src.itemsize if src.ndim else 0
    if (dst.dtype != src.dtype or not 0 < width <= PIXEL_ITEM_BYTES or src.shape != dst.shape
            or src.strides[-1] != src.itemsize or dst.strides[-1] != dst.itemsize
            or src.shape[-1] == 1):
        dst[...] = src
        return
    item = np.dtype((np.void, width))
    dst.view(item)[..., 0] = src.view(item)[..., 0]


@dataclass(frozen=True)
class Tap:
    """One filter tap: its indices, stride phase and flat offset inside that phase."""

    row: int
    col: int
    phase_row: int
    phase_col: int
    offset: int


@dataclass(frozen=True)
class PhaseGrid:
    """The taps of one stride phase: a ``rows x cols`` grid with flat offsets
    ``offset + a*row_step + b*col_step``, listing tap indices (into ``PhaseLayout.taps``) in
    grid order.

    Tap row ``i`` is in phase ``pr`` when ``i*d = q*s + pr``; those ``i`` step by
    ``s / gcd(s, d)``, so their shifts ``q`` step by ``d / gcd(s, d)``: an arithmetic grid, which a
    single strided view of the phase image covers (one copy per phase for im2col).
    """

    phase_row: int
    phase_col: int
    offset: int
    row_step: int
    col_step: int
    rows: int
    cols: int
    taps: tuple[int, ...]


def _zero_outside(images: np.ndarray, rs: slice, cs: slice, planar: bool = False) -> None:
    """Zero the positions of ``images`` outside rows ``rs`` and columns ``cs`` (``images``:
    ``(N, H, W, C)``, or ``(C, N, H, W)`` when ``planar``), the only ones a copy into
    ``images[..., rs, cs, ...]`` leaves unwritten."""
    lead = (slice(None),) * (2 if planar else 1)  # the axes before the rows
    images[(*lead, slice(None, rs.start))] = 0
    images[(*lead, slice(rs.stop, None))] = 0
    images[(*lead, rs, slice(None, cs.start))] = 0
    images[(*lead, rs, slice(cs.stop, None))] = 0


@dataclass(frozen=True)
class PhaseLayout:
    """Sizes of the phase-split layout for one geometry (see the module docstring)."""

    g: ConvGeometry
    hq: int
    wq: int
    taps: tuple[Tap, ...]
    max_offset: int
    grids: tuple[PhaseGrid, ...]

    @classmethod
    def of(cls, g: ConvGeometry) -> PhaseLayout:
        """The layout of ``g`` (both immutable: one per geometry, remembered for the last
        :data:`LAYOUTS_KEPT` geometries, since every conv call asks and building it costs
        about 50 us)."""
        return _layout_of(g)

    @property
    def grid_order(self) -> tuple[int, ...]:
        """Tap indices in the order of :attr:`grids` (phase by phase, grid order)."""
        return tuple(k for grid in self.grids for k in grid.taps)

    @property
    def identity(self) -> bool:
        """True when the phase image is the input itself (stride 1, no padding before, and
        exactly the rows and columns the windows read)."""
        g = self.g
        return (g.stride_rows == g.stride_cols == 1 and self.hq == g.in_rows
                and self.wq == g.in_cols and g.pad_top == 0 and g.pad_left == 0)

    def _span(self, phase: int, stride: int, pad: int, size: int, count: int) -> tuple[int, int, int]:
        """Phase rows ``[lo, hi)`` that hold input rows, and the first input row ``r0``.

        Phase row ``i`` is input row ``i*stride + phase - pad``; it exists when that is in
        ``[0, size)`` and ``i < count``.
        """
        lo = max(0, -((phase - pad) // stride))  # ceil((pad - phase) / stride)
        hi = min(count, (size - 1 - phase + pad) // stride + 1) if size > 0 else 0
        return lo, max(lo, hi), lo * stride + phase - pad

    def spans(self):
        """Yield ``(pr, pc, phase_slice, input_slice)`` pairing phase-image and input regions."""
        g = self.g
        for pr in range(g.stride_rows):
            rlo, rhi, r0 = self._span(pr, g.stride_rows, g.pad_top, g.in_rows, self.hq)
            for pc in range(g.stride_cols):
                clo, chi, c0 = self._span(pc, g.stride_cols, g.pad_left, g.in_cols, self.wq)
                if rhi <= rlo or chi <= clo:
                    continue
                phase_sl = (slice(rlo, rhi), slice(clo, chi))
                in_sl = (
                    slice(r0, r0 + (rhi - rlo - 1) * g.stride_rows + 1, g.stride_rows),
                    slice(c0, c0 + (chi - clo - 1) * g.stride_cols + 1, g.stride_cols),
                )
                yield pr, pc, phase_sl, in_sl

    def split_input(self, x: np.ndarray, dtype: np.dtype, planar: bool = False) -> np.ndarray:
        """Phase images of NHWC ``x`` (zero padding) in ``dtype``.

        Shape ``(sr, sc, N, Hq, Wq, C)``, or ``(sr, sc, C, N, Hq, Wq)`` when ``planar`` (one
        contiguous plane per channel, for few channels).
        """
        g = self.g
        n, c = x.shape[0], x.shape[3]
        if self.identity and not planar and x.dtype == dtype and x.flags.c_contiguous:
            return x.reshape(1, 1, *x.shape)
        inner = (c, n, self.hq, self.wq) if planar else (n, self.hq, self.wq, c)
        out = np.empty((g.stride_rows, g.stride_cols, *inner), dtype)
        spans = {(pr, pc): (rs, cs, ri, ci) for pr, pc, (rs, cs), (ri, ci) in self.spans()}

        def part(lo: int, hi: int) -> None:  # images [lo, hi): copies split over cores
            for pr in range(g.stride_rows):
                for pc in range(g.stride_cols):
                    phase = out[pr, pc, :, lo:hi] if planar else out[pr, pc, lo:hi]
                    if (pr, pc) not in spans:
                        phase[...] = 0
                        continue
                    rs, cs, ri, ci = spans[pr, pc]
                    _zero_outside(phase, rs, cs, planar)  # only what no pixel lands on
                    if planar:
                        phase[:, :, rs, cs] = x[lo:hi, ri, ci].transpose(3, 0, 1, 2)
                    else:
                        copy_pixels(phase[:, rs, cs], x[lo:hi, ri, ci])

        copy_ranges(part, n, x[:1].nbytes)
        return out

    def merge_input(self, phases: np.ndarray, out: np.ndarray, planar: bool = False) -> None:
        """Write phase images back into NHWC ``out`` (rows no tap reads are left untouched;
        copies split over cores by image)."""
        spans = list(self.spans())

        def part(lo: int, hi: int) -> None:
            for pr, pc, (rs, cs), (ri, ci) in spans:
                if planar:
                    out[lo:hi, ri, ci] = phases[pr, pc, :, lo:hi, rs, cs].transpose(1, 2, 3, 0)
                else:
                    copy_pixels(out[lo:hi, ri, ci], phases[pr, pc, lo:hi, rs, cs])

        copy_ranges(part, out.shape[0], out[:1].nbytes)

    def embed_output(self, y: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """NHWC ``y`` of the output's size, zero-padded to ``(N, Hq, Wq, C)`` in ``dtype``."""
        if y.shape[1:3] == (self.hq, self.wq) and y.dtype == dtype and y.flags.c_contiguous:
            return y
        return self.embed_output_flat(y, dtype, 0).reshape(-1, self.hq, self.wq, y.shape[3])

    def embed_output_flat(self, y: np.ndarray, dtype: np.dtype, head: int,
                          fill: Callable[[np.ndarray, int, int], None] | None = None
                          ) -> np.ndarray:
        """:meth:`embed_output` flattened to ``(N * Hq * Wq, C)`` after ``head`` zero rows;
        ``fill(out, lo, hi)``, when given, writes ``y``'s images ``[lo, hi)`` into
        ``out[lo:hi, :H, :W]`` (``out`` the ``(N, Hq, Wq, C)`` view) instead of a pixel copy
        (the compiled transposing copy of an NCHW ``y``)."""
        n, h, w = y.shape[:3]
        flat = np.empty((head + n * self.hq * self.wq, y.shape[3]), dtype)
        flat[:head] = 0
        out = flat[head:].reshape(n, self.hq, self.wq, y.shape[3])
        _zero_outside(out, slice(0, h), slice(0, w))

        def part(lo: int, hi: int) -> None:
            if fill is not None:
                fill(out, lo, hi)
            else:
                copy_pixels(out[lo:hi, :h, :w], y[lo:hi])

        copy_ranges(part, n, y[:1].nbytes)
        return flat


#: Geometries whose :class:`PhaseLayout` is remembered.
LAYOUTS_KEPT = 64


@functools.lru_cache(maxsize=LAYOUTS_KEPT)
def _layout_of(g: ConvGeometry) -> PhaseLayout:
    qr_max = (g.filter_rows - 1) * g.dilation_rows // g.stride_rows
    qc_max = (g.filter_cols - 1) * g.dilation_cols // g.stride_cols
    hq, wq = g.out_rows + qr_max, g.out_cols + qc_max
    taps = []
    for i in range(g.filter_rows):
        qr, pr = divmod(i * g.dilation_rows, g.stride_rows)
        for j in range(g.filter_cols):
            qc, pc = divmod(j * g.dilation_cols, g.stride_cols)
            taps.append(Tap(i, j, pr, pc, qr * wq + qc))
    return PhaseLayout(g, hq, wq, tuple(taps), qr_max * wq + qc_max, _grids(taps, g.filter_cols))


def _grids(taps: list[Tap], filter_cols: int) -> tuple[PhaseGrid, ...]:
    """Group the taps by stride phase into arithmetic grids (see :class:`PhaseGrid`)."""
    grids = []
    for pr, pc in sorted({(t.phase_row, t.phase_col) for t in taps}):
        rows = sorted({t.row for t in taps if t.phase_row == pr})
        cols = sorted({t.col for t in taps if t.phase_col == pc})
        ks = tuple(i * filter_cols + j for i in rows for j in cols)
        first = taps[ks[0]]
        row_step = taps[ks[len(cols)]].offset - first.offset if len(rows) > 1 else 0
        col_step = taps[ks[1]].offset - first.offset if len(cols) > 1 else 0
        for a in range(len(rows)):  # the derivation above says this holds; keep it checked
            for b in range(len(cols)):
                assert taps[ks[a * len(cols) + b]].offset == first.offset + a * row_step + b * col_step
        grids.append(PhaseGrid(pr, pc, first.offset, row_step, col_step, len(rows), len(cols), ks))
    return tuple(grids)
