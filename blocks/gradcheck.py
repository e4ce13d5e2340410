"""The GradCheck block: a gradient checked against central finite differences in float64.

``L = <op(input, filter), out_backprop>``; for each sampled element ``a_i`` of the chosen
argument (``wrt``) the numeric derivative is ``(L(a + eps e_i) - L(a - eps e_i)) / step`` with
``step = (a_i + eps) - (a_i - eps)`` as float64 represents it (``2 eps`` up to rounding).
Everything is cast to float64 first and evaluated with the engine's kernels in float64. L is
linear in each argument, so the central difference has no truncation error at all (the usual
O(eps^2) term is zero): the numbers are exact up to float64 rounding, whatever ``epsilon``.

Each sample costs two forward convolutions, but only of the part of L its element changes (a
true finite difference, not the analytic gradient): for ``wrt=filter`` the one output channel
the filter element feeds (1/out_channels of a full conv, the whole batch and image); for
``wrt=input`` the window of output positions of one image that read the element (about
``ceil(kernel * dilation / stride)^2`` positions, one channel group). ``samples=0`` checks every
element: cheap for inputs, but for filters ``2 * filter size`` single-channel convolutions of the
whole batch.

A long check says how far it is (:func:`engine.base.cancel.progress`, one unit a checked element)
and stops at the run's cancel (a checkpoint before each element). ``check`` warns before running
when :func:`estimated_seconds` passes :data:`SLOW_CHECK_SECONDS` (:func:`cost_warning`);
``gradblocks run`` prints the same warning first and, on a terminal, a progress line
(:mod:`engine.cli.progress`); the app shows both and its Cancel stops the check.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from blocks.check_support import (
    CHECK_CONV_ATTRS,
    CHECK_TOLERANCE,
    DEPTHWISE,
    SCALAR,
    VERDICT,
    conv_kwargs,
    forward_geometry,
    gradient_errors,
    op_rank,
    tolerance,
)
from blocks.conv import activation_axes, filter_axes, float_port
from blocks.local_loss import LocalLoss
from blocks.spec import INT32_MAX, AttrError, AttrSpec, BlockSpec, PortSpec, TensorSpec
from engine.base import cancel as cancellation
from engine.base.dtypes import tolerance_text
from engine.base.literal import literal
from engine.kernels.memory import SLACK, conv_workspace
from engine.shapes.conv import (
    ConvGeometry,
    ConvGeometryNd,
    channels_last,
    conv2d_geometry,
    conv3d_geometry,
)
from engine.shapes.geometry import to_channels_last

WRT = ("input", "filter")
PORTS = ("input", "filter", "out_backprop", "gradient")
OUTPUTS = ("numeric", "error", "max_abs_error", "max_rel_error", "ok")


def sample_indices(size: int, samples: int, seed: int) -> np.ndarray:
    """Sorted flat indices: all of ``range(size)`` when ``samples`` is 0 or at least ``size``,
    else ``samples`` of them drawn without replacement with ``seed``."""
    if samples == 0 or samples >= size:
        return np.arange(size)
    return np.sort(np.random.default_rng(seed).choice(size, size=samples, replace=False))


def sampled_mask(shape: tuple[int, ...], attrs: dict) -> np.ndarray:
    """True at the elements a GradCheck with ``attrs`` (``samples``, ``seed``) checks of a
    gradient of ``shape`` (:func:`sample_indices`); the others have no numeric value."""
    size = math.prod(shape)
    defaults = {a.name: a.default for a in ATTRS}
    samples, seed = (int(attrs.get(k, defaults[k])) for k in ("samples", "seed"))
    mask = np.zeros(size, bool)
    mask[sample_indices(size, samples, seed)] = True
    return mask.reshape(shape)


def grad_check(input: np.ndarray, filter: np.ndarray, out_backprop: np.ndarray,
               gradient: np.ndarray, op: str, wrt: str, strides, padding: str,
               explicit_paddings=(), data_format: str = "NHWC", dilations=None,
               epsilon: float = 1e-3, samples: int = 64, seed: int = 0) -> dict[str, np.ndarray]:
    """``gradient`` (of L w.r.t. ``wrt``) against float64 central differences of L on the
    sampled elements: ``numeric`` and ``error`` (NaN where not sampled), ``max_abs_error``,
    ``max_rel_error`` (over ``max |numeric|``) and ``ok`` (within :data:`CHECK_TOLERANCE` of
    ``gradient``'s dtype; with ``max |numeric|`` 0, ``max_abs_error`` is compared instead).
    ``explicit_paddings`` is for the 2-D ops only; ``dilations`` default to ones."""
    rank = op_rank(op)
    dilations = [1] * (rank + 2) if dilations is None else dilations
    if rank == 2:
        g = conv2d_geometry(np.shape(input), np.shape(filter), strides, padding,
                            explicit_paddings, data_format, dilations,
                            depthwise=op == DEPTHWISE).nd
    else:
        g = conv3d_geometry(np.shape(input), np.shape(filter), strides, padding, data_format,
                            dilations)
    grad = np.asarray(gradient)
    x = to_channels_last(np.asarray(input, np.float64), data_format)
    dy = to_channels_last(np.asarray(out_backprop, np.float64), data_format)
    loss = LocalLoss(g, x, np.asarray(filter, np.float64), dy)
    flat = sample_indices(grad.size, samples, seed)
    numbers = np.zeros(flat.size)
    empty = min(g.batch, *g.out_spatial, g.out_depth) == 0
    last = channels_last(data_format)
    for k, index in enumerate(zip(*np.unravel_index(flat, grad.shape), strict=True)):
        cancellation.checkpoint()
        cancellation.progress(k, flat.size)
        if empty:
            continue  # L is the empty sum: no element changes it
        at = tuple(map(int, index))
        if wrt == "filter":
            numbers[k] = loss.filter_element(at[:-2], at[-2], at[-1], epsilon)
        else:
            pos, c = (at[1:-1], at[-1]) if last else (at[2:], at[1])
            numbers[k] = loss.input_element(at[0], pos, c, epsilon)
    cancellation.progress(flat.size, flat.size)
    return gradient_errors(grad, flat, numbers, tolerance(grad.dtype))


def _names() -> set[str]:
    return {a.name for a in ATTRS} | set(PORTS)


def _nd(g: ConvGeometry | ConvGeometryNd) -> ConvGeometryNd:
    return g.nd if isinstance(g, ConvGeometry) else g


def _infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    g = _nd(forward_geometry(attrs, inputs, _names()))
    grad = float_port(inputs, "gradient")
    wrt = attrs["wrt"]
    if wrt == "input":
        want, axes = g.input_shape, activation_axes(attrs["data_format"])
    else:
        want, axes = g.filter_shape, filter_axes(g.rank, g.depthwise)
    if tuple(grad.shape) != tuple(want):
        raise AttrError("wrt", f"gradient shape {list(grad.shape)} does not match the {wrt} "
                               f"shape (wrt={wrt}): expected {list(want)}, got "
                               f"{list(grad.shape)}")
    field = TensorSpec(tuple(want), "float64", axes)
    return {"numeric": field, "error": field, "max_abs_error": SCALAR,
            "max_rel_error": SCALAR, "ok": VERDICT}


def _spans(g: ConvGeometryNd) -> tuple[int, ...]:
    """The padded input each spatial dimension's outputs read: ``(out - 1) * s + span``."""
    return tuple(max(0, (o - 1) * s + (k - 1) * d + 1) for o, s, k, d in zip(
        g.out_spatial, g.strides, g.filter_spatial, g.dilations))


def _workspace(attrs: dict, inputs: dict[str, TensorSpec],
               outputs: dict[str, TensorSpec]) -> int:
    """float64 copies of the four inputs, the cached zero-padded input windows, one window
    copy, one restricted conv's output and product, its kernel workspace, the sample lists."""
    g = _nd(forward_geometry(attrs, inputs, _names()))
    sizes = {p: math.prod(inputs[p].shape) for p in PORTS}
    spans = _spans(g)
    padded = g.batch * math.prod(spans) * g.in_depth
    out = g.batch * math.prod(g.out_spatial) * g.out_depth
    kernel = 0
    if min(g.batch, *g.out_spatial, g.out_depth) > 0:
        window = (g.batch, *spans, g.in_depth)
        if g.rank == 2:
            cropped: ConvGeometry | ConvGeometryNd = conv2d_geometry(
                window, g.filter_shape, [1, *g.strides, 1], "VALID", [], "NHWC",
                [1, *g.dilations, 1], g.depthwise)
        else:
            cropped = conv3d_geometry(window, g.filter_shape, [1, *g.strides, 1], "VALID",
                                      "NDHWC", [1, *g.dilations, 1])
        finite = all(inputs[p].finite for p in ("input", "filter", "out_backprop"))
        kernel = conv_workspace(cropped, "forward", "float64", finite)
    samples = sizes["gradient"] if attrs["samples"] == 0 else min(attrs["samples"],
                                                                   sizes["gradient"])
    return SLACK + 8 * (sum(sizes.values()) + 2 * padded + 2 * out + 6 * samples) + kernel


#: The run-time model of one evaluation of the restricted L (each checked element takes two):
#: a fixed cost (the window copy, the kernel call with its argument checks and dispatch, the
#: product with out_backprop) plus the evaluation's multiply-adds (:func:`evaluation_macs`) at
#: a rate. Measured with ``time.process_time`` around whole checks on a 2-core x86-64 VM
#: (float64 kernels, after a warm-up, other processes running): 120-130 us per evaluation of
#: 3 x 3 x 8 windows (5,184 multiply-adds), 200-265 us of 1 x 1 x 1,024 filter taps (1,024),
#: 0.5 ms at 295k, 9 ms at 4.7M, 24 ms at 14M; this model is within a factor of about 2 of
#: each (``tests/test_hangs.py`` holds it to 3: the fixed cost was 30 us once, and ``check``
#: then said "about 2 min" of a 14-minute check).
EVALUATION_SECONDS = 150e-6
MACS_PER_SECOND = 5e8
#: ``check`` warns about a GradCheck whose estimated run time passes this many seconds.
SLOW_CHECK_SECONDS = 60.0


def checked_elements(size: int, samples: int) -> int:
    """How many elements a GradCheck of a ``size``-element gradient checks."""
    return size if samples == 0 or samples >= size else samples


def evaluation_macs(g: ConvGeometry | ConvGeometryNd, wrt: str) -> int:
    """Multiply-adds of one evaluation of the part of L one element changes (see the module
    docstring): one output channel of the whole batch for a filter element, the window of
    output positions (all output channels of its group) that reads an input element."""
    g = _nd(g)
    if min(g.batch, *g.out_spatial, g.out_depth) == 0:
        return 0
    taps = math.prod(g.filter_spatial) * (1 if g.depthwise else g.filter_in_depth)
    if wrt == "filter":
        return g.batch * math.prod(g.out_spatial) * taps
    window = math.prod(min(o, -(-((k - 1) * d + 1) // s)) for o, k, d, s in zip(
        g.out_spatial, g.filter_spatial, g.dilations, g.strides))
    outs = g.filter_out if g.depthwise else g.filter_out // g.groups
    return window * outs * taps


def estimated_seconds(attrs: dict, inputs: dict[str, TensorSpec]) -> tuple[float, int, int]:
    """The modelled run time of a GradCheck (:data:`EVALUATION_SECONDS`,
    :data:`MACS_PER_SECOND`), the elements it checks and one evaluation's multiply-adds."""
    g = forward_geometry(attrs, inputs, _names())
    macs = evaluation_macs(g, attrs["wrt"])
    n = checked_elements(math.prod(inputs["gradient"].shape), attrs["samples"])
    if macs == 0:
        return 0.0, n, 0
    return n * 2 * (EVALUATION_SECONDS + macs / MACS_PER_SECOND), n, macs


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"


def cost_warning(attrs: dict, inputs: dict[str, TensorSpec]) -> tuple[str, str] | None:
    """``("samples", message)`` when the check would run longer than
    :data:`SLOW_CHECK_SECONDS` by :func:`estimated_seconds`, else None."""
    seconds, n, macs = estimated_seconds(attrs, inputs)
    if seconds <= SLOW_CHECK_SECONDS:
        return None
    fast = int(SLOW_CHECK_SECONDS / (seconds / n))
    size = math.prod(inputs["gradient"].shape)
    which = f"all {n:,}" if n == size else f"{n:,} of the {size:,}"
    return "samples", (
        f"samples={attrs['samples']} checks {which} elements of the {attrs['wrt']} "
        f"gradient, each with 2 convolutions of {macs:,} multiply-adds: about "
        f"{_duration(seconds)} by the estimate (it can be cancelled while it runs); samples="
        f"{max(fast, 1):,} or fewer stays under {_duration(SLOW_CHECK_SECONDS)}")


#: Block type -> the rule that warns, before running, that a block will run a long time
#: (:func:`engine.graph.compiler.compile_canvas` puts its message in ``Plan.warnings``).
RUN_TIME_WARNINGS = {"GradCheck": cost_warning}


def _emit(attrs: dict, inputs: dict[str, str], outputs: dict[str, str]) -> list[str]:
    args = [f"{p}={inputs[p]}" for p in PORTS]
    args += [f"{k}={literal(attrs[k])}" for k in ("op", "wrt")]
    args += [f"{k}={literal(v)}" for k, v in conv_kwargs(attrs).items()]
    args += [f"{k}={literal(attrs[k])}" for k in ("epsilon", "samples", "seed")]
    return [f"_checked = grad_check({', '.join(args)})",
            *(f"{var} = _checked[{literal(port)}]" for port, var in outputs.items())]


def _run(attrs: dict, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    ports: dict[str, Any] = {p: inputs[p] for p in PORTS}
    return grad_check(**ports, op=attrs["op"], wrt=attrs["wrt"],
                      **conv_kwargs(attrs), epsilon=attrs["epsilon"],
                      samples=attrs["samples"], seed=attrs["seed"])


ATTRS = (
    CHECK_CONV_ATTRS[0],
    AttrSpec("wrt", "enum", "filter", choices=WRT,
             doc="The argument the gradient is of: input or filter; gradient must have its "
                 "shape."),
    *CHECK_CONV_ATTRS[1:],
    AttrSpec("epsilon", "float", 1e-3, minimum=1e-12, maximum=1e6,
             doc="The finite-difference step. L is linear in each argument, so the central "
                 "difference is exact up to float64 rounding for any step."),
    AttrSpec("samples", "int", 64, minimum=0, maximum=INT32_MAX,
             doc="How many elements to check, drawn without replacement; 0 = all. A sample "
                 "can miss a single wrong element: use 0 to check every one."),
    AttrSpec("seed", "int", 0, minimum=0,
             doc="Seed of the sample draw: the same seed checks the same elements."),
)

GRAD_CHECK = BlockSpec(
    type_id="GradCheck", title="GradCheck", category="Checks", op="",
    doc="Checks a gradient of L = <op(input, filter), out_backprop> w.r.t. input or filter "
        "(wrt) against central finite differences computed in float64 on sampled elements "
        "(exact up to rounding: L is linear). ok = max |gradient - numeric| / max |numeric| "
        f"within the gradient dtype's tolerance ({tolerance_text(CHECK_TOLERANCE)}). Each "
        "sample costs two convolutions of the part of L it changes; samples=0 checks every "
        "element.",
    inputs=(PortSpec("input", "4-D input of the forward op, in data_format.", kind="float"),
            PortSpec("filter", "4-D filter of the forward op.", kind="float"),
            PortSpec("out_backprop", "dL/d output: the weights of L, shaped like the op's "
                                     "output.", kind="float"),
            PortSpec("gradient", "The gradient to check (from a backprop block or a file), "
                                 "shaped like the wrt argument.", kind="float")),
    outputs=(PortSpec("numeric", "Finite-difference gradient (float64), NaN where not "
                                 "sampled.", kind="float"),
             PortSpec("error", "|gradient - numeric| (float64), NaN where not sampled.",
                      kind="float"),
             PortSpec("max_abs_error", "max |gradient - numeric| over the sampled elements.",
                      kind="float"),
             PortSpec("max_rel_error", "max_abs_error / max |numeric|.", kind="float"),
             PortSpec("ok", "True when the gradient is within its dtype's tolerance.",
                      kind="bool")),
    attrs=ATTRS,
    infer=_infer,
    run=_run,
    emit=_emit,
    imports=("from blocks.gradcheck import grad_check",),
    workspace=_workspace,
    verdict="ok",
    main_output="error",  # the canvas preview shows where the gradient is wrong
    view_pair=("gradient", "numeric"),  # the viewer: gradient beside numeric, error between
)

SPECS = (GRAD_CHECK,)
__all__ = ["CHECK_TOLERANCE", "GRAD_CHECK", "RUN_TIME_WARNINGS", "cost_warning", "grad_check",
           "sample_indices"]
