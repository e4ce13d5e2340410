"""Canvas files: saving is atomic (a temporary file, then replace) and deterministic (sorted
keys, 2-space indent, trailing newline); loading reads only a regular file (never a FIFO or
device), refuses files over a size cap before reading them, and turns any bytes into a
:class:`~engine.graph.canvas.CanvasError` at worst (the document itself is validated by
:meth:`engine.graph.canvas.Canvas.from_json`).
"""

from __future__ import annotations

import json
import os
import stat

from engine.base.atomic import write_bytes_atomically
from engine.base.names import shown
from engine.graph.canvas import Canvas, CanvasError
from engine.io import strict_json

SUFFIX = ".gbc.json"
#: Canvas files larger than this are refused before reading (``load_canvas(max_bytes=...)``).
MAX_FILE_BYTES = 256 * 2**20


def dumps(canvas: Canvas) -> str:
    """The canonical text of a canvas: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(canvas.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def save_canvas(canvas: Canvas, path: str | os.PathLike) -> bytes:
    """Write atomically: a temporary file in the same folder, flushed, then renamed over
    (:func:`engine.base.atomic.write_atomically`); returns the bytes written."""
    data = dumps(canvas).encode("utf-8")
    write_bytes_atomically(path, data)
    return data


def load_canvas(path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES) -> Canvas:
    """Read and validate a canvas file; a :class:`CanvasError` names the file and problems.

    Only a regular file is read (a FIFO, device or folder is refused without reading), and only
    when it has at most ``max_bytes`` bytes. A UTF-8 byte-order mark is skipped.
    """
    source = str(path)
    text = _decode(_read_regular(path, max_bytes, source), source)
    data, problems = strict_json.loads(text)
    if problems:
        raise CanvasError(problems, source)
    return Canvas.from_json(data, source)


def _read_regular(path: str | os.PathLike[str], max_bytes: int, source: str) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes, or a CanvasError."""
    def refuse(message: str) -> CanvasError:
        return CanvasError([("$", message)], source)

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        if os.path.islink(path):
            raise refuse(f"a symbolic link to {shown(os.readlink(path))}, which does not "
                         "exist") from None
        raise refuse("no such file") from None
    except IsADirectoryError:
        raise refuse("is a folder, not a canvas file") from None
    except (OSError, ValueError) as err:  # ValueError: a NUL in the path
        raise refuse(f"cannot read the file: {getattr(err, 'strerror', None) or err}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise refuse("is a folder, not a canvas file")
        if not stat.S_ISREG(st.st_mode):
            raise refuse("is not a regular file (a FIFO, socket or device): not read")
        if st.st_size > max_bytes:
            raise refuse(f"the file has {st.st_size} bytes, more than the limit of {max_bytes}")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # it grew while we read
                raise refuse(f"the file has more than the limit of {max_bytes} bytes")
        return b"".join(chunks)
    except OSError as err:
        raise refuse(f"cannot read the file: {err.strerror or err}") from None
    finally:
        os.close(fd)


def _decode(data: bytes, source: str) -> str:
    """UTF-8 text (a leading byte-order mark skipped), or a CanvasError naming the byte."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        where = f"not UTF-8 text: byte 0x{data[err.start]:02x} at offset {err.start}"
        raise CanvasError([("$", where)], source) from None
