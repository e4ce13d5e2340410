"""Replace a file atomically: readers see the old file or the whole new one, never a mix.

``write_atomically(path, write)`` calls ``write(f)`` on a new temporary file in ``path``'s
folder (named ``.<name>.<pid>-<random>.tmp``), flushes and fsyncs it, renames it over ``path``
(``os.replace``) and fsyncs the folder. If anything fails or interrupts it before the rename
(an OSError such as a full disk, KeyboardInterrupt, an exception in ``write``) the temporary
file is removed and ``path`` is exactly as it was; if the process is killed, ``path`` is still
intact and only the temporary file may remain: the next write into that folder removes it
(:func:`sweep_stale_temps`: the process its name gives is gone and it has not changed for
:data:`STALE_TEMP_S`). The new file gets the old file's permission bits
(and its owner and group when we may set them), or the usual ones (0o666 less the umask) when
there was none.

A ``path`` that is a symbolic link (or a chain of them) stays a link: the file it finally points
to is written, atomically, in that file's folder. A dangling link creates its target, as a shell's
``echo > link`` does; a link into a missing folder or a loop of links is an OSError naming
``path`` and the link's target. A target that exists but is not a regular file (a FIFO, a
device, a socket, a folder) is an OSError: it is never replaced by a regular file.

Sets of files: ``write_file_set(main, write_main, members, owned_before, keep, check)`` writes a
main file and the companion files it names (an exported script and its ``.sources.<hash>.npz``,
an imported canvas and its ``.npy`` arrays) so that an interruption (SIGKILL, SIGINT, SIGTERM,
power loss) or a failure (a full disk) at any point leaves on disk either the whole old set or
the whole new one. The contract:

- ``main`` is resolved once (:func:`resolve_target`: through symbolic links) and every member is
  written beside the real file, in its folder; members are named by the caller by their content
  (e.g. ``s.sources.<hash12>.npz``), so a member's name never changes meaning: the old main file
  never sees new data under a name it uses.
- Steps, in order: (1) every member, then the main file, is written to a temporary file in that
  folder and fsynced; ``check(temps)`` may refuse the set (nothing is visible yet); (2) each
  member is renamed to its name; (3) the folder is fsynced and the main file renamed over the
  old one: the commit point; (4) the members the old main file named (``owned_before(real
  main)``, read before step 1) that the new set does not use are removed, except files in
  ``keep`` (same device and inode: any spelling, hard links).
- Before the commit, an exception or KeyboardInterrupt removes the temporary files and the
  members this call created (not those that existed before); after it, nothing is undone.
  Killed before the commit, temporary ``.<name>.<pid>-<random>.tmp`` files (removed by the
  next write into the folder, as above) and members no main file names may remain; killed
  after it, old members no main file names may remain.
- A member name that already exists (an earlier write of the same content) is replaced by the
  same content. Members get the main file's permission bits.

Test hook (read only by tests): with the environment variable :data:`STOP_AFTER_STEP_ENV` set
to K, ``write_file_set`` stops its process (SIGSTOP) after its K-th step (each temporary written,
each member renamed, the main file renamed, each removal of an old member not kept, counted from
1), so a test can send it a signal at exactly that point and continue it.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import signal
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

#: The test hook of :func:`write_file_set` (see the module docstring).
STOP_AFTER_STEP_ENV = "GRADBLOCKS_TEST_STOP_AFTER_STEP"


#: A temporary file of a killed write is removed (:func:`sweep_stale_temps`) once it has not
#: changed for this many seconds: a write in progress changes its file far more often.
STALE_TEMP_S = 60.0
#: A temporary file's name keeps this many characters of the target's name.
TEMP_NAME_CHARS = 40
#: Random bytes in a temporary file's name (written as twice as many lower-case hex digits).
TEMP_RANDOM_BYTES = 6
#: Exactly the names :func:`temp_name` gives: a dot, 1 to :data:`TEMP_NAME_CHARS` characters of
#: a file name (no separator, no NUL), a dot, a process id (ASCII decimal, no leading zero),
#: ``-``, the random part, ``.tmp``.
_TEMP_NAME = re.compile(
    rf"\.[^/\x00{re.escape(os.sep + (os.altsep or ''))}]{{1,{TEMP_NAME_CHARS}}}"
    rf"\.([1-9][0-9]{{0,9}})-[0-9a-f]{{{2 * TEMP_RANDOM_BYTES}}}\.tmp")


def temp_name(name: str, pid: int, random: bytes) -> str:
    """The name of a temporary file written for the file ``name`` by process ``pid``:
    ``.<name cut to TEMP_NAME_CHARS>.<pid>-<random as hex>.tmp``."""
    return f".{name[:TEMP_NAME_CHARS]}.{pid}-{random.hex()}.tmp"


def temp_pid(name: str) -> int | None:
    """The process id in ``name`` when :func:`temp_name` can give that name, else None."""
    match = _TEMP_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


def _running(pid: int) -> bool:
    """True unless no process ``pid`` exists (one we may not signal exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True
    return True


def _remove_temp_folder(path: str) -> bool:
    """Remove a temporary folder (a set built before it is moved into place) holding regular
    files only; anything else in it leaves it as it is."""
    try:
        with os.scandir(path) as entries:
            files = [e.path for e in entries]
        if not all(stat.S_ISREG(os.lstat(f).st_mode) for f in files):
            return False
        for f in files:
            os.unlink(f)
        os.rmdir(path)
    except OSError:
        return False
    return True


def sweep_stale_temps(folder: Path) -> list[Path]:
    """Remove the temporary files killed writes left in ``folder``: regular files (and folders
    of regular files: a file set built before it is moved into place) named as
    :func:`temp_name` names them (nothing else) whose process is gone (not this one) and that
    have not changed for :data:`STALE_TEMP_S`. Returns the paths removed; never raises."""
    removed: list[Path] = []
    try:
        entries = os.scandir(folder)
    except OSError:
        return removed
    now = time.time()
    with entries:
        for entry in entries:
            pid = temp_pid(entry.name)
            if pid is None or pid == os.getpid():
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))
                    or now - st.st_mtime < STALE_TEMP_S or _running(pid)):
                continue
            if stat.S_ISDIR(st.st_mode):
                if not _remove_temp_folder(entry.path):
                    continue
            else:
                try:
                    os.unlink(entry.path)
                except OSError:
                    continue
            removed.append(Path(entry.path))
    return removed


def _create_temp(folder: Path, name: str, made: list[Path] | None = None) -> tuple[int, Path]:
    """A new file :func:`temp_name` names in ``folder``, opened for writing, its path appended to
    ``made``.
    Interrupted (a signal handled as ``os.open`` returns: the file exists, its name not handed
    back yet), it removes the file."""
    while True:
        tmp = folder / temp_name(name, os.getpid(), os.urandom(TEMP_RANDOM_BYTES))
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            if made is not None:
                made.append(tmp)
            return fd, tmp
        except FileExistsError:  # another file's name: not ours to remove
            continue
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def fsync_folder(folder: Path) -> None:
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


#: ``stat.S_IFMT`` kinds that are not regular files, as messages name them.
_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def not_regular(path: str | os.PathLike) -> str | None:
    """What ``path`` is (``"a FIFO"``, ``"a folder"``...) when it exists, through symbolic links,
    and is not a regular file; None for a regular file or nothing."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISREG(mode):
        return None
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _refuse_special(path: Path, shown: str | os.PathLike) -> None:
    kind = not_regular(path)
    if kind:
        raise OSError(errno.EEXIST, f"is {kind}, not a regular file: refusing to replace it",
                      str(shown))


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


def write_atomically(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` through ``write(binary_file)`` atomically (see the module docstring)."""
    shown, path = path, resolve_target(path)
    _refuse_special(path, shown)
    folder = path.parent
    sweep_stale_temps(folder)
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
    fsync_folder(folder)


def write_bytes_atomically(path: str | os.PathLike, data: bytes) -> None:
    """:func:`write_atomically` of ``data``."""
    write_atomically(path, bytes_writer(data))


@dataclass(frozen=True)
class Member:
    """A companion file of a set: its file name (no folder; named by its content) and how to
    write it."""

    name: str
    write: Callable[[BinaryIO], object]

    @staticmethod
    def of_bytes(name: str, data: bytes) -> Member:
        """The member whose content is ``data``."""
        return Member(name, bytes_writer(data))


def bytes_writer(data: bytes) -> Callable[[BinaryIO], object]:
    """The writer (for :func:`write_atomically`, :func:`write_file_set`) of ``data``."""
    return lambda f: f.write(data)


def _stepper() -> Callable[[], None]:
    """The test hook (see the module docstring): a step counter that stops the process at the
    step :data:`STOP_AFTER_STEP_ENV` names; does nothing when it is not set."""
    stop = os.environ.get(STOP_AFTER_STEP_ENV)
    counter = itertools.count(1)

    def step() -> None:
        if stop and str(next(counter)) == stop:
            os.kill(os.getpid(), signal.SIGSTOP)
    return step


def _write_temp(folder: Path, name: str, write: Callable[[BinaryIO], object],
                made: list[Path]) -> Path:
    """A temporary file beside ``name`` holding what ``write`` writes, flushed and fsynced."""
    fd, tmp = _create_temp(folder, name, made)
    with os.fdopen(fd, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def _identities(paths: Iterable[str | os.PathLike]) -> set[tuple[int, int]]:
    found = set()
    for p in paths:
        try:
            st = os.stat(p)
        except (OSError, ValueError):
            continue
        found.add((st.st_dev, st.st_ino))
    return found


def _plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and os.sep not in name and (
        os.altsep is None or os.altsep not in name) and "\x00" not in name


def write_file_set(main: str | os.PathLike, write_main: Callable[[BinaryIO], object],
                   members: Sequence[Member],
                   owned_before: Callable[[Path], Iterable[str]] = lambda _main: (),
                   keep: Iterable[str | os.PathLike] = (),
                   check: Callable[[Mapping[str, Path]], None] | None = None) -> list[Path]:
    """Write ``main`` and its ``members`` all or nothing (see the module docstring); returns the
    paths written, members first (beside the real main file) and the real main file last."""
    real = resolve_target(main)
    _refuse_special(real, main)
    folder = real.parent
    names = [m.name for m in members]
    if len(set(names)) != len(names) or real.name in names or not all(map(_plain_name, names)):
        raise ValueError(f"member names must be distinct plain file names: {names!r}")
    for name in names:
        _refuse_special(folder / name, folder / name)
    sweep_stale_temps(folder)
    step = _stepper()
    old = {n for n in owned_before(real) if _plain_name(n)} if os.path.lexists(real) else set()
    kept = _identities(keep)
    made: list[Path] = []  # temporary files, renamed or not
    placed: list[tuple[Path, Path]] = []  # (temporary, member) for members this call created
    main_tmp: Path | None = None
    try:
        temps = {}
        for m in members:
            temps[m.name] = _write_temp(folder, m.name, m.write, made)
            step()
        main_tmp = _write_temp(folder, real.name, write_main, made)
        step()
        for tmp in made:
            _copy_owner_and_mode(tmp, real)
        if check is not None:
            check(temps)
        for name, tmp in temps.items():
            final = folder / name
            if not os.path.lexists(final):
                placed.append((tmp, final))
            os.replace(tmp, final)
            step()
        fsync_folder(folder)
        os.replace(main_tmp, real)
    except BaseException:
        # Committed when the main file's temporary is gone: the exception came after the
        # rename (a signal handled as os.replace returned). Then the new set stands.
        if main_tmp is None or os.path.lexists(main_tmp):
            for tmp in made:
                tmp.unlink(missing_ok=True)
            for tmp, final in placed:
                if not os.path.lexists(tmp):  # renamed into place by this call
                    final.unlink(missing_ok=True)
        raise
    step()
    fsync_folder(folder)
    _remove_stale(real, sorted(old - set(names)), kept, step)
    return [*(folder / n for n in names), real]


def _remove_stale(real: Path, stale_names: Sequence[str], kept: set[tuple[int, int]],
                  step: Callable[[], None]) -> None:
    """Remove the old members ``stale_names`` (never the main file nor a file ``kept``)."""
    for name in stale_names:
        stale = real.parent / name
        if stale != real and not _identities([stale]) & kept:
            try:
                if not os.path.isdir(stale):
                    stale.unlink()
            except OSError:  # gone already, or not ours to remove: the new set is written
                pass
            step()
