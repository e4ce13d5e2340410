"""The ``--attrs`` of a bare weights file (:mod:`engine.io.models.weights_reader`): the words
read whatever the layers' rank (:func:`parse_attrs`), then fitted to each layer's spatial rank,
1, 2 or 3 (:func:`fit_attrs`).

``strides`` and ``dilations`` take one number per spatial dim, or one number for every dim (as
PyTorch's and Keras's int arguments); ``pads`` two per spatial dim, before then after:
``left,right`` (1-D), ``top,bottom,left,right`` (2-D), ``front,back,top,bottom,left,right``
(3-D). A value whose count fits no layer of the file refuses only the layers it does not fit,
each with one line naming the attribute and the counts. ``weights`` and ``data_format`` name a
layout family whatever the rank: OIW, OIHW, OIDHW are one (PyTorch's: out, in, kernel) and WIO,
HWIO, DHWIO the other (TensorFlow's); NCW, NCHW, NCDHW mean channels first and NWC, NHWC,
NDHWC channels last. They are read as OIHW / HWIO and NCHW / NHWC.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.base.names import escaped
from engine.io.models.model_import import ModelImportError

ATTR_KEYS = ("strides", "dilations", "padding", "pads", "groups", "weights", "data_format")
#: ``weights=`` words -> the layout family they name.
LAYOUTS = {"OIW": "OIHW", "OIHW": "OIHW", "OIDHW": "OIHW",
           "WIO": "HWIO", "HWIO": "HWIO", "DHWIO": "HWIO"}
#: ``data_format=`` words -> channels first (NCHW) or last (NHWC).
FORMATS = {"NCW": "NCHW", "NCHW": "NCHW", "NCDHW": "NCHW",
           "NWC": "NHWC", "NHWC": "NHWC", "NDHWC": "NHWC"}
#: How many numbers each list attribute may have (for some rank: 1 means every dim).
COUNTS = {"strides": (1, 2, 3), "dilations": (1, 2, 3), "pads": (2, 4, 6), "groups": (1,)}
#: The dimensions of a layer's weights, by layout family and tensor rank.
LAYOUT_DIMS = {
    "OIHW": {3: "out, in / groups, W", 4: "out, in / groups, H, W",
             5: "out, in / groups, D, H, W"},
    "HWIO": {3: "W, in / groups, out", 4: "H, W, in / groups, out",
             5: "D, H, W, in / groups, out"},
}
#: ``pads`` by spatial rank, as messages name them.
PAD_NAMES = {1: "left,right", 2: "top,bottom,left,right",
             3: "front,back,top,bottom,left,right"}


def _numbers(key: str, value: str) -> tuple[int, ...]:
    """The integers of ``key=value``, their count and sign checked (one-line error)."""
    try:
        nums = tuple(int(v) for v in value.split(","))
    except ValueError:
        raise ModelImportError(f"--attrs: {key}={value!r} is not a list of integers") from None
    allowed = COUNTS[key]
    if len(nums) not in allowed or min(nums) < (0 if key == "pads" else 1):
        n = len(nums) if len(nums) in allowed else (
            ", ".join(map(str, allowed[:-1])) + f" or {allowed[-1]}")
        raise ModelImportError(f"--attrs: {key}={escaped(value)} needs {n} "
                               f"{'non-negative' if key == 'pads' else 'positive'} "
                               "integer(s)")
    return nums


def parse_attrs(text: str) -> dict:
    """``--attrs`` as a dict (one-line error naming the bad word): lists as tuples of the
    numbers given, ``groups`` an int, the words upper-cased and ``weights`` / ``data_format``
    as their family (OIHW / HWIO, NCHW / NHWC)."""
    out: dict = {}
    for word in text.split():
        key, eq, value = word.partition("=")
        if not eq or key not in ATTR_KEYS:
            raise ModelImportError(f"--attrs: {word!r} is not key=value with key one of "
                                   f"{', '.join(ATTR_KEYS)}")
        if key in COUNTS:
            nums = _numbers(key, value)
            out[key] = nums[0] if key == "groups" else nums
            continue
        value = value.upper()
        names = {"padding": {"SAME": "SAME", "VALID": "VALID", "EXPLICIT": "EXPLICIT"},
                 "weights": LAYOUTS, "data_format": FORMATS}[key]
        if value not in names:
            raise ModelImportError(f"--attrs: {key}={escaped(value)} is not one of "
                                   f"{', '.join(names)}")
        out[key] = names[value]
    if out.get("padding") == "EXPLICIT" and "pads" not in out:
        raise ModelImportError("--attrs: padding=EXPLICIT needs pads=T,B,L,R (before, after "
                               "per spatial dim; 1-D: L,R; 3-D: front,back,T,B,L,R)")
    return out


@dataclass(frozen=True)
class Fitted:
    """One layer's window attributes at its spatial rank (a 1-D layer's still 1-D)."""

    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    padding: str
    pads: tuple[int, ...]


def _per_dim(attrs: dict, key: str, rank: int) -> tuple[int, ...]:
    """``strides`` or ``dilations`` with one number per dim (a single number is every dim's)."""
    nums = attrs.get(key, (1,))
    if len(nums) == 1:
        return nums * rank
    if len(nums) != rank:
        every = " (or 1 for every dim)" if rank > 1 else ""
        raise ModelImportError(f"--attrs {key}={','.join(map(str, nums))} has {len(nums)} "
                               f"numbers, expected {rank} for a {rank}-D conv{every}")
    return tuple(nums)


def fit_attrs(attrs: dict, rank: int) -> Fitted:
    """The ``--attrs`` (:func:`parse_attrs`) of a ``rank``-D layer (1, 2 or 3): strides and
    dilations per dim, padding (EXPLICIT when pads are given, else VALID, by default) and the
    pads, (before, after) per dim; a one-line error when a count does not fit the rank."""
    padding = attrs.get("padding", "EXPLICIT" if "pads" in attrs else "VALID")
    pads = (0,) * 2 * rank
    if padding == "EXPLICIT":
        pads = tuple(attrs.get("pads", pads))
        if len(pads) != 2 * rank:
            raise ModelImportError(f"--attrs pads={','.join(map(str, pads))} has {len(pads)} "
                                   f"numbers, expected {2 * rank} for a {rank}-D conv "
                                   f"({PAD_NAMES[rank]})")
    return Fitted(_per_dim(attrs, "strides", rank), _per_dim(attrs, "dilations", rank),
                  padding, pads)


def rank_problem(shape: tuple[int, ...], layout: str) -> str:
    """Why a tensor of ``shape`` is no layer's weights in ``layout`` (OIHW or HWIO): the
    dimensions each conv rank takes."""
    dims = LAYOUT_DIMS[layout]
    return (f"has shape {list(shape)}, expected 3 dimensions ({dims[3]}), 4 ({dims[4]}) or "
            f"5 ({dims[5]}) with weights={layout}")
