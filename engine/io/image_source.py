"""PNG and JPEG images as tensors: the header read on its own, the values made exactly.

:func:`read_header` opens the file with Pillow's lazy ``Image.open`` (the header only, no pixel
is decoded) and gives the size the tensor will have: width and height after the EXIF
orientation (tag 0x0112, read from the header: a JPEG's APP1 segment, a PNG's eXIf chunk before
its image data; orientations 5-8 swap width and height). An image of more than
:data:`MAX_PIXELS` pixels, a file that is not a PNG or JPEG, or one Pillow cannot parse is an
:class:`~engine.base.errors.InvalidArgumentError` whose message starts with ``path`` (Pillow's own
decompression-bomb warning and error become this error too, before any pixel is allocated).

:func:`read_image` decodes the file and makes the tensor:

- ``color`` ``gray`` is Pillow's luma conversion (mode "L", ITU-R 601-2: L = R * 299/1000 +
  G * 587/1000 + B * 114/1000), ``rgb`` is mode "RGB"; alpha is dropped, palettes are looked
  up, a gray image in ``rgb`` repeats its value in the three channels.
- ``scale`` ``unit`` gives values in [0, 1] (v / 255), ``byte`` the values 0..255.
- 16-bit gray PNGs (mode "I;16") keep their 16 bits: ``unit`` is v / 65535 and ``byte`` is
  v / 257 (so 65535 is 255.0, values are not rounded to integers). Pillow reads 16-bit RGB PNGs
  as 8-bit RGB, which is what they give.
- ``data_format`` ``NHWC`` gives shape [1, H, W, C], ``NCHW`` gives [1, C, H, W]; C is 1 for
  gray and 3 for rgb.
- The values are computed in float64 (``v / 255.0``) and rounded once to ``dtype``, in chunks of
  rows (no float64 copy of the whole image), so a run and an exported script calling this same
  function give the same bits.

No invented pixel: a file with fewer bytes than its pixels need is refused as truncated (Pillow
would fill the missing part with gray or black; :mod:`engine.io.image_truncation` says how it
is found). Before anything is decoded, the header's size is checked against :data:`MAX_PIXELS`
and against the file's size; that is :func:`read_header`, so ``check`` refuses such a file.
:func:`read_image` then counts a PNG's decompressed rows exactly before decoding, and decodes a
JPEG twice. Pillow's ``ImageFile.LOAD_TRUNCATED_IMAGES`` is set False before each decode (a file
cut short without an end marker is then Pillow's "image file is truncated" error).
"""

from __future__ import annotations

import os
import stat
import warnings
from dataclasses import dataclass

import numpy as np

from engine.base.cancel import checkpoint
from engine.base.dtypes import to_dtype
from engine.base.errors import InvalidArgumentError
from engine.io.image_truncation import (
    file_size_problem,
    jpeg_scans_problem,
    png_data_problem,
    png_ihdr,
)

COLORS = ("gray", "rgb")
SCALES = ("unit", "byte")
DATA_FORMATS = ("NHWC", "NCHW")
FORMATS = ("PNG", "JPEG")
#: The largest image accepted, in pixels (64 megapixels).
MAX_PIXELS = 64_000_000
#: Elements converted to float64 at a time.
CHUNK = 1 << 20
_ORIENTATION = 0x0112
#: Modes holding 16-bit gray values.
_WIDE = ("I;16", "I;16B", "I;16L", "I")
#: Pillow modes of gray images (with or without alpha).
GRAY_MODES = ("1", "L", "LA", "La", *_WIDE)


@dataclass(frozen=True)
class ImageHeader:
    """What an image's header says: the format, Pillow's mode, the stored size and the EXIF
    orientation (1-8; 1 when absent or unknown)."""

    format: str
    mode: str
    stored_size: tuple[int, int]
    orientation: int
    #: The file's size in bytes (0: not known).
    file_bytes: int = 0

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) once the orientation is applied."""
        w, h = self.stored_size
        return (h, w) if self.orientation in (5, 6, 7, 8) else (w, h)

    @property
    def wide(self) -> bool:
        """Whether the values are 16-bit (a 16-bit gray PNG)."""
        return self.mode in _WIDE


def _fail(path: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"path {path!r}: {message}", argument="path")


def channels(color: str) -> int:
    """Channels of a tensor of ``color``: 1 (gray) or 3 (rgb)."""
    return 1 if color == "gray" else 3


def tensor_shape(header: ImageHeader, color: str, data_format: str) -> tuple[int, int, int, int]:
    """The tensor's shape: [1, H, W, C] (NHWC) or [1, C, H, W] (NCHW)."""
    w, h = header.size
    c = channels(color)
    return (1, h, w, c) if data_format == "NHWC" else (1, c, h, w)


def _check_file(path: str) -> None:
    """``path`` names a regular file (a FIFO would block Pillow's read)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise _fail(path, "no such image file") from None
    except (OSError, ValueError) as err:
        raise _fail(path, f"cannot read the file: {getattr(err, 'strerror', None) or err}") \
            from None
    if not stat.S_ISREG(st.st_mode):
        raise _fail(path, "is not a regular file (a folder, FIFO, socket or device): not read")


def _open(path: str):
    """The lazily opened image (header parsed, no pixel decoded), or our error."""
    from PIL import Image, UnidentifiedImageError

    _check_file(path)
    try:
        with warnings.catch_warnings():
            # Pillow warns above its own MAX_IMAGE_PIXELS and raises above twice it; our smaller
            # limit is checked on the size below, so its warning is not needed
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(path, formats=FORMATS)
    except Image.DecompressionBombError:
        raise _fail(path, f"the image is larger than {MAX_PIXELS // 10**6} megapixels "
                          "(its header claims more pixels than that): not read") from None
    except UnidentifiedImageError:
        raise _fail(path, "is not a PNG or JPEG image Pillow can read (another format, "
                          "or a corrupt header)") from None
    except FileNotFoundError:
        raise _fail(path, "no such image file") from None
    except OSError as err:
        raise _fail(path, f"cannot read the image: {err.strerror or err}") from None
    except Exception as err:  # noqa: BLE001 - Pillow's parsers raise SyntaxError, struct.error,
        # ValueError, ... on a corrupt header: every one is a bad file, not our bug
        raise _fail(path, f"is a corrupt {_kind(path)} file ({type(err).__name__}: {err})") \
            from None
    return im


def _kind(path: str) -> str:
    return "JPEG" if path.lower().endswith((".jpg", ".jpeg")) else "image"


def _orientation(im) -> int:
    """The EXIF orientation in the header (a PNG's eXIf after its pixels is not looked for:
    that would decode the image)."""
    if im.format == "PNG" and "exif" not in im.info:
        return 1
    try:
        value = im.getexif().get(_ORIENTATION, 1)
    except Exception:  # noqa: BLE001 - a broken EXIF block: no orientation, as Pillow's own
        return 1  # exif_transpose treats a tag it cannot use
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _header_of(path: str, im) -> ImageHeader:
    w, h = im.size
    if w * h > MAX_PIXELS:
        raise _fail(path, f"the image is {w} x {h} = {w * h / 1e6:.1f} megapixels, more than "
                          f"the {MAX_PIXELS // 10**6} accepted")
    if w == 0 or h == 0:
        raise _fail(path, f"the image is empty ({w} x {h} pixels)")
    return ImageHeader(im.format, im.mode, (w, h), _orientation(im), _file_bytes(path))


def _file_bytes(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def read_header(path: str) -> ImageHeader:
    """The checked header of the PNG or JPEG file ``path`` (no pixel is decoded): its size
    within :data:`MAX_PIXELS` and the file large enough for it (:func:`_check_file_size`)."""
    im = _open(path)
    try:
        header = _header_of(path, im)
        _check_file_size(path, header)
        return header
    finally:
        im.close()


def _check_file_size(path: str, header: ImageHeader) -> None:
    """Refuse a file smaller than the least its size can be coded in
    (:func:`engine.io.image_truncation.file_size_problem`)."""
    problem = file_size_problem(path, header.format, header.stored_size, header.file_bytes)
    if problem:
        raise _truncated(path, header, problem)


def _truncated(path: str, header: ImageHeader, detail: str) -> InvalidArgumentError:
    w, h = header.stored_size
    return _fail(path, f"is a truncated {header.format}: {detail} (its header declares {w} x "
                       f"{h} pixels; the missing ones would be invented): not read")


def read_workspace(header: ImageHeader, color: str) -> int:
    """Bytes :func:`read_image` needs besides its result (a bound): the decoded image and its
    converted, turned and NumPy copies, or the two decodes a JPEG is checked with (at most five
    of at most 4 bytes a pixel), the file's bytes twice (the JPEG check), the float64 chunk."""
    w, h = header.stored_size
    return 5 * 4 * w * h + 2 * header.file_bytes + 8 * CHUNK * channels(color)


def _transposed(im, orientation: int):
    """``im`` turned upright, exactly as ``PIL.ImageOps.exif_transpose`` does for the tag."""
    from PIL import Image

    method = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
              4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
              6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
              8: Image.Transpose.ROTATE_90}.get(orientation)
    return im if method is None else im.transpose(method)


def _pixels(path: str, im, header: ImageHeader, color: str) -> np.ndarray:
    """The decoded (H, W, C) uint8 or uint16 pixels of ``color``, upright; a truncated file
    is refused (module docstring)."""
    from PIL import ImageFile

    ImageFile.LOAD_TRUNCATED_IMAGES = False  # never invent the pixels a file lacks
    try:
        im.load()
    except (OSError, SyntaxError, ValueError, EOFError) as err:
        raise _fail(path, f"cannot decode the {header.format} image (corrupt or truncated: "
                          f"{err})") from None
    if header.format == "JPEG":
        problem = jpeg_scans_problem(path, im)
        if problem:
            raise _truncated(path, header, problem)
    try:
        if header.wide:
            upright = _transposed(im, header.orientation) if header.orientation != 1 else im
            gray = np.asarray(upright)
            if gray.dtype != np.uint16:  # mode "I" stores 16-bit values in int32
                gray = np.clip(gray, 0, 65535).astype(np.uint16)
            values = gray[:, :, None]
            return values if color == "gray" else np.repeat(values, 3, axis=2)
        converted = im.convert("L" if color == "gray" else "RGB")
        upright = _transposed(converted, header.orientation)
        values = np.asarray(upright)
        return values[:, :, None] if values.ndim == 2 else values
    except (OSError, SyntaxError, ValueError, EOFError) as err:
        raise _fail(path, f"cannot decode the {header.format} image (corrupt or truncated: "
                          f"{err})") from None


def read_image(path: str, color: str = "rgb", scale: str = "unit", data_format: str = "NHWC",
               dtype: str = "float32") -> np.ndarray:
    """The image ``path`` as a C-contiguous ``dtype`` array (see the module docstring)."""
    for name, value, allowed in (("color", color, COLORS), ("scale", scale, SCALES),
                                 ("data_format", data_format, DATA_FORMATS)):
        if value not in allowed:
            raise InvalidArgumentError(f"{name} {value!r} is not one of {', '.join(allowed)}",
                                       argument=name)
    dt = to_dtype(dtype)
    im = _open(path)
    try:
        header = _header_of(path, im)
        _check_file_size(path, header)
        ihdr = png_ihdr(path) if header.format == "PNG" else None
        problem = png_data_problem(path, ihdr) if ihdr is not None else None
        if problem:
            raise _truncated(path, header, problem)
        pixels = _pixels(path, im, header, color)
    finally:
        im.close()
    divisor = (65535.0 if scale == "unit" else 257.0) if header.wide else \
        (255.0 if scale == "unit" else 1.0)
    out = np.empty(tensor_shape(header, color, data_format), dt)
    target = out[0] if data_format == "NHWC" else out[0].transpose(1, 2, 0)
    h, w, c = pixels.shape
    rows = max(1, CHUNK // max(1, w * c))
    for r in range(0, h, rows):
        checkpoint()
        chunk = pixels[r:r + rows].astype(np.float64)
        if divisor != 1.0:
            chunk /= divisor
        target[r:r + rows] = chunk.astype(dt)
    return out


def bound(scale: str) -> float:
    """The largest magnitude a value can have: 1 (unit) or 255 (byte)."""
    return 1.0 if scale == "unit" else 255.0

