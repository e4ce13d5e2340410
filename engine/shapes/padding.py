"""Padding and output-size rules for one spatial dimension, as TensorFlow computes them.

These small pure functions are shared by the kernels and by shape inference, so the shape the
app predicts and the shape a kernel returns come from the same code.

Derivation (TensorFlow's ``GetWindowedOutputSizeVerbose``). A filter of ``k`` taps dilated by
``d`` covers ``eff = (k - 1) * d + 1`` input positions. Output position ``o`` reads the padded
input at rows ``o * s + t * d`` for taps ``t = 0 .. k-1``; the padded input has
``n + before + after`` rows, so the last window must start at or before
``n + before + after - eff``, which gives

    out = (n + before + after - eff + s) // s          (C division, truncating toward zero)

- VALID: ``before = after = 0``.
- EXPLICIT: ``before`` and ``after`` are given.
- SAME: ``out = ceil(n / s)`` and the padding is whatever makes the last window fit,
  ``total = max(0, (out - 1) * s + eff - n)``, split ``before = total // 2`` and
  ``after = total - before`` (the odd extra row goes after, like TensorFlow).

A negative ``out`` is an error; TensorFlow's C division means a numerator in ``(-s, 0)`` still
gives an output size of 0.
"""

from __future__ import annotations

from typing import NamedTuple

from engine.base.errors import InvalidArgumentError

PADDINGS = ("SAME", "VALID", "EXPLICIT")


class Window(NamedTuple):
    """The output size of one spatial dimension and the padding before and after it."""

    out: int
    pad_before: int
    pad_after: int


def effective_filter_size(filter_size: int, dilation: int) -> int:
    """Input positions covered by ``filter_size`` taps spaced ``dilation`` apart."""
    return (filter_size - 1) * dilation + 1


def _c_div(num: int, den: int) -> int:
    """Integer division truncating toward zero, as in C."""
    q = abs(num) // den
    return q if num >= 0 else -q


def windowed_output(
    input_size: int,
    filter_size: int,
    dilation: int,
    stride: int,
    padding: str,
    pad_before: int = 0,
    pad_after: int = 0,
) -> Window:
    """Output size and padding of one spatial dimension (see the module docstring)."""
    eff = effective_filter_size(filter_size, dilation)
    if padding == "SAME":
        out = (input_size + stride - 1) // stride
        total = max(0, (out - 1) * stride + eff - input_size)
        pad_before, pad_after = total // 2, total - total // 2
    elif padding == "VALID":
        pad_before = pad_after = 0
        out = _c_div(input_size - eff + stride, stride)
    elif padding == "EXPLICIT":
        out = _c_div(input_size + pad_before + pad_after - eff + stride, stride)
    else:
        raise InvalidArgumentError(
            f"padding {padding!r} is not one of {', '.join(PADDINGS)}", "padding")
    if out < 0:
        raise InvalidArgumentError(
            f"computed output size would be negative: {out} (input_size {input_size}, "
            f"effective_filter_size {eff}, stride {stride}, {padding})"
        )
    return Window(out, pad_before, pad_after)
