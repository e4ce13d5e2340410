"""An interruption while the .npz writer opens a member (Ctrl+C, SIGTERM unwinding) propagates
as itself: zipfile's "Can't close the ZIP file while there is an open writing handle" must not
replace it (the caller discards the half-written temporary file)."""

import io
import zipfile

import numpy as np
import pytest

from engine.io.npz import write_npz

# an archive finished by the garbage collector would print "Exception ignored in ...": an error
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


def test_an_interrupt_inside_zipfile_open_propagates_as_itself(monkeypatch):
    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    # ZipFile.open marks the archive as being written, then builds the member's handle
    monkeypatch.setattr(zipfile._ZipWriteFile, "__init__", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_npz(io.BytesIO(), {"a": np.zeros(3)})


def test_an_interrupt_while_writing_a_member_propagates_as_itself(monkeypatch):
    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(np.lib.format, "write_array", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_npz(io.BytesIO(), {"a": np.zeros(3), "b": np.ones(2)})


def test_written_arrays_read_back():
    buf = io.BytesIO()
    write_npz(buf, {"file": np.arange(3), "x y": np.ones((2, 2), np.float32)})
    buf.seek(0)
    with np.load(buf) as data:
        assert data.files == ["file", "x y"]
        np.testing.assert_array_equal(data["file"], np.arange(3))
