"""Which ``input_sizes`` an out_backprop shape allows: for stride > 1 (or VALID padding with
a filter larger than a stride) several input sizes give the same output size, and
Conv2DBackpropInput returns a different gradient for each. Pure shape rules, no Qt.

Per spatial dimension (see :mod:`engine.shapes.padding`), with ``eff = (k - 1) * d + 1`` and ``P``
the explicit padding before plus after (0 for VALID):

- SAME: ``out = ceil(n / s)``, so ``n`` runs over ``(out - 1) * s + 1 .. out * s`` (only 0
  for ``out = 0``).
- VALID / EXPLICIT: ``out = (n + P - eff + s) // s`` (C division), so ``n`` runs over
  ``out * s - s + eff - P .. out * s - 1 + eff - P``; for ``out = 0`` the numerator lies
  in ``(-s, s)``. Sizes below 0 are dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from engine.shapes.conv import explicit_pads, spatial_axes, window_attr
from engine.shapes.padding import effective_filter_size


def sizes_for_output(out: int, filter_size: int, dilation: int, stride: int, padding: str,
                     pad_before: int = 0, pad_after: int = 0) -> range:
    """Every input size ``n >= 0`` of one spatial dimension whose output size is ``out``."""
    if out < 0:
        return range(0)
    if padding == "SAME":
        return range(1) if out == 0 else range((out - 1) * stride + 1, out * stride + 1)
    eff = effective_filter_size(filter_size, dilation)
    shift = eff - pad_before - pad_after  # n = numerator - s + shift
    if out == 0:
        lo, hi = -stride + 1, stride - 1  # numerators truncating to 0
    else:
        lo, hi = out * stride, out * stride + stride - 1
    return range(max(0, lo - stride + shift), max(0, hi - stride + shift + 1))


def spatial_choices(out_backprop_shape: Sequence[int], filter_shape: Sequence[int],
                    attrs: Mapping[str, Any]) -> tuple[range, range]:
    """(heights, widths) of the inputs whose forward output has out_backprop's spatial size,
    for a conv block's attributes (``strides``, ``padding``, ``explicit_paddings``,
    ``data_format``, ``dilations``; ``explicit_paddings`` only read for EXPLICIT)."""
    fmt = attrs.get("data_format", "NHWC")
    padding = attrs.get("padding", "SAME")
    explicit = attrs.get("explicit_paddings", ()) if padding == "EXPLICIT" else ()
    top, bottom, left, right = explicit_pads(padding, explicit, fmt)
    sr, sc = window_attr("strides", attrs.get("strides", (1, 1, 1, 1)), fmt)
    dr, dc = window_attr("dilations", attrs.get("dilations", (1, 1, 1, 1)), fmt)
    _, r, c, _ = spatial_axes(fmt)
    return (sizes_for_output(int(out_backprop_shape[r]), int(filter_shape[0]), dr, sr, padding,
                             top, bottom),
            sizes_for_output(int(out_backprop_shape[c]), int(filter_shape[1]), dc, sc, padding,
                             left, right))


def consistent_input_sizes(out_backprop_shape: Sequence[int], filter_shape: Sequence[int],
                           attrs: Mapping[str, Any]) -> list[list[int]]:
    """Every input size vector (in ``data_format`` order) whose forward output has
    out_backprop's spatial size: batch from out_backprop, depth the filter's in_channels (an
    ungrouped conv, or depthwise), heights times widths from :func:`spatial_choices`."""
    n, r, c, d = spatial_axes(attrs.get("data_format", "NHWC"))
    rows, cols = spatial_choices(out_backprop_shape, filter_shape, attrs)
    out = []
    for h, w in itertools.product(rows, cols):
        vec = [0, 0, 0, 0]
        vec[n], vec[r], vec[c], vec[d] = int(out_backprop_shape[n]), h, w, int(filter_shape[2])
        out.append(vec)
    return out


def choices_text(sizes: range) -> str:
    """``{7, 8}``; a long run as ``{7, 8, ..., 12}``; ``{}`` when empty."""
    if len(sizes) > 4:
        return f"{{{sizes[0]}, {sizes[1]}, ..., {sizes[-1]}}}"
    return "{" + ", ".join(map(str, sizes)) + "}"
