"""``gradblocks explain`` and ``gradblocks geometry`` on the Conv3D family, run as a user runs
them (a subprocess): five-entry indices, the planes in the formula, JSON of five-entry factor
indices, and the geometry's depth slices (``--slice``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from engine import kernels
from engine.api import new_canvas

ROOT = Path(__file__).parents[1]
ATTRS = {"strides": [1, 2, 1, 1, 1], "dilations": [1, 2, 1, 1, 1], "padding": "SAME",
         "data_format": "NDHWC"}


def cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def canvas(tmp_path_factory) -> Path:
    """x [1,7,4,4,2] = 1, 2, 3, ...; w [3,2,2,1,4] ones (2 groups); Conv3D y, depth stride 2 and
    dilation 2, SAME; its two gradients with out_backprop = y."""
    c = new_canvas()
    c.add("Tensor", "x", shape=[1, 7, 4, 4, 2], fill="arange", dtype="float64")
    c.add("Tensor", "w", shape=[3, 2, 2, 1, 4], fill="ones", dtype="float64")
    c.add("Conv3D", "y", **ATTRS)
    c.connect("x", "y.input")
    c.connect("w", "y.filter")
    for src, name in (("w", "ws"), ("x", "xs")):
        c.add("ShapeOf", name)
        c.connect(src, f"{name}.input")
    c.add("Conv3DBackpropFilterV2", "dw", **ATTRS)
    c.connect("x", "dw.input")
    c.connect("ws", "dw.filter_sizes")
    c.connect("y", "dw.out_backprop")
    c.add("Conv3DBackpropInputV2", "dx", **ATTRS)
    c.connect("xs", "dx.input_sizes")
    c.connect("w", "dx.filter")
    c.connect("y", "dx.out_backprop")
    path = tmp_path_factory.mktemp("conv3d") / "conv3d.gbc.json"
    c.save(path)
    return path


def test_explain_prints_the_terms_of_a_conv3d_element(canvas):
    """output[0, 0, 1, 1, 3]: plane 0 reads planes 2a-2 (tap 0: padding), rows i+1, cols j+1,
    input channel 1 (group 1 of 2)."""
    proc = cli("explain", canvas, "y", "0,0,1,1,3", "--limit", "2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "y (y).output[0, 0, 1, 1, 3]: float64, shape [1, 4, 4, 4, 4]"
    assert lines[1] == ("output[0,0,1,1,3] = sum over a,i,j,q of input[0, 2*a-2, i+1, j+1, q+1] "
                        "* filter[a, i, j, q, 3]")
    assert lines[2] == "  over a < 3, i < 2, j < 2, q < 1"
    assert lines[3].startswith("8 term(s); 4 padding term(s)")
    assert lines[4].split() == ["#", "input", "value", "filter", "value", "product"]
    # input[0, 0, 1, 1, 1] is element ((0*4 + 1)*4 + 1)*2 + 1 = 11 in C order: 12
    assert lines[5].split() == ["0", "[0,", "0,", "1,", "1,", "1]", "12.0", "[1,", "0,", "0,",
                                "0,", "3]", "1.0", "12"]
    x = np.arange(1, 7 * 4 * 4 * 2 + 1, dtype=np.float64).reshape(1, 7, 4, 4, 2)
    value = float(kernels.conv3d(x, np.ones((3, 2, 2, 1, 4)), **ATTRS)[0, 0, 1, 1, 3])
    assert lines[-3:] == [f"sum of the 8 term(s) (float64): {value!r}",
                          f"value of the block (float64): {value!r}", "|sum - value| = 0"]


@pytest.mark.parametrize("node, index", [("dw", "2,1,0,0,1"), ("dx", "0,6,2,1,1")])
def test_explain_json_lists_five_entry_factor_indices(canvas, node, index):
    proc = cli("explain", canvas, node, index, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["index"] == [int(v) for v in index.split(",")]
    assert doc["terms"] and all(len(f["index"]) == 5 for t in doc["terms"] for f in t["factors"])
    assert doc["sum"] == pytest.approx(doc["value"], rel=1e-12)
    ports = [f["port"] for f in doc["terms"][0]["factors"]]
    assert ports == (["input", "out_backprop"] if node == "dw" else ["filter", "out_backprop"])


def test_explain_refuses_a_four_entry_index_for_a_3d_block(canvas):
    proc = cli("explain", canvas, "y", "0,0,1,1")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "index [0, 0, 1, 1] has 4 entries, the output has 5 dimensions" in proc.stderr


def test_geometry_draws_a_depth_slice(canvas, tmp_path):
    out = tmp_path / "y.png"
    proc = cli("geometry", canvas, "y", "-o", out, "--slice", "0", "--frame", "5")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}: ")
    first = np.asarray(Image.open(out).convert("RGB"))
    other = tmp_path / "other.png"
    assert cli("geometry", canvas, "y", "-o", other, "--slice", "3", "--frame", "5"
               ).returncode == 0
    # the same 2-D panels, another planes panel and depth caption
    assert np.asarray(Image.open(other).convert("RGB")).shape == first.shape
    assert (np.asarray(Image.open(other).convert("RGB")) != first).any()
    overlap = tmp_path / "overlap.png"
    proc = cli("geometry", canvas, "dx", "-o", overlap, "--overlap", "--slice", "6")
    assert proc.returncode == 0, proc.stderr


def test_geometry_gif_steps_through_every_slice(canvas, tmp_path):
    proc = cli("geometry", canvas, "dw", "-o", tmp_path / "dw.gif")
    assert proc.returncode == 0, proc.stderr
    # filter gradient: 2x2 tap frames x 3 depth taps
    assert proc.stdout.endswith(": 12 frame(s) of 12\n")


@pytest.mark.parametrize("args, message", [
    (("y", "--slice", "4"), "--slice 4: y (y) has 4 output plane(s), 0 to 3"),
    (("dw", "--slice", "3"), "--slice 3: dw (dw) has 3 depth tap(s), 0 to 2"),
    (("y", "--overlap", "--slice", "7"), "--slice 7: y (y) has 7 input plane(s), 0 to 6"),
])
def test_geometry_refuses_a_slice_out_of_range(canvas, tmp_path, args, message):
    node, *rest = args
    proc = cli("geometry", canvas, node, "-o", tmp_path / "g.png", *rest)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"gradblocks: {message}\n"


def test_geometry_slice_is_for_a_png(canvas, tmp_path):
    proc = cli("geometry", canvas, "y", "-o", tmp_path / "g.gif", "--slice", "1")
    assert proc.returncode == 2
    assert "--slice is for a .png still" in proc.stderr
