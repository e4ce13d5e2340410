"""Blocks that check and name results: Compare and Output."""

from __future__ import annotations

import math

import numpy as np

from blocks.spec import AttrError, AttrSpec, BlockSpec, PortSpec, TensorSpec
from engine.base.dtypes import DTYPES, RTOL
from engine.base.literal import literal


def _tolerance(a: str, b: str) -> float:
    """The looser of the two dtypes' relative tolerances (int dtypes count as float64)."""
    return max(RTOL.get(a, RTOL["float64"]), RTOL.get(b, RTOL["float64"]))


def _compare_infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    a, b = inputs["a"], inputs["b"]
    if a.shape != b.shape:
        raise AttrError("b", f"b shape {list(b.shape)} does not match a shape {list(a.shape)}")
    scalar = TensorSpec((), "float64")
    return {"output": TensorSpec(a.shape, "float64", a.axes or b.axes), "max_abs_error": scalar,
            "max_rel_error": scalar, "agree": TensorSpec((), "bool")}


def _compare_workspace(attrs: dict, inputs: dict[str, TensorSpec],
                       outputs: dict[str, TensorSpec]) -> int:
    """float64 copies of a and b (unless they are float64) and one float64 |.| temporary."""
    n = math.prod(inputs["a"].shape)
    casts = sum(inputs[p].dtype != "float64" for p in ("a", "b"))
    return (casts + 1) * 8 * n


def compare(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """``a - b`` in float64, ``max|a - b|``, ``max|a - b| / max|b|`` and whether
    ``max|a - b| <= rtol * max(max|a|, max|b|)`` with the looser dtype's rtol (RTOL)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf is NaN: the output shows it
        diff = a64 - b64
    max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
    scale = max(float(np.max(np.abs(a64))) if a64.size else 0.0,
                float(np.max(np.abs(b64))) if b64.size else 0.0)
    max_b = float(np.max(np.abs(b64))) if b64.size else 0.0
    rel = max_abs / max_b if max_b > 0 else (0.0 if max_abs == 0 else float("inf"))
    rtol = _tolerance(_name(a), _name(b))
    agree = bool(np.isfinite(max_abs) and max_abs <= rtol * scale)
    return {"output": diff, "max_abs_error": np.float64(max_abs),
            "max_rel_error": np.float64(rel), "agree": np.bool_(agree)}


def _name(a: np.ndarray) -> str:
    for name, dt in DTYPES.items():
        if a.dtype == dt:
            return name
    return "float64"


def _compare_emit(attrs: dict, inputs: dict[str, str], outputs: dict[str, str]) -> list[str]:
    return [f"_compared = compare({inputs['a']}, {inputs['b']})",
            *(f"{var} = _compared[{literal(port)}]" for port, var in outputs.items())]


COMPARE = BlockSpec(
    type_id="Compare", title="Compare", category="Checks", op="",
    doc="Compares a and b (same shape): output = a - b in float64, the max absolute error, the "
        "max relative error (max|a - b| / max|b|), and agree = max|a - b| <= rtol * "
        "max(max|a|, max|b|) with the looser dtype's rtol (float64 1e-12, float32 2e-5, "
        "float16 4e-3, bfloat16 3e-2).",
    inputs=(PortSpec("a", "First tensor."), PortSpec("b", "Second tensor, same shape as a.")),
    outputs=(PortSpec("output", "a - b (float64).", kind="float"),
             PortSpec("max_abs_error", "max |a - b|.", kind="float"),
             PortSpec("max_rel_error", "max |a - b| / max |b|.", kind="float"),
             PortSpec("agree", "True when a and b agree within the dtype's tolerance.",
                      kind="bool")),
    attrs=(),
    infer=_compare_infer,
    run=lambda attrs, inputs: compare(inputs["a"], inputs["b"]),
    emit=_compare_emit,
    imports=("from blocks.checks import compare",),
    workspace=_compare_workspace,
    verdict="agree",
)

OUTPUT = BlockSpec(
    type_id="Output", title="Output", category="Checks", op="",
    doc="A named result: passes its input through. `gradblocks run --out` and an exported "
        "script store its value under its name (and, when a canvas has Output blocks, only "
        "theirs). Names are unique per canvas and become file names inside the .npz: "
        "non-empty, without / or \\, control characters or leading or trailing spaces.",
    inputs=(PortSpec("input", "The tensor to name."),),
    outputs=(PortSpec("output", "The same tensor."),),
    attrs=(AttrSpec("name", "text", "result",
                    doc="The result's name: the key of its value in --out files and in an "
                        "exported script's results; unique per canvas."),),
    infer=lambda attrs, inputs: {"output": inputs["input"]},
    run=lambda attrs, inputs: {"output": inputs["input"]},
    emit=lambda attrs, inputs, outputs: [f"{outputs['output']} = {inputs['input']}"],
    passthrough=True,
    result_name="name",
)

SPECS = (COMPARE, OUTPUT)
