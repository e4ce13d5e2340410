"""``--support SPEC``: what an implementation declares it supports, narrowing the generated
cases (the catalogue, the random search and the shrinker's candidates alike).

A SPEC is tokens separated by spaces, each ``NAME=V1,V2,...``, ``NAME<=N`` (also ``<``, ``>=``,
``>``) or a flag, with the names:

- numbers: ``strides``, ``dilations`` (every entry), ``groups``, ``multiplier`` (depthwise),
  ``kernel`` (every side), ``batch``, ``pads`` (every explicit or SAME pad);
- words: ``layouts`` (NHWC, NCHW: channels last or first, also for the 3-D ops' NDHWC and
  NCDHW), ``dtypes`` (float16, bfloat16, float32, float64),
  ``padding`` (TensorFlow's SAME, VALID, EXPLICIT; PyTorch's strings ``valid``: no padding, and
  ``same``: stride 1 and, per dimension, a total padding of ``d*(k-1)``, the odd one after, as
  ``F.conv2d(padding='same')`` pads); a case passes when it matches any word listed;
- flags (:data:`FLAGS`): ``equal_strides``, ``no_strided_dilation``, ``nonempty``,
  ``no_remainder``.

e.g. ``strides<=2 dilations=1 groups=1 layouts=NHWC dtypes=float32 padding=SAME,VALID
equal_strides``. A bad token is an :class:`~engine.base.errors.InvalidArgumentError` naming it.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.base.dtypes import DTYPES
from engine.base.errors import InvalidArgumentError
from engine.base.names import shown
from engine.shapes.conv import ConvGeometry, ConvGeometryNd
from engine.shapes.padding import PADDINGS
from engine.verify.conventions import Geometry

#: PyTorch's padding strings (``F.conv2d``): lower case, next to TensorFlow's modes.
TORCH_PADDINGS = ("valid", "same")
NUMBERS = ("strides", "dilations", "groups", "multiplier", "kernel", "batch", "pads")
WORDS = {"layouts": ("NHWC", "NCHW"), "dtypes": tuple(DTYPES),
         "padding": (*PADDINGS, *TORCH_PADDINGS)}
_OPS: dict[str, Callable[[int, int], bool]] = {
    "<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "=": operator.eq}
_TOKEN = re.compile(r"([a-z_]+)(<=|>=|<|>|=)(.+)")
_NAME = re.compile(r"[a-z_]+")


def _nd(cg: ConvGeometry | ConvGeometryNd) -> ConvGeometryNd:
    return cg.nd if isinstance(cg, ConvGeometry) else cg


def _pads(cg: ConvGeometryNd) -> tuple[int, ...]:
    """(before, after) of every dimension, flat: (top, bottom, left, right) in 2-D."""
    return tuple(p for pair in cg.pads for p in pair)


def remainders(g: Geometry, cg: ConvGeometry | ConvGeometryNd) -> tuple[int, ...]:
    """The output-size remainder per dimension: ``(size + pads - d*(k-1) - 1) mod s``."""
    return tuple((size + before + after - d * (k - 1) - 1) % s for size, (before, after), d, k, s
                 in zip(g.sizes, _nd(cg).pads, g.dilations, g.kernel, g.strides, strict=True))


def torch_same_pads(g: Geometry) -> tuple[int, ...]:
    """``F.conv2d(padding='same')``'s pads (top, bottom, left, right; 3-D: front and back
    first): per dimension a total of ``d*(k-1)``, half before (rounded down), the rest
    after."""
    totals = (d * (k - 1) for d, k in zip(g.dilations, g.kernel, strict=True))
    return tuple(p for t in totals for p in (t // 2, t - t // 2))


def _nonempty(g: Geometry, cg: ConvGeometryNd) -> bool:
    return all(s > 0 for s in (g.batch, g.channels, g.out_channels, *cg.input_shape,
                               *cg.filter_shape, *cg.output_shape))


#: flag -> (what it declares, the test of a case).
FLAGS: dict[str, tuple[str, Callable[[Geometry, ConvGeometryNd], bool]]] = {
    "equal_strides": ("strides equal in every dimension (height and width; 3-D: and depth)",
                      lambda g, cg: len(set(g.strides)) == 1),
    "no_strided_dilation": ("no case with a stride > 1 and a dilation > 1 (in any dimensions)",
                            lambda g, cg: max(g.strides) == 1 or max(g.dilations) == 1),
    "nonempty": ("no empty array: batch, channels, out channels and every side > 0", _nonempty),
    "no_remainder": ("the output-size remainder (size + pads - d*(k-1) - 1) mod s is 0",
                     lambda g, cg: not any(remainders(g, cg))),
}


def _padding_is(word: str, g: Geometry, cg: ConvGeometryNd) -> bool:
    if word == "valid":
        return not any(_pads(cg))
    if word == "same":
        return max(g.strides) == 1 and _pads(cg) == torch_same_pads(g)
    return g.padding == word


@dataclass(eq=False)  # compared (and cached) by identity
class Support:
    """Parsed ``--support``: each number test a (name, predicate) pair, the word lists and the
    flags; ``text`` the SPEC as given."""

    numbers: list[tuple[str, Callable[[int], bool]]] = field(default_factory=list)
    words: dict[str, set[str]] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    text: str = ""

    def dtypes(self, wanted: list[str]) -> list[str]:
        allowed = self.words.get("dtypes")
        return [d for d in wanted if allowed is None or d in allowed]

    def allows(self, g: Geometry, cg: ConvGeometry | ConvGeometryNd) -> bool:
        cg = _nd(cg)
        values = {
            "strides": g.strides, "dilations": g.dilations, "kernel": g.kernel,
            "groups": (1 if g.depthwise else g.groups,),
            "multiplier": (g.out_channels if g.depthwise else 1,), "batch": (g.batch,),
            "pads": _pads(cg)}
        for name, test in self.numbers:
            if not all(test(v) for v in values[name]):
                return False
        if "layouts" in self.words and g.data_format not in self.words["layouts"]:
            return False
        if "padding" in self.words and not any(_padding_is(w, g, cg)
                                               for w in self.words["padding"]):
            return False
        return all(FLAGS[f][1](g, cg) for f in self.flags)


def _bad(token: str, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"--support token {shown(token)}: {why}", "support")


def _flag(token: str) -> str:
    """A token without an operator: a flag (else the error naming it)."""
    if token in FLAGS:
        return token
    if token in NUMBERS:
        raise _bad(token, f"{token} needs a comparison, e.g. {token}<=2 or {token}=1,2")
    if token in WORDS:
        raise _bad(token, f"{token} needs = and a comma list of {', '.join(WORDS[token])}")
    raise _bad(token, f"unknown flag (one of {', '.join(FLAGS)})")


def parse_support(text: str | None) -> Support:
    """Parse a SPEC (see the module docstring); None or blank supports everything."""
    support = Support(text=text or "")
    for token in (text or "").split():
        if _NAME.fullmatch(token):
            support.flags.add(_flag(token))
            continue
        m = _TOKEN.fullmatch(token)
        if not m:
            raise _bad(token, "expected NAME=VALUES, NAME<=N or a flag (e.g. strides<=2, "
                       "padding=SAME,VALID, equal_strides)")
        name, op, rest = m.groups()
        if name in FLAGS:
            raise _bad(token, f"{name} is a flag: give it alone, without {op} and a value")
        if name in WORDS:
            values = rest.split(",")
            bad = [v for v in values if v not in WORDS[name]]
            if op != "=" or bad:
                raise _bad(token, f"{name} takes = and a comma list of "
                           f"{', '.join(WORDS[name])}")
            support.words[name] = set(values)
        elif name in NUMBERS:
            try:
                nums = [int(v) for v in rest.split(",")]
            except ValueError:
                raise _bad(token, f"{name} takes whole numbers") from None
            if op != "=" and len(nums) != 1:
                raise _bad(token, f"{op} takes one number")
            compare = _OPS[op]
            test = ((lambda v, ns=frozenset(nums): v in ns) if op == "=" else
                    (lambda v, n=nums[0], c=compare: c(v, n)))
            support.numbers.append((name, test))
        else:
            raise _bad(token, f"unknown name {name!r} (one of "
                       f"{', '.join([*NUMBERS, *WORDS])}; flags: {', '.join(FLAGS)})")
    return support
