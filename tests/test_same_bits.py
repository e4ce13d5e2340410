"""One canvas, the same bits on every surface (issue 31 point 4): the notebook API, the app,
``gradblocks run --out`` and the exported NumPy script.

The kernel path is a function of the call (:mod:`engine.kernels.accel`: op, shapes, dtype,
attributes and ``GRADBLOCKS_KERNELS``), never of what a process has loaded, so the API, the app
and the command line agree bit for bit. The exported script reproduces the NumPy path: bit for
bit where every call of the canvas runs NumPy (calls below the size rule, as every shipped
example's), within the tolerance where one runs compiled (the guide's export page says so)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine import api
from engine.kernels import accel, dispatch
from engine.shapes.conv import conv2d_geometry
from tests.export_support import REPO, assert_same_result, npz_safe

EXAMPLES = sorted((REPO / "assets" / "examples").glob("*.gbc.json"))


def _env() -> dict[str, str]:
    """The user's environment: the default kernel choice (auto)."""
    env = {k: v for k, v in os.environ.items() if k != accel.ENV}
    env["PYTHONPATH"] = str(REPO)
    return env


def _cli_run(canvas: Path, out: Path) -> dict[str, np.ndarray]:
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(canvas), "--out",
                           str(out)], capture_output=True, text=True, env=_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


def _exported_run(canvas: Path, tmp: Path) -> dict[str, np.ndarray]:
    script, out = tmp / f"{canvas.name}.py", tmp / f"{canvas.name}.script.npz"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "export", str(canvas), "--to",
                           "numpy", "-o", str(script)], capture_output=True, text=True,
                          env=_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True,
                          text=True, cwd=canvas.parent, env=_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


def _api_run(canvas: Path) -> dict[str, np.ndarray]:
    return {key: npz_safe(a) for key, a in api.load(canvas).run().named.items()}


def _bits(a: np.ndarray) -> tuple:
    a = np.ascontiguousarray(a)
    return a.dtype.str, a.shape, a.tobytes()


def _assert_bitwise(got: dict, want: dict, what: str) -> None:
    assert sorted(got) == sorted(want), what
    for key, value in want.items():
        assert _bits(got[key]) == _bits(value), f"{what}: {key}"


def _large_canvas(path: Path) -> Path:
    """A filter gradient and an input gradient over the size rule (compiled under auto) and a
    forward under it (NumPy), from seeded random tensors."""
    c = api.new_canvas()
    c.add("Tensor", "x", shape=[12, 20, 20, 16], fill="random_normal", seed=1)
    c.add("Tensor", "w", shape=[3, 3, 16, 24], fill="random_normal", seed=2)
    c.add("Tensor", "dy", shape=[12, 20, 20, 24], fill="random_normal", seed=3)
    c.add("Tensor", "small", shape=[1, 6, 6, 2], fill="random_normal", seed=4)
    c.add("Tensor", "sw", shape=[3, 3, 2, 2], fill="random_normal", seed=5)
    c.add("IntVector", "fs", values=[3, 3, 16, 24])
    c.add("IntVector", "xs", values=[12, 20, 20, 16])
    c.add("Conv2DBackpropFilter", "dw")
    c.add("Conv2DBackpropInput", "dx")
    c.add("Conv2D", "y")
    for src, dst in (("x", "dw.input"), ("fs", "dw.filter_sizes"), ("dy", "dw.out_backprop"),
                     ("xs", "dx.input_sizes"), ("w", "dx.filter"), ("dy", "dx.out_backprop"),
                     ("small", "y.input"), ("sw", "y.filter")):
        c.connect(src, dst)
    return c.save(path)


def test_the_large_canvas_has_calls_on_both_sides_of_the_size_rule():
    big = conv2d_geometry((12, 20, 20, 16), (3, 3, 16, 24), [1, 1, 1, 1], "SAME", (), "NHWC")
    small = conv2d_geometry((1, 6, 6, 2), (3, 3, 2, 2), [1, 1, 1, 1], "SAME", (), "NHWC")
    assert dispatch.numpy_seconds(small) < accel.COMPILED_FROM_SECONDS
    assert dispatch.numpy_seconds(big) >= accel.COMPILED_FROM_SECONDS


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name.split(".")[0])
def test_api_run_out_and_the_exported_script_agree_bit_for_bit_on_each_example(
        example, tmp_path, monkeypatch):
    monkeypatch.delenv(accel.ENV, raising=False)
    want = _api_run(example)
    _assert_bitwise(_cli_run(example, tmp_path / "run.npz"), want, "run --out")
    _assert_bitwise(_exported_run(example, tmp_path), want, "exported script")


def test_a_canvas_with_compiled_calls_gives_the_same_bits_in_the_api_and_run_out(
        tmp_path, monkeypatch):
    """The command line takes the compiled path for the large calls as the API does (it used
    to run them on NumPy until its compiled code happened to be loaded); the exported script
    (the NumPy path) agrees within the tolerance."""
    monkeypatch.delenv(accel.ENV, raising=False)
    canvas = _large_canvas(tmp_path / "large.gbc.json")
    want = _api_run(canvas)
    _assert_bitwise(_cli_run(canvas, tmp_path / "run.npz"), want, "run --out")
    script = _exported_run(canvas, tmp_path)
    assert sorted(script) == sorted(want)
    for key, value in want.items():
        assert_same_result(script[key], value, key)


def test_the_app_gives_the_apis_bits_while_its_compiled_code_is_still_loading(
        qtbot, tmp_path, monkeypatch):
    """The app's start-up load of the compiled code (app.startup) changes no path: a run
    started at once, the load perhaps still going, gives the API's bits."""
    from engine.graph.result_names import result_keys
    from tests.app_support import close_window, make_window, wait_run

    monkeypatch.delenv(accel.ENV, raising=False)
    canvas = _large_canvas(tmp_path / "large.gbc.json")
    want = _api_run(canvas)
    plan = api.load(canvas).plan()
    window = make_window(qtbot, tmp_path, api.load(canvas).canvas)
    try:
        accel.warm_up_in_background()  # what app.startup does
        wait_run(qtbot, window)
        got = {key: npz_safe(window.session.outputs[ref])
               for ref, key in result_keys(plan.steps, plan.labels).items()}
        _assert_bitwise(got, want, "app")
    finally:
        close_window(window)
