"""engine.base.file_stamp: a change made by someone else is seen; a touch is not a change."""

from __future__ import annotations

import os

from engine.base import file_stamp
from engine.base.file_stamp import FileStamp


def test_a_change_of_content_is_seen_even_with_the_same_size_and_mtime(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"abc")
    before = FileStamp.of(path)
    st = path.stat()
    path.write_bytes(b"xyz")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert before.differs(FileStamp.of(path, previous=before))


def test_a_touch_is_not_a_change_and_deleting_or_replacing_by_a_folder_is(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"abc")
    before = FileStamp.of(path)
    os.utime(path, ns=(1, 10**18))
    assert not before.differs(FileStamp.of(path, previous=before))
    path.unlink()
    assert FileStamp.of(path) is None and before.differs(None)
    path.mkdir()
    now = FileStamp.of(path)
    assert now.sha256 == file_stamp.NOT_REGULAR and before.differs(now)


def test_an_unreadable_file_is_a_change(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"abc")
    before = FileStamp.of(path)
    path.chmod(0)
    try:
        now = FileStamp.of(path)
        if os.access(path, os.R_OK):  # root reads anything: nothing to test here
            assert now == before
        else:
            assert now.sha256 == file_stamp.UNREADABLE and before.differs(now)
    finally:
        path.chmod(0o644)


def test_a_big_file_with_the_same_size_and_mtime_is_not_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(file_stamp, "ALWAYS_HASH_BYTES", 2)
    path = tmp_path / "a.txt"
    path.write_bytes(b"abc")
    before = FileStamp.of(path)
    monkeypatch.setattr(file_stamp.os, "read", lambda *a: (_ for _ in ()).throw(AssertionError))
    assert FileStamp.of(path, previous=before) is before


def test_the_stamp_of_a_write_holds_the_bytes_written_not_a_later_change(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"ours")
    stamp = FileStamp.written(path, b"ours")
    assert stamp == FileStamp.of(path)
    path.write_bytes(b"xxxx")  # someone else, right after our write
    assert FileStamp.written(path, b"ours").differs(FileStamp.of(path))
    assert FileStamp.written(tmp_path / "gone", b"") is None
