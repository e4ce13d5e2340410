"""AdjointCheck: <op(x, w), dy> = <x, backprop_input(shape(x), w, dy)> = <w, backprop_filter(x,
shape(w), dy)> with the engine's kernels in every dtype; a broken kernel is flagged."""

from __future__ import annotations

import numpy as np
import pytest

from engine import kernels
from engine.base.dtypes import CHECK_TOLERANCE
from engine.graph.canvas import Canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor
from engine.shapes.conv import conv2d_geometry

FILTERS = {"Conv2D": [3, 2, 4, 3], "DepthwiseConv2dNative": [3, 2, 4, 2]}
GEOMETRIES = [
    {},
    {"strides": [1, 2, 2, 1], "padding": "VALID"},
    {"padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 2, 2, 0, 0, 0],
     "dilations": [1, 2, 2, 1]},
    {"data_format": "NCHW", "strides": [1, 1, 2, 2]},
]


def adjoint_canvas(op: str, dtype: str, attrs: dict, seed: int = 0) -> Canvas:
    """x, w, dy as literal values in [0, 1) (positive: the inner products do not cancel, so
    the half types' rounding stays well inside their tolerance) -> AdjointCheck ``adj``."""
    x_shape = [2, 4, 6, 5] if attrs.get("data_format") == "NCHW" else [2, 6, 5, 4]
    kw = {k: attrs.get(k, d) for k, d in (("strides", [1, 1, 1, 1]), ("padding", "SAME"),
                                          ("explicit_paddings", []), ("data_format", "NHWC"),
                                          ("dilations", [1, 1, 1, 1]))}
    dy_shape = conv2d_geometry(x_shape, FILTERS[op], depthwise=op != "Conv2D",
                               **kw).output_shape
    rng = np.random.default_rng(seed)
    c = Canvas()
    for node_id, shape in (("x", x_shape), ("w", FILTERS[op]), ("dy", dy_shape)):
        c.add_node("Tensor", attrs={"fill": "values", "dtype": dtype,
                                    "values": rng.uniform(0, 1, shape).tolist()}, id=node_id)
    c.add_node("AdjointCheck", attrs={"op": op, **attrs}, id="adj")
    for port, src in (("input", "x"), ("filter", "w"), ("out_backprop", "dy")):
        c.connect((src, "output"), ("adj", port))
    return c


def run(canvas: Canvas) -> dict:
    plan = compile_canvas(canvas)
    assert plan.ok, plan.errors
    result = Executor().run(plan)
    assert not result.errors, result.errors
    return {port: result.outputs[("adj", port)] for port in
            ("forward", "via_input", "via_filter", "max_rel_error", "ok")}


@pytest.mark.parametrize("geometry", range(len(GEOMETRIES)))
@pytest.mark.parametrize("op", sorted(FILTERS))
@pytest.mark.parametrize("dtype", ("float64", "float32", "bfloat16", "float16"))
def test_the_three_inner_products_agree_for_the_engine_kernels(dtype, op, geometry):
    out = run(adjoint_canvas(op, dtype, GEOMETRIES[geometry]))
    values = [float(out[p]) for p in ("forward", "via_input", "via_filter")]
    assert all(v > 0 for v in values)
    spread = (max(values) - min(values)) / max(values)
    assert float(out["max_rel_error"]) == pytest.approx(spread, rel=1e-12, abs=1e-300)
    assert bool(out["ok"]) and spread <= CHECK_TOLERANCE[dtype]
    assert all(np.asarray(out[p]).dtype == np.float64 for p in ("forward", "max_rel_error"))


@pytest.mark.parametrize("op", sorted(FILTERS))
@pytest.mark.parametrize("dtype", ("float64", "float32"))
def test_a_broken_input_gradient_kernel_is_flagged(monkeypatch, op, dtype):
    """The input-gradient kernel with its rows flipped (a classic bug) is caught, and the
    two correct products still agree."""
    name = {"Conv2D": "conv2d_backprop_input",
            "DepthwiseConv2dNative": "depthwise_conv2d_native_backprop_input"}[op]
    right = getattr(kernels, name)
    monkeypatch.setattr(kernels, name, lambda *a, **k: np.flip(right(*a, **k), axis=1).copy())
    out = run(adjoint_canvas(op, dtype, {"strides": [1, 2, 1, 1]}, seed=5))
    assert not bool(out["ok"]) and float(out["max_rel_error"]) > CHECK_TOLERANCE[dtype]
    forward, via_filter = float(out["forward"]), float(out["via_filter"])
    assert abs(forward - via_filter) <= CHECK_TOLERANCE[dtype] * abs(forward)


def test_a_filter_gradient_off_by_one_percent_is_flagged(monkeypatch):
    right = kernels.conv2d_backprop_filter
    monkeypatch.setattr(kernels, "conv2d_backprop_filter", lambda *a, **k: right(*a, **k) * 1.01)
    out = run(adjoint_canvas("Conv2D", "float32", {}))
    assert not bool(out["ok"]) and float(out["max_rel_error"]) == pytest.approx(0.01, rel=0.01)


def test_problems_are_named_before_running():
    c = adjoint_canvas("Conv2D", "float32", {})
    c.set_attr("w", "dtype", "float64")
    (err,) = compile_canvas(c).errors["adj"]
    assert err.attr == "filter"
    assert err.message == "filter dtype float64 does not match input dtype float32"
    c = adjoint_canvas("Conv2D", "float32", {})
    c.set_attr("adj", "padding", "VALID")
    (err,) = compile_canvas(c).errors["adj"]
    assert err.attr == "out_backprop"
    assert err.message == ("out_backprop shape [2, 6, 5, 3] does not match the Conv2D output "
                           "shape: expected [2, 4, 4, 3], got [2, 6, 5, 3]")
