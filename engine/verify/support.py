"""``--support SPEC``: what an implementation claims, narrowing the generated cases.

A SPEC is tokens separated by spaces, each ``NAME=V1,V2,...`` or ``NAME<=N`` (also ``<``,
``>=``, ``>``) with the names:

- numbers: ``strides``, ``dilations`` (every entry), ``groups``, ``multiplier`` (depthwise),
  ``kernel`` (every side), ``batch``, ``pads`` (every explicit or SAME pad);
- words: ``layouts`` (NHWC, NCHW), ``dtypes`` (float16, bfloat16, float32, float64),
  ``padding`` (SAME, VALID, EXPLICIT).

e.g. ``strides<=2 dilations=1 groups=1 layouts=NHWC dtypes=float32 padding=SAME,VALID``. A bad
token is an :class:`~engine.base.errors.InvalidArgumentError` naming it.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.base.dtypes import DTYPES
from engine.base.errors import InvalidArgumentError
from engine.base.names import shown
from engine.shapes.conv import ConvGeometry
from engine.shapes.padding import PADDINGS
from engine.verify.conventions import Geometry

NUMBERS = ("strides", "dilations", "groups", "multiplier", "kernel", "batch", "pads")
WORDS = {"layouts": ("NHWC", "NCHW"), "dtypes": tuple(DTYPES), "padding": PADDINGS}
_OPS: dict[str, Callable[[int, int], bool]] = {
    "<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "=": operator.eq}
_TOKEN = re.compile(r"([a-z]+)(<=|>=|<|>|=)(.+)")


@dataclass
class Support:
    """Parsed ``--support``: each test a (name, predicate) pair."""

    numbers: list[tuple[str, Callable[[int], bool]]] = field(default_factory=list)
    words: dict[str, set[str]] = field(default_factory=dict)
    text: str = ""

    def dtypes(self, wanted: list[str]) -> list[str]:
        allowed = self.words.get("dtypes")
        return [d for d in wanted if allowed is None or d in allowed]

    def allows(self, g: Geometry, cg: ConvGeometry) -> bool:
        values = {
            "strides": g.strides, "dilations": g.dilations, "kernel": g.kernel,
            "groups": (1 if g.depthwise else g.groups,),
            "multiplier": (g.out_channels if g.depthwise else 1,), "batch": (g.batch,),
            "pads": (cg.pad_top, cg.pad_bottom, cg.pad_left, cg.pad_right)}
        for name, test in self.numbers:
            if not all(test(v) for v in values[name]):
                return False
        checks = {"layouts": g.data_format, "padding": g.padding}
        return all(checks[k] in allowed for k, allowed in self.words.items() if k in checks)


def parse_support(text: str | None) -> Support:
    """Parse a SPEC (see the module docstring); None or blank supports everything."""
    support = Support(text=text or "")
    for token in (text or "").split():
        m = _TOKEN.fullmatch(token)
        if not m:
            raise InvalidArgumentError(f"--support token {shown(token)}: expected NAME=VALUES "
                                       "or NAME<=N (e.g. strides<=2, padding=SAME,VALID)",
                                       "support")
        name, op, rest = m.groups()
        if name in WORDS:
            values = rest.split(",")
            bad = [v for v in values if v not in WORDS[name]]
            if op != "=" or bad:
                raise InvalidArgumentError(
                    f"--support token {shown(token)}: {name} takes = and a comma list of "
                    f"{', '.join(WORDS[name])}", "support")
            support.words[name] = set(values)
        elif name in NUMBERS:
            try:
                nums = [int(v) for v in rest.split(",")]
            except ValueError:
                raise InvalidArgumentError(f"--support token {shown(token)}: {name} takes "
                                           "whole numbers", "support") from None
            if op != "=" and len(nums) != 1:
                raise InvalidArgumentError(f"--support token {shown(token)}: {op} takes one "
                                           "number", "support")
            compare = _OPS[op]
            test = ((lambda v, ns=frozenset(nums): v in ns) if op == "=" else
                    (lambda v, n=nums[0], c=compare: c(v, n)))
            support.numbers.append((name, test))
        else:
            raise InvalidArgumentError(
                f"--support token {shown(token)}: unknown name {name!r} (one of "
                f"{', '.join([*NUMBERS, *WORDS])})", "support")
    return support
