"""Python source text for a plain value, the only way values reach an exported script.

``literal(value)`` returns an expression that evaluates to an equal value, bit for bit:

- ``str`` through :func:`ascii` (a quoted literal with every non-ASCII, control, quote and
  backslash character escaped: user text can never end the literal or become code);
- ``int``, ``bool`` and ``None`` through ``repr``; finite floats through ``repr`` (which
  round-trips exactly, ``-0.0`` included); infinities as ``float('inf')`` / ``-float('inf')``
  and NaN as ``float('nan')`` (its sign and payload kept: other NaNs are rebuilt from their
  bits);
- lists, tuples and dicts of these, recursively (NumPy scalars and arrays count as their
  Python values).

Anything else is a :class:`TypeError`: no object's own ``repr`` ever reaches a script.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

_NAN_BITS = struct.unpack("<Q", struct.pack("<d", float("nan")))[0]
_SIGN = 1 << 63


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
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no literal for a {type(value).__name__}")
