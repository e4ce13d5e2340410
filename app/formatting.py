"""Short human-readable text for shapes, dtypes, tensor types and timings."""

from __future__ import annotations

import re

DTYPE_SHORT = {
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "int32": "i32", "int64": "i64", "bool": "bool",
}


def shape_text(shape) -> str:
    """(1, 5, 5, 2) -> '1×5×5×2'; () -> 'scalar'."""
    shape = tuple(shape)
    return "×".join(str(d) for d in shape) if shape else "scalar"


def dtype_short(dtype) -> str:
    name = str(dtype)
    return DTYPE_SHORT.get(name, name)


def spec_label(spec) -> str:
    """Compact port label of a TensorSpec: '1×5×5×2 f32'."""
    return f"{shape_text(spec.shape)} {dtype_short(spec.dtype)}"


def spec_tooltip(port: str, spec) -> str:
    """Full description of a TensorSpec for a tooltip."""
    lines = [f"{port}: shape {tuple(spec.shape)}, dtype {spec.dtype}"]
    axes = getattr(spec, "axes", None)
    if axes:
        lines.append("axes " + ", ".join(axes))
    value = getattr(spec, "value", None)
    if value is not None and getattr(value, "size", 0) <= 16:
        lines.append("value " + str(value.tolist()))
    return "\n".join(lines)


def ms_text(seconds: float) -> str:
    ms = seconds * 1000.0
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.1f} ms"
    return f"{seconds:.2f} s"


ZWSP = "\u200b"


def breakable(text: str, run: int = 24) -> str:
    """``text`` with zero-width spaces inside every word longer than ``run`` characters (after
    path and identifier separators, and at least every ``run`` characters), so a word-wrapped
    label can break a long path or value instead of growing to its width. Shorter words, such
    as the numbers of a statistics line, are left exactly as they are."""
    def split(word: re.Match) -> str:
        out, since = [], 0
        for ch in word.group(0):
            out.append(ch)
            since += 1
            if ch in "/\\_.,:;=" or since >= run:
                out.append(ZWSP)
                since = 0
        return "".join(out)

    return re.sub(rf"\S{{{run + 1},}}", split, text)


def progress_format_literal(text: str) -> str:
    """``text`` for a QProgressBar format, shown as it is: Qt replaces ``%p``, ``%v`` and
    ``%m`` anywhere in a format and has no escape, so a word joiner (invisible) follows each
    ``%`` that would start one ("100%v" in a title stays "100%v")."""
    return re.sub(r"%(?=[pvm])", "%\u2060", text)
