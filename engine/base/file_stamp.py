"""What a file on disk looked like when we read or wrote it, to notice changes made by others.

``FileStamp.of(path)`` records size, modification time (ns) and the SHA-256 of the content;
``stamp.differs(now)`` says whether the file changed since: a different hash, or gone. Size and
mtime only spare reading a big file twice: a file whose bytes are the same after a ``touch`` is
not a change, and a same-size change within the file system's mtime granularity is still seen
for files up to ``ALWAYS_HASH_BYTES``.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass

#: Files up to this size are hashed on every check, whatever their size and mtime say.
ALWAYS_HASH_BYTES = 16 * 2**20

NOT_REGULAR = "not a regular file"
UNREADABLE = "unreadable"


@dataclass(frozen=True)
class FileStamp:
    """Size, mtime_ns and content hash (or NOT_REGULAR / UNREADABLE) of a file."""

    size: int
    mtime_ns: int
    sha256: str

    @classmethod
    def of(cls, path: str | os.PathLike, *, previous: FileStamp | None = None
           ) -> FileStamp | None:
        """The stamp of ``path`` now, or None when there is no file there.

        With ``previous``, a file bigger than ALWAYS_HASH_BYTES whose size and mtime are those of
        ``previous`` is taken to be unchanged without reading it again.
        """
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return None
        except OSError:
            try:
                st = os.stat(path)
            except OSError:
                return None
            return cls(st.st_size, st.st_mtime_ns, UNREADABLE)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return cls(st.st_size, st.st_mtime_ns, NOT_REGULAR)
            if (previous is not None and st.st_size > ALWAYS_HASH_BYTES
                    and (st.st_size, st.st_mtime_ns) == (previous.size, previous.mtime_ns)):
                return previous
            digest = hashlib.sha256()
            try:
                while chunk := os.read(fd, 1 << 20):
                    digest.update(chunk)
            except OSError:
                return cls(st.st_size, st.st_mtime_ns, UNREADABLE)
            return cls(st.st_size, st.st_mtime_ns, digest.hexdigest())
        finally:
            os.close(fd)

    @classmethod
    def written(cls, path: str | os.PathLike, data: bytes) -> FileStamp | None:
        """The stamp of ``path`` just after we wrote ``data`` to it: size and mtime from the
        disk, the hash of ``data`` (so a change made right after our write is still seen)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        return cls(st.st_size, st.st_mtime_ns, hashlib.sha256(data).hexdigest())

    def differs(self, now: FileStamp | None) -> bool:
        """True when ``now`` (a later stamp, None = deleted) has other content than this one."""
        return now is None or now.sha256 != self.sha256 or now.size != self.size
