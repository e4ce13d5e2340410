"""Shrinking a failing case to a minimal one that still fails with the same verdict.

Order (a case is smaller when this key is, compared left to right): the number of elements
summed over every array argument; then the sum of strides; of dilations; then the elements
of the input, filter and output no array argument holds (a size given as a shape, as
``input_sizes``, and the result: so such a size shrinks too, and then the strides and
dilations it made harmless); then the sum of paddings (the explicit pads, or SAME's computed
ones); then plain over special (contiguous memory, NHWC, VALID padding). Greedy passes,
hypothesis-style: each pass tries, in this order, batch, the spatial sizes (height, width; 3-D:
planes first; to 1, halved, minus 1), channels and groups, out channels, kernel sides, then
strides, dilations, the kernel, strides and dilations on every side at once (what
``equal_strides`` needs), pads (to 1 or 0, minus 1), padding mode, layout and memory; the first
smaller candidate that the framework accepts, the ``--support`` spec allows and that still
fails the same way is taken and the pass starts again, until a pass changes nothing or
:data:`MAX_CALLS` calls were made. Last, where no single step is taken, an axis made plain in one
step (:func:`plain_axes`): its stride, its dilation or both to 1 with its size and kernel side
made smaller at the same time (a stride or dilation can matter only with the size it strides
over, as SAME's padding of an input 3 wide strided by 3 and of one 1 wide strided by 1 are the
same; one step at a time never gets there).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from engine.verify.conventions import Geometry, accepts, shapes_nd
from engine.verify.support import Support
from engine.verify.values import Case, array_sizes

MAX_CALLS = 300


def key(case: Case) -> tuple:
    g = case.geometry
    cg = shapes_nd(g)
    special = ((case.memory != "contiguous") + (g.data_format != "NHWC")
               + (g.padding != "VALID"))
    arrays = sum(array_sizes(case))
    every = sum(math.prod(s) for s in (cg.input_shape, cg.filter_shape, cg.output_shape))
    return (arrays, sum(g.strides), sum(g.dilations), every - arrays,
            sum(p for pair in cg.pads for p in pair), special)


def _smaller(v: int, lo: int) -> list[int]:
    return sorted({c for c in (lo, v // 2, v - 1) if lo <= c < v})


def _pair(p: tuple[int, ...], i: int, v: int) -> tuple[int, ...]:
    """``p`` with entry ``i`` set to ``v``."""
    return (*p[:i], v, *p[i + 1:])


def candidates(g: Geometry, convention: str) -> Iterator[Geometry]:
    """Smaller geometries, in the order of the module docstring."""
    for v in _smaller(g.batch, 1 if g.batch else 0):
        yield g.with_(batch=v)
    for i, size in enumerate(g.sizes):
        for v in _smaller(size, 1):
            yield g.with_sizes(_pair(g.sizes, i, v))
    if not g.depthwise:
        for groups in _smaller(g.groups, 1):
            if g.channels % groups == 0 and g.out_channels % groups == 0:
                yield g.with_(groups=groups)
        per = g.channels // max(g.groups, 1)
        for v in _smaller(per, 1):
            yield g.with_(channels=v * g.groups)
        for v in _smaller(g.out_channels // max(g.groups, 1), 1):
            yield g.with_(out_channels=v * g.groups)
    else:
        for v in _smaller(g.channels, 1):
            yield g.with_(channels=v)
        for v in _smaller(g.out_channels, 1):
            yield g.with_(out_channels=v)
    for i in range(g.rank):
        for v in _smaller(g.kernel[i], 1):
            yield g.with_(kernel=_pair(g.kernel, i, v))
    for field in ("strides", "dilations"):
        for i in range(g.rank):
            for v in _smaller(getattr(g, field)[i], 1):
                yield g.with_(**{field: _pair(getattr(g, field), i, v)})
    for field in ("kernel", "strides", "dilations"):  # both sides at once (equal_strides)
        pair = getattr(g, field)
        if min(pair) > 1:
            for v in _smaller(min(pair), 1):
                yield g.with_(**{field: tuple(p - min(pair) + v for p in pair)})
    if g.padding == "EXPLICIT":
        pads = list(g.pads)
        sym = convention == "torch"
        for i in ((0, 2) if sym else range(4)):
            for v in _smaller(pads[i], 0):
                new = list(pads)
                new[i] = v
                if sym:
                    new[i + 1] = v
                yield g.with_(pads=tuple(new))
        if convention == "tf":
            yield g.with_(padding="VALID", pads=(0, 0, 0, 0))
    if g.padding == "SAME":
        yield g.with_(padding="VALID")
    if g.data_format != "NHWC":
        yield g.with_(data_format="NHWC")


def plain_axes(g: Geometry) -> Iterator[Geometry]:
    """Per axis with a stride or dilation over 1: that stride, that dilation or both set to 1,
    each with the axis's size and kernel side kept or made smaller (two or more changes at
    once; the single ones are :func:`candidates`)."""
    for i, n in enumerate(g.sizes):
        s, d, k = g.strides[i], g.dilations[i], g.kernel[i]
        pairs = {(1, d), (s, 1), (1, 1)} - {(s, d)}
        for s1, d1 in sorted(pairs):
            for n1 in [*_smaller(n, 1), n]:
                for k1 in [*_smaller(k, 1), k]:
                    if (s1 != s) + (d1 != d) + (n1 != n) + (k1 != k) >= 2:
                        yield g.with_sizes(_pair(g.sizes, i, n1)).with_(
                            kernel=_pair(g.kernel, i, k1), strides=_pair(g.strides, i, s1),
                            dilations=_pair(g.dilations, i, d1))


def shrink(case: Case, still_fails: Callable[[Case], bool], support: Support,
           max_calls: int = MAX_CALLS) -> tuple[Case, int]:
    """The minimal case found and the number of calls made."""
    calls = 0
    current, current_key = case, key(case)
    changed = True
    while changed and calls < max_calls:
        changed = False
        options = [current.with_(geometry=c) for c in candidates(current.geometry,
                                                                  case.convention)]
        if current.memory != "contiguous":
            options.append(current.with_(memory="contiguous"))
        options += sorted((current.with_(geometry=c) for c in plain_axes(current.geometry)
                           if accepts(c, case.convention, case.op)), key=key)
        for cand in options:
            if not accepts(cand.geometry, case.convention, case.op):
                continue
            if not support.allows(cand.geometry, shapes_nd(cand.geometry)):
                continue
            k = key(cand)
            if k >= current_key:
                continue
            calls += 1
            if still_fails(cand):
                current, current_key, changed = cand, k, True
                break
            if calls >= max_calls:
                break
    return current, calls
