"""Blocks that check and name results: Compare and Output.

Compare's rule is :func:`compare_float64` with the rtol of :func:`compare_rtol`; they use only
NumPy and :data:`engine.base.dtypes.RTOL` (:data:`COMPARE_CODE`), so
:mod:`engine.export.frameworks` copies their source into the scripts it writes: an exported
script compares with this code, not a restatement.
"""

from __future__ import annotations

import math

import numpy as np

from blocks.spec import AttrError, AttrSpec, BlockSpec, PortSpec, TensorSpec
from engine.base.dtypes import RTOL, dtype_name, rtol, tolerance_text
from engine.base.literal import literal


def compare_rtol(dtype_a: str, dtype_b: str) -> float:
    """The looser of the two dtypes' :func:`~engine.base.dtypes.rtol`."""
    return max(rtol(dtype_a), rtol(dtype_b))


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


def compare_float64(a64: np.ndarray, b64: np.ndarray, tol: float) -> dict:
    """Compare's outputs for float64 ``a64`` and ``b64``: ``a - b``, ``max|a - b|``,
    ``max|a - b| / max|b|`` and ``agree``: ``max|a - b| <= tol * max(max|a|, max|b|)`` with a
    finite ``max|a - b|`` (a NaN or an infinity in either disagrees)."""
    with np.errstate(invalid="ignore"):  # inf - inf is NaN: the output shows it
        diff = a64 - b64
    max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
    scale = max(float(np.max(np.abs(a64))) if a64.size else 0.0,
                float(np.max(np.abs(b64))) if b64.size else 0.0)
    max_b = float(np.max(np.abs(b64))) if b64.size else 0.0
    rel = max_abs / max_b if max_b > 0 else (0.0 if max_abs == 0 else float("inf"))
    agree = bool(np.isfinite(max_abs) and max_abs <= tol * scale)
    return {"output": diff, "max_abs_error": np.float64(max_abs),
            "max_rel_error": np.float64(rel), "agree": np.bool_(agree)}


def compare(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """The Compare block: :func:`compare_float64` of ``a`` and ``b`` in float64, with the
    looser dtype's rtol (:func:`compare_rtol`)."""
    a, b = np.asarray(a), np.asarray(b)
    return compare_float64(np.asarray(a, np.float64), np.asarray(b, np.float64),
                           compare_rtol(dtype_name(a.dtype), dtype_name(b.dtype)))


#: The comparison code exported scripts carry (their source, in this order): NumPy and
#: :data:`engine.base.dtypes.RTOL` only.
COMPARE_CODE = (rtol, compare_rtol, compare_float64)


def _compare_emit(attrs: dict, inputs: dict[str, str], outputs: dict[str, str]) -> list[str]:
    return [f"_compared = compare({inputs['a']}, {inputs['b']})",
            *(f"{var} = _compared[{literal(port)}]" for port, var in outputs.items())]


COMPARE = BlockSpec(
    type_id="Compare", title="Compare", category="Checks", op="",
    doc="Compares a and b (same shape): output = a - b in float64, the max absolute error, the "
        "max relative error (max|a - b| / max|b|), and agree = max|a - b| <= rtol * "
        f"max(max|a|, max|b|) with the looser dtype's rtol ({tolerance_text(RTOL)}).",
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
