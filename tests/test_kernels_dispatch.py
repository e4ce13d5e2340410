"""engine.kernels.dispatch: one decision per call, the table of paths (names and workspace) it
takes them from, the NumPy path free of compiled imports, and small calls never importing numba
under the run policy (the CLI's)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine import kernels
from engine.kernels import accel, dispatch, workspace
from engine.kernels.memory import conv_workspace
from engine.shapes.conv import conv2d_geometry

ROOT = Path(__file__).resolve().parents[1]
OPS = {"forward": kernels.conv2d, "filter": kernels.conv2d_backprop_filter,
       "input": kernels.conv2d_backprop_input}
DW = {"forward": kernels.depthwise_conv2d_native,
      "filter": kernels.depthwise_conv2d_native_backprop_filter,
      "input": kernels.depthwise_conv2d_native_backprop_input}

#: (input NHWC, filter, stride, depthwise) -> {kind: (compiled path, NumPy path)}
CASES = [
    (((2, 9, 9, 20), (3, 3, 20, 24), 2, False),
     {"forward": ("numba tiles", "numpy per-tap"), "filter": ("numba tiles", "numpy per-tap"),
      "input": ("numba tiles", "numpy per-tap")}),
    (((2, 9, 9, 3), (3, 3, 3, 8), 1, False),
     {"forward": ("numba im2col", "numpy im2col"), "filter": ("numba im2col", "numpy im2col"),
      "input": ("numba col2im", "numpy col2im")}),
    (((2, 9, 9, 20), (3, 3, 20, 24), 1, False),
     {"input": ("numba tiles", "numpy gather")}),
    (((4, 12, 12, 32), (3, 3, 32, 32), 1, False),
     {k: ("winograd", None) for k in ("forward", "filter", "input")}),
    (((2, 9, 9, 5), (3, 3, 5, 2), 2, True),
     {k: ("numba", "numpy tiles") for k in ("forward", "filter", "input")}),
]


def _args(kind, xs, ws, stride, depthwise):
    g = conv2d_geometry(xs, ws, [1, stride, stride, 1], "SAME", (), "NHWC", depthwise=depthwise)
    rng = np.random.default_rng(0)
    x, w, dy = (rng.standard_normal(s).astype(np.float32)
                for s in (g.input_shape, g.filter_shape, g.output_shape))
    args = {"forward": (x, w), "filter": (x, ws, dy), "input": (xs, w, dy)}[kind]
    return g, args, {"strides": [1, stride, stride, 1], "padding": "SAME"}


@pytest.mark.parametrize("case", CASES, ids=[str(c[0]) for c in CASES])
def test_each_call_takes_the_path_of_the_table_and_reports_its_name(monkeypatch, case):
    """The name last_path() reports is the table's row for the decision (compiled or not)."""
    pytest.importorskip("numba")
    (xs, ws, stride, depthwise), want = case
    for kind, (compiled_name, numpy_name) in want.items():
        g, args, attrs = _args(kind, xs, ws, stride, depthwise)
        for mode, name in (("numba", compiled_name), ("numpy", numpy_name)):
            monkeypatch.setenv(accel.ENV, mode)
            (DW if depthwise else OPS)[kind](*args, **attrs)
            if name is not None:
                assert kernels.last_path() == name, (kind, mode)
            first = dispatch.route(g, kind, mode == "numba")[0]
            assert kernels.last_path() == first.name
            assert first.compiled == (mode == "numba")


def test_every_recorded_name_is_a_row_and_the_workspace_is_the_largest_of_the_route():
    g = conv2d_geometry((4, 12, 12, 32), (3, 3, 32, 32), [1, 1, 1, 1], "SAME", (), "NHWC")
    assert set(dispatch.PATHS) >= {"empty", "numpy tap-spans", "numba", "numpy tiles",
                                   "winograd", "numba tiles", "numba im2col", "numba col2im",
                                   "numpy im2col", "numpy per-tap", "numpy col2im",
                                   "numpy gather"}
    assert dispatch.route(g, "filter", True) == (dispatch.WINOGRAD, dispatch.NUMBA_TILES)
    want = max(workspace.winograd_tiles(g, "filter", 4), workspace.phase_layout(g, "filter", 4))
    assert dispatch.workspace_bytes(g, "filter", 4) == want
    assert conv_workspace(g, "filter", "float32", True) >= want
    empty = conv2d_geometry((0, 5, 5, 3), (3, 3, 3, 2), [1, 1, 1, 1], "SAME", (), "NHWC")
    assert dispatch.route(empty, "forward", True) == (dispatch.EMPTY,)
    assert dispatch.workspace_bytes(empty, "forward", 4) == 0
    extreme = conv2d_geometry((1, 1, 1, 3), (3, 3, 3, 2), [1, 20000, 20000, 1], "SAME", (),
                              "NHWC")
    assert dispatch.route(extreme, "input", True) == (dispatch.TAP_SPANS,)


def _imports(module: Path) -> set[str]:
    tree = ast.parse(module.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


@pytest.mark.parametrize("name", ["compute", "sparse"])
def test_the_numpy_paths_import_nothing_compiled(name):
    names = _imports(ROOT / "engine" / "kernels" / f"{name}.py")
    assert not {n for n in names if "_compiled" in n or n.split(".")[0] in ("numba",
                                                                             "llvmlite")}


def test_the_compiled_modules_never_ask_the_switch():
    """Readiness, mode and chunk size come from the dispatch, never from accel."""
    for module in (ROOT / "engine" / "kernels" / "_compiled").glob("*.py"):
        assert not {n for n in _imports(module) if n.startswith("engine.kernels.accel")}, module


RUN = ("import sys\n"
       "from engine.kernels import accel, dispatch\n"
       "from engine import kernels\n"
       "import numpy as np\n"
       "accel.announce_compiles()\n"  # what the CLI does: the run policy
       "x = np.ones((2, 16, 16, 8), np.float32)\n"
       "kernels.depthwise_conv2d_native(x, np.ones((3, 3, 8, 1), np.float32), [1, 1, 1, 1],"
       " 'SAME')\n"
       "kernels.conv2d(x, np.ones((3, 3, 8, 8), np.float32), [1, 1, 1, 1], 'SAME')\n"
       "print(kernels.last_path(), 'numba' in sys.modules, accel._warm_thread is None)\n")


def test_small_calls_of_a_run_never_import_numba():
    env = {k: v for k, v in os.environ.items() if k != accel.ENV}
    out = subprocess.run([sys.executable, "-c", RUN], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout.split()
    assert out == ["numpy", "im2col", "False", "True"]


def test_the_command_line_takes_the_same_path_as_the_library(monkeypatch):
    """The command line's setting (announce_compiles) changes no call's path: a call over the
    size rule runs compiled, waiting for its code, and one under it runs NumPy without loading
    anything."""
    monkeypatch.setattr(accel, "_note_wanted", True)  # the CLI's setting (announce_compiles)
    monkeypatch.setattr(accel, "_warm_thread", None)
    monkeypatch.setattr(accel, "_ready", set())
    monkeypatch.setenv(accel.ENV, "auto")
    x, w = np.ones((1, 6, 6, 4), np.float32), np.ones((3, 3, 4, 1), np.float32)
    kernels.depthwise_conv2d_native(x, w, [1, 1, 1, 1], "SAME")
    assert kernels.last_path() == "numpy tiles" and accel._warm_thread is None
    if accel.compiled() is not None:
        monkeypatch.setattr(accel, "COMPILED_FROM_SECONDS", 0.0)  # this call is large now
        kernels.depthwise_conv2d_native(x, w, [1, 1, 1, 1], "SAME")
        assert kernels.last_path() == "numba"


def test_the_estimate_of_numpy_time_grows_with_the_work():
    small = conv2d_geometry((1, 8, 8, 4), (3, 3, 4, 4), [1, 1, 1, 1], "SAME", (), "NHWC")
    big = conv2d_geometry((64, 224, 224, 64), (3, 3, 64, 64), [1, 1, 1, 1], "SAME", (), "NHWC")
    assert dispatch.numpy_seconds(small) < accel.COMPILED_FROM_SECONDS < dispatch.numpy_seconds(big)
