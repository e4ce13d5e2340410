"""``gradblocks import MODEL --all -o DIR`` is all or nothing: SIGINT, SIGTERM or SIGKILL at a
step of a 40-layer import (the test hook model_canvases.SIGNAL_AFTER_STEP_ENV: the process
signals itself after its K-th step, so no timing is involved) or a full disk (ENOSPC injected
into the writer) leaves DIR as it was; the same command afterwards exits 0 and DIR then holds
exactly the files, byte for byte, of an uninterrupted run.

Only the interrupted runs need a process of their own (and the reference run, the command as a
user types it); the reruns, the earlier results and the full disk run the same ``main`` in this
process (``cli_main``), which is where the time went: one start-up per run."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.base import atomic
from engine.cli import commands
from engine.graph.model_canvases import SIGNAL_AFTER_STEP_ENV
from tests.test_file_names import write_convs

ROOT = Path(__file__).parents[1]
LAYERS = [f"l{i:02d}" for i in range(40)]
#: Steps of a run into a new DIR: 40 canvases built, then index.json (then one rename).
#: Into a DIR of files, the moves follow: 60 arrays (40 filters, 20 biases), 40 canvases,
#: index.json (142, the commit).
BUILT, ARRAYS = 41, 60
def gb(model: Path, out: Path, hook: str | None = None) -> subprocess.CompletedProcess:
    """``gradblocks import MODEL --all -o OUT`` in a process of its own (signalled by itself at
    the step ``hook`` names)."""
    env = {k: v for k, v in os.environ.items() if k != SIGNAL_AFTER_STEP_ENV}
    if hook:
        env[SIGNAL_AFTER_STEP_ENV] = hook
    return subprocess.run([sys.executable, "-m", "engine.cli", "import", str(model), "--all",
                           "-o", str(out)], capture_output=True, text=True, cwd=ROOT, env=env,
                          check=False, timeout=600)


def cli_main(model: Path, out: Path) -> int:
    """The same command through ``engine.cli``'s ``main`` in this process (no hook set)."""
    assert SIGNAL_AFTER_STEP_ENV not in os.environ
    return commands.main(["import", str(model), "--all", "-o", str(out)])


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
    assert cli_main(earlier_model, earlier) == 0
    new, over = folder / "new", folder / "over"
    done = gb(model, new)  # the reference: the command in a process of its own
    assert done.returncode == 0, done.stderr
    shutil.copytree(earlier, over)
    assert cli_main(model, over) == 0
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
    assert cli_main(case["model"], out) == 0
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
    assert cli_main(case["model"], out) == 0
    assert tree(out) == case["new"]
    left = [p.name for p in out.iterdir() if atomic.temp_pid(p.name)]
    assert len(left) == (sig == "SIGKILL")  # its build folder, swept once old
    assert len(swept(out)) == len(left) and tree(out) == case["new"]
    assert sorted(p.name for p in out.iterdir()) == sorted(case["new"])


@pytest.mark.parametrize("earlier", [False, True])
@pytest.mark.parametrize("at", [1, 50])
def test_a_full_disk_leaves_the_folder_as_it_was_and_the_rerun_completes(
        case, tmp_path, monkeypatch, capsys, earlier, at):
    """The writer's ``_write_temp`` fails with ENOSPC from its ``at``-th call on."""
    out = tmp_path / "out"
    if earlier:
        shutil.copytree(case["earlier"], out)
    calls, write = [], atomic._write_temp

    def full(*args):
        calls.append(1)
        if len(calls) >= at:
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(*args)

    with monkeypatch.context() as m:
        m.setattr(atomic, "_write_temp", full)
        capsys.readouterr()
        status = cli_main(case["model"], out)
        printed = capsys.readouterr()
    assert len(calls) >= at  # the disk did fill
    assert status == 1 and printed.out == "", printed.err
    assert printed.err.count("\n") == 1 and "No space left on device" in printed.err
    assert (tree(out) == case["earlier_tree"]) if earlier else not out.exists()
    assert [p.name for p in (out if earlier else tmp_path).iterdir()
            if atomic.temp_pid(p.name)] == []
    assert cli_main(case["model"], out) == 0
    assert tree(out) == case["new"]
