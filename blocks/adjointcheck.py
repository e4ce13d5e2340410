"""The AdjointCheck block: the dot-product test of a conv op and its two backprop ops.

For ``y = op(x, w)``: ``<y, dy> = <x, backprop_input(shape(x), w, dy)> = <w,
backprop_filter(x, shape(w), dy)>`` exactly in real arithmetic. The three ops run in the inputs'
dtype (as a user runs them), the inner products in float64.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from blocks.check_support import (
    CHECK_CONV_ATTRS,
    OP_KERNELS,
    SCALAR,
    VERDICT,
    adjoint_errors,
    conv_kwargs,
    forward_geometry,
    op_rank,
    tolerance,
)
from blocks.conv import shared_dtype
from blocks.spec import BlockSpec, PortSpec, TensorSpec
from engine import kernels
from engine.base.dtypes import CHECK_TOLERANCE, to_dtype, tolerance_text
from engine.base.literal import literal
from engine.kernels.memory import SLACK, conv_workspace

PORTS = ("input", "filter", "out_backprop")


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """``<a, b>`` in float64."""
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def adjoint_check(input: np.ndarray, filter: np.ndarray, out_backprop: np.ndarray, op: str,
                  strides, padding: str, data_format: str, dilations,
                  explicit_paddings=()) -> dict[str, np.ndarray]:
    """``forward`` = <op(x, w), dy>, ``via_input`` = <x, dx>, ``via_filter`` = <w, dw>,
    ``max_rel_error`` (largest pairwise difference over the largest magnitude) and ``ok``
    (within the inputs' dtype's check tolerance). The kernels are looked up in
    :mod:`engine.kernels` at call time; ``explicit_paddings`` is for the 2-D ops only."""
    fwd, bfilter, binput = (getattr(kernels, name) for name in OP_KERNELS[op])
    kw = {"strides": strides, "padding": padding, "data_format": data_format,
          "dilations": dilations}
    if op_rank(op) == 2:
        kw["explicit_paddings"] = explicit_paddings
    x, w, dy = (np.asarray(a) for a in (input, filter, out_backprop))
    forward = _dot(fwd(x, w, **kw), dy)
    via_input = _dot(x, binput(np.array(x.shape), w, dy, **kw))
    via_filter = _dot(w, bfilter(x, np.array(w.shape), dy, **kw))
    return adjoint_errors(forward, via_input, via_filter, tolerance(x.dtype))


def _names() -> set[str]:
    return {a.name for a in CHECK_CONV_ATTRS} | set(PORTS)


def _infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    forward_geometry(attrs, inputs, _names())
    shared_dtype(("input", inputs["input"]), ("filter", inputs["filter"]))
    shared_dtype(("input", inputs["input"]), ("out_backprop", inputs["out_backprop"]))
    return {"forward": SCALAR, "via_input": SCALAR, "via_filter": SCALAR,
            "max_rel_error": SCALAR, "ok": VERDICT}


def _workspace(attrs: dict, inputs: dict[str, TensorSpec],
               outputs: dict[str, TensorSpec]) -> int:
    """The largest of the three kernels' workspaces, their three results in the inputs'
    dtype, and two float64 operands of the largest inner product."""
    g = forward_geometry(attrs, inputs, _names())
    dtype = inputs["input"].dtype
    finite = all(inputs[p].finite for p in PORTS)
    x, w, y = (math.prod(inputs[p].shape) for p in PORTS)
    item = to_dtype(dtype).itemsize
    kernel = max(conv_workspace(g, kind, dtype, finite) for kind in ("forward", "filter",
                                                                      "input"))
    return SLACK + kernel + item * (x + w + y) + 8 * 3 * max(x, w, y)


def _emit(attrs: dict, inputs: dict[str, str], outputs: dict[str, str]) -> list[str]:
    args = [f"{p}={inputs[p]}" for p in PORTS] + [f"op={literal(attrs['op'])}"]
    args += [f"{k}={literal(v)}" for k, v in conv_kwargs(attrs).items()]
    return [f"_checked = adjoint_check({', '.join(args)})",
            *(f"{var} = _checked[{literal(port)}]" for port, var in outputs.items())]


def _run(attrs: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    ports: dict[str, Any] = {p: inputs[p] for p in PORTS}
    return adjoint_check(**ports, op=attrs["op"], **conv_kwargs(attrs))


ADJOINT_CHECK = BlockSpec(
    type_id="AdjointCheck", title="AdjointCheck", category="Checks", op="",
    doc="The dot-product test: <op(x, w), dy>, <x, backprop_input(shape(x), w, dy)> and "
        "<w, backprop_filter(x, shape(w), dy)> agree for a correct op and its gradients. The "
        "ops run in the inputs' dtype, the inner products in float64; ok = the largest "
        "pairwise difference over the largest magnitude is within the dtype's tolerance "
        f"({tolerance_text(CHECK_TOLERANCE)}).",
    inputs=(PortSpec("input", "4-D input x, in data_format.", kind="float"),
            PortSpec("filter", "4-D filter w.", kind="float"),
            PortSpec("out_backprop", "dy, shaped like the op's output.", kind="float")),
    outputs=(PortSpec("forward", "<op(x, w), dy> (float64).", kind="float"),
             PortSpec("via_input", "<x, backprop_input(shape(x), w, dy)> (float64).", kind="float"),
             PortSpec("via_filter", "<w, backprop_filter(x, shape(w), dy)> (float64).",
                      kind="float"),
             PortSpec("max_rel_error", "Largest pairwise difference of the three over the "
                                       "largest magnitude.", kind="float"),
             PortSpec("ok", "True when the three agree within the dtype's tolerance.",
                      kind="bool")),
    attrs=CHECK_CONV_ATTRS,
    infer=_infer,
    run=_run,
    emit=_emit,
    imports=("from blocks.adjointcheck import adjoint_check",),
    workspace=_workspace,
    verdict="ok",
)

SPECS = (ADJOINT_CHECK,)
