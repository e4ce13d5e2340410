"""Replace a file atomically: readers see the old file or the whole new one, never a mix.

``write_atomically(path, write)`` calls ``write(f)`` on a new temporary file in ``path``'s
folder (named ``.<name>.<random>.tmp``), flushes and fsyncs it, renames it over ``path``
(``os.replace``) and fsyncs the folder. If anything fails or interrupts it before the rename
(an OSError such as a full disk, KeyboardInterrupt, an exception in ``write``) the temporary
file is removed and ``path`` is exactly as it was; if the process is killed, ``path`` is still
intact and only the temporary file may remain. The new file gets the old file's permission bits,
or the usual ones (0o666 less the umask) when there was none.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def _create_temp(folder: Path, name: str) -> tuple[int, Path]:
    """A new file ``.<name>.<random>.tmp`` in ``folder``, opened for writing (name cut so the
    temporary name is never longer than the target's allows)."""
    while True:
        tmp = folder / f".{name[:40]}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable (best effort: not every system opens folders)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomically(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Write ``path`` through ``write(binary_file)`` atomically (see the module docstring)."""
    path = Path(path)
    folder = path.parent
    fd, tmp = _create_temp(folder, path.name)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        except FileNotFoundError:
            pass
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(folder)


def write_bytes_atomically(path: str | os.PathLike, data: bytes) -> None:
    """:func:`write_atomically` of ``data``."""
    write_atomically(path, lambda f: f.write(data))
