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
would fill the missing part with gray or black). Before anything is decoded, the header's size
is checked against :data:`MAX_PIXELS` and against the file's size: a Huffman-coded JPEG needs
at least :data:`JPEG_MIN_BITS_PER_BLOCK` bit per 8 x 8 block of every component (an
arithmetic-coded one is not bounded this way), a PNG at least 1 byte per
:data:`DEFLATE_MAX_RATIO` bytes of its filtered rows (deflate's largest ratio); that is
:func:`read_header`, so ``check`` refuses such a file. :func:`read_image` then counts a PNG's
decompressed rows exactly (no more, no less than its size needs) before decoding, and decodes
a JPEG twice, the second time with filler bytes before each marker that ends entropy-coded data:
a complete scan skips the filler, a truncated one (data cut short, an end marker appended)
decodes it, so the two pictures differ. Pillow's ``ImageFile.LOAD_TRUNCATED_IMAGES`` is set
False before each decode (a file cut short without an end marker is then Pillow's "image file
is truncated" error).
"""

from __future__ import annotations

import io
import os
import stat
import warnings
import zlib
from dataclasses import dataclass

import numpy as np

from engine.base.cancel import checkpoint
from engine.base.dtypes import to_dtype
from engine.base.errors import InvalidArgumentError

COLORS = ("gray", "rgb")
SCALES = ("unit", "byte")
DATA_FORMATS = ("NHWC", "NCHW")
FORMATS = ("PNG", "JPEG")
#: The largest image accepted, in pixels (64 megapixels).
MAX_PIXELS = 64_000_000
#: Elements converted to float64 at a time.
CHUNK = 1 << 20
#: A Huffman-coded JPEG spends at least one bit on each 8 x 8 block of each component (its DC
#: code: a sequential scan also codes the block's end, a progressive first DC scan only it).
JPEG_MIN_BITS_PER_BLOCK = 1
#: Deflate's largest compression ratio (a 258-byte match in about 2 bits, RFC 1951): a PNG's
#: compressed data is at least its filtered rows' bytes / this.
DEFLATE_MAX_RATIO = 1032
#: Filler put before each marker that ends a JPEG's entropy-coded data for the second decode
#: (no 0xFF byte: it is not a marker; a complete scan skips it as extraneous data).
_JPEG_FILLER = bytes([0xA5, 0x5A, 0x3C, 0xC3]) * 32
#: SOF markers of arithmetic-coded JPEGs (no bits-per-block bound).
_ARITHMETIC_SOF = (0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF)
#: SOF markers (0xC4 DHT, 0xC8 JPG and 0xCC DAC are not frames).
_SOF = tuple(m for m in range(0xC0, 0xD0) if m not in (0xC4, 0xC8, 0xCC))
#: PNG colour type -> samples a pixel.
_PNG_SAMPLES = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
#: Adam7 passes: (first column, first row, column step, row step).
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))
#: Bytes read from a PNG file at a time when its data is counted.
_READ = 1 << 20
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


def _truncated(path: str, header: ImageHeader, detail: str) -> InvalidArgumentError:
    w, h = header.stored_size
    return _fail(path, f"is a truncated {header.format}: {detail} (its header declares {w} x "
                       f"{h} pixels; the missing ones would be invented): not read")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _jpeg_frame(path: str) -> tuple[int, list[tuple[int, int]]] | None:
    """The SOF marker byte (0xC0-0xCF) of the JPEG ``path`` and its components' sampling
    factors (horizontal, vertical), read from the segment headers before the frame (their
    payloads are skipped); None when no frame comes before a scan or the end."""
    with open(path, "rb") as f:
        if f.read(2) != b"\xff\xd8":
            return None
        while True:
            head = f.read(2)
            while head == b"\xff\xff":  # fill bytes before a marker
                head = b"\xff" + f.read(1)
            if len(head) < 2 or head[0] != 0xFF or head[1] in (0xD8, 0xD9, 0xDA):
                return None
            if head[1] == 0x01 or 0xD0 <= head[1] <= 0xD7:  # standalone: no length
                continue
            size = f.read(2)
            if len(size) < 2:
                return None
            length = max(int.from_bytes(size, "big") - 2, 0)  # libjpeg skips 0 for 0 or 1
            if head[1] not in _SOF:
                f.seek(length, os.SEEK_CUR)
                continue
            body = f.read(length)
            factors = [(body[i + 1] >> 4, body[i + 1] & 15) for i in range(6, len(body) - 2, 3)]
            return head[1], factors


def _jpeg_blocks(w: int, h: int, factors: list[tuple[int, int]]) -> int:
    """8 x 8 blocks of a ``w`` x ``h`` JPEG over all its components (each sampled at its
    factors over the largest)."""
    factors = [(max(a, 1), max(b, 1)) for a, b in factors] or [(1, 1)]
    most_a, most_b = max(a for a, _ in factors), max(b for _, b in factors)
    return sum(_ceil_div(_ceil_div(w * a, most_a), 8) * _ceil_div(_ceil_div(h * b, most_b), 8)
               for a, b in factors)


def _png_ihdr(path: str) -> tuple[int, int, int, int, int] | None:
    """(width, height, bit depth, colour type, interlace) of the PNG ``path``'s IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(33)
    if len(head) < 33 or head[12:16] != b"IHDR":
        return None
    w, h = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    return w, h, head[24], head[25], head[28]


def _png_rows_bytes(ihdr: tuple[int, int, int, int, int]) -> int:
    """Bytes of a PNG's filtered rows: a filter byte and the packed samples of each row (of
    each Adam7 pass when interlaced)."""
    w, h, depth, colour, interlace = ihdr
    bits = depth * _PNG_SAMPLES.get(colour, 4)

    def rows(width: int, height: int) -> int:
        return 0 if width <= 0 or height <= 0 else height * (1 + _ceil_div(width * bits, 8))
    if not interlace:
        return rows(w, h)
    return sum(rows(_ceil_div(w - x0, dx), _ceil_div(h - y0, dy)) for x0, y0, dx, dy in _ADAM7)


def _check_file_size(path: str, header: ImageHeader) -> None:
    """Refuse a file smaller than the least its size can be coded in (module docstring)."""
    size = header.file_bytes
    w, h = header.stored_size
    if header.format == "JPEG":
        frame = _jpeg_frame(path)
        if frame is None or frame[0] in _ARITHMETIC_SOF:
            return  # Pillow read a frame we did not find: its decode decides
        blocks = _jpeg_blocks(w, h, frame[1])
        need = blocks * JPEG_MIN_BITS_PER_BLOCK // 8
        what = f"its {blocks:,} blocks of 8 x 8 pixels need at least {need:,} bytes of data"
    else:
        ihdr = _png_ihdr(path)
        if ihdr is None:
            return
        rows = _png_rows_bytes(ihdr)
        need = rows // DEFLATE_MAX_RATIO
        what = (f"its {rows:,} bytes of pixel rows compress to at least {need:,} bytes "
                f"(deflate's largest ratio is {DEFLATE_MAX_RATIO}:1)")
    if size < need:
        raise _truncated(path, header, f"the file has {size:,} bytes but {what}")


def _png_data_problem(path: str, ihdr: tuple[int, int, int, int, int]) -> str | None:
    """Why the PNG ``path``'s IDAT data decompresses to fewer bytes than its rows need (None
    when it does not, or when the file ends inside a chunk: Pillow's decode then reports the
    truncation). Streamed: at most :data:`_READ` bytes of the file and of the output at a
    time; it stops once the rows are complete."""
    need = _png_rows_bytes(ihdr)
    inflate = zlib.decompressobj()
    made = 0
    with open(path, "rb") as f:
        f.seek(8)
        seen = False
        while True:
            head = f.read(8)
            if len(head) < 8:
                break
            length, kind = int.from_bytes(head[:4], "big"), head[4:]
            if kind != b"IDAT":
                if seen:
                    break  # the image data is one run of IDAT chunks
                f.seek(length + 4, os.SEEK_CUR)
                continue
            seen = True
            left = length
            while left > 0:
                checkpoint()
                data = f.read(min(left, _READ))
                if not data:
                    return None  # the file ends inside a chunk: Pillow's decode says so
                left -= len(data)
                try:
                    while data and not inflate.eof and made < need:
                        made += len(inflate.decompress(data, _READ))
                        data = inflate.unconsumed_tail
                except zlib.error:
                    return None  # corrupt data: Pillow's decode says so
                if made >= need:
                    return None
            f.seek(4, os.SEEK_CUR)  # the CRC
    if made < need:
        return (f"its pixel data holds {made:,} bytes of rows but {need:,} are needed"
                + ("" if inflate.eof else " (the compressed data stops in the middle)"))
    return None


def _jpeg_with_filler(data: bytes) -> bytes:
    """``data`` with :data:`_JPEG_FILLER` before every marker that ends entropy-coded data
    (the one after each scan, and each restart marker)."""
    pieces, start, i, n = [], 0, 2, len(data)
    while i + 4 <= n:  # the segments: marker, length, payload
        if data[i] != 0xFF:
            break
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker == 0xD9:
            break
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        i += 4 + max(int.from_bytes(data[i + 2:i + 4], "big") - 2, 0)  # as libjpeg skips
        if marker != 0xDA:
            continue
        while i < n:  # entropy-coded data: up to a marker other than a stuffed 0xFF00
            j = data.find(b"\xff", i)
            if j < 0 or j + 1 >= n:
                i = n
                break
            k = j + 1
            while k < n and data[k] == 0xFF:
                k += 1
            if k < n and data[k] == 0x00:
                i = k + 1
                continue
            pieces += [data[start:j], _JPEG_FILLER]
            start = j
            if k < n and 0xD0 <= data[k] <= 0xD7:
                i = k + 1
                continue
            i = j
            break
    return b"".join([*pieces, data[start:]])


def _same_pixels(a, b) -> bool:
    """Whether two decoded images are equal, compared a band of rows at a time."""
    if a.mode != b.mode or a.size != b.size:
        return False
    w, h = a.size
    rows = max(1, CHUNK // max(1, w * 4))
    for top in range(0, h, rows):
        checkpoint()
        box = (0, top, w, min(h, top + rows))
        if a.crop(box).tobytes() != b.crop(box).tobytes():
            return False
    return True


def _check_jpeg_scans(path: str, im, header: ImageHeader) -> None:
    """Refuse a JPEG whose entropy-coded data ends before its scans do (module docstring):
    ``im`` (decoded) against a decode with filler before each marker ending the data."""
    from PIL import Image

    with open(path, "rb") as f:
        data = f.read()
    filled = _jpeg_with_filler(data)
    if filled == data:
        return  # no entropy-coded data ends at a marker: Pillow's own error covers it
    try:
        with Image.open(io.BytesIO(filled), formats=["JPEG"]) as other:
            other.load()
            same = _same_pixels(im, other)
    except (OSError, SyntaxError, ValueError, EOFError):
        same = False
    if not same:
        raise _truncated(path, header, "its coded data stops before its last scan does "
                                       "(cut short, then given an end marker)")


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
        _check_jpeg_scans(path, im, header)
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
        ihdr = _png_ihdr(path) if header.format == "PNG" else None
        problem = _png_data_problem(path, ihdr) if ihdr is not None else None
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

