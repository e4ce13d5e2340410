"""The default install without numba: every command and the app start, on the NumPy path.

Each command runs in a fresh process where importing numba fails (``sys.modules["numba"] =
None``, as when it is not installed), with the kernels left on ``auto``; it must succeed and
never load a compiled module."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.model_files import write_onnx

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "assets" / "examples"
COMPILED = ("llvmlite", "engine.kernels._compiled.numba_depthwise",
            "engine.kernels._compiled.conv_tiles_jit", "engine.kernels._compiled.winograd_jit",
            "engine.kernels._compiled.numba_simd")
#: Runs ``gradblocks`` (``python -m app``: :mod:`app.launch`), with numba not importable.
NO_NUMBA = ("import sys, runpy; sys.modules['numba'] = None; sys.argv[0] = 'gradblocks'; "
            "runpy.run_module('app', run_name='__main__')")


def run_without_numba(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, set]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPROFILEIMPORTTIME", "GRADBLOCKS_KERNELS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["QT_QPA_PLATFORM"] = "offscreen"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", NO_NUMBA, *args],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=600,
                          check=False)
    loaded = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
              if line.startswith("import time:") and "|" in line}
    # the refused ``import numba`` is logged too (a few microseconds); nothing of it loads
    return proc, {name for name in loaded if name != "numba"}


def compiled_modules(loaded: set[str]) -> set[str]:
    return {n for n in loaded if n in COMPILED or n.startswith(("numba.", "llvmlite."))}


def _errors(proc: subprocess.CompletedProcess) -> str:
    return "\n".join(line for line in proc.stderr.splitlines()
                     if not line.startswith("import time:"))


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.gbc.json")))
def test_every_example_checks_and_runs(example, tmp_path):
    proc, loaded = run_without_numba(["run", str(EXAMPLES / example), "--out", "r.npz"],
                                     tmp_path)
    assert proc.returncode == 0, _errors(proc)
    assert not compiled_modules(loaded)
    with np.load(tmp_path / "r.npz") as results:
        assert results.files and all(np.isfinite(results[k]).all() for k in results.files)


@pytest.mark.parametrize("command", [
    ["check", "{ex}"],
    ["export", "{ex}", "-o", "s.py"],
    ["export", "{ex}", "--to", "tensorflow", "-o", "t.py"],
    ["explain", "{ex}", "grad_filter", "0,0,0,0", "--json"],
    ["geometry", "{ex}", "grad_filter", "-o", "g.png"],
    ["import", "{onnx}", "--list"],
    ["import", "{onnx}", "--layer", "conv_grouped", "-o", "layer.gbc.json"],
])
def test_every_command_works(command, tmp_path):
    onnx = write_onnx(tmp_path / "m.onnx") if "{onnx}" in command else None
    args = [a.format(ex=EXAMPLES / "conv2d_backprop_filter.gbc.json", onnx=onnx)
            for a in command]
    proc, loaded = run_without_numba(args, tmp_path)
    assert proc.returncode == 0, _errors(proc)
    assert not compiled_modules(loaded)
    if command[0] == "import" and "--layer" in command:
        check, _ = run_without_numba(["run", "layer.gbc.json"], tmp_path)
        assert check.returncode == 0, _errors(check)


def test_the_app_starts_and_runs_a_canvas(tmp_path):
    pytest.importorskip("PySide6")
    shot = tmp_path / "shot.png"
    proc, loaded = run_without_numba([str(EXAMPLES / "training_step.gbc.json"), "--run",
                                      "--screenshot", str(shot)], tmp_path)
    assert proc.returncode == 0, _errors(proc)
    assert shot.stat().st_size > 10_000
    assert not compiled_modules(loaded)
    assert "PySide6" in loaded
