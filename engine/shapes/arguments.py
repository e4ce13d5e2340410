"""The conv ops' integer and enum arguments as TensorFlow takes them: int vectors in the int32
range (:func:`int_vector`) and enums (:func:`check_enum`), each refusal an
:class:`~engine.base.errors.InvalidArgumentError` naming the argument."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.base.errors import InvalidArgumentError
from engine.base.names import shown

#: TensorFlow's int32 attribute and size range.
INT32_MAX = 2**31 - 1


def is_int(v: object) -> bool:
    """An integer, NumPy's included, and not a boolean."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def int_vector(name: str, value: object, lengths: Sequence[int]) -> tuple[int, ...]:
    """A list, tuple or 1-D integer array as a tuple of ints in TensorFlow's int32 range, with
    one of the allowed lengths. Booleans, floats, strings, nested or ragged lists, scalars and
    values beyond int32 are :class:`InvalidArgumentError` naming ``name``."""
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise InvalidArgumentError(
                f"{name} must be a 1-D vector, got shape {list(value.shape)}", name)
        if not (value.size == 0 or np.issubdtype(value.dtype, np.integer)):
            raise InvalidArgumentError(
                f"{name} must be integers, got {value.dtype} values {shown(value.tolist())}",
                name)
        items: Sequence[object] = value.tolist()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise InvalidArgumentError(
            f"{name} must be a list of integers, got {type(value).__name__} {shown(value)}",
            name)
    if not all(is_int(v) for v in items):
        raise InvalidArgumentError(f"{name} must be integers, got {shown(list(items))}", name)
    vec = tuple(int(v) for v in items)  # type: ignore[call-overload]
    if len(vec) not in lengths:
        want = " or ".join(str(n) for n in lengths)
        raise InvalidArgumentError(
            f"{name} must have {want} elements, got {len(vec)}: {shown(list(vec))}", name)
    for v in vec:
        if not -INT32_MAX - 1 <= v <= INT32_MAX:
            raise InvalidArgumentError(
                f"{name} {shown(list(vec))}: every entry must be within TensorFlow's int32 "
                f"range [-2147483648, 2147483647], got {shown(v)}", name)
    return vec


def check_enum(name: str, value: object, choices: Sequence[str]) -> None:
    """``value`` is one of ``choices``, else an :class:`InvalidArgumentError` naming ``name``."""
    if not isinstance(value, str) or value not in choices:
        raise InvalidArgumentError(
            f"{name} {shown(value)} is not one of {', '.join(choices)}", name)
