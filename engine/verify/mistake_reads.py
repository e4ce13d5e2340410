"""The known mistakes that are a geometry read wrongly (:mod:`engine.verify.mistakes` lists
them all): per spatial dimension an implementation's stride, dilation and padding before, as
one :class:`~engine.verify.call_model.Dim` each, computed with
:func:`~engine.verify.call_model.evaluate` (a loop with the right output size and
bounds-checked reads). Also the :class:`Candidate` every mistake's flavour is, and the helpers
the other mistakes share.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from engine.shapes.padding import windowed_output
from engine.verify.call_model import Call, Dim, emit, evaluate

#: The spatial dimensions by name, per rank.
DIM_WORDS = {2: ("height", "width"), 3: ("depth", "height", "width")}


class Candidate(NamedTuple):
    """One flavour of a mistake: ``compute(operands)`` (layout-free operands) is the mistaken
    result in the call's layout (InvalidArgumentError where the kernel refuses it); ``dims``
    the reads of a geometry mistake (None for the others)."""

    id: str
    detail: str
    compute: Callable[[Mapping[str, np.ndarray]], np.ndarray]
    dims: tuple[Dim, ...] | None = None


def pair_text(dims: Sequence[Dim], field: str) -> str:
    """One field of every dimension: ``(1, 2)`` (3-D: ``(1, 2, 2)``)."""
    return f"({', '.join(str(getattr(d, field)) for d in dims)})"


def geo(mid: str, detail: str, call: Call, dims: Sequence[Dim]) -> Candidate:
    """The flavour ``mid`` computing the op with the reads of ``dims`` (one per dimension)."""
    reads = tuple(dims)
    return Candidate(mid, detail, lambda ops: emit(call, evaluate(call, ops, reads)), reads)


def subsets(rank: int) -> list[tuple[int, ...]]:
    """Per dimension 0 or 1, at least one 1, fewest first: (1, 0), (0, 1), (1, 1) in 2-D."""
    return [tuple(int(i in chosen) for i in range(rank)) for r in range(1, rank + 1)
            for chosen in itertools.combinations(range(rank), r)]


def geometry_mistakes(call: Call) -> Iterator[Candidate]:
    dims, pad = call.dims, call.geometry.padding
    if any(d.stride != d.dilation for d in dims):
        yield geo("stride_dilation_swapped",
                  f"strides {pair_text(dims, 'stride')} used as dilations and dilations "
                  f"{pair_text(dims, 'dilation')} as strides",
                  call, tuple(d._replace(stride=d.dilation, dilation=d.stride) for d in dims))
    if pad == "SAME" and any((d.before + d.after) % 2 for d in dims):
        moved = tuple(d._replace(before=d.after) for d in dims)
        yield geo("same_pad_extra_before", f"top/left padding {pair_text(moved, 'before')} "
                  f"instead of {pair_text(dims, 'before')}", call, moved)
        odd = [i for i, d in enumerate(dims) if (d.before + d.after) % 2]
        for i in odd if len(odd) > 1 else ():  # in one dimension only
            one = tuple(d._replace(before=d.after) if j == i else d for j, d in enumerate(dims))
            yield geo("same_pad_extra_before", f"in {DIM_WORDS[call.rank][i]} only: padding "
                      f"before {pair_text(one, 'before')} instead of {pair_text(dims, 'before')}",
                      call, one)


def strides_swapped(call: Call) -> Iterator[Candidate]:
    """Per pair of dimensions with different strides: the two exchanged (SAME's padding then
    follows the strides read)."""
    dims = call.dims
    for i, j in itertools.combinations(range(call.rank), 2):
        if dims[i].stride == dims[j].stride:
            continue
        read = [*dims]
        read[i], read[j] = dims[i]._replace(stride=dims[j].stride), \
            dims[j]._replace(stride=dims[i].stride)
        if call.geometry.padding == "SAME":
            read = [d._replace(before=windowed_output(d.size, d.taps, d.dilation, d.stride,
                                                      "SAME").pad_before) for d in read]
        yield geo("strides_swapped", f"strides {pair_text(read, 'stride')} instead of "
                  f"{pair_text(dims, 'stride')} ({DIM_WORDS[call.rank][i]} and "
                  f"{DIM_WORDS[call.rank][j]} exchanged)", call, read)


def _side(name: str, before: int, step: int) -> str:
    how = "one too many" if step > 0 else "one too few"
    return f"{name} padding {before + step} instead of {before} ({how})"


def _steps(rank: int) -> list[tuple[int, ...]]:
    """The offsets of the padding before, per dimension: the same sign first (+1 then -1,
    fewest dimensions first), then mixed signs."""
    same = [tuple(sign * c for c in cut) for sign in (1, -1) for cut in subsets(rank)]
    mixed = [t for t in itertools.product((1, 0, -1), repeat=rank) if 1 in t and -1 in t]
    return same + mixed


def offset_mistakes(call: Call) -> Iterator[Candidate]:
    names = ("top", "left") if call.rank == 2 else ("front", "top", "left")
    for steps in _steps(call.rank):
        sides = [_side(n, d.before, step) for n, d, step in zip(names, call.dims, steps,
                                                                strict=True) if step]
        yield geo("padding_offset_by_one", ", ".join(sides), call,
                   [d._replace(before=d.before + step)
                    for d, step in zip(call.dims, steps, strict=True)])
