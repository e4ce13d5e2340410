"""GradCheck: float64 central differences of L = <op(input, filter), out_backprop> against a
gradient. It passes the backprop blocks' gradients and flags one wrong element, in every dtype,
for both ops, both arguments and several geometries; its problems are named before running."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given

from blocks.gradcheck import grad_check
from blocks.registry import get_spec
from engine.base.dtypes import CHECK_TOLERANCE
from engine.graph.canvas import Canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor
from engine.shapes.conv import conv2d_geometry
from tests import reference
from tests.test_kernels_properties import _arrays, conv_cases

OPS = {  # op: forward block, filter-gradient block, input-gradient block, filter shape
    "Conv2D": ("Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", [3, 2, 4, 3]),
    "DepthwiseConv2dNative": ("DepthwiseConv2D", "DepthwiseBackpropFilter",
                              "DepthwiseBackpropInput", [3, 2, 4, 2]),
}
GEOMETRIES = {
    "same": {},
    "stride2-valid": {"strides": [1, 2, 2, 1], "padding": "VALID"},
    "dilated-explicit": {"padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 2, 2, 0, 0, 0],
                         "dilations": [1, 2, 2, 1]},
    "nchw-stride2-same": {"data_format": "NCHW", "strides": [1, 1, 2, 2]},
}
DTYPES = ("float64", "float32", "bfloat16", "float16")


def _input_shape(attrs: dict) -> list[int]:
    return [2, 4, 6, 5] if attrs.get("data_format") == "NCHW" else [2, 6, 5, 4]


def check_canvas(op: str, dtype: str, attrs: dict, filter_shape: list[int] | None = None,
                 **check: object) -> Canvas:
    """x, w, dy sources -> both backprop blocks -> a GradCheck per argument (ids gc_input,
    gc_filter; samples 0 unless given), plus the gradients' blocks dx and dw."""
    _, dw_block, dx_block, w_shape = OPS[op]
    w_shape = filter_shape or w_shape
    x_shape = _input_shape(attrs)
    kw = {k: attrs.get(k, d) for k, d in (("strides", [1, 1, 1, 1]), ("padding", "SAME"),
                                          ("explicit_paddings", []), ("data_format", "NHWC"),
                                          ("dilations", [1, 1, 1, 1]))}
    dy_shape = conv2d_geometry(x_shape, w_shape, depthwise=op != "Conv2D", **kw).output_shape
    c = Canvas()
    for node_id, shape, seed in (("x", x_shape, 1), ("w", w_shape, 2), ("dy", dy_shape, 3)):
        c.add_node("Tensor", attrs={"shape": list(shape), "dtype": dtype, "seed": seed},
                   id=node_id)
    c.add_node("ShapeOf", id="xs")
    c.add_node("ShapeOf", id="ws")
    c.connect(("x", "output"), ("xs", "input"))
    c.connect(("w", "output"), ("ws", "input"))
    c.add_node(dw_block, attrs=attrs, id="dw")
    c.add_node(dx_block, attrs=attrs, id="dx")
    for src, dst in (("x", ("dw", "input")), ("ws", ("dw", "filter_sizes")),
                     ("dy", ("dw", "out_backprop")), ("xs", ("dx", "input_sizes")),
                     ("w", ("dx", "filter")), ("dy", ("dx", "out_backprop"))):
        c.connect((src, "output"), dst)
    for wrt, grad in (("input", "dx"), ("filter", "dw")):
        node = f"gc_{wrt}"
        c.add_node("GradCheck", attrs={"op": op, "wrt": wrt, "samples": 0, **attrs, **check},
                   id=node)
        for port, src in (("input", "x"), ("filter", "w"), ("out_backprop", "dy"),
                          ("gradient", grad)):
            c.connect((src, "output"), (node, port))
    return c


def run(canvas: Canvas) -> tuple:
    plan = compile_canvas(canvas)
    assert plan.ok, plan.errors
    result = Executor().run(plan)
    assert not result.errors, result.errors
    return plan, result.outputs


def rerun_with(plan, outputs, node: str, gradient: np.ndarray) -> dict:
    """The GradCheck ``node`` run again, as the block runs, on another gradient."""
    step = next(s for s in plan.steps if s.node_id == node)
    arrays = {p: outputs[src] for p, src in step.inputs.items()}
    return step.spec.run(step.attrs, {**arrays, "gradient": gradient})


def one_wrong(gradient: np.ndarray, index: int) -> np.ndarray:
    """``gradient`` with one element off by half its largest magnitude (in its own dtype)."""
    wrong = gradient.astype(np.float64)
    wrong.reshape(-1)[index] += 0.5 * np.max(np.abs(wrong)) + 1.0
    return wrong.astype(gradient.dtype)


@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_passes_the_backprop_gradients_and_flags_one_wrong_element(dtype, op, geometry):
    plan, out = run(check_canvas(op, dtype, GEOMETRIES[geometry]))
    for wrt in ("input", "filter"):
        node = f"gc_{wrt}"
        gradient = out[(("dx" if wrt == "input" else "dw"), "output")]
        assert gradient.dtype.name == dtype or dtype == "bfloat16"
        numeric, error = out[(node, "numeric")], out[(node, "error")]
        assert numeric.shape == error.shape == gradient.shape and numeric.dtype == np.float64
        assert not np.isnan(numeric).any()  # samples=0: every element
        assert bool(out[(node, "ok")]), (wrt, float(out[(node, "max_rel_error")]))
        assert float(out[(node, "max_rel_error")]) <= CHECK_TOLERANCE[dtype]
        assert float(out[(node, "max_abs_error")]) == np.max(error)
        # one element off: flagged, and the error map points at it
        index = gradient.size // 3
        wrong = rerun_with(plan, out, node, one_wrong(gradient, index))
        assert not bool(wrong["ok"]) and float(wrong["max_rel_error"]) > 0.4
        assert int(np.argmax(wrong["error"])) == index
        np.testing.assert_array_equal(wrong["numeric"], numeric)  # the numbers stay


@pytest.mark.parametrize("op", sorted(OPS))
def test_numeric_gradient_equals_the_float64_analytic_one(op):
    """Finite differences (not the gradient kernels) give the same numbers in float64,
    here on a grouped Conv2D (filter in_channels 2 of input depth 4) and a depthwise op."""
    shape = [3, 2, 2, 4] if op == "Conv2D" else None
    _, out = run(check_canvas(op, "float64", {"strides": [1, 2, 1, 1],
                                              "dilations": [1, 1, 2, 1]}, shape))
    for wrt, grad in (("input", "dx"), ("filter", "dw")):
        np.testing.assert_allclose(out[(f"gc_{wrt}", "numeric")], out[(grad, "output")],
                                   rtol=1e-9, atol=1e-12)
        assert float(out[(f"gc_{wrt}", "max_rel_error")]) < 1e-11


def test_samples_are_drawn_without_replacement_by_seed_and_can_miss_a_wrong_element():
    plan, out = run(check_canvas("Conv2D", "float32", {}, samples=5, seed=3))
    numeric = out[("gc_filter", "numeric")]
    sampled = np.flatnonzero(~np.isnan(numeric))
    assert sampled.size == 5
    assert np.array_equal(np.isnan(out[("gc_filter", "error")]), np.isnan(numeric))
    same = rerun_with(plan, out, "gc_filter", out[("dw", "output")])
    np.testing.assert_array_equal(same["numeric"], numeric)
    c = check_canvas("Conv2D", "float32", {}, samples=5, seed=4)
    other = run(c)[1][("gc_filter", "numeric")]
    assert not np.array_equal(np.isnan(other), np.isnan(numeric))
    # a wrong element outside the sample goes unnoticed (the README's caveat) ...
    gradient = out[("dw", "output")]
    missed = next(i for i in range(gradient.size) if i not in set(sampled))
    assert bool(rerun_with(plan, out, "gc_filter", one_wrong(gradient, missed))["ok"])
    # ... one inside it does not
    assert not bool(rerun_with(plan, out, "gc_filter", one_wrong(gradient, sampled[2]))["ok"])


def test_more_samples_than_elements_checks_every_element():
    _, out = run(check_canvas("DepthwiseConv2dNative", "float64", {}, samples=10_000))
    assert not np.isnan(out[("gc_filter", "numeric")]).any()


def test_a_zero_gradient_is_compared_by_its_absolute_error():
    """dy = 0: every numeric derivative is 0, so ok compares max_abs_error with the
    tolerance (max_rel_error is 0 for the right gradient and inf for a wrong one)."""
    c = check_canvas("Conv2D", "float32", {})
    c.set_attr("dy", "fill", "zeros")
    plan, out = run(c)
    assert bool(out[("gc_input", "ok")]) and float(out[("gc_input", "max_rel_error")]) == 0
    gradient = out[("dx", "output")]
    wrong = rerun_with(plan, out, "gc_input", one_wrong(gradient, 0))
    assert not bool(wrong["ok"]) and float(wrong["max_rel_error"]) == np.inf


def test_an_element_no_output_reads_has_derivative_zero():
    """VALID with stride 2 on 6 rows and a 3-row filter never reads the last row."""
    _, out = run(check_canvas("Conv2D", "float64", {"strides": [1, 2, 2, 1],
                                                     "padding": "VALID"}))
    numeric = out[("gc_input", "numeric")]
    assert np.all(numeric[:, 5] == 0) and np.any(numeric[:, 4] != 0)
    assert bool(out[("gc_input", "ok")])


def _errors(canvas: Canvas, node: str) -> list:
    return compile_canvas(canvas).errors.get(node, [])


def test_a_gradient_of_the_other_argument_is_an_error_of_wrt():
    c = check_canvas("Conv2D", "float32", {})
    c.set_attr("gc_input", "wrt", "filter")  # fed dx [2, 6, 5, 4]
    (err,) = _errors(c, "gc_input")
    assert err.attr == "wrt"
    assert err.message == ("gradient shape [2, 6, 5, 4] does not match the filter shape "
                           "(wrt=filter): expected [3, 2, 4, 3], got [2, 6, 5, 4]")
    assert str(err).startswith("gc_input.wrt: gradient shape")


def test_an_out_backprop_of_the_wrong_shape_and_a_bad_stride_are_named():
    c = check_canvas("Conv2D", "float32", {})
    c.set_attr("gc_filter", "strides", [1, 2, 2, 1])
    (err,) = _errors(c, "gc_filter")
    assert err.attr == "out_backprop"
    assert "out_backprop shape [2, 6, 5, 3] does not match the Conv2D output shape: " \
           "expected [2, 3, 3, 3], got [2, 6, 5, 3]" == err.message
    c.set_attr("gc_filter", "strides", [2, 1, 1, 1])
    (err,) = _errors(c, "gc_filter")
    assert err.attr == "strides"
    c = check_canvas("Conv2D", "float32", {})
    c.set_attr("gc_filter", "op", "DepthwiseConv2dNative")  # filter [3, 2, 4, 3]: M = 3
    (err,) = _errors(c, "gc_filter")
    assert err.attr == "out_backprop" and "expected [2, 6, 5, 12]" in err.message


def test_infer_gives_shapes_dtypes_and_axes_before_running():
    plan = compile_canvas(check_canvas("DepthwiseConv2dNative", "bfloat16",
                                       {"data_format": "NCHW"}))
    numeric = plan.specs[("gc_input", "numeric")]
    assert (numeric.shape, numeric.dtype, numeric.axes) == ((2, 4, 6, 5), "float64",
                                                            ("N", "C", "H", "W"))
    dw = plan.specs[("gc_filter", "error")]
    assert (dw.shape, dw.axes) == ((3, 2, 4, 2), ("kh", "kw", "in", "multiplier"))
    assert plan.specs[("gc_filter", "ok")].dtype == "bool"
    assert plan.specs[("gc_filter", "max_rel_error")].shape == ()


@pytest.mark.parametrize(("name", "value", "match"), [
    ("epsilon", "1e-3", "epsilon must be a number, got '1e-3'"),
    ("epsilon", float("nan"), "epsilon must be a finite number, got nan"),
    ("epsilon", float("inf"), "epsilon must be a finite number, got inf"),
    ("epsilon", True, "epsilon must be a number, got True"),
    ("epsilon", 0.0, r"epsilon must be >= 1e-12, got 0.0"),
    ("epsilon", 10**400, "beyond the float range"),
    ("samples", -1, "samples must be >= 0"),
    ("wrt", "output", "wrt 'output' is not one of input, filter"),
    ("op", "Conv4D", "op 'Conv4D' is not one of Conv2D, DepthwiseConv2dNative, Conv3D"),
])
def test_invalid_attributes_are_named(name, value, match):
    from blocks.spec import AttrError

    with pytest.raises(AttrError, match=match) as info:
        get_spec("GradCheck").attr(name).validate(value)
    assert info.value.attr == name


def test_float_attributes_round_trip_through_the_canvas_file(tmp_path):
    from engine.graph.canvas import CanvasError
    from engine.graph.canvas_file import load_canvas, save_canvas

    c = check_canvas("Conv2D", "float32", {})
    c.set_attr("gc_input", "epsilon", 0.1 + 0.2)
    c.set_attr("gc_filter", "epsilon", 2)  # an int is taken as a float
    assert c.nodes["gc_filter"].attrs["epsilon"] == 2.0
    assert isinstance(c.nodes["gc_filter"].attrs["epsilon"], float)
    path = tmp_path / "c.gbc.json"
    save_canvas(c, path)
    again = load_canvas(path)
    assert again.nodes["gc_input"].attrs["epsilon"] == 0.30000000000000004
    assert again == c
    text = path.read_text().replace("0.30000000000000004", "NaN")
    path.write_text(text)
    with pytest.raises(CanvasError) as info:
        load_canvas(path)
    assert any("epsilon" in where and "finite" in message
               for where, message in info.value.problems)


def test_the_same_check_with_an_other_epsilon_agrees():
    """L is linear: the step does not change the numbers beyond rounding."""
    _, a = run(check_canvas("Conv2D", "float64", {}, epsilon=1e-3))
    _, b = run(check_canvas("Conv2D", "float64", {}, epsilon=0.5))
    np.testing.assert_allclose(a[("gc_filter", "numeric")], b[("gc_filter", "numeric")],
                               rtol=1e-10, atol=1e-12)


def test_workspace_bounds_what_a_check_allocates():
    import tracemalloc

    plan = compile_canvas(check_canvas("Conv2D", "float32", {"strides": [1, 2, 1, 1]}))
    outputs = Executor().run(plan).outputs
    for node in ("gc_input", "gc_filter"):
        step = next(s for s in plan.steps if s.node_id == node)
        inputs = {p: plan.specs[src] for p, src in step.inputs.items()}
        outs = {p: plan.specs[(node, p)] for p in step.spec.output_names()}
        workspace = step.spec.workspace(step.attrs, inputs, outs)
        arrays = {p: outputs[src] for p, src in step.inputs.items()}
        tracemalloc.start()
        try:
            result = step.spec.run(step.attrs, arrays)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak - sum(np.asarray(v).nbytes for v in result.values()) <= workspace


def test_a_broken_gradient_block_is_caught(monkeypatch):
    """An input-gradient block that flips rows (a classic bug) fails its GradCheck: the check
    differentiates the forward op and uses no gradient kernel."""
    from blocks import registry

    spec = registry.REGISTRY["Conv2DBackpropInput"]

    def flipped(attrs, inputs):
        return {"output": np.flip(spec.run(attrs, inputs)["output"], axis=1).copy()}

    monkeypatch.setitem(registry.REGISTRY, "Conv2DBackpropInput",
                        dataclasses.replace(spec, run=flipped))
    _, out = run(check_canvas("Conv2D", "float64", {}))
    assert not bool(out[("gc_input", "ok")])
    assert bool(out[("gc_filter", "ok")])


def test_a_nan_in_the_gradient_or_the_inputs_fails_the_check_without_raising():
    c = check_canvas("Conv2D", "float32", {}, samples=0)
    plan, out = run(c)
    gradient = out[("dw", "output")].copy()
    gradient.reshape(-1)[7] = np.nan
    result = rerun_with(plan, out, "gc_filter", gradient)
    assert not bool(result["ok"]) and np.isnan(float(result["max_abs_error"]))
    assert np.isnan(result["error"].reshape(-1)[7])
    assert np.isfinite(np.delete(result["error"].reshape(-1), 7)).all()
    step = next(s for s in plan.steps if s.node_id == "gc_filter")
    arrays = {p: out[src] for p, src in step.inputs.items()}
    x = arrays["input"].copy()
    x[0, 2, 2, 1] = np.nan
    assert not bool(step.spec.run(step.attrs, {**arrays, "input": x})["ok"])


def _matches_the_definition(case, op: str) -> None:
    g, attrs, dtype, seed = case
    x, w, dy = (a.astype(np.float64) for a in _arrays(g, dtype, seed))
    kw = {"explicit_paddings": [], **attrs, "epsilon": 1e-3, "samples": 0, "seed": 0}
    for wrt, exact, bound in (
            ("filter", reference.backprop_filter(x, dy, g),
             reference.backprop_filter(abs(x), abs(dy), g)),
            ("input", reference.backprop_input(w, dy, g),
             reference.backprop_input(abs(w), abs(dy), g))):
        result = grad_check(x, w, dy, exact, op, wrt, **kw)
        assert result["numeric"].shape == exact.shape
        # rounding: float64 eps times the window's sum of |terms| over the step (1e-3)
        scale = float(np.max(bound, initial=0.0)) + 1.0
        assert np.all(np.abs(result["numeric"] - exact) <= 1e-10 * scale), wrt
        assert bool(result["ok"]), (wrt, float(result["max_rel_error"]))


@given(conv_cases())
def test_conv2d_numeric_gradients_equal_the_definition_on_random_geometries(case):
    """Any layout, padding, stride, dilation and group count (empty tensors included):
    GradCheck's finite differences of both arguments equal the slow reference's float64
    gradients, and the reference's gradients pass."""
    _matches_the_definition(case, "Conv2D")


@given(conv_cases(depthwise=True))
def test_depthwise_numeric_gradients_equal_the_definition_on_random_geometries(case):
    _matches_the_definition(case, "DepthwiseConv2dNative")
