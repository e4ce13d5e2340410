"""The command line never loses a file: atomic writes, refusal to overwrite the canvas, output
paths checked before running, exit codes, short errors and option values, driven as a user
does (a subprocess) where possible."""

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from engine.base import atomic
from engine.cli import canvas_commands, commands, common
from engine.graph.budget import gib_to_bytes
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas

REPO = Path(__file__).parents[1]
EXAMPLE = REPO / "assets" / "examples" / "conv2d_backprop_filter.gbc.json"


def gradblocks(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    """``gradblocks ARGS`` in a subprocess; stdout and stderr as bytes."""
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                          check=False)


def err_lines(proc) -> list[str]:
    return proc.stderr.decode("utf-8", "backslashreplace").splitlines()


def in_process(capsys, *args: str) -> subprocess.CompletedProcess:
    """``cli.main(args)`` with the result shaped like :func:`gradblocks`'s (for sweeps over many
    values; every behaviour is also driven through a real subprocess below)."""
    code = commands.main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out.encode(), out.err.encode())


def _canvas(tmp_path: Path, name: str = "c.gbc.json") -> Path:
    path = tmp_path / name
    path.write_bytes(EXAMPLE.read_bytes())
    return path


def _previous(path: Path) -> bytes:
    """A previous results file at ``path``; its bytes."""
    with open(path, "wb") as f:
        np.savez(f, previous=np.arange(5))
    return path.read_bytes()


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


# -- interrupted and failed writes -----------------------------------------------------------

def _fail_mid_write(exc):
    def write_npz(file, arrays):
        file.write(b"PK\x03\x04 half an archive")
        raise exc
    return write_npz


@pytest.mark.parametrize("exc, status", [
    (KeyboardInterrupt(), 130), (OSError(errno.ENOSPC, "No space left on device"), 1)],
    ids=["ctrl-c", "disk-full"])
@pytest.mark.parametrize("stage", ["write", "fsync", "replace"])
def test_interrupted_or_failed_results_write_keeps_the_previous_file(tmp_path, monkeypatch,
                                                                     capsys, exc, status, stage):
    canvas, out = _canvas(tmp_path), tmp_path / "results.npz"
    before = _previous(out)
    if stage == "write":
        monkeypatch.setattr(canvas_commands, "write_npz", _fail_mid_write(exc))
    else:
        def fail(*args):
            raise exc
        monkeypatch.setattr(atomic.os, stage, fail)
    assert commands.main(["run", str(canvas), "--out", str(out)]) == status
    assert out.read_bytes() == before
    assert _leftovers(tmp_path) == []
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    if status == 1:
        assert "No space left on device" in err[0] and "unchanged" in err[0]


def test_failed_export_keeps_the_previous_script(tmp_path, monkeypatch, capsys):
    canvas, script = _canvas(tmp_path), tmp_path / "s.py"
    script.write_text("previous = 1\n")

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    assert commands.main(["export", str(canvas), "-o", str(script)]) == 1
    assert script.read_text() == "previous = 1\n" and _leftovers(tmp_path) == []
    assert "cannot write" in capsys.readouterr().err


def test_atomic_write_keeps_permissions_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "s.py"
    path.write_text("old")
    path.chmod(0o751)
    atomic.write_bytes_atomically(path, b"new")
    assert path.read_bytes() == b"new" and (path.stat().st_mode & 0o777) == 0o751


def _run_until_writing(tmp_path: Path, out: Path, stderr) -> subprocess.Popen:
    """``gradblocks run`` of a 256 MiB canvas with ``--out out``, returned once the .npz's
    temporary file exists (the write is under way)."""
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "ones", "shape": [64, 1024, 1024]}, id="big")
    canvas = tmp_path / "big.gbc.json"
    save_canvas(c, canvas)
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "run", str(canvas), "--out",
                             str(out)], env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    try:
        while not _leftovers(tmp_path) and proc.poll() is None:
            time.sleep(0.001)
        assert _leftovers(tmp_path), "the run ended before its write could be interrupted"
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc


def test_killed_run_leaves_the_previous_results_intact(tmp_path):
    """SIGKILL while the .npz is being written (its temporary file exists): the old one stays."""
    out, before = tmp_path / "results.npz", _previous(tmp_path / "results.npz")
    proc = _run_until_writing(tmp_path, out, subprocess.DEVNULL)
    proc.kill()
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert out.read_bytes() == before
    with np.load(out) as data:
        np.testing.assert_array_equal(data["previous"], np.arange(5))


# -- never over the canvas -------------------------------------------------------------------

@pytest.mark.parametrize("how", ["same", "relative", "dotdot", "symlink", "hardlink"])
@pytest.mark.parametrize("command", ["run", "export"])
def test_output_over_the_canvas_is_refused_by_any_path(tmp_path, monkeypatch, capsys, how,
                                                       command):
    canvas = _canvas(tmp_path)
    before = canvas.read_bytes()
    target = {"same": str(canvas), "relative": "c.gbc.json",
              "dotdot": str(tmp_path / "sub" / ".." / "c.gbc.json")}.get(how)
    (tmp_path / "sub").mkdir()
    if how == "symlink":
        (tmp_path / "link.npz").symlink_to(canvas)
        target = str(tmp_path / "link.npz")
    elif how == "hardlink":
        os.link(canvas, tmp_path / "hard.py")
        target = str(tmp_path / "hard.py")
    flag = "--out" if command == "run" else "-o"
    monkeypatch.chdir(tmp_path)
    if (command, how) == ("run", "hardlink"):
        proc = gradblocks(command, str(canvas), flag, target, cwd=tmp_path)
    else:
        proc = in_process(capsys, command, str(canvas), flag, target)
    assert proc.returncode == 2
    lines = err_lines(proc)
    assert len(lines) == 1 and "refusing to overwrite" in lines[0]
    assert canvas.read_bytes() == before and proc.stdout == b""


# -- paths that cannot work: one line, exit 2, nothing run or written -------------------------

@pytest.mark.parametrize("kind, message", [
    ("folder", "is a folder"), ("missing", "does not exist"),
    ("long", "longer than this system allows"), ("slash", "is not a file name")])
@pytest.mark.parametrize("command", ["run", "export"])
def test_unusable_output_paths_are_one_line_usage_errors(tmp_path, capsys, kind, message,
                                                         command):
    canvas = _canvas(tmp_path)
    (tmp_path / "folder").mkdir()
    target = {"folder": str(tmp_path / "folder"), "missing": str(tmp_path / "no" / "r.npz"),
              "long": str(tmp_path / ("r" * 300)), "slash": str(tmp_path / "x") + "/"}[kind]
    before = sorted(os.listdir(tmp_path))
    args = (command, str(canvas), "--out" if command == "run" else "-o", target)
    proc = gradblocks(*args) if kind == "long" else in_process(capsys, *args)
    assert proc.returncode == 2
    lines = err_lines(proc)
    assert len(lines) == 1 and message in lines[0] and len(lines[0]) <= common.MAX_LINE
    assert sorted(os.listdir(tmp_path)) == before and proc.stdout == b""


# -- what is written, and what is said --------------------------------------------------------

def test_out_writes_exactly_the_path_given_and_names_it(tmp_path):
    canvas = _canvas(tmp_path)
    proc = gradblocks("run", str(canvas), "--out", "results", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.decode().splitlines()[-1] == "wrote 4 output(s) to results"
    assert not (tmp_path / "results.npz").exists()
    with np.load(tmp_path / "results") as data:
        assert "Conv2DBackpropFilter" in data.files  # the title of grad_filter
    assert _leftovers(tmp_path) == []


def test_export_names_the_script_it_wrote_and_replaces_it(tmp_path):
    canvas = _canvas(tmp_path)
    (tmp_path / "s.py").write_text("old")
    proc = gradblocks("export", str(canvas), "-o", "s.py", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.decode() == "wrote s.py: 4 block(s)\n"
    assert "kernels.conv2d_backprop_filter(" in (tmp_path / "s.py").read_text()


def test_odd_bytes_in_paths_never_break_the_output(tmp_path):
    canvas = _canvas(tmp_path)
    odd = os.fsencode(tmp_path) + b"/r\xff\xfe.npz"
    proc = gradblocks(b"run", os.fsencode(canvas), b"--out", odd,
                      env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == (b"wrote 4 output(s) to " + os.fsencode(tmp_path)
                                            + b"/r\\udcff\\udcfe.npz")
    assert os.path.exists(odd)
    missing = os.fsencode(tmp_path) + b"/\xff\xe9\xa0\x80.gbc.json"
    proc = gradblocks(b"check", missing, env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 2
    assert len(err_lines(proc)) == 1 and b"cannot open " in proc.stderr
    assert proc.stderr.rstrip().endswith(b".gbc.json: no such file")
    assert b"Traceback" not in proc.stderr


# -- exit codes and short errors ---------------------------------------------------------------

def test_many_problems_are_capped_at_20_lines_of_at_most_300_characters(tmp_path):
    c = Canvas()
    for i in range(30):
        c.add_node("Conv2D", id=f"c{i}")
    canvas = tmp_path / ("x" * 240 + ".gbc.json")
    save_canvas(c, canvas)
    proc = gradblocks("check", str(canvas))
    assert proc.returncode == 2
    lines = err_lines(proc)
    assert len(lines) == 1 + 20 + 1 and lines[-1] == "  ... and 40 more"
    assert lines[0].endswith("xxx.gbc.json: 60 problems:") and "..." in lines[0]
    assert all(len(line) <= common.MAX_LINE for line in lines)


def test_a_huge_value_is_never_echoed(tmp_path):
    canvas = _canvas(tmp_path)
    text = canvas.read_text().replace('"padding": "SAME"', '"padding": "' + "V" * 100_000 + '"')
    canvas.write_text(text)
    proc = gradblocks("check", str(canvas))
    assert proc.returncode == 2 and len(proc.stderr) < 1000
    assert "padding" in proc.stderr.decode()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "abc", "1e400", "-0"])
def test_memory_limit_must_be_positive_and_finite(tmp_path, capsys, value):
    args = ("run", str(_canvas(tmp_path)), f"--memory-limit-gib={value}")
    proc = gradblocks(*args) if value == "nan" else in_process(capsys, *args)
    assert proc.returncode == 2 and proc.stdout == b""
    lines = err_lines(proc)
    assert len(lines) == 1 and lines[0].startswith("gradblocks run: error: argument "
                                                   "--memory-limit-gib:")


def test_huge_and_tiny_memory_limits_work(tmp_path):
    canvas = _canvas(tmp_path)
    assert gradblocks("run", str(canvas), "--memory-limit-gib", "1e300").returncode == 0
    assert gib_to_bytes("1e300") == 10**300 * 2**30
    assert gib_to_bytes("0.5") == 2**29 and gib_to_bytes("1e-300") == 1
    proc = gradblocks("run", str(canvas), "--memory-limit-gib", "1e-9")
    assert proc.returncode == 2
    assert "more than the memory limit" in proc.stderr.decode()


def test_usage_errors_are_one_line(tmp_path):
    proc = gradblocks("export", str(_canvas(tmp_path)))
    assert proc.returncode == 2
    assert err_lines(proc) == [("gradblocks export: error: the following arguments are "
                               "required: -o/--output (see gradblocks export --help)")]


def test_terminated_run_removes_its_temporary_file(tmp_path):
    """SIGTERM (kill, a CI timeout) while the .npz is written unwinds like Ctrl+C: the old file
    stays, the temporary file goes, one line says so, exit status 143."""
    out, before = tmp_path / "results.npz", _previous(tmp_path / "results.npz")
    proc = _run_until_writing(tmp_path, out, subprocess.PIPE)
    try:
        proc.terminate()
        _out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 143, err
    assert out.read_bytes() == before and _leftovers(tmp_path) == []
    assert "Traceback" not in err and "terminated" in err


def test_a_termination_keeps_the_errors_of_half_built_objects_quiet(capfd, monkeypatch):
    """SIGTERM inside a constructor (ZipFile.__init__ for --out) left an object whose __del__
    failed while the program unwound: Python printed its traceback after our one line."""
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # Python's, which prints

    class HalfBuilt:
        def __del__(self):
            raise AttributeError("'ZipFile' object has no attribute '_writing'")

    with pytest.raises(commands.Terminated):
        commands._raise_terminated(15, None)
    obj = HalfBuilt()
    del obj
    assert "Traceback" not in capfd.readouterr().err
