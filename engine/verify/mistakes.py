"""Known mistakes of conv and conv-gradient implementations, as variants of the exact reference.

A variant is what an implementation making one mistake returns for a canonical ``tf.raw_ops``
call, in float64 from the exact kernels (:mod:`engine.kernels`) on a changed geometry, permuted
or reinterpreted operands, or a permuted result. Variants keep the reference's output shape (a
wrong shape is the ``wrong_shape`` verdict: :func:`engine.verify.diagnose.diagnose_shape`).
A geometry mistake is a loop implementation with the right output size and bounds-checked
reads (:mod:`engine.verify.call_model`: :func:`~engine.verify.call_model.evaluate` computes any
such geometry with the kernels).
Which ops and cases a mistake applies to: :data:`APPLIES_TO`. A mistake yields nothing where it
gives exactly the reference, and may yield several flavours under one id. The ids named from a
shape or a verdict rather than from values (an empty output's shape, a refusal) are
:data:`VERDICT_MISTAKES`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from engine.base.errors import InvalidArgumentError
from engine.shapes.padding import windowed_output
from engine.verify.call_model import (
    ACTIVATIONS,
    OTHER_FORMAT,
    Call,
    Dim,
    canonical,
    emit,
    evaluate,
    reference,
    reinterpret,
)
from engine.verify.conventions import TF_OPS  # noqa: F401 - the kernels, for callers
from engine.verify.mistake_reads import (
    DIM_WORDS,
    Candidate,
    geo,
    geometry_mistakes,
    offset_mistakes,
    pair_text,
    strides_swapped,
    subsets,
)

#: Stable id -> what the implementation does wrong, in documentation (and matching) order.
MISTAKES: dict[str, str] = {
    "stride_dilation_swapped": "the stride used as the dilation and the dilation as the stride",
    "same_pad_extra_before": "SAME with an odd total padding: the extra row or column put "
                             "before (top/left) instead of after",
    "filter_not_flipped": "the input gradient (a transposed conv) computed with the filter "
                          "not rotated by 180 degrees",
    "convolution_not_correlation": "a true convolution (the filter rotated by 180 degrees) "
                                   "instead of TensorFlow's cross-correlation",
    "filter_in_out_swapped": "the filter's in_channels and out_channels (depthwise: channel and "
                             "multiplier) swapped in its memory order",
    "output_size_off_by_one": "the output size one off: loops one row or column short",
    "dilation_ignored": "the dilation taken as 1",
    "dilation_ignored_undilated_same": "the dilation taken as 1 and the SAME padding computed "
                                       "for the undilated filter (TensorFlow 2.21's CPU "
                                       "depthwise backprops)",
    "padding_ignored": "the input read without its padding (no offset by the padding before)",
    "batch_averaged": "the filter gradient divided by the batch size",
    "batch_not_accumulated": "the filter gradient of one image only (the first or the last: "
                             "the sum over the batch reset or never taken)",
    "positions_averaged": "the filter gradient divided by the number of output positions "
                          "(batch x output rows x output columns): a mean instead of a sum",
    "groups_ignored": "groups ignored: every output channel reads the first group's channels",
    "multiplier_order": "the depthwise output channel k*M+m taken as m*C+k",
    "layout_swapped": "NHWC read as NCHW or the reverse (the arrays' memory, the attribute "
                      "vectors, or data_format ignored)",
    "explicit_pads_swapped": "EXPLICIT paddings swapped: before/after, height/width, or read "
                             "in ONNX order (top, left, bottom, right)",
    "output_padding_zeroed": "the input gradient's last rows or columns beyond the last "
                             "window's reach (conv_transpose2d's output_padding, the stride "
                             "remainder) left 0 instead of computed",
    "padding_offset_by_one": "the top or left padding one too many or one too few (every "
                             "padding mode; VALID one too many reads row or column -1)",
    "strides_swapped": "the strides of two spatial dimensions exchanged (height and width; "
                       "3-D: depth with height or width)",
}

#: Stable id -> what the implementation does wrong, for the mistakes named from the verdict
#: itself rather than a reference variant (:func:`engine.verify.diagnose.diagnose_shape`, the
#: ``raised`` verdict); documented after :data:`MISTAKES`.
VERDICT_MISTAKES: dict[str, str] = {
    "empty_output_shape": "an empty output (a 0 in the reference's shape) returned with "
                          "another shape, or a non-empty one returned empty",
    "refused_valid_case": "a geometry TensorFlow accepts refused with an exception",
}
#: Every id: :data:`MISTAKES`, then :data:`VERDICT_MISTAKES`.
ALL_MISTAKES: dict[str, str] = MISTAKES | VERDICT_MISTAKES

#: The ops and cases each mistake applies to (the others: every op and case).
APPLIES_TO: dict[str, str] = {
    "same_pad_extra_before": "SAME padding with an odd total padding in a dimension",
    "filter_not_flipped": "the input gradients (Conv2DBackpropInput, its depthwise twin, "
                          "Conv3DBackpropInputV2)",
    "convolution_not_correlation": "the forward ops and the filter gradients",
    "dilation_ignored": "dilations > 1",
    "dilation_ignored_undilated_same": "SAME padding with dilations > 1",
    "padding_ignored": "SAME or EXPLICIT with a nonzero padding",
    "batch_averaged": "the filter gradients with batch > 1",
    "batch_not_accumulated": "the filter gradients with batch > 1",
    "positions_averaged": "the filter gradients with more than one output position",
    "groups_ignored": "the ops but the depthwise ones, with groups > 1",
    "multiplier_order": "the depthwise ops with multiplier > 1 and more than one channel",
    "explicit_pads_swapped": "EXPLICIT padding",
    "output_padding_zeroed": "the input gradients with a nonzero stride remainder",
    "strides_swapped": "strides that differ between two spatial dimensions",
}


def _flip(cut: Sequence[int]) -> Callable[[np.ndarray], np.ndarray]:
    """A filter (or its gradient) reversed along the spatial axes ``cut`` marks (all: rotated
    by 180 degrees)."""
    spatial = tuple(slice(None, None, -1 if c else 1) for c in cut)
    return lambda a: a[spatial]


def _with(call: Call, **changed: Callable[[np.ndarray], np.ndarray]):
    """The reference on operands changed by the given functions."""
    return lambda ops: reference(call, {k: changed.get(k, lambda a: a)(v)
                                        for k, v in ops.items()})


def _take(index: slice) -> Callable[[np.ndarray], np.ndarray]:
    """The function taking ``a[index]``."""
    return lambda a: a[index]


def _after(call: Call, post: Callable[[np.ndarray], np.ndarray]):
    """A post-transformation of the layout-free reference."""
    return lambda ops: emit(call, post(evaluate(call, ops, call.dims)))


def _flips(call: Call) -> Iterator[Candidate]:
    """The filter rotated (or not rotated) by 180 degrees; then reversed in some dimensions
    only (e.g. in depth only)."""
    cuts = subsets(call.rank)
    for cut in [cuts[-1], *cuts[:-1]]:
        flip, some = _flip(cut), " and ".join(
            n for n, c in zip(DIM_WORDS[call.rank], cut, strict=True) if c) + " only"
        if call.kind == "input":
            yield Candidate("filter_not_flipped", (
                "the filter used as is where the transposed conv needs it rotated by 180 "
                "degrees" if all(cut) else f"the filter reversed in {some}, rotated as the "
                "transposed conv needs it in no other dimension"), _with(call, filter=flip))
        elif call.kind == "output":
            yield Candidate("convolution_not_correlation", "the filter rotated by 180 degrees"
                            if all(cut) else f"the filter reversed in {some}",
                            _with(call, filter=flip))
        else:
            yield Candidate("convolution_not_correlation", "the filter gradient comes out "
                            + ("rotated by 180 degrees" if all(cut) else f"reversed in {some}"),
                            _after(call, flip))


def _filter_mistakes(call: Call) -> Iterator[Candidate]:
    yield from _flips(call)
    *k, q, o = call.geometry.filter_shape
    r = len(k)
    names = ("channel", "multiplier") if call.depthwise else ("in_channels", "out_channels")
    taps, oi, hw = tuple(range(r)), (r + 1, r), tuple(range(2, r + 2))
    tf_read = (lambda w: w.reshape(*k, o, q).swapaxes(-1, -2))
    torch_read = (lambda w: w.transpose(*oi, *taps).reshape(q, o, *k).transpose(*hw, 0, 1))
    tf_write = (lambda dw: dw.swapaxes(-1, -2).reshape(*k, q, o))
    torch_write = (lambda dw: dw.transpose(r, r + 1, *taps).reshape(o, q, *k)
                   .transpose(*hw, 1, 0))
    spatial = "HW" if r == 2 else "DHW"
    flavours = [(f"TensorFlow ({spatial}IO)", tf_read, tf_write)]
    if not call.depthwise:
        flavours.append((f"PyTorch (OI{spatial})", torch_read, torch_write))
    for memory, read, write in flavours:
        detail = f"{names[0]} and {names[1]} swapped in the filter's {memory} memory order"
        yield Candidate("filter_in_out_swapped", detail,
                        _after(call, write) if call.kind == "filter"
                        else _with(call, filter=read))


def _size_mistakes(call: Call) -> Iterator[Candidate]:
    dims = call.dims
    names = ("row", "column") if call.rank == 2 else ("plane", "row", "column")
    for cut in subsets(call.rank):
        if any(c and d.out < 2 for c, d in zip(cut, dims, strict=True)):
            continue
        what = " and ".join(n for n, c in zip(names, cut, strict=True) if c)
        detail = (f"the last output {what} left out (output size "
                  f"{', '.join(str(d.out - c) for d, c in zip(dims, cut, strict=True))} instead "
                  f"of {', '.join(str(d.out) for d in dims)})")
        zero = (lambda a, cut=cut: a * _keep(a.shape, cut))
        yield Candidate("output_size_off_by_one", detail,
                        _after(call, zero) if call.kind == "output"
                        else _with(call, out_backprop=zero))
    if any(d.dilation > 1 for d in dims):
        yield geo("dilation_ignored", f"dilations {pair_text(dims, 'dilation')} taken as 1", call,
                  [d._replace(dilation=1) for d in dims])
    dilated = [i for i, d in enumerate(dims) if d.dilation > 1]
    for i in dilated if len(dilated) > 1 else ():  # one dimension's only
        yield geo("dilation_ignored", f"the {DIM_WORDS[call.rank][i]} dilation "
                  f"{dims[i].dilation} taken as 1", call,
                  [d._replace(dilation=1) if j == i else d for j, d in enumerate(dims)])
    undilated = tuple(d._replace(dilation=1, before=windowed_output(
        d.size, d.taps, 1, d.stride, "SAME").pad_before) for d in dims)
    if call.geometry.padding == "SAME" and any(  # else the same reads as dilation_ignored
            d.dilation > 1 and u.before != d.before for d, u in zip(dims, undilated, strict=True)):
        yield geo("dilation_ignored_undilated_same",
                  f"dilations {pair_text(dims, 'dilation')} taken as 1, top/left padding "
                  f"{pair_text(undilated, 'before')} (SAME for the undilated filter) instead of "
                  f"{pair_text(dims, 'before')}", call, undilated)
    if call.geometry.padding != "VALID" and any(d.before or d.after for d in dims):
        yield geo("padding_ignored", f"top/left padding {pair_text(dims, 'before')} taken as 0",
                  call, tuple(d._replace(before=0) for d in dims))


def _keep(shape: tuple[int, ...], cut: Sequence[int]) -> np.ndarray:
    """1, with 0 in the last ``cut[i]`` positions of each spatial dimension ``i`` of a
    channels-last ``shape`` (2-D: rows, columns)."""
    keep = np.ones(shape[1:-1])
    for axis, c in enumerate(cut):
        index = [slice(None)] * keep.ndim
        index[axis] = slice(keep.shape[axis] - c, None)
        keep[tuple(index)] = 0
    return keep[None, ..., None]


def _groups(call: Call) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    q = call.geometry.filter_in_depth

    def compute(ops: Mapping[str, np.ndarray]) -> np.ndarray:
        if call.kind != "input":
            return emit(call, evaluate(call, {**ops, "input": ops["input"][..., :q]}, call.dims))
        dx = np.zeros(call.out_shape)
        dx[..., :q] = evaluate(call, ops, call.dims, (*call.out_shape[:-1], q))
        return emit(call, dx)
    return compute


def _channel_mistakes(call: Call) -> Iterator[Candidate]:
    g = call.geometry
    if call.kind == "filter" and g.batch > 1:
        yield Candidate("batch_averaged", f"every element 1/{g.batch} of the reference",
                        _after(call, lambda dw: dw / g.batch))
        for which, image in (("first", slice(None, 1)), ("last", slice(-1, None))):
            yield Candidate("batch_not_accumulated", f"the {which} of {g.batch} images only",
                            _with(call, input=_take(image), out_backprop=_take(image)))
    positions = g.batch * int(np.prod(g.out_spatial))
    if call.kind == "filter" and positions > g.batch:
        sides = " x ".join(str(n) for n in g.out_spatial)
        yield Candidate("positions_averaged", f"every element 1/{positions} of the reference "
                        f"(batch {g.batch} x {sides} output positions)",
                        _after(call, lambda dw: dw / positions))
    if not call.depthwise and g.groups > 1:
        yield Candidate("groups_ignored", f"all {g.filter_out} output channels read input "
                        f"channels 0-{g.filter_in_depth - 1} (groups {g.groups} ignored)",
                        _groups(call))
    c, m = g.in_depth, g.filter_out
    if call.depthwise and c > 1 and m > 1:
        k_m = np.arange(c * m).reshape(c, m)
        perm = k_m.T.reshape(-1)  # position m*C+k holds k*M+m
        for p, how in ((perm, "k*M+m taken as m*C+k"), (np.argsort(perm), "m*C+k taken as k*M+m")):
            detail = f"channel {how} (C={c}, M={m})"
            permute = (lambda a, p=p: a[..., p])
            yield Candidate("multiplier_order", detail, _after(call, permute)
                            if call.kind == "output" else _with(call, out_backprop=permute))


def _attr_read(call: Call) -> tuple[Dim, ...]:
    """The dims an implementation gets reading strides, dilations and explicit_paddings in the
    other layout (SAME pads then follow its strides and dilations)."""
    fmt, args = call.data_format, call.args
    first = 2 if fmt.endswith("C") else 1  # the other layout's first spatial axis
    s, d = list(args["strides"]), list(args.get("dilations", (1,) * (call.rank + 2)))
    pads = list(args.get("explicit_paddings", ()))
    out = []
    for dim, axis in zip(call.dims, range(first, first + call.rank), strict=True):
        before = pads[2 * axis] if pads else 0
        if call.geometry.padding == "SAME":
            before = windowed_output(dim.size, dim.taps, d[axis], s[axis], "SAME").pad_before
        out.append(dim._replace(stride=s[axis], dilation=d[axis], before=before))
    return tuple(out)


def _layout_mistakes(call: Call) -> Iterator[Candidate]:
    fmt = call.data_format
    yield Candidate("layout_swapped", f"data_format ignored: the arrays and attributes read as "
                    f"{OTHER_FORMAT[fmt]}",
                    lambda ops: reference(call, ops, data_format=OTHER_FORMAT[fmt]))
    for memory in (fmt, OTHER_FORMAT[fmt]):
        read_as = OTHER_FORMAT[memory]

        def compute(ops, memory=memory, read_as=read_as):
            ops = {k: (reinterpret(v, memory, read_as) if k in ACTIVATIONS else v)
                   for k, v in ops.items()}
            y = evaluate(call, ops, call.dims)
            return emit(call, y if call.kind == "filter" else reinterpret(y, read_as, memory))
        yield Candidate("layout_swapped", f"{memory} activations read (and written) as "
                        f"{read_as}", compute)
    dims = _attr_read(call)
    if dims != call.dims:
        yield geo("layout_swapped", f"strides, dilations and paddings read as "
                  f"{OTHER_FORMAT[fmt]}: strides {pair_text(dims, 'stride')}, dilations "
                  f"{pair_text(dims, 'dilation')}, top/left padding {pair_text(dims, 'before')}",
                  call, dims)
    if call.geometry.padding == "EXPLICIT":
        (t, b), (left, right) = ((d.before, d.after) for d in call.dims)
        for before, how in (((b, right), "before and after swapped"),
                            ((left, t), "height and width swapped"),
                            ((t, b), "read in ONNX order (top, left, bottom, right)")):
            moved = (call.dims[0]._replace(before=before[0]),
                     call.dims[1]._replace(before=before[1]))
            yield geo("explicit_pads_swapped", f"{how}: top/left padding "
                      f"{pair_text(moved, 'before')} instead of {pair_text(call.dims, 'before')}",
                       call, moved)


def _remainders(call: Call) -> tuple[int, ...]:
    """Per dimension the input rows no window reaches at the end: ``(size + before + after -
    eff) mod stride`` (conv_transpose2d's output_padding)."""
    return tuple((d.size + d.before + d.after - (d.taps - 1) * d.dilation - 1) % d.stride
                 for d in call.dims)


def _output_padding_mistakes(call: Call) -> Iterator[Candidate]:
    rest = _remainders(call)
    if call.kind == "input" and any(rest):
        keep = _keep(call.out_shape, rest)
        planes = f"{rest[0]} plane(s), " if call.rank == 3 else ""
        yield Candidate("output_padding_zeroed", f"the last {planes}{rest[-2]} row(s) and "
                        f"{rest[-1]} column(s) of the input gradient left 0",
                        _after(call, lambda dx: dx * keep))


def candidates(call: Call) -> Iterator[Candidate]:
    """Every flavour of every mistake that applies to the call's op and attributes, in
    :data:`MISTAKES` order (a flavour may still equal the reference on the case);
    ``padding_offset_by_one`` skips the reads an earlier geometry mistake already names."""
    named: set[tuple[Dim, ...]] = set()
    for group in (geometry_mistakes, _filter_mistakes, _size_mistakes, _channel_mistakes,
                  _layout_mistakes, _output_padding_mistakes):
        for cand in group(call):
            if cand.dims is not None:
                named.add(cand.dims)
            yield cand
    yield from (c for c in offset_mistakes(call) if c.dims not in named)
    yield from strides_swapped(call)


def computed(call: Call, ref: np.ndarray) -> Iterator[tuple[Candidate, np.ndarray]]:
    """The candidates with their outputs, skipping those that do not apply, differ in shape
    from ``ref`` or equal it."""
    for cand in candidates(call):
        try:
            out = cand.compute(call.operands)
        except InvalidArgumentError:
            continue
        if out.shape == ref.shape and not np.array_equal(out, ref, equal_nan=True):
            yield cand, out


def variants(tf_op: str, tf_args: dict[str, Any]) -> Iterator[tuple[str, np.ndarray]]:
    """(mistake id, float64 output of an implementation making it) for the canonical call, in
    :data:`MISTAKES` order; a mistake with several flavours is yielded once per flavour."""
    call = canonical(tf_op, tf_args)
    for cand, out in computed(call, reference(call)):
        yield cand.id, out
