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
    tolerance,
)
from blocks.conv import DEPTHWISE_FILTER_AXES, FILTER_AXES, activation_axes, float_port
from blocks.spec import INT32_MAX, AttrError, AttrSpec, BlockSpec, PortSpec, TensorSpec
from engine import kernels
from engine.base import cancel as cancellation
from engine.base.dtypes import tolerance_text
from engine.base.literal import literal
from engine.kernels.memory import SLACK, conv_workspace
from engine.shapes.conv import ConvGeometry, conv2d_geometry

WRT = ("input", "filter")
PORTS = ("input", "filter", "out_backprop", "gradient")
OUTPUTS = ("numeric", "error", "max_abs_error", "max_rel_error", "ok")


def _nhwc(a: np.ndarray, data_format: str) -> np.ndarray:
    return a if data_format == "NHWC" else a.transpose(0, 2, 3, 1)


class _Loss:
    """Evaluates the part of L that one element of the input or filter changes."""

    def __init__(self, g: ConvGeometry, x: np.ndarray, w: np.ndarray, dy: np.ndarray):
        self.g, self.x, self.w, self.dy = g, x, w, dy
        self.kernel = (kernels.depthwise_conv2d_native if g.depthwise else kernels.conv2d)
        self.kw: dict[str, Any] = {"strides": [1, g.stride_rows, g.stride_cols, 1], "padding": "VALID",
                   "data_format": "NHWC",
                   "dilations": [1, g.dilation_rows, g.dilation_cols, 1]}
        self.span_rows = (g.filter_rows - 1) * g.dilation_rows + 1
        self.span_cols = (g.filter_cols - 1) * g.dilation_cols + 1
        self._windows: dict[int, np.ndarray] = {}

    def window(self, batch: slice, rows: tuple[int, int], cols: tuple[int, int],
               chans: slice) -> np.ndarray:
        """A float64 copy of the zero-padded input over padded rows and cols ``[lo, hi)``."""
        g, x = self.g, self.x
        n = len(range(*batch.indices(x.shape[0])))
        out = np.zeros((n, rows[1] - rows[0], cols[1] - cols[0], chans.stop - chans.start))
        r0, r1 = max(rows[0] - g.pad_top, 0), min(rows[1] - g.pad_top, g.in_rows)
        c0, c1 = max(cols[0] - g.pad_left, 0), min(cols[1] - g.pad_left, g.in_cols)
        if r0 < r1 and c0 < c1:
            out[:, r0 + g.pad_top - rows[0]:r1 + g.pad_top - rows[0],
                c0 + g.pad_left - cols[0]:c1 + g.pad_left - cols[0]] = x[batch, r0:r1, c0:c1,
                                                                           chans]
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

    def filter_element(self, i: int, j: int, q: int, o: int, eps: float) -> float:
        """dL/dw[i, j, q, o]: L restricted to the output channel the element feeds."""
        g = self.g
        if g.depthwise:
            chans, out = slice(q, q + 1), q * g.filter_out + o
            ww, qq = self.w[:, :, q:q + 1, o:o + 1].copy(), 0
        else:
            chans, _, _ = self._group(o, filter_channel=True)
            out, ww, qq = o, self.w[:, :, :, o:o + 1].copy(), q
        xw = self._windows.get(chans.start)
        if xw is None:
            rows = (0, (g.out_rows - 1) * g.stride_rows + self.span_rows)
            cols = (0, (g.out_cols - 1) * g.stride_cols + self.span_cols)
            xw = self._windows.setdefault(chans.start,
                                          self.window(slice(None), rows, cols, chans))
        dyw = self.dy[:, :, :, out:out + 1]
        return self._difference(ww, (i, j, qq, 0), eps, xw, ww, dyw)

    def input_element(self, n: int, h: int, v: int, c: int, eps: float) -> float:
        """dL/dx[n, h, v, c] (NHWC): L restricted to the output window that reads it."""
        g = self.g
        hp, vp = h + g.pad_top, v + g.pad_left
        r_lo = max(0, -(-(hp - self.span_rows + 1) // g.stride_rows))
        r_hi = min(g.out_rows - 1, hp // g.stride_rows)
        c_lo = max(0, -(-(vp - self.span_cols + 1) // g.stride_cols))
        c_hi = min(g.out_cols - 1, vp // g.stride_cols)
        if r_lo > r_hi or c_lo > c_hi:
            return 0.0  # no output reads the element: L does not depend on it
        chans, outs, local = self._group(c, filter_channel=False)
        rows = (r_lo * g.stride_rows, r_hi * g.stride_rows + self.span_rows)
        cols = (c_lo * g.stride_cols, c_hi * g.stride_cols + self.span_cols)
        xw = self.window(slice(n, n + 1), rows, cols, chans)
        ww = self.w[:, :, chans, :] if g.depthwise else self.w[:, :, :, outs]
        dyw = self.dy[n:n + 1, r_lo:r_hi + 1, c_lo:c_hi + 1, outs]
        index = (0, hp - rows[0], vp - cols[0], local)
        return self._difference(xw, index, eps, xw, ww, dyw)


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
               explicit_paddings, data_format: str, dilations, epsilon: float, samples: int,
               seed: int) -> dict[str, np.ndarray]:
    """``gradient`` (of L w.r.t. ``wrt``) against float64 central differences of L on the
    sampled elements: ``numeric`` and ``error`` (NaN where not sampled), ``max_abs_error``,
    ``max_rel_error`` (over ``max |numeric|``) and ``ok`` (within :data:`CHECK_TOLERANCE` of
    ``gradient``'s dtype; with ``max |numeric|`` 0, ``max_abs_error`` is compared instead)."""
    g = conv2d_geometry(np.shape(input), np.shape(filter), strides, padding, explicit_paddings,
                        data_format, dilations, depthwise=op == DEPTHWISE)
    grad = np.asarray(gradient)
    x = _nhwc(np.asarray(input, np.float64), data_format)
    dy = _nhwc(np.asarray(out_backprop, np.float64), data_format)
    loss = _Loss(g, x, np.asarray(filter, np.float64), dy)
    flat = sample_indices(grad.size, samples, seed)
    numbers = np.zeros(flat.size)
    empty = g.batch == 0 or g.out_rows == 0 or g.out_cols == 0 or g.out_depth == 0
    for k, index in enumerate(zip(*np.unravel_index(flat, grad.shape), strict=True)):
        cancellation.checkpoint()
        cancellation.progress(k, flat.size)
        if empty:
            continue  # L is the empty sum: no element changes it
        if wrt == "filter":
            i, j, q, o = map(int, index)
            numbers[k] = loss.filter_element(i, j, q, o, epsilon)
        else:
            n, a, b, c = map(int, index)
            nhwc = (n, a, b, c) if data_format == "NHWC" else (n, b, c, a)
            numbers[k] = loss.input_element(*nhwc, epsilon)
    cancellation.progress(flat.size, flat.size)
    return gradient_errors(grad, flat, numbers, tolerance(grad.dtype))


def _names() -> set[str]:
    return {a.name for a in ATTRS} | set(PORTS)


def _infer(attrs: dict, inputs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
    g = forward_geometry(attrs, inputs, _names())
    grad = float_port(inputs, "gradient")
    wrt = attrs["wrt"]
    if wrt == "input":
        want, axes = g.input_shape, activation_axes(attrs["data_format"])
    else:
        want, axes = g.filter_shape, DEPTHWISE_FILTER_AXES if g.depthwise else FILTER_AXES
    if tuple(grad.shape) != tuple(want):
        raise AttrError("wrt", f"gradient shape {list(grad.shape)} does not match the {wrt} "
                               f"shape (wrt={wrt}): expected {list(want)}, got "
                               f"{list(grad.shape)}")
    field = TensorSpec(tuple(want), "float64", axes)
    return {"numeric": field, "error": field, "max_abs_error": SCALAR,
            "max_rel_error": SCALAR, "ok": VERDICT}


def _workspace(attrs: dict, inputs: dict[str, TensorSpec],
               outputs: dict[str, TensorSpec]) -> int:
    """float64 copies of the four inputs, the cached zero-padded input windows, one window
    copy, one restricted conv's output and product, its kernel workspace, the sample lists."""
    g = forward_geometry(attrs, inputs, _names())
    sizes = {p: math.prod(inputs[p].shape) for p in PORTS}
    rows = max(0, (g.out_rows - 1) * g.stride_rows + (g.filter_rows - 1) * g.dilation_rows + 1)
    cols = max(0, (g.out_cols - 1) * g.stride_cols + (g.filter_cols - 1) * g.dilation_cols + 1)
    padded = g.batch * rows * cols * g.in_depth
    out = g.batch * g.out_rows * g.out_cols * g.out_depth
    kernel = 0
    if min(g.batch, g.out_rows, g.out_cols, g.out_depth) > 0:
        cropped = conv2d_geometry((g.batch, rows, cols, g.in_depth), g.filter_shape,
                                  [1, g.stride_rows, g.stride_cols, 1], "VALID", [], "NHWC",
                                  [1, g.dilation_rows, g.dilation_cols, 1], g.depthwise)
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


def evaluation_macs(g: ConvGeometry, wrt: str) -> int:
    """Multiply-adds of one evaluation of the part of L one element changes (see the module
    docstring): one output channel of the whole batch for a filter element, the window of
    output positions (all output channels of its group) that reads an input element."""
    if min(g.batch, g.out_rows, g.out_cols, g.out_depth) == 0:
        return 0
    taps = g.filter_rows * g.filter_cols * (1 if g.depthwise else g.filter_in_depth)
    if wrt == "filter":
        return g.batch * g.out_rows * g.out_cols * taps
    span_rows = (g.filter_rows - 1) * g.dilation_rows + 1
    span_cols = (g.filter_cols - 1) * g.dilation_cols + 1
    rows = min(g.out_rows, -(-span_rows // g.stride_rows))
    cols = min(g.out_cols, -(-span_cols // g.stride_cols))
    outs = g.filter_out if g.depthwise else g.filter_out // g.groups
    return rows * cols * outs * taps


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
