"""Start-up stays light: the modules `gradblocks check` and `gradblocks run` import for a float32
canvas, counted in a fresh process (never timed). ml_dtypes (bfloat16), numba (compiled
kernels), onnx, h5py (model import) and PIL (image fills) are each imported only by what needs
them; the kernels' compute paths load with the first kernel call, and the compiled per-tap tiles
with the first call that runs them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "assets" / "examples")
                  .glob("*.gbc.json"))
#: Top-level modules a float32 canvas's check or run must not import.
HEAVY = {"ml_dtypes", "numba", "onnx", "h5py", "PIL"}
#: engine.kernels modules a float32 canvas's check or run must not import (NumPy paths only).
COMPILED_TILES = {"engine.kernels.tiled", "engine.kernels._compiled.conv_tiles"}
#: What `import engine.kernels` must not import: the paths behind the ops.
KERNEL_PATHS = {"engine.kernels.dispatch", "engine.kernels.compute", "engine.kernels.layout",
                "engine.kernels.sparse", "engine.kernels.gemm", "engine.kernels.accel",
                "engine.kernels._compiled"} | COMPILED_TILES

#: Runs the CLI as `gradblocks ARGS...` in this process, then prints its exit status and the
#: names of every module imported, as JSON, on stderr's last line.
_PROBE = ("import json, runpy, sys; sys.argv = ['gradblocks', *sys.argv[1:]]\n"
          "try:\n    runpy.run_module('engine.cli', run_name='__main__')\n    code = 0\n"
          "except SystemExit as e:\n    code = e.code\n"
          "print(json.dumps([code, sorted(sys.modules)]),"
          " file=sys.stderr)")


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def _imported(*args: str, env: dict | None = None) -> set[str]:
    """The modules a fresh `gradblocks ARGS` imports (it must exit 0)."""
    run = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True,
                         text=True, env=env, check=False)
    code, modules = json.loads(run.stderr.strip().splitlines()[-1])
    assert code in (0, None), run.stderr
    return set(modules)


def test_the_examples_are_float32_canvases():
    dtypes = {node["attrs"].get("dtype", "float32")
              for e in EXAMPLES for node in json.loads(e.read_text())["nodes"]}
    assert len(EXAMPLES) >= 5 and dtypes == {"float32"}


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name.split(".")[0])
def test_check_and_run_of_a_float32_canvas_import_no_heavy_module(command, example):
    env = {k: v for k, v in os.environ.items() if k != "GRADBLOCKS_KERNELS"}
    modules = _imported(command, str(example), env=env)
    assert "engine.kernels.ops" in modules and "numpy" in modules
    assert _top(modules) & HEAVY == set()
    assert modules & COMPILED_TILES == set()
    if command == "run":  # the probe sees what a kernel call loads
        assert "engine.kernels.dispatch" in modules and "engine.kernels.compute" in modules


def test_import_engine_kernels_imports_no_heavy_module():
    code = ("import json, sys, engine.kernels; before = sorted(sys.modules)\n"
            "import numpy as np\n"
            "x = np.ones((1, 3, 3, 20), np.float32)\n"
            "y = engine.kernels.conv2d(x, np.ones((2, 2, 20, 1), np.float32), [1] * 4, 'VALID')\n"
            "print(json.dumps([before, sorted(sys.modules), y.ravel().tolist()]))")
    env = dict(os.environ, GRADBLOCKS_KERNELS="numpy")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    before, after, y = json.loads(run.stdout)
    assert _top(set(before)) & HEAVY == set() and set(before) & KERNEL_PATHS == set()
    assert y == [80.0] * 4  # 2 x 2 taps x 20 channels of ones
    assert {"engine.kernels.dispatch", "engine.kernels.compute"} <= set(after)
    assert set(after) & COMPILED_TILES == set()  # the NumPy path, forced


def test_a_bfloat16_canvas_does_import_ml_dtypes(tmp_path):
    """The probe sees ml_dtypes when a canvas needs it (so its absence above means something)."""
    canvas = json.loads(EXAMPLES[0].read_text())
    for node in canvas["nodes"]:
        if node["type"] == "Tensor":
            node["attrs"]["dtype"] = "bfloat16"
    path = tmp_path / "b.gbc.json"
    path.write_text(json.dumps(canvas))
    assert "ml_dtypes" in _imported("run", str(path))


def test_a_compiled_conv_call_does_import_the_tiles():
    """The other side of COMPILED_TILES: a conv that runs compiled loads them."""
    pytest.importorskip("numba")
    code = ("import json, sys\nimport numpy as np\nfrom engine import kernels\n"
            "x = np.ones((2, 40, 40, 24), np.float32)\n"
            "y = kernels.conv2d(x, np.ones((2, 2, 24, 24), np.float32), [1] * 4, 'VALID')\n"
            "print(json.dumps([kernels.last_path(), float(y.min()), float(y.max()),"
            " sorted(sys.modules)]))")
    env = dict(os.environ, GRADBLOCKS_KERNELS="numba")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    path, lo, hi, modules = json.loads(run.stdout)
    assert (lo, hi) == (96.0, 96.0)  # 2 x 2 taps x 24 channels of ones
    assert path.startswith("numba") and COMPILED_TILES <= set(modules)


def test_the_dtype_table_imports_ml_dtypes_only_for_a_type_numpy_lacks():
    code = ("import json, sys\nimport numpy as np\n"
            "from engine.base.dtypes import DTYPES, dtype_name, float_array, largest_finite\n"
            "seen = [list(DTYPES), 'bfloat16' in DTYPES, dtype_name(np.float16),"
            " dtype_name(np.int8), largest_finite('float16'), float_array('x', [1.0]).dtype.name,"
            " 'ml_dtypes' in sys.modules]\n"
            "import ml_dtypes\n"
            "b = np.zeros(2, ml_dtypes.bfloat16)\n"
            "seen += [DTYPES['bfloat16'] == b.dtype, dtype_name(b.dtype),"
            " float_array('x', b).dtype == b.dtype, largest_finite('bfloat16')]\n"
            "print(json.dumps(seen))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert json.loads(run.stdout) == [["float16", "bfloat16", "float32", "float64"], True,
                                      "float16", "int8", 65504.0, "float64", False,
                                      True, "bfloat16", True, 3.3895313892515355e38]
