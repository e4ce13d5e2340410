"""GradCheck's loss ``L = <op(input, filter), out_backprop>`` evaluated on the part one
element changes: for a filter element the one output channel it feeds; for an input element the
window of output positions that read it. Any number of spatial dimensions (2 and 3)."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine import kernels
from engine.shapes.conv import FORMATS, ConvGeometryNd


class LocalLoss:
    """Evaluates the part of L that one element of the input or filter changes, over any
    number of spatial dimensions (channels-last float64 arrays; windows of the zero-padded
    input convolved VALID with the op's strides and dilations)."""

    def __init__(self, g: ConvGeometryNd, x: np.ndarray, w: np.ndarray, dy: np.ndarray):
        self.g, self.x, self.w, self.dy = g, x, w, dy
        self.kernel = (kernels.depthwise_conv2d_native if g.depthwise else
                       kernels.conv2d if g.rank == 2 else kernels.conv3d)
        self.kw: dict[str, Any] = {
            "strides": [1, *g.strides, 1], "padding": "VALID",
            "data_format": FORMATS[g.rank][0], "dilations": [1, *g.dilations, 1]}
        self.span = tuple((k - 1) * d + 1 for k, d in zip(g.filter_spatial, g.dilations))
        self._windows: dict[int, np.ndarray] = {}

    def window(self, batch: slice, lo: tuple[int, ...], hi: tuple[int, ...],
               chans: slice) -> np.ndarray:
        """A float64 copy of the zero-padded input over padded positions ``[lo, hi)`` (one
        pair per spatial dimension)."""
        g, x = self.g, self.x
        n = len(range(*batch.indices(x.shape[0])))
        out = np.zeros((n, *(b - a for a, b in zip(lo, hi)), chans.stop - chans.start))
        src, dst = [], []
        for a, b, size, (before, _) in zip(lo, hi, g.in_spatial, g.pads):
            first, last = max(a - before, 0), min(b - before, size)
            if first >= last:
                return out
            src.append(slice(first, last))
            dst.append(slice(first + before - a, last + before - a))
        out[(slice(None), *dst, slice(None))] = x[(batch, *src, chans)]
        return out

    def _value(self, xw: np.ndarray, ww: np.ndarray, dyw: np.ndarray) -> float:
        return float(np.sum(self.kernel(xw, ww, **self.kw) * dyw))

    def _difference(self, arr: np.ndarray, index: tuple, eps: float, xw: np.ndarray,
                    ww: np.ndarray, dyw: np.ndarray) -> float:
        """The central difference of L in ``arr[index]`` (``arr`` is ``xw`` or ``ww``)."""
        orig = arr[index]
        up, down = orig + eps, orig - eps
        arr[index] = up
        plus = self._value(xw, ww, dyw)
        arr[index] = down
        minus = self._value(xw, ww, dyw)
        arr[index] = orig
        return (plus - minus) / (up - down)

    def _group(self, channel: int, filter_channel: bool) -> tuple[slice, slice, int]:
        """Input channels, output channels and the channel's offset in its input slice, for
        input channel ``channel`` (or the filter's output channel when ``filter_channel``)."""
        g = self.g
        if g.depthwise:
            return slice(channel, channel + 1), slice(channel * g.filter_out,
                                                      (channel + 1) * g.filter_out), 0
        per_group = g.filter_out // g.groups
        grp = channel // per_group if filter_channel else channel // g.filter_in_depth
        q = g.filter_in_depth
        return slice(grp * q, (grp + 1) * q), slice(grp * per_group, (grp + 1) * per_group), \
            channel - grp * q

    def filter_element(self, taps: tuple[int, ...], q: int, o: int, eps: float) -> float:
        """dL/dw[taps, q, o]: L restricted to the output channel the element feeds."""
        g = self.g
        if g.depthwise:
            chans, out = slice(q, q + 1), q * g.filter_out + o
            ww, qq = self.w[..., q:q + 1, o:o + 1].copy(), 0
        else:
            chans, _, _ = self._group(o, filter_channel=True)
            out, ww, qq = o, self.w[..., :, o:o + 1].copy(), q
        xw = self._windows.get(chans.start)
        if xw is None:
            hi = tuple((n - 1) * s + span for n, s, span in zip(g.out_spatial, g.strides,
                                                                 self.span))
            xw = self._windows.setdefault(
                chans.start, self.window(slice(None), (0,) * g.rank, hi, chans))
        dyw = self.dy[..., out:out + 1]
        return self._difference(ww, (*taps, qq, 0), eps, xw, ww, dyw)

    def input_element(self, n: int, pos: tuple[int, ...], c: int, eps: float) -> float:
        """dL/dx[n, pos, c] (channels last): L restricted to the output window that reads
        it."""
        g = self.g
        padded = tuple(p + before for p, (before, _) in zip(pos, g.pads))
        lo = tuple(max(0, -(-(p - span + 1) // s))
                   for p, span, s in zip(padded, self.span, g.strides))
        hi = tuple(min(o - 1, p // s) for p, o, s in zip(padded, g.out_spatial, g.strides))
        if any(a > b for a, b in zip(lo, hi)):
            return 0.0  # no output reads the element: L does not depend on it
        chans, outs, local = self._group(c, filter_channel=False)
        start = tuple(a * s for a, s in zip(lo, g.strides))
        stop = tuple(b * s + span for b, s, span in zip(hi, g.strides, self.span))
        xw = self.window(slice(n, n + 1), start, stop, chans)
        ww = self.w[..., chans, :] if g.depthwise else self.w[..., outs]
        dyw = self.dy[(slice(n, n + 1), *(slice(a, b + 1) for a, b in zip(lo, hi)), outs)]
        index = (0, *(p - a for p, a in zip(padded, start)), local)
        return self._difference(xw, index, eps, xw, ww, dyw)
