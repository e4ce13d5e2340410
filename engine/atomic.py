"""Replace a file atomically: readers see the old file or the whole new one, never a mix.

``write_atomically(path, write)`` calls ``write(f)`` on a new temporary file in ``path``'s
folder (named ``.<name>.<random>.tmp``), flushes and fsyncs it, renames it over ``path``
(``os.replace``) and fsyncs the folder. If anything fails or interrupts it before the rename
(an OSError such as a full disk, KeyboardInterrupt, an exception in ``write``) the temporary
file is removed and ``path`` is exactly as it was; if the process is killed, ``path`` is still
intact and only the temporary file may remain. The new file gets the old file's permission bits
(and its owner and group when we may set them), or the usual ones (0o666 less the umask) when
there was none.

A ``path`` that is a symbolic link (or a chain of them) stays a link: the file it finally points
to is written, atomically, in that file's folder. A dangling link creates its target, as a shell's
``echo > link`` does; a link into a missing folder or a loop of links is an OSError naming
``path`` and the link's target.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def _create_temp(folder: Path, name: str) -> tuple[int, Path]:
    """A new file ``.<name>.<random>.tmp`` in ``folder``, opened for writing (name cut so the
    temporary name is never longer than the target's allows). Interrupted (a signal handled as
    ``os.open`` returns: the file exists, its name not handed back yet), it removes the file."""
    while True:
        tmp = folder / f".{name[:40]}.{os.urandom(6).hex()}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:  # another file's name: not ours to remove
            continue
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


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


def resolve_target(path: str | os.PathLike) -> Path:
    """The file a write to ``path`` must replace: ``path`` itself, or the final target of the
    symbolic link(s) it is; an OSError naming ``path`` for a loop or a target in a missing
    folder."""
    path = Path(path)
    if not path.is_symlink():
        return path
    target = Path(os.path.realpath(path))
    if target.is_symlink():  # realpath stops where the links go round in a circle
        raise OSError(errno.ELOOP, "too many levels of symbolic links (a loop through "
                      f"{os.readlink(path)})", str(path))
    if not target.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, f"a symbolic link to {target}, whose folder "
                                "does not exist", str(path))
    return target


def _copy_owner_and_mode(tmp: Path, old: Path) -> None:
    """Give ``tmp`` the permission bits of ``old`` (and its owner/group, best effort)."""
    try:
        st = os.stat(old)
    except FileNotFoundError:
        return  # a new file keeps the 0o666-less-umask mode it was created with
    if hasattr(os, "chown"):
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except OSError:  # not ours to give away: keep our own owner and group
            pass
    os.chmod(tmp, stat.S_IMODE(st.st_mode))


def write_atomically(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Write ``path`` through ``write(binary_file)`` atomically (see the module docstring)."""
    path = resolve_target(path)
    folder = path.parent
    fd, tmp = _create_temp(folder, path.name)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        _copy_owner_and_mode(tmp, path)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(folder)


def write_bytes_atomically(path: str | os.PathLike, data: bytes) -> None:
    """:func:`write_atomically` of ``data``."""
    write_atomically(path, lambda f: f.write(data))
