"""Say what is wrong with an implementation's output: a known mistake, or the pattern of wrong
elements and the terms of the worst one.

Tolerance (the one table, :data:`engine.base.dtypes.RTOL`, with the bound rule of
:func:`engine.base.tolerance.verdict`): a value ``v`` agrees with an exact value ``e`` when
``verdict(|v - e|, bound, |v - e| / bound, RTOL[dtype])`` holds, ``bound`` being the element's
sum of |products| (the op on the operands' absolute values; absolute tolerance where it is 0).
An output agrees when every element does. :func:`diagnose` names the first mistake of
:data:`~engine.verify.mistakes.MISTAKES` whose variant agrees with the output (each variant with
its own bound), and any other mistake that matches as well; ``id`` is None when the output agrees
with the reference, when no known mistake matches (the text then describes the wrong elements
and the worst element's terms), and when the output holds values no computation on the
operands gives (:func:`engine.verify.unwritten.unwritten_memory`: "reads memory it never
wrote", never a mistake id).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.base.dtypes import RTOL, to_dtype
from engine.base.errors import InvalidArgumentError
from engine.base.names import escaped
from engine.base.tolerance import relative, verdict
from engine.explain.terms import OPS as EXPLAINED
from engine.explain.terms import Explanation, TooManyTerms, explain_element
from engine.shapes.conv import conv2d_geometry, conv3d_geometry
from engine.shapes.geometry import to_channels_last
from engine.shapes.ops import CONV_OPS
from engine.verify import mistakes as mk
from engine.verify.call_model import OTHER_FORMAT, Call
from engine.verify.mistakes import ALL_MISTAKES, MISTAKES
from engine.verify.unwritten import unwritten_memory, unwritten_text

#: explain's block type id of each tf.raw_ops name (the op table's).
TYPE_IDS: dict[str, str] = {op.name: op.block_type for op in CONV_OPS}
#: Most terms of the worst element that are listed and analysed.
MAX_TERMS = 4096
#: Most nonzero terms of the worst element searched subset by subset for the value given.
SUBSET_TERMS = 12
#: Axis names of an array's index, by port (activations by data_format).
AXIS_NAMES = {"NHWC": ("image", "row", "column", "channel"),
              "NCHW": ("image", "channel", "row", "column"),
              "filter": ("row", "column", "in channel", "out channel"),
              # the 3-D ops' (explain lists their terms too)
              "NDHWC": ("image", "plane", "row", "column", "channel"),
              "NCDHW": ("image", "channel", "plane", "row", "column"),
              "filter3d": ("plane", "row", "column", "in channel", "out channel")}
@dataclass(frozen=True)
class Diagnosis:
    """A mistake id of :data:`MISTAKES` (None: no known mistake, or no mistake) and a sentence
    for the implementation's author."""

    id: str | None
    text: str


def _rtol(dtype: str) -> float:
    to_dtype(dtype)  # an unknown name is an InvalidArgumentError
    return RTOL[dtype]


def _close(value: float, exact: float, bound: float, tol: float) -> bool:
    err = abs(value - exact)
    return verdict(err, bound, relative(err, bound), tol)


def wrong_elements(got: np.ndarray, expected: np.ndarray, bound: np.ndarray,
                   tol: float) -> np.ndarray:
    """Where ``got`` disagrees with ``expected`` (NaN and Inf disagree)."""
    with np.errstate(invalid="ignore"):
        err = np.abs(got - expected)
    return np.vectorize(lambda e, b: not _close(e, 0.0, b, tol), otypes=[bool])(err, bound) \
        if err.size else np.zeros(err.shape, bool)


def agrees(got: np.ndarray, expected: np.ndarray, bound: np.ndarray, tol: float) -> bool:
    """Every element of ``got`` agrees with ``expected`` (a normwise test first: an element
    within its bound is within the largest bound)."""
    if got.size == 0:
        return True
    with np.errstate(invalid="ignore"):
        max_abs = float(np.max(np.abs(got - expected)))
    scale = float(np.max(bound))
    if not verdict(max_abs, scale, relative(max_abs, scale), tol):
        return False
    return not wrong_elements(got, expected, bound, tol).any()


_HEX = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER_LIST = re.compile(r"[\[(]\s*-?\d+(?:\s*,\s*-?\d+)*\s*,?\s*[\])]")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def refusal_key(message: str) -> str:
    """``message`` with its numbers, shapes and addresses replaced (``#``, ``[#]``, ``<hex>``;
    digits inside a name such as ``Conv2D`` or ``float32`` kept) and its spaces collapsed:
    refusals that differ only in the numbers share the key."""
    text = _HEX.sub("<hex>", message)
    text = _NUMBER_LIST.sub("[#]", text)
    text = _NUMBER.sub("#", text)
    return " ".join(text.split())


def diagnose_refusal(message: str) -> Diagnosis:
    """The diagnosis of the ``raised`` verdict on a case TensorFlow accepts: the message
    quoted (control characters escaped)."""
    mid = "refused_valid_case"
    return Diagnosis(mid, f"Matches {mid}: {ALL_MISTAKES[mid]}: \"{escaped(message)}\".")


def diagnose(tf_op: str, tf_args: dict[str, Any], got: np.ndarray, reference: np.ndarray,
             dtype: str) -> Diagnosis:
    """What is wrong with ``got`` (the implementation's output in the TF layout, float64) for
    the canonical call ``tf_op(**tf_args)`` whose exact result is ``reference``."""
    tol = _rtol(dtype)
    got, reference = np.asarray(got, np.float64), np.asarray(reference, np.float64)
    if got.shape != reference.shape:
        return diagnose_shape(tf_op, tf_args, got.shape, reference.shape)
    if unwritten_memory(tf_op, tf_args, got):
        return Diagnosis(None, unwritten_text(tf_op, tf_args, got))
    call = mk.canonical(tf_op, tf_args)
    magnitudes = {k: np.abs(v) for k, v in call.operands.items()}
    bound = mk.reference(call, magnitudes)
    if agrees(got, reference, bound, tol):
        return Diagnosis(None, f"The output agrees with the reference within the {dtype} "
                               f"tolerance (rtol {tol:g} of each element's sum of |products|).")
    found = [cand for cand, out in mk.computed(call, reference)
             if agrees(got, out, np.abs(cand.compute(magnitudes)), tol)]
    if found:
        first = found[0]
        also = {c.id: c for c in found if c.id != first.id}
        text = (f"Matches {first.id}: {MISTAKES[first.id]} ({first.detail}), within the {dtype} "
                "tolerance")
        if also:
            text += "; indistinguishable here from " + "; ".join(
                f"{c.id} ({c.detail})" for c in also.values())
        return Diagnosis(first.id, text + ".")
    wrong = wrong_elements(got, reference, bound, tol)
    terms = mk.reference(call, {k: np.ones_like(v) for k, v in call.operands.items()})
    unread = (" Every wrong element has no terms (no window reads it: the reference is 0), as "
              "if the output were never written there." if not (wrong & (terms != 0)).any()
              else "")
    return Diagnosis(None, "No known mistake matches. " + pattern(call, wrong) + unread + " "
                     + worst_terms(call, got, reference, tol))


def _ranges(values: np.ndarray) -> str:
    """Sorted distinct ints as ``0-2, 5``."""
    vals = sorted({int(v) for v in values})
    parts = []
    for _, run in itertools.groupby(enumerate(vals), lambda t: t[1] - t[0]):
        seq = [v for _, v in run]
        parts.append(str(seq[0]) if len(seq) == 1 else f"{seq[0]}-{seq[-1]}")
    return ", ".join(parts)


def pattern(call: Call, wrong: np.ndarray) -> str:
    """Where the wrong elements are: ``5 of 16 elements are wrong (border only, one channel):
    rows 0, 3; columns 0-3; channels 1; images 0.`` (``wrong`` in the call's layout)."""
    k, total = int(wrong.sum()), wrong.size
    tags: list[str] = []
    if call.kind == "filter":
        *index, q, o = np.nonzero(wrong)
        *kernel, nq, no = wrong.shape
        taps = sorted(set(zip(*(a.tolist() for a in index), strict=True)))
        if k < total and np.prod(kernel) > 1 and len(taps) == 1:
            tags.append("one filter tap")
        inner, outer = ("channel", "multiplier") if call.depthwise else \
            ("input channel", "output channel")
        if k < total and no > 1 and len(set(o.tolist())) == 1:
            tags.append(f"one {outer}")
        if k < total and nq > 1 and len(set(q.tolist())) == 1:
            tags.append(f"one {inner}")
        names = "i, j" if len(kernel) == 2 else "a, i, j"
        where = (f"taps ({names}) {', '.join(str(t) for t in taps[:8])}"
                 f"{', ...' if len(taps) > 8 else ''}; {inner}s {_ranges(q)}; "
                 f"{outer}s {_ranges(o)}")
    else:
        w = to_channels_last(wrong, call.data_format)
        n, *at, ch = np.nonzero(w)
        nn, *sides, chans = w.shape
        spatial = w.any(axis=(0, -1))
        border = np.ones(sides, bool)
        border[(slice(1, -1),) * len(sides)] = False
        if k < total and min(sides) > 2:
            if not (spatial & ~border).any():
                tags.append("border only")
            elif not (spatial & border).any():
                tags.append("interior only")
        if k < total and chans > 1 and len(set(ch.tolist())) == 1:
            tags.append("one channel")
        if k < total and nn > 1 and len(set(n.tolist())) == 1:
            tags.append("one image")
        planes = f"planes {_ranges(at[0])}; " if len(at) == 3 else ""
        where = (f"{planes}rows {_ranges(at[-2])}; columns {_ranges(at[-1])}; channels "
                 f"{_ranges(ch)}; images {_ranges(n)}")
    if k == total:
        tags.insert(0, "all")
    label = f" ({', '.join(tags)})" if tags else ""
    return f"{k} of {total} elements are wrong{label}: {where}."


def _g(v: float) -> str:
    return f"{v:.6g}"


def _term_masks(e: Explanation, data_format: str) -> list[tuple[np.ndarray, str]]:
    """Sets of terms sharing one index entry of one operand, each set once, with every
    ``port axis value`` naming it (``input row 5 and filter row 2``)."""
    found: dict[bytes, tuple[np.ndarray, list[str]]] = {}
    for f in e.factors:
        filter_names = "filter" if f.index.shape[1] == 4 else "filter3d"
        names = AXIS_NAMES[filter_names if f.port == "filter" else data_format]
        for axis, name in enumerate(names):
            column = f.index[:, axis]
            for value in np.unique(column):
                mask = column == value
                if mask.all():
                    continue
                entry = found.setdefault(mask.tobytes(), (mask, []))
                entry[1].append(f"{f.port} {name} {int(value)}")
    return [(mask, " and ".join(names)) for mask, names in found.values()]


def _term_text(e: Explanation, t: int) -> str:
    return "*".join(f"{f.port}[{', '.join(str(int(v)) for v in f.index[t])}]"
                    for f in e.factors)


def analyse_terms(e: Explanation, value: float, tol: float, data_format: str) -> str:
    """How ``value`` relates to the terms of the element ``e`` explains: which of them it sums,
    which it misses or counts twice; else its ratio to the exact sum."""
    p, exact, count = e.products, e.sum, e.terms
    bound = float(np.abs(p).sum())
    if count == 0:
        return "its sum has no terms (every tap reads padding)"
    if not np.isfinite(value) and np.all(np.isfinite(p)):
        return f"is {value} although every term is finite"
    if _close(value, 0.0, bound, tol):
        return f"is 0, as if none of its {count} terms were counted"
    masks = [(m, d, float(p[m].sum())) for m, d in _term_masks(e, data_format)]
    masks = [(m, d, s) for m, d, s in masks if not _close(s, 0.0, bound, tol)]
    for mask, desc, part in masks:
        if _close(value, exact - part, bound, tol):
            k = int(mask.sum())
            return (f"equals the sum of {count - k} of its {count} terms; missing the {k} that "
                    f"read {desc}")
    for mask, desc, part in masks:
        if _close(value, part, bound, tol):
            return (f"equals the sum of only {int(mask.sum())} of its {count} terms, those that "
                    f"read {desc}")
        if _close(value, exact + part, bound, tol):
            return f"counts the {int(mask.sum())} terms that read {desc} twice"
    nonzero = np.flatnonzero(p)
    if len(nonzero) <= SUBSET_TERMS:
        for r in range(1, len(nonzero)):
            for missing in itertools.combinations(nonzero.tolist(), r):
                if _close(value, exact - float(p[list(missing)].sum()), bound, tol):
                    return (f"equals the sum of {count - r} of its {count} terms; missing "
                            + ", ".join(_term_text(e, t) for t in missing))
    if exact != 0:
        return f"is {value / exact:.4g} times the exact sum"
    return f"differs from it by {_g(value - exact)}"


def worst_terms(call: Call, got: np.ndarray, reference: np.ndarray, tol: float) -> str:
    """The worst element (largest error; NaN and Inf first): its value, the reference's terms
    (:mod:`engine.explain.terms`) and how the value relates to them."""
    with np.errstate(invalid="ignore"):
        err = np.abs(got - reference)
    err = np.where(np.isfinite(err), err, np.inf)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))
    names = ("input", "filter", "out_backprop", "filter_sizes", "input_sizes")
    inputs = {k: (np.asarray(v, np.float64) if k in ("input", "filter", "out_backprop") else v)
              for k, v in call.args.items() if k in names}
    attrs = {k: v for k, v in call.args.items() if k not in names}
    value = float(got[index])
    head = f"[{', '.join(str(i) for i in index)}]: the implementation gives {_g(value)}"
    if TYPE_IDS[call.op] not in EXPLAINED:  # explain lists no terms of this op (3-D)
        return f"Worst element {head}, the reference {_g(float(reference[index]))}."
    try:
        e = explain_element(TYPE_IDS[call.op], attrs, inputs, index, max_terms=MAX_TERMS)
    except TooManyTerms as err_terms:
        return (f"Worst element {head}, the reference {_g(float(reference[index]))} (a sum of "
                f"{err_terms.terms} terms, too many to analyse).")
    left, formula = e.formula.split(" = ", 1)
    return (f"Worst element {left}: the implementation gives {_g(value)}, the reference "
            f"{_g(e.sum)} = {formula} ({e.domain}; {e.terms} terms); the implementation's value "
            f"{analyse_terms(e, value, tol, call.data_format)}.")


def _forward_shape(call: Call, **changes: Any) -> tuple[int, ...] | None:
    args = {k: call.args.get(k, d) for k, d in (("strides", None), ("padding", None),
                                                ("explicit_paddings", ()),
                                                ("data_format", call.data_format),
                                                ("dilations", _unit(call)))} | changes
    if args["padding"] != "EXPLICIT":
        args["explicit_paddings"] = ()
    shapes = np.shape(call.args["input"]), np.shape(call.args["filter"])
    try:
        if call.rank == 3:
            del args["explicit_paddings"]
            return conv3d_geometry(*shapes, **args).output_shape
        return conv2d_geometry(*shapes, depthwise=call.depthwise, **args).output_shape
    except InvalidArgumentError:
        return None


def _unit(call: Call) -> list[int]:
    """Dilations (or strides) of 1."""
    return [1] * (call.rank + 2)


def _explicit(call: Call, t: int, b: int, left: int, right: int) -> list[int]:
    return ([0, 0, t, b, left, right, 0, 0] if call.data_format == "NHWC"
            else [0, 0, 0, 0, t, b, left, right])


def _shape_candidates(call: Call, ref_shape: tuple[int, ...]):
    """(id, detail, shape) of the wrong shapes known mistakes give, in MISTAKES order but for a
    size merely one off, tried last (a specific mistake's shape may be one off too)."""
    args, fmt = call.args, call.data_format
    first = 1 if fmt.endswith("C") or call.kind == "filter" else 2
    axes = range(first, first + call.rank)
    if call.kind == "output":
        yield ("stride_dilation_swapped", "strides and dilations swapped",
               _forward_shape(call, strides=args.get("dilations", _unit(call)),
                              dilations=args["strides"]))
    if call.kind == "filter":
        *k, q, o = ref_shape
        yield "filter_in_out_swapped", "in and out channels swapped", (*k, o, q)
    if call.kind == "input":
        shape = list(ref_shape)
        for axis, d in zip(axes, call.dims, strict=True):
            span = d.size + d.before + d.after - (d.taps - 1) * d.dilation - 1
            shape[axis] = d.size - span % d.stride
        yield ("output_size_off_by_one", ("the input size computed from the output size, "
               "losing the remainder (size + pads - dilation*(taps-1) - 1) mod stride"),
               tuple(shape))
    if call.kind == "output":
        yield "dilation_ignored", "dilations taken as 1", _forward_shape(call,
                                                                        dilations=_unit(call))
        yield "padding_ignored", "VALID instead of the padding", _forward_shape(call,
                                                                               padding="VALID")
    if call.kind != "filter":
        n, *inner = ref_shape
        other = (n, inner[-1], *inner[:-1]) if fmt.endswith("C") else (n, *inner[1:], inner[0])
        yield "layout_swapped", f"written as {OTHER_FORMAT[fmt]}", other
        yield ("layout_swapped", "data_format ignored",
               _forward_shape(call, data_format=OTHER_FORMAT[fmt]) if call.kind == "output"
               else None)
    if call.kind == "output" and call.geometry.padding == "EXPLICIT":
        (t, b), (left, right) = ((d.before, d.after) for d in call.dims)
        yield ("explicit_pads_swapped", "height and width paddings swapped",
               _forward_shape(call, explicit_paddings=_explicit(call, left, right, t, b)))
        yield ("explicit_pads_swapped", "paddings read in ONNX order (top, left, bottom, right)",
               _forward_shape(call, explicit_paddings=_explicit(call, t, left, b, right)))
    if call.kind == "output":
        strides = list(args["strides"])
        for i, j in itertools.combinations(axes, 2):
            swapped = list(strides)
            swapped[i], swapped[j] = strides[j], strides[i]
            yield "strides_swapped", "two dimensions' strides exchanged", \
                _forward_shape(call, strides=swapped) if swapped != strides else None
    if call.kind != "filter":  # last: a specific mistake's shape may also be one off
        for steps in [tuple(sign * c for c in cut) for sign in (-1, 1)
                      for cut in mk.subsets(call.rank)]:
            shape = list(ref_shape)
            for axis, step in zip(axes, steps, strict=True):
                shape[axis] += step
            yield "output_size_off_by_one", "the output size computed one off", tuple(shape)


def diagnose_shape(tf_op: str, tf_args: dict[str, Any], got_shape: tuple[int, ...],
                   reference_shape: tuple[int, ...] | None = None) -> Diagnosis:
    """The first known mistake that gives an output of ``got_shape`` (in the TF layout) instead
    of the reference's shape (the wrong_shape verdict), or id None."""
    call = mk.canonical(tf_op, tf_args)
    if reference_shape is None:
        reference_shape = mk.emit(call, np.empty(call.out_shape)).shape
    got_shape, ref = tuple(int(s) for s in got_shape), tuple(int(s) for s in reference_shape)
    said = f"the output has shape {list(got_shape)} where TensorFlow's is {list(ref)}"
    empty = Diagnosis("empty_output_shape", f"Matches empty_output_shape: "
                      f"{ALL_MISTAKES['empty_output_shape']}: {said}.")
    if 0 in ref and 0 not in got_shape and got_shape != ref:
        return empty
    for mid, detail, shape in _shape_candidates(call, ref):
        if shape is not None and tuple(shape) == got_shape and got_shape != ref:
            return Diagnosis(mid, f"Matches {mid}: {MISTAKES[mid]} ({detail}): {said}.")
    if (0 in ref or 0 in got_shape) and got_shape != ref:
        return empty
    return Diagnosis(None, f"No known mistake gives this shape: {said}.")
