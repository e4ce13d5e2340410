"""Canvases and helpers for the framework export and crosscheck tests: where each framework's
Python is (``GRADBLOCKS_TF_PYTHON``, ``GRADBLOCKS_TORCH_PYTHON``, ``GRADBLOCKS_JAX_PYTHON``, else
this interpreter if it can import the framework), and a canvas exercising every convention."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas

REPO = Path(__file__).parents[1]
ENV_VARS = {"tensorflow": "GRADBLOCKS_TF_PYTHON", "pytorch": "GRADBLOCKS_TORCH_PYTHON",
            "jax": "GRADBLOCKS_JAX_PYTHON"}
MODULES = {"tensorflow": "tensorflow", "pytorch": "torch", "jax": "jax"}


def framework_python(name: str) -> str | None:
    """The interpreter that can import framework ``name``, or None."""
    for python in (os.environ.get(ENV_VARS[name]), sys.executable):
        if python and subprocess.run([python, "-c", f"import {MODULES[name]}"],
                                     check=False, capture_output=True).returncode == 0:
            return python
    return None


def crosscheck_cli(canvas: Path, *args: str) -> subprocess.CompletedProcess:
    """``gradblocks crosscheck CANVAS ARGS --json`` as a user runs it."""
    return subprocess.run([sys.executable, "-m", "engine.cli", "crosscheck", str(canvas), *args,
                           "--json"], check=False, capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def report(proc: subprocess.CompletedProcess) -> dict:
    """The one JSON object on stdout."""
    return json.loads(proc.stdout)


def conventions_canvas(path: Path) -> Path:
    """Every convention a translation must get right, in one canvas saved at ``path``:

    - float64 grouped Conv2D in NCHW with asymmetric EXPLICIT pads, strides 2 and dilations
      2, and its two gradients (input_sizes from a ShapeOf);
    - float32 depthwise (multiplier 2) in NHWC with TF SAME, odd padding, stride 2, and its two
      gradients;
    - an AdjointCheck of the depthwise op in NCHW, a GradCheck of the grouped conv's input
      gradient, a Transpose and a Compare of the depthwise input gradient with the input.
    """
    c = Canvas()
    nchw = {"data_format": "NCHW", "strides": [1, 1, 2, 2], "dilations": [1, 1, 2, 2],
            "padding": "EXPLICIT", "explicit_paddings": [0, 0, 0, 0, 1, 2, 0, 3]}
    same = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    tensor = {"x": ([2, 4, 9, 8], "float64", 1), "w": ([3, 2, 2, 6], "float64", 2),
              "xd": ([1, 7, 6, 3], "float32", 3), "wd": ([3, 2, 3, 2], "float32", 4),
              "xa": ([1, 2, 7, 7], "float32", 5), "wa": ([3, 3, 2, 2], "float32", 6),
              "dya": ([1, 4, 4, 4], "float32", 7)}
    for name, (shape, dtype, seed) in tensor.items():
        c.add_node("Tensor", attrs={"shape": shape, "dtype": dtype, "seed": seed,
                                    "fill": "random_normal"}, id=name)
    c.add_node("Conv2D", attrs=nchw, id="conv")
    c.add_node("ShapeOf", id="x_shape")
    c.add_node("ShapeOf", id="w_shape")
    c.add_node("Conv2DBackpropFilter", attrs=nchw, id="dw")
    c.add_node("Conv2DBackpropInput", attrs=nchw, id="dx")
    c.add_node("GradCheck", attrs={**nchw, "wrt": "input", "samples": 6, "seed": 1}, id="gc")
    c.add_node("DepthwiseConv2D", attrs=same, id="dconv")
    c.add_node("IntVector", attrs={"values": [3, 2, 3, 2]}, id="wd_sizes")
    c.add_node("IntVector", attrs={"values": [1, 7, 6, 3]}, id="xd_sizes")
    c.add_node("DepthwiseBackpropFilter", attrs=same, id="ddw")
    c.add_node("DepthwiseBackpropInput", attrs=same, id="ddx")
    c.add_node("AdjointCheck", attrs={"op": "DepthwiseConv2dNative", "data_format": "NCHW",
                                      "strides": [1, 1, 2, 2], "padding": "SAME"}, id="adj")
    c.add_node("Transpose", attrs={"perm": [0, 3, 1, 2]}, id="t")
    c.add_node("Compare", id="cmp")
    wires = [("x", "conv", "input"), ("w", "conv", "filter"), ("x", "x_shape", "input"),
             ("w", "w_shape", "input"), ("x", "dw", "input"), ("w_shape", "dw", "filter_sizes"),
             ("conv", "dw", "out_backprop"), ("x_shape", "dx", "input_sizes"),
             ("w", "dx", "filter"), ("conv", "dx", "out_backprop"), ("x", "gc", "input"),
             ("w", "gc", "filter"), ("conv", "gc", "out_backprop"), ("dx", "gc", "gradient"),
             ("xd", "dconv", "input"), ("wd", "dconv", "filter"), ("xd", "ddw", "input"),
             ("wd_sizes", "ddw", "filter_sizes"), ("dconv", "ddw", "out_backprop"),
             ("xd_sizes", "ddx", "input_sizes"), ("wd", "ddx", "filter"),
             ("dconv", "ddx", "out_backprop"), ("xa", "adj", "input"), ("wa", "adj", "filter"),
             ("dya", "adj", "out_backprop"), ("ddx", "t", "input"), ("ddx", "cmp", "a"),
             ("xd", "cmp", "b")]
    for src, dst, port in wires:
        c.connect((src, "output"), (dst, port))
    save_canvas(c, path)
    return path
