"""Python source text for a plain value, the only way values reach an exported script.

``literal(value)`` returns an expression that evaluates to an equal value, bit for bit:

- ``str`` through :func:`ascii` (a quoted literal with every non-ASCII, control, quote and
  backslash character escaped: user text can never end the literal or become code);
- ``int``, ``bool`` and ``None`` through ``repr``; finite floats through ``repr`` (which
  round-trips exactly, ``-0.0`` included); infinities as ``float('inf')`` / ``-float('inf')``
  and NaN as ``float('nan')`` (its sign and payload kept: other NaNs are rebuilt from their
  bits);
- lists, tuples and dicts of these, recursively (NumPy scalars and arrays count as their
  Python values);
- a rectangular nest of lists holding more than :data:`PACK_ABOVE` numbers, all floats or all
  ints within int64, packed: their little-endian float64 or int64 bytes in base64, rebuilt by
  ``numpy.frombuffer(...).reshape(...).tolist()`` (the same Python floats or ints, bit for bit).
  Python parses that in constant memory, where 3 million numbers written out take more than
  4 GiB to parse (an exported canvas with a large ``values`` Tensor).

Anything else is a :class:`TypeError`: no object's own ``repr`` ever reaches a script.
"""

from __future__ import annotations

import base64
import math
import struct
from typing import Any

import numpy as np

from engine.base.names import article

_NAN_BITS = struct.unpack("<Q", struct.pack("<d", float("nan")))[0]
_SIGN = 1 << 63
#: Numbers in a nest of lists above which it is written packed (module docstring); below, as
#: text anyone can read.
PACK_ABOVE = 4096


def _float(x: float) -> str:
    if math.isfinite(x):
        return repr(x)
    if math.isinf(x):
        return "float('inf')" if x > 0 else "-float('inf')"
    bits = struct.unpack("<Q", struct.pack("<d", x))[0]
    if bits == _NAN_BITS:
        return "float('nan')"
    if bits == _NAN_BITS | _SIGN:
        return "-float('nan')"
    return f"__import__('struct').unpack('<d', ({bits:#x}).to_bytes(8, 'little'))[0]"


def _packed(value: list) -> str | None:
    """The packed expression of ``value`` (module docstring), or None when it is not a
    rectangular nest of lists of more than :data:`PACK_ABOVE` floats, or ints within int64."""
    shape, level = [], [value]
    while level and all(type(item) is list for item in level):
        size = len(level[0])
        if any(len(item) != size for item in level):
            return None  # ragged
        shape.append(size)
        level = [x for item in level for x in item]
    if len(level) <= PACK_ABOVE or not shape:
        return None
    kind = type(level[0])
    if kind not in (float, int) or any(type(x) is not kind for x in level):
        return None  # lists, tuples, bools, NumPy scalars, a float among ints: written out
    try:
        data = np.array(level, dtype="<f8" if kind is float else "<i8")
    except OverflowError:  # an int beyond int64
        return None
    text = base64.b64encode(data.tobytes()).decode("ascii")
    return (f"__import__('numpy').frombuffer(__import__('base64').b64decode({text!r}), "
            f"{data.dtype.str!r}).reshape({literal(tuple(shape))}).tolist()")


def literal(value: Any) -> str:
    """A Python expression equal to ``value`` (see the module docstring)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool):
        return repr(bool(value)) if value is not None else "None"
    if isinstance(value, int):
        return repr(int.__int__(value))  # a subclass's own __repr__ is never called
    if isinstance(value, float):
        return _float(float.__float__(value))
    if isinstance(value, str):
        return ascii(str.__str__(value))
    if isinstance(value, list):
        return _packed(value) or "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no literal for {article(type(value).__name__)}")
