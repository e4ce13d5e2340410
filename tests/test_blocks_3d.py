"""The Conv3D family as blocks (issue 33 item 2): ports named as the tf.raw_ops arguments, the
attributes of 5 in data_format order (no EXPLICIT), shape inference on every wire, and runs
that equal the kernels; driven through the notebook API and the command line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from blocks.registry import get_spec
from engine import kernels
from engine.api import new_canvas
from engine.base.errors import InvalidArgumentError
from tests.export_support import REPO

TYPES = ("Conv3D", "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2")


def test_the_three_blocks_have_the_raw_ops_ports_and_attributes():
    ports = {t: get_spec(t).input_names() for t in TYPES}
    assert ports == {"Conv3D": ("input", "filter"),
                     "Conv3DBackpropFilterV2": ("input", "filter_sizes", "out_backprop"),
                     "Conv3DBackpropInputV2": ("input_sizes", "filter", "out_backprop")}
    for t in TYPES:
        spec = get_spec(t)
        attrs = {a.name: a for a in spec.attrs}
        assert list(attrs) == ["strides", "padding", "data_format", "dilations"]
        assert attrs["strides"].default == [1] * 5 and attrs["dilations"].length == (5,)
        assert attrs["padding"].choices == ("SAME", "VALID")
        assert attrs["data_format"].choices == ("NDHWC", "NCDHW")
        assert spec.op == t and [p.name for p in spec.outputs] == ["output"]


def _canvas(fmt: str = "NDHWC", filter_in: int = 2):
    """x [2,5,6,7,4] (or NCDHW), a filter [2,3,2,filter_in,6] (grouped unless 4),
    out_backprop from the forward; both gradients wired from ShapeOf blocks."""
    strides, dil = [1, 2, 1, 2, 1], [1, 1, 2, 1, 1]
    if fmt == "NCDHW":
        strides, dil = [1, 1, 2, 1, 2], [1, 1, 1, 2, 1]
    shape = [2, 5, 6, 7, 4] if fmt == "NDHWC" else [2, 4, 5, 6, 7]
    attrs = {"strides": strides, "dilations": dil, "padding": "SAME", "data_format": fmt}
    c = new_canvas()
    c.add("Tensor", "x", shape=shape, fill="random_normal", seed=1)
    c.add("Tensor", "w", shape=[2, 3, 2, filter_in, 6], fill="random_normal", seed=2)
    c.add("Conv3D", "y", **attrs)
    c.connect("x", "y.input")
    c.connect("w", "y.filter")
    c.add("ShapeOf", "ws")
    c.connect("w", "ws.input")
    c.add("ShapeOf", "xs")
    c.connect("x", "xs.input")
    c.add("Conv3DBackpropFilterV2", "dw", **attrs)
    c.connect("x", "dw.input")
    c.connect("ws", "dw.filter_sizes")
    c.connect("y", "dw.out_backprop")
    c.add("Conv3DBackpropInputV2", "dx", **attrs)
    c.connect("xs", "dx.input_sizes")
    c.connect("w", "dx.filter")
    c.connect("y", "dx.out_backprop")
    return c, attrs


@pytest.mark.parametrize("fmt", ["NDHWC", "NCDHW"])
def test_a_canvas_of_the_three_infers_and_runs_as_the_kernels(fmt):
    c, attrs = _canvas(fmt)
    specs = c.plan().specs
    out = c.run()
    x, w, y = out["x"], out["w"], out["y"]
    want_y = kernels.conv3d(x, w, **attrs)
    assert specs[("y", "output")].shape == want_y.shape
    assert specs[("y", "output")].axes == tuple(fmt)
    assert specs[("dw", "output")].axes == ("kd", "kh", "kw", "in", "out")
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(
        out["dw"], kernels.conv3d_backprop_filter(x, w.shape, y, **attrs))
    np.testing.assert_array_equal(
        out["dx"], kernels.conv3d_backprop_input(x.shape, w, y, **attrs))
    assert out["dw"].shape == w.shape and out["dx"].shape == x.shape


def test_bad_attributes_and_wires_name_the_block_and_what_is_wrong():
    c, _ = _canvas()
    with pytest.raises(InvalidArgumentError, match=r"block 'y' \(Conv3D\) attribute strides: "
                                                   r"strides must have 5 elements, got 4"):
        c.set("y", strides=[1, 1, 1, 1])
    with pytest.raises(InvalidArgumentError, match="padding.*EXPLICIT"):
        c.set("y", padding="EXPLICIT")
    c.set("y", data_format="NCDHW", strides=[1, 1, 1, 1, 1], dilations=[1, 1, 1, 1, 1])
    problems = str(c.check())
    assert "y.input: input depth 5 must be a positive multiple of filter in_channels 2. With " \
           "data_format NDHWC this block is valid" in problems


def test_the_command_line_runs_a_3d_canvas_file(tmp_path):
    c, attrs = _canvas("NCDHW")
    path, out = tmp_path / "conv3d.gbc.json", tmp_path / "out.npz"
    c.save(path)
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(path), "--out",
                           str(out)], capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    with np.load(out) as got:
        x, w = got["x"], got["w"]
        y = kernels.conv3d(x, w, **attrs)
        np.testing.assert_array_equal(got["y"], y)
        np.testing.assert_array_equal(got["dx"], kernels.conv3d_backprop_input(
            x.shape, w, y, **attrs))


@pytest.mark.parametrize("kernels_env", ["numpy", "numba"])  # the N-d path, a compiled one
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("port", ["y", "dw", "dx"])
@pytest.mark.parametrize("filter_in", [2, 4])  # grouped: the planes path; not: im2col
def test_the_workspace_bounds_what_a_3d_kernel_allocates(monkeypatch, dtype, port, kernels_env,
                                                         filter_in):
    """The compiler's memory estimate (engine.kernels.memory.conv_workspace) of each 3-D
    block covers what its run allocates besides its result (tracemalloc), on every path."""
    from engine.graph.compiler import compile_canvas
    from engine.kernels import accel
    from tests.test_memory import workspace_and_peak

    monkeypatch.setenv(accel.ENV, kernels_env)
    c, _ = _canvas(filter_in=filter_in)
    c.set("x", dtype=dtype)
    c.set("w", dtype=dtype)
    plan = compile_canvas(c.canvas)
    assert plan.ok, plan.errors
    workspace, out, peak = workspace_and_peak(plan, port, warm=True)
    im2col = filter_in == 4 and port != "dx"
    assert kernels.last_path() == ("numpy nd" if kernels_env == "numpy" else
                                   "numba im2col 3-D" if im2col else "planes (2-D kernels)")
    assert 0 < peak - out.nbytes <= workspace
