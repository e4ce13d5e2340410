"""check and run agree: on random valid canvases (sources of every fill and dtype, conv blocks of
random valid geometries built to fit, Transpose, ShapeOf, IntVector, Compare, Output) every
inferred shape and dtype is the computed one and no block reports an internal error."""

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine.base.dtypes import dtype_name
from engine.graph.canvas import Canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor

DTYPES = ["float16", "bfloat16", "float32", "float64"]
FILLS = ["zeros", "ones", "arange", "random_normal", "random_uniform", "values", "file"]
CONV = {("forward", False): "Conv2D", ("filter", False): "Conv2DBackpropFilter",
        ("input", False): "Conv2DBackpropInput", ("forward", True): "DepthwiseConv2D",
        ("filter", True): "DepthwiseBackpropFilter", ("input", True): "DepthwiseBackpropInput"}


@st.composite
def geometries(draw):
    """Conv attributes and NHWC sizes whose windows fit the padded input."""
    fmt = draw(st.sampled_from(["NHWC", "NCHW"]))
    depthwise = draw(st.booleans())
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
    pads = [draw(st.integers(0, 2)) for _ in range(4)]
    reach_h, reach_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    low_h = max(1, reach_h - (pads[0] + pads[1] if padding == "EXPLICIT" else 0))
    low_w = max(1, reach_w - (pads[2] + pads[3] if padding == "EXPLICIT" else 0))
    h = draw(st.integers(low_h if padding != "SAME" else 1, low_h + 5))
    w = draw(st.integers(low_w if padding != "SAME" else 1, low_w + 5))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    groups = 1 if depthwise else draw(st.sampled_from([g for g in (1, 2) if c % g == 0]))
    out = draw(st.integers(1, 3)) * (1 if depthwise else groups)
    explicit = ([0, 0, *pads, 0, 0] if fmt == "NHWC" else [0, 0, 0, 0, *pads])
    attrs = {"strides": [1, sh, sw, 1] if fmt == "NHWC" else [1, 1, sh, sw],
             "dilations": [1, dh, dw, 1] if fmt == "NHWC" else [1, 1, dh, dw],
             "padding": padding, "data_format": fmt,
             "explicit_paddings": explicit}
    x_shape = [n, h, w, c] if fmt == "NHWC" else [n, c, h, w]
    w_shape = [kh, kw, c // groups, out]
    return depthwise, attrs, x_shape, w_shape


@st.composite
def canvases(draw, folder: Path):
    """A valid canvas and the ids of its nodes."""
    dtype = draw(st.sampled_from(DTYPES))
    depthwise, attrs, x_shape, w_shape = draw(geometries())
    c = Canvas()

    def source(node_id: str, shape: list[int]) -> None:
        fill = draw(st.sampled_from(FILLS))
        a = {"dtype": dtype, "fill": fill, "shape": shape, "seed": draw(st.integers(0, 9))}
        if fill in ("values", "file"):
            values = np.random.default_rng(a["seed"]).standard_normal(shape)
            if draw(st.booleans()):  # NaN and infinities go through the NaN/Inf path
                values.reshape(-1)[0] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
            if fill == "values":
                a["values"] = values.tolist()
            else:
                stored = draw(st.sampled_from(["<f2", "<f4", ">f8", "<i2"]))
                values = np.round(values) if stored == "<i2" else values
                path = folder / f"{node_id}.npy"
                np.save(path, np.nan_to_num(values).astype(stored) if stored == "<i2"
                        else values.astype(stored))
                a["path"] = str(path)
        c.add_node("Tensor", attrs=a, id=node_id)

    source("x", x_shape)
    source("w", w_shape)
    c.add_node(CONV[("forward", depthwise)], attrs=attrs, id="y")
    c.connect(("x", "output"), ("y", "input"))
    c.connect(("w", "output"), ("y", "filter"))
    kind = draw(st.sampled_from(["filter", "input"]))
    c.add_node(CONV[(kind, depthwise)], attrs=attrs, id="grad")
    sizes_of = "x" if kind == "input" else "w"
    if draw(st.booleans()):
        c.add_node("ShapeOf", id="sizes")
        c.connect((sizes_of, "output"), ("sizes", "input"))
    else:
        c.add_node("IntVector", attrs={"values": x_shape if kind == "input" else w_shape},
                   id="sizes")
    c.connect(("sizes", "output"), ("grad", f"{sizes_of.replace('x', 'input')}_sizes"
                                    .replace("w_sizes", "filter_sizes")))
    c.connect(("x" if kind == "filter" else "w", "output"),
              ("grad", "input" if kind == "filter" else "filter"))
    c.connect(("y", "output"), ("grad", "out_backprop"))
    perm = draw(st.permutations(range(4)))
    c.add_node("Transpose", attrs={"perm": list(perm)}, id="t")
    c.connect(("grad", "output"), ("t", "input"))
    c.add_node("Transpose", attrs={"perm": [int(i) for i in np.argsort(perm)]}, id="back")
    c.connect(("t", "output"), ("back", "input"))
    c.add_node("Compare", id="cmp")
    c.connect(("grad", "output"), ("cmp", "a"))
    c.connect(("back", "output"), ("cmp", "b"))
    c.add_node("Output", attrs={"name": "agree"}, id="out")
    c.connect(("cmp", "agree"), ("out", "input"))
    return c


@given(st.data())
def test_inferred_shapes_and_dtypes_are_the_computed_ones(data):
    with tempfile.TemporaryDirectory() as tmp:
        canvas = data.draw(canvases(Path(tmp)))
        plan = compile_canvas(canvas)
        problems = [str(e) for errs in plan.errors.values() for e in errs]
        assert not problems, problems
        result = Executor().run(plan)
    assert not result.errors, result.errors
    assert len(result.outputs) == len(plan.specs)
    for key, spec in plan.specs.items():
        value = np.asarray(result.outputs[key])
        assert value.shape == spec.shape, key
        assert dtype_name(value.dtype) == spec.dtype, key
    grad, back = result.outputs[("grad", "output")], result.outputs[("back", "output")]
    assert np.array_equal(grad.astype(np.float64), back.astype(np.float64), equal_nan=True)
