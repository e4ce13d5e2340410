"""Short human-readable text for shapes, dtypes, tensor types and timings."""

from __future__ import annotations

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
