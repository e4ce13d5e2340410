"""A PNG or JPEG file with fewer bytes than its pixels need: Pillow would invent the missing
ones (gray or black), so :mod:`engine.io.image_source` refuses such a file as truncated.

Before anything is decoded, the header's size is checked against the file's size
(:func:`file_size_problem`): a Huffman-coded JPEG needs at least :data:`JPEG_MIN_BITS_PER_BLOCK`
bit per 8 x 8 block of every component (an arithmetic-coded one is not bounded this way), a PNG
at least 1 byte per :data:`DEFLATE_MAX_RATIO` bytes of its filtered rows (deflate's largest
ratio). Then a PNG's decompressed rows are counted exactly (:func:`png_data_problem`: no more,
no less than its size needs) before decoding, and a JPEG is decoded twice
(:func:`jpeg_scans_problem`), the second time with filler bytes before each marker that ends
entropy-coded data: a complete scan skips the filler, a truncated one (data cut short, an end
marker appended) decodes it, so the two pictures differ.
"""

from __future__ import annotations

import io
import os
import zlib
from typing import Any

from engine.base.cancel import checkpoint

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
#: Bytes of decoded pixels compared at a time (a band of rows).
_BAND_BYTES = 1 << 20


def _ceil_div(a: int, b: int) -> int:
    """``a / b`` rounded up."""
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


def png_ihdr(path: str) -> tuple[int, int, int, int, int] | None:
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


def file_size_problem(path: str, format: str, stored_size: tuple[int, int],
                      file_bytes: int) -> str | None:
    """Why a ``format`` file of ``file_bytes`` bytes is smaller than the least its stored size
    can be coded in (see the module docstring), or None."""
    w, h = stored_size
    if format == "JPEG":
        frame = _jpeg_frame(path)
        if frame is None or frame[0] in _ARITHMETIC_SOF:
            return None  # Pillow read a frame we did not find: its decode decides
        blocks = _jpeg_blocks(w, h, frame[1])
        need = blocks * JPEG_MIN_BITS_PER_BLOCK // 8
        what = f"its {blocks:,} blocks of 8 x 8 pixels need at least {need:,} bytes of data"
    else:
        ihdr = png_ihdr(path)
        if ihdr is None:
            return None
        rows = _png_rows_bytes(ihdr)
        need = rows // DEFLATE_MAX_RATIO
        what = (f"its {rows:,} bytes of pixel rows compress to at least {need:,} bytes "
                f"(deflate's largest ratio is {DEFLATE_MAX_RATIO}:1)")
    if file_bytes < need:
        return f"the file has {file_bytes:,} bytes but {what}"
    return None


def png_data_problem(path: str, ihdr: tuple[int, int, int, int, int]) -> str | None:
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


def _same_pixels(a: Any, b: Any) -> bool:
    """Whether two decoded images are equal, compared a band of rows at a time."""
    if a.mode != b.mode or a.size != b.size:
        return False
    w, h = a.size
    rows = max(1, _BAND_BYTES // max(1, w * 4))
    for top in range(0, h, rows):
        checkpoint()
        box = (0, top, w, min(h, top + rows))
        if a.crop(box).tobytes() != b.crop(box).tobytes():
            return False
    return True


def jpeg_scans_problem(path: str, im: Any) -> str | None:
    """Why the JPEG ``path``'s entropy-coded data ends before its scans do (see the module
    docstring), or None: ``im`` (decoded) against a decode with filler before each marker
    ending the data."""
    from PIL import Image

    with open(path, "rb") as f:
        data = f.read()
    filled = _jpeg_with_filler(data)
    if filled == data:
        return None  # no entropy-coded data ends at a marker: Pillow's own error covers it
    try:
        with Image.open(io.BytesIO(filled), formats=["JPEG"]) as other:
            other.load()
            same = _same_pixels(im, other)
    except (OSError, SyntaxError, ValueError, EOFError):
        same = False
    if not same:
        return ("its coded data stops before its last scan does (cut short, then given an end "
                "marker)")
    return None
