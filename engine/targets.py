"""Whether a file the command line is asked to write can be written, before anything runs.

``target_problem(target, protected)`` says why ``target`` must not or cannot be written: it is
one of the ``protected`` files (the canvas being read) by any path to it (relative, absolute,
a symlink or a hard link: same device and inode), it is a folder, its folder does not exist,
or its name or path is longer than the system allows. None when it can be tried; a failure at
write time (disk full, no permission) is still possible.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Used when the system does not say (os.pathconf is POSIX only).
DEFAULT_NAME_MAX = 255
DEFAULT_PATH_MAX = 4096


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return int(os.pathconf(folder, name))
    except (AttributeError, OSError, ValueError):
        return default


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def target_problem(target: str, protected: tuple[str, ...] = ()) -> str | None:
    """Why ``target`` cannot be written (see the module docstring), or None."""
    path = Path(target)
    if not target or target.endswith(("/", os.sep)):
        return "is not a file name"
    folder = path.parent
    try:
        encoded = os.fsencode(target)
    except (UnicodeError, ValueError):
        return "cannot be encoded as a file name"
    if b"\x00" in encoded:
        return "contains a NUL character"
    if len(encoded) >= _limit(folder, "PC_PATH_MAX", DEFAULT_PATH_MAX):
        return f"is longer ({len(encoded)} bytes) than this system allows for a path"
    if len(os.fsencode(path.name)) > _limit(folder, "PC_NAME_MAX", DEFAULT_NAME_MAX):
        return (f"has a file name of {len(os.fsencode(path.name))} bytes, longer than this "
                "system allows")
    if not folder.is_dir():
        return "cannot be written: its folder does not exist"
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"cannot be checked: {err.strerror or err}"
    if os.path.isdir(target):
        return "is a folder"
    for other in protected:
        try:
            if _same_file(st, os.stat(other)):
                return "is the canvas being read: refusing to overwrite it"
        except OSError:
            continue
    return None
