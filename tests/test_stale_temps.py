"""Temporary files of killed writes (engine.base.atomic.sweep_stale_temps): a SIGKILL between
writing the temporary file and renaming it leaves ``.<name>.<pid>-<random>.tmp``; the next
write into that folder removes it once its process is gone and it has not changed for
STALE_TEMP_S, and touches nothing else."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine.base import atomic

ROOT = Path(__file__).resolve().parents[1]
KILLED_WRITE = (
    "import os, signal, sys\n"
    "from engine.base import atomic\n"
    "def write(f):\n"
    "    f.write(b'half of the new file')\n"
    "    f.flush()\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
    "atomic.write_atomically(sys.argv[1], write)\n")


def temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def test_the_next_write_removes_what_a_killed_write_left(tmp_path):
    target = tmp_path / "result.npy"
    target.write_bytes(b"old")
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITE, str(target)], cwd=ROOT,
                            timeout=120, check=False)
    assert killed.returncode == -signal.SIGKILL
    left = temps(tmp_path)
    assert len(left) == 1 and left[0].startswith(".result.npy.")
    assert target.read_bytes() == b"old"
    age(tmp_path / left[0], atomic.STALE_TEMP_S + 5)
    atomic.write_bytes_atomically(target, b"new")
    assert temps(tmp_path) == [] and target.read_bytes() == b"new"


def test_a_file_set_write_sweeps_too(tmp_path):
    stale = tmp_path / f".x.gbc.json.{dead_pid()}-{'a' * 12}.tmp"
    stale.write_bytes(b"left by a killed import")
    age(stale, atomic.STALE_TEMP_S + 5)
    member = atomic.Member("x.filter.npy", lambda f: np.save(f, np.zeros(2)))
    atomic.write_file_set(tmp_path / "x.gbc.json", lambda f: f.write(b"{}"), [member])
    assert temps(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.filter.npy", "x.gbc.json"]


def test_only_old_temporaries_of_gone_processes_are_removed(tmp_path):
    gone = dead_pid()
    old = atomic.STALE_TEMP_S + 5
    keep = {
        "fresh": (f".a.npy.{gone}-{'b' * 12}.tmp", 0),  # may be a write still going on
        "alive": (f".a.npy.{os.getppid()}-{'c' * 12}.tmp", old),  # its process runs
        "ours": (f".a.npy.{os.getpid()}-{'d' * 12}.tmp", old),  # this process's own
        "other name": (f".a.npy.{gone}.tmp", old),  # not a name GradBlocks gives
        "other tool": (f"a.npy.{gone}-{'e' * 12}.tmp", old),  # no leading dot
    }
    for name, seconds in keep.values():
        (tmp_path / name).write_bytes(b"x")
        age(tmp_path / name, seconds)
    link = tmp_path / f".b.npy.{gone}-{'f' * 12}.tmp"
    link.symlink_to(tmp_path / "elsewhere")
    age(link, old)
    removable = tmp_path / f".c.npy.{gone}-{'0' * 12}.tmp"
    removable.write_bytes(b"x")
    age(removable, old)
    assert atomic.sweep_stale_temps(tmp_path) == [removable]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [name for name, _ in keep.values()] + [link.name])


def test_a_folder_that_cannot_be_listed_sweeps_nothing(tmp_path):
    assert atomic.sweep_stale_temps(tmp_path / "missing") == []


def _near_misses(pid: int) -> list[str]:
    """Names of the writer's shape that it can never produce (see atomic.temp_name)."""
    tail = f".{pid}-0123456789ab.tmp"
    arabic = str(pid).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    return [
        "." + "a" * 60 + ".npz" + tail,  # name part 64 characters: the writer cuts at 40
        "." + "b" * 41 + tail,  # 41 characters
        "." + "é" * 41 + tail,
        ".." + tail[1:],  # an empty name part
        f".c.npy.{pid}-0123456789a.tmp",  # 11 hex digits
        f".c.npy.{pid}-0123456789abc.tmp",  # 13
        f".c.npy.{pid}-0123456789AB.tmp",  # upper case
        f".c.npy.{pid}-0123456789ag.tmp",  # not hex
        f".c.npy.{pid}-０１２３４５６７８９ab.tmp",  # fullwidth digits
        f".c.npy.0{pid}-0123456789ab.tmp",  # a pid with a leading zero
        f".c.npy.{arabic}-0123456789ab.tmp",  # a pid in Arabic-Indic digits
        f".c.npy.{pid}_0123456789ab.tmp",
        f".c.npy.{pid}-0123456789ab.TMP",
        f".c.npy.{pid}-0123456789ab.tmp~",
        f".c.npy.{pid}-0123456789ab.tmp\n",
    ]


def test_names_the_writer_cannot_produce_are_never_removed(tmp_path):
    gone = dead_pid()
    names = _near_misses(gone)
    for name in names:
        (tmp_path / name).write_bytes(b"someone else's")
        age(tmp_path / name, atomic.STALE_TEMP_S + 5)
    assert atomic.sweep_stale_temps(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)


#: File names: any characters but the separator and NUL.
FILE_NAMES = st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)),
                     min_size=1, max_size=120)


@given(name=FILE_NAMES, pid=st.integers(1, 2**31 - 1), random=st.binary(min_size=6, max_size=6))
def test_every_name_the_writer_gives_is_recognised_with_its_pid(name, pid, random):
    assert atomic.temp_pid(atomic.temp_name(name, pid, random)) == pid


@given(name=FILE_NAMES, random=st.binary(min_size=6, max_size=6))
def test_the_near_misses_of_a_writer_name_are_not_recognised(name, random):
    made = atomic.temp_name(name, 4242, random)
    assert atomic.temp_pid(made) == 4242
    longer = "." + name[: atomic.TEMP_NAME_CHARS] + "x" * (atomic.TEMP_NAME_CHARS + 1 - len(
        name[: atomic.TEMP_NAME_CHARS])) + made[made.rindex(".", 0, -4):]
    for miss in [longer, made.replace(random.hex(), random.hex()[:-1]),
                 made.replace(random.hex(), random.hex() + "0"),
                 made[:-4] + ".TMP", "x" + made[1:], made + "\n", *_near_misses(4242)]:
        assert atomic.temp_pid(miss) is None, miss


def test_a_writer_temporary_of_a_name_with_a_newline_is_swept(tmp_path):
    stale = tmp_path / atomic.temp_name("two\nlines.npy", dead_pid(), b"\x01" * 6)
    stale.write_bytes(b"left by a killed write")
    age(stale, atomic.STALE_TEMP_S + 5)
    assert atomic.sweep_stale_temps(tmp_path) == [stale]
