"""A 3-D conv's pads as TensorFlow's SAME or VALID: tf.raw_ops.Conv3D (and its gradients) take
those two only, no EXPLICIT padding.

Pads ``(before, after)`` on an axis of ``n`` rows compute what SAME computes when the conv gives
the same output rows and each output row reads the same input rows: output row ``o`` reads rows
``o * stride + i * dilation - before`` (zeros outside the input), so ``before`` must be SAME's
before-pad for ``n`` (TensorFlow's rule: the odd pad after) and the output count SAME's,
``ceil(n / stride)``; the after-pad only decides how many rows the output has. VALID likewise,
with before-pad 0 and ``floor((n - reach) / stride) + 1`` output rows. A transposed conv is the
input gradient of the conv on its output Y: its pads are that conv's, on Y's size, and the
output count is the transposed conv's input X (output rows past the kernel's reach are zeros
either way). One padding must do for every axis; when none does, the canvas pads the input
itself (:attr:`engine.io.models.model_import.TfConv.input_pads`).
"""

from __future__ import annotations

from collections.abc import Sequence

#: The spatial axes' names by rank, as messages show them.
AXES = {1: ("cols",), 2: ("rows", "cols"), 3: ("planes", "rows", "cols")}


def same_pads(size: int, k: int, s: int, d: int) -> tuple[int, int]:
    """TensorFlow SAME: (before, after) with the odd one after."""
    out = -(-size // s)  # ceil(size / s) exactly, for any size
    total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
    return total // 2, total - total // 2


def conv_count(size: int, k: int, s: int, d: int, before: int, after: int) -> int:
    """The output rows of a conv over ``size`` rows padded by ``before`` and ``after``."""
    return (size + before + after - (k - 1) * d - 1) // s + 1


def _fits(padding: str, size: int, k: int, s: int, d: int, before: int, count: int) -> bool:
    reach = (k - 1) * d + 1
    if padding == "SAME":
        return before == same_pads(size, k, s, d)[0] and -(-size // s) == count
    return before == 0 and size >= reach and (size - reach) // s + 1 == count


def equivalent_padding(sizes: Sequence[int], counts: Sequence[int], kernel: Sequence[int],
                       strides: Sequence[int], dilations: Sequence[int],
                       pads: Sequence[int]) -> str | None:
    """VALID or SAME when it computes what ``pads`` (before, after per axis) do on an input of
    ``sizes`` giving ``counts`` output rows per axis (VALID first, when both do); else None."""
    for padding in ("VALID", "SAME"):
        if all(_fits(padding, n, k, s, d, pads[2 * i], m) for i, (n, m, k, s, d) in enumerate(
                zip(sizes, counts, kernel, strides, dilations, strict=True))):
            return padding
    return None


def pads_text(pads: Sequence[int]) -> str:
    """Pads (before, after per axis) as ``1,1 0,1 2,2``."""
    return " ".join(f"{pads[i]},{pads[i + 1]}" for i in range(0, len(pads), 2))
