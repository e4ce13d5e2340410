"""The cases of a sweep: the catalogue of named edge classes (each tried on every run, once per
dtype), then seeded random cases, smallest sizes first.

Random geometries (of the op's number of spatial dimensions, :func:`op_rank`): strides and
dilations 1-3, kernels 1-4, sides growing from 1 to :data:`MAX_SIDE` with the case index
(:data:`GROWTH` cases per step; 3-D: :data:`MAX_SIDE_3D`), 1-3 channels; only cases
the convention's framework accepts (:func:`engine.verify.conventions.accepts`) and the
``--support`` spec allows. A class none of whose :data:`TRIES` draws the spec allows is excluded
by it (:func:`excluded_classes`): not tried, e.g. ``empty_output`` under ``nonempty``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from engine.base.errors import InvalidArgumentError
from engine.verify.conventions import (
    TORCH_STRING_PADDING,
    Geometry,
    accepts,
    depthwise_op,
    op_rank,
    shapes_nd,
)
from engine.verify.support import TORCH_PADDINGS, Support, remainders, torch_same_pads
from engine.verify.values import Case

MAX_SIDE = 9
#: The largest side of a random 3-D case (three sides of 9 would make cases ten times larger).
MAX_SIDE_3D = 6
GROWTH = 25
#: Draws per case before a class is given up for this run (nothing it asks is accepted).
TRIES = 300

Draw = Callable[[np.random.Generator, Geometry], Geometry | None]


def _pair(rng: np.random.Generator, lo: int, hi: int, rank: int = 2) -> tuple[int, ...]:
    """``rank`` draws from ``lo``-``hi``, one per spatial dimension."""
    return tuple(int(rng.integers(lo, hi + 1)) for _ in range(rank))


def _fill(g: Geometry, v: int) -> tuple[int, ...]:
    return (v,) * g.rank


def base(rng: np.random.Generator, cap: int, convention: str, op: str,
         support: Support) -> Geometry:
    """A random geometry of ``op`` with sides up to ``cap`` (padded as :func:`_torch_padding`
    says when the spec allows PyTorch's padding strings only)."""
    depthwise = depthwise_op(op, convention)
    rank = op_rank(op)
    channels = int(rng.integers(1, 4))
    groups = 1
    if not depthwise and channels > 1 and rng.random() < 0.3:
        groups = channels
    out = int(rng.integers(1, 4)) * (groups if not depthwise else 1)
    kernel = _pair(rng, 1, min(4, max(cap, 1)), rank)
    g = Geometry(batch=int(rng.integers(1, 3)), height=int(rng.integers(1, cap + 1)),
                 width=int(rng.integers(1, cap + 1)), channels=channels, kernel=kernel,
                 out_channels=out, groups=groups, strides=_pair(rng, 1, 3, rank),
                 dilations=_pair(rng, 1, 3, rank) if rng.random() < 0.5 else (1,) * rank,
                 depthwise=depthwise,
                 planes=int(rng.integers(1, cap + 1)) if rank == 3 else None)
    if rank == 3:  # SAME or VALID only (tf.raw_ops' Conv3D); torch: where symmetric
        g = g.with_(padding=str(rng.choice(["SAME", "VALID"])))
        if convention == "tf":
            g = g.with_(data_format=str(rng.choice(["NHWC", "NCHW"])))
    elif convention == "torch":
        p = _pair(rng, 0, 2) if rng.random() < 0.6 else (0, 0)
        g = g.with_(padding="EXPLICIT", pads=(p[0], p[0], p[1], p[1]))
    else:
        padding = str(rng.choice(["SAME", "VALID", "EXPLICIT"]))
        pads = tuple(int(v) for v in rng.integers(0, 3, 4)) if padding == "EXPLICIT" else (0,) * 4
        g = g.with_(padding=padding, pads=pads, data_format=str(rng.choice(["NHWC", "NCHW"])))
    return _torch_padding(rng, g, convention, op, support)


def _torch_padding(rng: np.random.Generator, g: Geometry, convention: str, op: str,
                   support: Support) -> Geometry:
    """``g`` padded as one of the spec's PyTorch strings, drawn, when those are all its
    ``padding`` words (few random geometries are): ``valid`` no padding, ``same`` stride 1 and
    its pads: tf SAME and VALID; torch ``conv2d`` the strings themselves
    (:data:`engine.verify.conventions.TORCH_STRING_PADDING`), the other torch ops (int
    paddings only) those pads, which torch takes only when symmetric."""
    words = support.words.get("padding")
    if not words or not words <= set(TORCH_PADDINGS):
        return g
    strings = convention == "tf" or op in TORCH_STRING_PADDING or g.rank == 3
    if str(rng.choice(sorted(words))) == "valid":
        return g.with_(padding="VALID" if strings else "EXPLICIT", pads=(0,) * 4)
    g = g.with_(strides=_fill(g, 1))
    return g.with_(padding="SAME", pads=(0,) * 4) if strings else \
        g.with_(pads=torch_same_pads(g))


def _remainder(g: Geometry) -> bool:
    return any(remainders(g, shapes_nd(g)))


def _odd_totals(g: Geometry) -> tuple[bool, ...]:
    """Per dimension, whether its total padding is odd."""
    return tuple((b + a) % 2 == 1 for b, a in shapes_nd(g).pads)


def _odd_same(g: Geometry) -> bool:
    return g.padding == "SAME" and any(_odd_totals(g))


def _when(test: Callable[[Geometry], bool], **fixed) -> Draw:
    """Set ``fixed`` fields (values or callables of rng), then keep geometries passing test."""
    def draw(rng: np.random.Generator, g: Geometry) -> Geometry | None:
        g = g.with_(**{k: _value(v, rng, g) for k, v in fixed.items()})
        try:
            return g if test(g) else None
        except InvalidArgumentError:  # a geometry TF refuses
            return None
    return draw


def _value(v: Any, rng: np.random.Generator, g: Geometry) -> Any:
    """A fixed field's value: a callable of rng (of rng and the geometry: :func:`_per_rank`),
    a tuple given for 2-D (the same entry in every dimension of a 3-D geometry), or as is."""
    if callable(v):
        return v(rng, g) if getattr(v, "ranked", False) else v(rng)
    if isinstance(v, tuple) and v and len(set(v)) == 1 and len(v) == 2:
        return _fill(g, v[0])
    return v


def _per_rank(draw: Callable[..., tuple[int, ...]]) -> Callable[..., tuple[int, ...]]:
    """``draw(rng, rank)`` as a field drawn for the geometry's rank."""
    def field(rng: np.random.Generator, g: Geometry) -> tuple[int, ...]:
        return draw(rng, g.rank)
    field.ranked = True  # type: ignore[attr-defined]
    return field


def _ints(lo: int, hi: int) -> Callable[..., tuple[int, ...]]:
    """A field drawn from ``lo``-``hi`` per spatial dimension."""
    return _per_rank(lambda rng, rank: _pair(rng, lo, hi, rank))


def _strided(rng, rank: int = 2) -> tuple[int, ...]:
    return _pair(rng, 2, 3, rank)


def _explicit_asym(rng) -> tuple[int, int, int, int]:
    while True:
        pads = tuple(int(v) for v in rng.integers(0, 3, 4))
        if pads[0] != pads[1] or pads[2] != pads[3]:
            return pads  # type: ignore[return-value]


def _two(op: str) -> bool:
    return op_rank(op) == 2


def _three(op: str) -> bool:
    return op_rank(op) == 3


def _depth_only(lo: int, hi: int) -> Callable[..., tuple[int, ...]]:
    """A field over 1 in the depth (planes) dimension only: ``(v, 1, 1)``, ``v`` in lo-hi."""
    return _per_rank(lambda rng, rank: (int(rng.integers(lo, hi + 1)), *(1,) * (rank - 1)))


def _depth_remainder_only(g: Geometry) -> bool:
    first, *rest = remainders(g, shapes_nd(g))
    return first != 0 and not any(rest)


def _empty_depth(g: Geometry) -> bool:
    out = shapes_nd(g).out_spatial
    return out[0] == 0 and min(out[1:]) > 0


_STRIDED = _per_rank(_strided)
#: name -> (conventions it applies to, ops predicate, draw). A tuple of two equal entries is
#: that entry in every spatial dimension (:func:`_value`); the 3-D classes come last.
CATALOGUE: dict[str, tuple[tuple[str, ...], Callable[[str], bool], Draw]] = {
    "output_remainder": (("tf", "torch"), lambda op: True,
                         _when(lambda g: max(g.strides) > 1 and _remainder(g),
                               strides=_STRIDED)),
    "one_by_one_stride": (("tf", "torch"), lambda op: True,
                          _when(lambda g: True, kernel=(1, 1), strides=_STRIDED)),
    "filter_wider_than_stride": (("tf", "torch"), lambda op: True, _when(
        lambda g: g.kernel[0] > g.strides[0] > 1, strides=(2, 2), kernel=_ints(3, 4))),
    "dilation_with_stride": (("tf", "torch"), lambda op: True, _when(
        lambda g: True, strides=_STRIDED, dilations=_ints(2, 3), kernel=_ints(2, 3))),
    "same_odd_padding": (("tf",), lambda op: True,
                         _when(_odd_same, padding="SAME", pads=(0, 0, 0, 0),
                               kernel=_ints(2, 4))),
    "asymmetric_explicit": (("tf",), _two,
                            _when(lambda g: True, padding="EXPLICIT", pads=_explicit_asym)),
    "filter_larger_than_input": (("tf", "torch"), lambda op: True, _when(
        lambda g: any(k > n for k, n in zip(g.kernel, g.sizes, strict=True)),
        kernel=_ints(3, 4), height=lambda rng: int(rng.integers(1, 3)))),
    "empty_output": (("tf",), lambda op: True, _when(
        lambda g: 0 in shapes_nd(g).output_shape,
        padding="VALID", pads=(0, 0, 0, 0), kernel=(3, 3), height=2, strides=(2, 2))),
    "zero_batch": (("tf", "torch"), lambda op: True, _when(lambda g: True, batch=0)),
    "zero_channels": (("tf",), _two, _when(lambda g: True, out_channels=0)),
    "non_square": (("tf", "torch"), lambda op: True, _when(
        lambda g: all(len(set(v)) > 1 for v in (g.sizes, g.kernel, g.strides, g.dilations)),
        dilations=_ints(1, 3), strides=_ints(1, 3))),
    "batch_gt_1": (("tf", "torch"), lambda op: True,
                   _when(lambda g: True, batch=lambda rng: int(rng.integers(2, 4)))),
    "groups": (("tf", "torch"), lambda op: not op.startswith("Depthwise"), _when(
        lambda g: True, channels=lambda rng: int(rng.choice([2, 4, 6])), groups=2,
        out_channels=lambda rng: 2 * int(rng.integers(1, 3)))),
    "depth_multiplier": (("tf",), lambda op: op.startswith("Depthwise"), _when(
        lambda g: True, out_channels=lambda rng: int(rng.integers(2, 4)),
        channels=lambda rng: int(rng.integers(2, 4)))),
    "layout_nhwc": (("tf",), lambda op: True, _when(lambda g: True, data_format="NHWC")),
    "layout_nchw": (("tf",), lambda op: True, _when(
        lambda g: g.channels > 1, data_format="NCHW",
        channels=lambda rng: int(rng.integers(2, 4)))),
    "noncontiguous": (("tf", "torch"), lambda op: True, _when(lambda g: True)),
    "readonly": (("tf", "torch"), lambda op: True, _when(lambda g: True)),
    "depth_remainder_only": (("tf", "torch"), _three, _when(
        _depth_remainder_only, strides=_depth_only(2, 3))),
    "stride_in_depth_only": (("tf", "torch"), _three,
                             _when(lambda g: True, strides=_depth_only(2, 3))),
    "dilation_in_depth_only": (("tf", "torch"), _three, _when(
        lambda g: g.kernel[0] > 1, dilations=_depth_only(2, 3))),
    "same_odd_depth_only": (("tf",), _three, _when(
        lambda g: _odd_totals(g) == (True, False, False), padding="SAME",
        kernel=_ints(1, 4))),
    "non_cubic_filter": (("tf", "torch"), _three,
                         _when(lambda g: len(set(g.kernel)) == 3, kernel=_ints(1, 4))),
    "empty_depth": (("tf",), _three, _when(_empty_depth, padding="VALID",
                                           kernel=_depth_only(3, 4), planes=2)),
}


def edge_classes(op: str, convention: str) -> list[str]:
    return [name for name, (convs, ops, _) in CATALOGUE.items()
            if convention in convs and ops(op)]


def _fits(g: Geometry, op: str, convention: str, support: Support) -> bool:
    if not accepts(g, convention, op):
        return False
    return support.allows(g, shapes_nd(g))


def _draw(name: str, op: str, convention: str, rng: np.random.Generator,
          support: Support) -> Geometry | None:
    """A geometry of the edge class ``name`` that is accepted and supported (None: none in
    :data:`TRIES` draws)."""
    draw = CATALOGUE[name][2]
    for i in range(TRIES):
        g = draw(rng, base(rng, 3 + i // 50, convention, op,
                            support))
        if g is not None and _fits(g, op, convention, support):
            return g
    return None


def catalogue_case(name: str, op: str, convention: str, dtype: str, rng: np.random.Generator,
                   support: Support) -> Case | None:
    """A case of the edge class ``name``, or None when no accepted, supported one was drawn."""
    g = _draw(name, op, convention, rng, support)
    if g is None:
        return None
    memory = name if name in ("noncontiguous", "readonly") else "contiguous"
    return Case(op, convention, g, dtype, name, int(rng.integers(2**31)), memory)


@functools.lru_cache(maxsize=32)
def excluded_classes(op: str, convention: str, support: Support) -> tuple[str, ...]:
    """The edge classes of ``op`` the spec excludes: none of :data:`TRIES` draws (from a fixed
    seed, whatever the sweep's) is a case it allows. The sweep does not try them."""
    return tuple(name for name in edge_classes(op, convention)
                 if _draw(name, op, convention, np.random.default_rng(0), support) is None)


def generate(op: str, convention: str, dtypes: list[str], total: int, seed: int,
             support: Support) -> Iterator[Case]:
    """``total`` cases: the catalogue (each class per dtype) first, then random ones with sides
    growing from 1 (``--cases`` counts both)."""
    rng = np.random.default_rng(seed)
    count = 0
    excluded = excluded_classes(op, convention, support)
    for dtype in dtypes:
        for name in edge_classes(op, convention):
            if name in excluded:
                continue
            if count >= total:
                return
            case = catalogue_case(name, op, convention, dtype, rng, support)
            if case is not None:
                count += 1
                yield case
    i, misses, rank = 0, 0, op_rank(op)
    while count < total and misses < TRIES * 10:
        cap = min(MAX_SIDE if rank == 2 else MAX_SIDE_3D, 1 + i // GROWTH)
        g = base(rng, cap, convention, op, support)
        i += 1
        if not _fits(g, op, convention, support):
            misses += 1
            continue
        misses = 0
        count += 1
        yield Case(op, convention, g, dtypes[count % len(dtypes)], "random",
                   int(rng.integers(2**31)))
