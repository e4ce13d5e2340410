"""engine.base.atomic: a save never destroys what it does not own (permission bits, symbolic links)
and leaves no temporary file behind when it fails."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from engine.base import atomic
from engine.cli import commands
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import load_canvas, save_canvas


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o755])
def test_replacing_a_file_keeps_its_permission_bits(tmp_path, mode):
    path = tmp_path / "a.gbc.json"
    path.write_text("old")
    path.chmod(mode)
    save_canvas(Canvas(), path)
    assert (path.stat().st_mode & 0o777) == mode
    assert load_canvas(path).nodes == {}


def test_a_new_file_gets_the_umask_mode_not_0600(tmp_path):
    old = os.umask(0o022)
    try:
        atomic.write_bytes_atomically(tmp_path / "new.txt", b"x")
        os.umask(0o027)
        atomic.write_bytes_atomically(tmp_path / "new2.txt", b"x")
    finally:
        os.umask(old)
    assert ((tmp_path / "new.txt").stat().st_mode & 0o777) == 0o644
    assert ((tmp_path / "new2.txt").stat().st_mode & 0o777) == 0o640


def test_writing_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    target = real_dir / "canvas.gbc.json"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.gbc.json"
    link.symlink_to(os.path.relpath(target, tmp_path))
    chain = tmp_path / "chain.gbc.json"
    chain.symlink_to(link)
    atomic.write_bytes_atomically(chain, b"new")
    assert chain.is_symlink() and link.is_symlink()
    assert os.readlink(link) == os.path.relpath(target, tmp_path)
    assert target.read_bytes() == b"new" and (target.stat().st_mode & 0o777) == 0o640
    assert _temps(tmp_path) == [] and _temps(real_dir) == []


def test_a_dangling_symlink_creates_its_target(tmp_path):
    """Like ``echo > link`` in a shell: the link stays and its target comes into being."""
    link = tmp_path / "link.gbc.json"
    link.symlink_to("made.gbc.json")
    save_canvas(Canvas(), link)
    assert link.is_symlink() and load_canvas(tmp_path / "made.gbc.json").nodes == {}


def test_a_dangling_symlink_into_a_missing_folder_or_a_loop_is_a_clear_error(tmp_path):
    link = tmp_path / "link.gbc.json"
    link.symlink_to(tmp_path / "gone" / "x.gbc.json")
    with pytest.raises(FileNotFoundError, match="symbolic link to .*gone.*link.gbc.json"):
        save_canvas(Canvas(), link)
    loop = tmp_path / "loop.gbc.json"
    loop.symlink_to(loop)
    with pytest.raises(OSError, match="symbolic links.*loop.gbc.json"):
        save_canvas(Canvas(), loop)
    assert link.is_symlink() and loop.is_symlink() and _temps(tmp_path) == []


def test_an_exception_while_writing_leaves_the_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"old")

    def half(f):
        f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic.write_atomically(path, half)
    assert path.read_bytes() == b"old" and _temps(tmp_path) == []


def test_cli_out_through_a_symlink_writes_the_target(tmp_path):
    canvas = tmp_path / "c.gbc.json"
    c = Canvas()
    c.add_node("Tensor", id="t", attrs={"shape": [2], "fill": "ones"})
    save_canvas(c, canvas)
    target = tmp_path / "results" / "r.npz"
    target.parent.mkdir()
    target.write_bytes(b"old")
    target.chmod(0o640)
    link = tmp_path / "r.npz"
    link.symlink_to(target)
    assert commands.main(["run", str(canvas), "--out", str(link)]) == 0
    assert link.is_symlink() and (target.stat().st_mode & 0o777) == 0o640
    assert np.load(target)["t"].tolist() == [1.0, 1.0]


def test_an_interrupt_as_the_temporary_file_is_created_leaves_no_file(tmp_path, monkeypatch):
    """A signal (SIGTERM, Ctrl+C) is handled the moment os.open returns: the temporary file
    exists but its name was not yet handed back. It was left behind (tests/test_cli_files.py
    ::test_terminated_run_removes_its_temporary_file failed now and then under load)."""
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    real_open = os.open

    def open_then_interrupted(path, flags, mode=0o777):
        fd = real_open(path, flags, mode)
        os.close(fd)
        raise KeyboardInterrupt  # what the signal handler raises right after the call

    monkeypatch.setattr(atomic.os, "open", open_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_bytes_atomically(target, b"new")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]
    assert target.read_bytes() == b"old"
