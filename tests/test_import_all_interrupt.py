"""``gradblocks import MODEL --all -o DIR`` is all or nothing: SIGINT, SIGTERM or SIGKILL at a
step of a 40-layer import (the test hook model_canvases.SIGNAL_AFTER_STEP_ENV: the process
signals itself after its K-th step, so no timing is involved) or a full disk (ENOSPC injected
into the writer) leaves DIR as it was; the same command afterwards exits 0 and DIR then holds
exactly the files, byte for byte, of an uninterrupted run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.base import atomic
from engine.graph.model_canvases import SIGNAL_AFTER_STEP_ENV
from tests.test_file_names import write_convs

ROOT = Path(__file__).parents[1]
LAYERS = [f"l{i:02d}" for i in range(40)]
#: Steps of a run into a new DIR: 40 canvases built, then index.json (then one rename).
#: Into a DIR of files, the moves follow: 60 arrays (40 filters, 20 biases), 40 canvases,
#: index.json (142, the commit).
BUILT, ARRAYS = 41, 60
#: Runs the CLI with atomic._write_temp failing with ENOSPC from its K-th call on.
_FULL_DISK = ("import errno, runpy, sys\n"
              "from engine.base import atomic\n"
              "k, calls, write = int(sys.argv.pop(1)), [], atomic._write_temp\n"
              "def full(*args):\n"
              "    calls.append(1)\n"
              "    if len(calls) >= k:\n"
              "        raise OSError(errno.ENOSPC, 'No space left on device')\n"
              "    return write(*args)\n"
              "atomic._write_temp = full\n"
              "sys.argv = ['gradblocks', *sys.argv[1:]]\n"
              "runpy.run_module('engine.cli', run_name='__main__')\n")


def gb(model: Path, out: Path, hook: str | None = None,
       full_disk_at: int | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != SIGNAL_AFTER_STEP_ENV}
    if hook:
        env[SIGNAL_AFTER_STEP_ENV] = hook
    head = ["-c", _FULL_DISK, str(full_disk_at)] if full_disk_at else ["-m", "engine.cli"]
    return subprocess.run([sys.executable, *head, "import", str(model), "--all", "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT, env=env, check=False,
                          timeout=600)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes), leaving out temporary names."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not any(atomic.temp_pid(part) for part in p.relative_to(
                folder).parts)}


def swept(folder: Path) -> list[str]:
    """Age what killed runs left in ``folder`` and sweep it; the names of what it removed."""
    for p in folder.iterdir():
        if atomic.temp_pid(p.name):
            old = p.stat().st_mtime - atomic.STALE_TEMP_S - 5
            os.utime(p, (old, old))
    return sorted(p.name for p in atomic.sweep_stale_temps(folder))


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> dict:
    """The model, an earlier --all of another model, and the uninterrupted results (into a new
    DIR, and over the earlier result)."""
    folder = tmp_path_factory.mktemp("models")
    model = write_convs(folder / "m.onnx", LAYERS, seed=1)
    earlier_model = write_convs(folder / "earlier.onnx", LAYERS[:30], seed=2)
    earlier = folder / "earlier"
    assert gb(earlier_model, earlier).returncode == 0
    new, over = folder / "new", folder / "over"
    assert gb(model, new).returncode == 0
    shutil.copytree(earlier, over)
    assert gb(model, over).returncode == 0
    assert len(tree(new)) == 40 + ARRAYS + 1 and tree(over) == tree(new)
    return {"model": model, "earlier": earlier, "new": tree(new), "earlier_tree": tree(earlier)}


EXPECTED_STATUS = {"SIGKILL": -signal.SIGKILL, "SIGINT": 130, "SIGTERM": 143}


@pytest.mark.parametrize("sig, step", [("SIGKILL", 1), ("SIGKILL", 20), ("SIGKILL", BUILT),
                                       ("SIGINT", 20), ("SIGTERM", BUILT)])
def test_an_interrupted_run_into_a_new_folder_writes_nothing_and_the_rerun_completes(
        case, tmp_path, sig, step):
    out = tmp_path / "out"
    stopped = gb(case["model"], out, f"{step}:{sig}")
    assert stopped.returncode == EXPECTED_STATUS[sig], stopped.stderr
    assert "Traceback" not in stopped.stderr
    assert not out.exists()  # all or nothing
    left = [p.name for p in tmp_path.iterdir()]
    assert all(atomic.temp_pid(n) for n in left) and len(left) == (sig == "SIGKILL")
    again = gb(case["model"], out)
    assert again.returncode == 0, again.stderr
    assert tree(out) == case["new"]
    assert len(swept(tmp_path)) == len(left) and [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("sig, step", [
    ("SIGKILL", BUILT), ("SIGKILL", BUILT + 30), ("SIGKILL", BUILT + ARRAYS + 20),
    ("SIGKILL", BUILT + ARRAYS + 40), ("SIGKILL", BUILT + ARRAYS + 41), ("SIGINT", BUILT + 10),
    ("SIGTERM", BUILT + ARRAYS + 1)])
def test_an_interrupted_run_over_an_earlier_result_is_completed_by_the_rerun(
        case, tmp_path, sig, step):
    out = tmp_path / "out"
    shutil.copytree(case["earlier"], out)
    stopped = gb(case["model"], out, f"{step}:{sig}")
    assert stopped.returncode == EXPECTED_STATUS[sig], stopped.stderr
    if step <= BUILT:  # nothing moved yet: DIR is as it was
        assert tree(out) == case["earlier_tree"]
    again = gb(case["model"], out)
    assert again.returncode == 0, again.stderr
    assert tree(out) == case["new"]
    left = [p.name for p in out.iterdir() if atomic.temp_pid(p.name)]
    assert len(left) == (sig == "SIGKILL")  # its build folder, swept once old
    assert len(swept(out)) == len(left) and tree(out) == case["new"]
    assert sorted(p.name for p in out.iterdir()) == sorted(case["new"])


@pytest.mark.parametrize("earlier", [False, True])
@pytest.mark.parametrize("at", [1, 50])
def test_a_full_disk_leaves_the_folder_as_it_was_and_the_rerun_completes(
        case, tmp_path, earlier, at):
    out = tmp_path / "out"
    if earlier:
        shutil.copytree(case["earlier"], out)
    full = gb(case["model"], out, full_disk_at=at)
    assert full.returncode == 1 and full.stdout == "", full.stderr
    assert full.stderr.count("\n") == 1 and "No space left on device" in full.stderr
    assert (tree(out) == case["earlier_tree"]) if earlier else not out.exists()
    assert [p.name for p in (out if earlier else tmp_path).iterdir()
            if atomic.temp_pid(p.name)] == []
    again = gb(case["model"], out)
    assert again.returncode == 0, again.stderr
    assert tree(out) == case["new"]
