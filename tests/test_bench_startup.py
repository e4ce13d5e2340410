"""The start-up benchmark, run as a user runs it (timings are printed, never asserted)."""

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "assets" / "examples" / \
    "conv2d_backprop_filter.gbc.json"


def test_bench_startup_prints_each_command_with_its_target_and_no_scipy():
    out = subprocess.run([sys.executable, "-m", "engine.bench.startup", "--runs", "1",
                          str(EXAMPLE)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("start-up, wall seconds over 1 fresh processes")
    assert lines[1].startswith("bytecode of engine/: ")
    rows = {line[:48].strip(): line[48:].split() for line in lines[3:6]}
    assert set(rows) == {"python -c 'import numpy'", "python -c 'import engine.kernels'",
                         "gradblocks check conv2d_backprop_filter.gbc.json"}
    assert len(rows["python -c 'import numpy'"]) == 3  # median, min, max; no target
    assert rows["python -c 'import engine.kernels'"][3] == "0.15"
    assert rows["gradblocks check conv2d_backprop_filter.gbc.json"][3] == "0.25"
    assert all(float(v) > 0 for r in rows.values() for v in r[:3])
    assert lines[6] == "scipy imported by the check: no"


def test_a_failing_check_fails_the_benchmark_loudly(tmp_path):
    bad = tmp_path / "bad.gbc.json"
    bad.write_text("{")
    run = subprocess.run([sys.executable, "-m", "engine.bench.startup", "--runs", "1", str(bad)],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 1
    assert "gradblocks check bad.gbc.json: exited with status" in run.stderr
    assert "Traceback" not in run.stderr


def test_check_loads_neither_scipy_nor_pillow():
    """`gradblocks check` stays light: one BLAS library (no SciPy), Pillow only for images."""
    code = ("import runpy, sys; sys.argv = ['gradblocks', 'check', sys.argv[1]]\n"
            "try:\n    runpy.run_module('engine.cli', run_name='__main__')\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'PIL'}),"
            " 'engine.kernels' in sys.modules, file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", code, str(EXAMPLE)], capture_output=True,
                         text=True, check=True)
    assert run.stderr.strip().splitlines()[-1] == "[] True"


def test_the_default_example_is_a_shipped_canvas():
    """Without EXAMPLE the benchmark checks a canvas of assets/examples (found from its own
    place, engine/bench/startup.py)."""
    from engine.bench import startup

    assert startup.DEFAULT_EXAMPLE.is_file()
    assert startup.DEFAULT_EXAMPLE.parent == EXAMPLE.parent


def test_the_bytecode_line_says_whether_sources_are_compiled_at_each_start(tmp_path,
                                                                           monkeypatch):
    from engine.bench import startup

    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    pkg = tmp_path / "engine"
    pkg.mkdir()
    assert startup.bytecode_line(pkg) == "bytecode of engine/: not cached"
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"")
    assert startup.bytecode_line(pkg) == "bytecode of engine/: cached"
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert startup.bytecode_line(pkg).endswith("(PYTHONDONTWRITEBYTECODE is set: no new "
                                               "bytecode is written)")
