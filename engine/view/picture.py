"""A tensor as a Pillow image, for notebooks (``engine.api.picture``): the viewer's default
slice or filter montage in its colour map (:func:`engine.view.thumbnail.thumbnail`), which
Jupyter shows inline. It takes a NumPy array or a (nested) list of bool, integer or float
numbers; masked arrays are refused (their mask would be ignored: pass ``a.filled(value)``), as
are complex, object, text, date and structured arrays, ragged lists and sizes outside
1..:data:`MAX_PICTURE_SIDE`; each refusal is one InvalidArgumentError naming the argument.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.base.arguments import bad
from engine.base.errors import InvalidArgumentError
from engine.view.thumbnail import thumbnail

#: Default (width, height) of a :func:`picture`.
PICTURE_SIZE = (512, 384)
#: Largest width or height a picture may be asked for, in pixels (its RGBA image then needs at
#: most 64 MiB).
MAX_PICTURE_SIDE = 4096
#: Most elements a picture reads (it makes one pass over the tensor for its colour levels): a
#: bigger array (a ``np.broadcast_to`` view of 10^12 elements, say) is refused, not read for
#: hours.
MAX_PICTURE_ELEMENTS = 2**31
#: Why an array of each NumPy dtype kind has no picture (bool, int, uint and float have one).
_NOT_NUMBERS = {"c": "complex numbers: picture .real, .imag or abs() of it",
                "O": "Python objects: convert it with .astype(float)",
                "U": "text", "S": "bytes", "M": "dates", "m": "time spans",
                "V": "structured records or raw bytes"}
#: What a montage's separator lines (transparent in the app) are painted in a picture.
PICTURE_BACKGROUND = (255, 255, 255)
def _masked(name: str) -> InvalidArgumentError:
    """Why a masked array ``name`` is refused (its mask would be ignored)."""
    return InvalidArgumentError(
        f"{name} must be a plain NumPy array, got a masked array: refused, because its mask "
        f"would be ignored (pass {name}.filled(value) to choose what masked elements show)",
        argument=name)


def _array_argument(value: object, name: str = "array") -> np.ndarray:
    """``value`` as an ndarray of bool, integer or float numbers; anything else (a masked
    array, text, None, a ragged list, complex or object values...) is refused in one line."""
    if isinstance(value, np.ma.MaskedArray):
        raise _masked(name)
    if isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, (bool, int, float, np.generic, list, tuple)):
        if isinstance(value, (list, tuple)) and any(isinstance(v, np.ma.MaskedArray)
                                                    for v in value):
            raise _masked(name)
        try:
            array = np.asarray(value)
        except (ValueError, TypeError, OverflowError, RecursionError) as err:
            raise InvalidArgumentError(
                f"{name} must be a NumPy array or a nested list of numbers with rows of equal "
                f"length, got a ragged or unreadable {type(value).__name__} (NumPy: "
                f"{str(err).splitlines()[0][:100]})",
                argument=name) from None
    else:
        raise bad(name, "a NumPy array or a (nested) list of numbers", value)
    kind = array.dtype.kind
    if kind not in "biuf":
        raise InvalidArgumentError(
            f"{name} must hold bool, integer or float numbers, got dtype {array.dtype}: "
            f"{_NOT_NUMBERS.get(kind, 'no numbers')}", argument=name)
    if array.size > MAX_PICTURE_ELEMENTS:
        raise InvalidArgumentError(
            f"{name} must have at most {MAX_PICTURE_ELEMENTS:,} elements (a picture reads "
            f"each one), got {array.size:,}: picture a slice of it", argument=name)
    return array


def _size_argument(value: object) -> tuple[int, int]:
    """``(width, height)``: two whole numbers in 1..MAX_PICTURE_SIDE."""
    expected = f"(width, height): two whole numbers of pixels in 1..{MAX_PICTURE_SIDE}"
    if not isinstance(value, (tuple, list)) or len(value) != 2 or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
            for v in value):
        raise bad("size", expected, value)
    w, h = int(value[0]), int(value[1])
    if not (1 <= w <= MAX_PICTURE_SIDE and 1 <= h <= MAX_PICTURE_SIDE):
        raise bad("size", expected, (w, h))
    return w, h


def _axes_argument(value: object, ndim: int) -> tuple[str, ...] | None:
    """None, or one axis name (a str) per dimension of the array."""
    if value is None:
        return None
    expected = f"None or {ndim} axis names (strings), one per dimension of the array"
    if not isinstance(value, (tuple, list)) or len(value) != ndim or not all(
            isinstance(a, str) for a in value):
        raise bad("axes", expected, value)
    return tuple(value)


def picture(array: Any, axes: tuple[str, ...] | None = None,
            size: tuple[int, int] = PICTURE_SIZE):
    """A Pillow RGB image of ``array``: the viewer's default slice or filter montage in its
    colour map, within ``size`` (width, height) pixels, cells drawn as squares of whole pixels
    (:func:`engine.view.thumbnail.thumbnail`; ``axes`` names the axes, e.g. ("kh", "kw", "in",
    "out") for a filter); montage separators are :data:`PICTURE_BACKGROUND`. Arguments are
    checked first (see the module docstring): a bad one is an InvalidArgumentError naming it."""
    from PIL import Image

    array = _array_argument(array)
    axes = _axes_argument(axes, array.ndim)
    size = _size_argument(size)
    if array.size == 0:
        raise InvalidArgumentError(f"an empty tensor (shape {list(array.shape)}) has no "
                                   "picture", argument="array")
    rgba = thumbnail(array, axes, size)
    rgb = rgba[..., :3].copy()
    rgb[rgba[..., 3] == 0] = PICTURE_BACKGROUND
    return Image.fromarray(rgb, "RGB")
