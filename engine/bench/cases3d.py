"""The Conv3D benchmark cases of ``python -m engine.bench`` (issue 33 item 8): forward, filter
gradient and input gradient of two NDHWC shapes, timed as the 2-D cases are
(:mod:`engine.bench.kernels`), TensorFlow's ``Conv3D``, ``Conv3DBackpropFilterV2`` and
``Conv3DBackpropInputV2`` alongside with ``--compare``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine import kernels
from engine.base.dtypes import to_dtype
from engine.shapes.conv import conv3d_geometry

#: The 3-D ops by tf.raw_ops name.
OURS: dict[str, Callable[..., np.ndarray]] = {
    "Conv3D": kernels.conv3d,
    "Conv3DBackpropFilterV2": kernels.conv3d_backprop_filter,
    "Conv3DBackpropInputV2": kernels.conv3d_backprop_input,
}


@dataclass(frozen=True)
class Case3d:
    """One 3-D benchmark call: op name, NDHWC input shape, filter ``[kd, kh, kw, in, out]``,
    strides (planes, rows, cols), padding."""

    name: str
    op: str  # tf.raw_ops name
    input_shape: tuple[int, int, int, int, int]
    filter_shape: tuple[int, int, int, int, int]
    strides: tuple[int, int, int]
    padding: str
    dtype: str = "float32"
    group: str = "3-D"

    def attrs(self) -> dict:
        return {"strides": [1, *self.strides, 1], "padding": self.padding,
                "data_format": "NDHWC"}

    def output_shape(self) -> tuple[int, ...]:
        g = conv3d_geometry(self.input_shape, self.filter_shape, self.attrs()["strides"],
                            self.padding)
        return g.output_shape

    def gflop(self) -> float:
        n, *out, co = self.output_shape()
        macs = n * int(np.prod(out)) * int(np.prod(self.filter_shape[:4])) * co
        return 2 * macs / 1e9

    def make_args(self, rng: np.random.Generator) -> dict:
        """The op's keyword arguments (TensorFlow's names) on random data."""
        dtype = to_dtype(self.dtype)
        args = dict(self.attrs())
        if self.op != "Conv3D":
            args["out_backprop"] = rng.standard_normal(self.output_shape()).astype(dtype)
        if self.op == "Conv3DBackpropFilterV2":
            args["filter_sizes"] = np.array(self.filter_shape, np.int32)
        else:
            args["filter"] = rng.standard_normal(self.filter_shape).astype(dtype)
        if self.op == "Conv3DBackpropInputV2":
            args["input_sizes"] = np.array(self.input_shape, np.int32)
        else:
            args["input"] = rng.standard_normal(self.input_shape).astype(dtype)
        return args


#: (name, input, filter, strides) of the two shapes (64 output channels each), each run
#: forward, filter gradient, input gradient.
SHAPES = [("16x56x56x64 3x3x3 s1", (2, 16, 56, 56, 64), (3, 3, 3, 64, 64), (1, 1, 1)),
          ("32x112x112x3 3x7x7 s1,2,2", (1, 32, 112, 112, 3), (3, 7, 7, 3, 64), (1, 2, 2))]

CASES = [Case3d(f"3d {kind} {name}", op, x, w, s, "SAME")
         for name, x, w, s in SHAPES
         for kind, op in (("forward", "Conv3D"), ("filter", "Conv3DBackpropFilterV2"),
                          ("input", "Conv3DBackpropInputV2"))]
