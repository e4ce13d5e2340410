"""GradCheck and AdjointCheck on Conv3D (issue 33 item 2): the numeric gradient of
``L = <conv3d(x, w), dy>`` equals the float64 definition (tests.conv3d_reference) on every
element, the check passes the kernels' gradients and catches a wrong one, and the dot-product
test holds; through the blocks, on a canvas, as a user builds it."""

from __future__ import annotations

import numpy as np
import pytest

from blocks.adjointcheck import adjoint_check
from blocks.gradcheck import grad_check
from engine.api import new_canvas
from engine.base.errors import InvalidArgumentError
from tests import conv3d_reference as ref

#: (input NDHWC, filter, strides, dilations (spatial), padding): stride and dilation in depth,
#: a grouped filter, SAME with odd pad totals.
CASES = [
    ((1, 5, 4, 6, 2), (3, 2, 3, 2, 3), (2, 1, 2), (1, 2, 1), "SAME"),
    ((2, 4, 5, 3, 4), (2, 3, 1, 2, 4), (1, 2, 1), (2, 1, 1), "VALID"),
]


def _arrays(case, seed=0):
    shape, fshape, s, d, padding = case
    rng = np.random.default_rng(seed)
    g = ref.geo(shape, fshape, s, d, padding)
    x, w = rng.standard_normal(shape), rng.standard_normal(fshape)
    dy = rng.standard_normal(g.output_shape)
    return g, x, w, dy


def _ncdhw(a):
    return np.moveaxis(a, -1, 1)


@pytest.mark.parametrize("fmt", ["NDHWC", "NCDHW"])
@pytest.mark.parametrize("case", CASES, ids=["strided-dilated-same", "grouped-valid"])
def test_the_numeric_gradient_is_the_definition_on_every_element(case, fmt):
    g, x, w, dy = _arrays(case)
    _, _, s, d, padding = case
    if fmt == "NDHWC":
        attrs = {"strides": [1, *s, 1], "dilations": [1, *d, 1]}
        to = (lambda a: a)
    else:
        attrs = {"strides": [1, 1, *s], "dilations": [1, 1, *d]}
        to = _ncdhw
    attrs.update(padding=padding, data_format=fmt, epsilon=1e-3, samples=0, seed=0)
    for wrt, (exact, bound) in (("filter", ref.backprop_filter(x, dy, g)),
                                ("input", ref.backprop_input(w, dy, g))):
        want = exact if wrt == "filter" else to(exact)
        scale = (bound if wrt == "filter" else to(bound)) + 1.0
        out = grad_check(to(x), w, to(dy), want, "Conv3D", wrt, **attrs)
        assert out["numeric"].shape == want.shape
        # float64 rounding of a window's sum over the step 2e-3: far below 1e-10 of the scale
        assert np.all(np.abs(out["numeric"] - want) <= 1e-10 * scale), wrt
        assert bool(out["ok"])
        wrong = want.copy()
        wrong.flat[want.size // 2] += 1.0
        assert not bool(grad_check(to(x), w, to(dy), wrong, "Conv3D", wrt, **attrs)["ok"])


def test_adjoint_check_holds_for_conv3d_and_names_a_wrong_padding():
    g, x, w, dy = _arrays(CASES[0])
    out = adjoint_check(x.astype(np.float32), w.astype(np.float32), dy.astype(np.float32),
                        "Conv3D", strides=[1, 2, 1, 2, 1], padding="SAME",
                        data_format="NDHWC", dilations=[1, 1, 2, 1, 1])
    forward = float(np.sum(ref.forward(x.astype(np.float32), w.astype(np.float32), g)[0]
                           * dy.astype(np.float32)))
    assert bool(out["ok"]) and abs(float(out["forward"]) - forward) <= 1e-4 * abs(forward)


def _check_canvas(op_block: str, wrt: str):
    """x, w, dy Tensors; the Conv3D gradient block; GradCheck of it and an AdjointCheck."""
    attrs = {"strides": [1, 2, 1, 1, 1], "dilations": [1, 1, 1, 2, 1], "padding": "SAME",
             "data_format": "NDHWC"}
    c = new_canvas()
    c.add("Tensor", "x", shape=[1, 5, 4, 6, 2], fill="random_normal", seed=1, dtype="float64")
    c.add("Tensor", "w", shape=[3, 2, 3, 2, 3], fill="random_normal", seed=2, dtype="float64")
    c.add("Tensor", "dy", shape=[1, 3, 4, 6, 3], fill="random_normal", seed=3, dtype="float64")
    c.add(op_block, "grad", **attrs)
    if wrt == "filter":
        c.add("IntVector", "ws", values=[3, 2, 3, 2, 3])
        c.connect("x", "grad.input")
        c.connect("ws", "grad.filter_sizes")
    else:
        c.add("IntVector", "xs", values=[1, 5, 4, 6, 2])
        c.connect("xs", "grad.input_sizes")
        c.connect("w", "grad.filter")
    c.connect("dy", "grad.out_backprop")
    c.add("GradCheck", "gc", op="Conv3D", wrt=wrt, samples=0, **attrs)
    for port in ("input", "filter", "out_backprop"):
        c.connect({"input": "x", "filter": "w", "out_backprop": "dy"}[port], f"gc.{port}")
    c.connect("grad", "gc.gradient")
    c.add("AdjointCheck", "adj", op="Conv3D", **attrs)
    for port in ("input", "filter", "out_backprop"):
        c.connect({"input": "x", "filter": "w", "out_backprop": "dy"}[port], f"adj.{port}")
    return c


@pytest.mark.parametrize(("block", "wrt"), [("Conv3DBackpropFilterV2", "filter"),
                                            ("Conv3DBackpropInputV2", "input")])
def test_the_check_blocks_pass_the_3d_gradient_blocks_on_a_canvas(block, wrt):
    c = _check_canvas(block, wrt)
    out = c.run()
    assert bool(out["gc.ok"]) and float(out["gc.max_rel_error"]) < 1e-12
    assert bool(out["adj.ok"])
    assert c.plan().specs[("gc", "numeric")].axes == (
        ("kd", "kh", "kw", "in", "out") if wrt == "filter" else tuple("NDHWC"))


def test_a_check_of_conv3d_with_2d_attributes_names_the_attribute():
    c = _check_canvas("Conv3DBackpropFilterV2", "filter")
    c.set("gc", strides=[1, 1, 1, 1])
    report = str(c.check())
    assert "gc.strides: strides must have 5 elements, got 4" in report, report
    with pytest.raises(InvalidArgumentError, match="padding EXPLICIT is not one of Conv3D's"):
        c.set("gc", strides=[1, 1, 1, 1, 1])
        c.set("gc", padding="EXPLICIT")
        c.run()


@pytest.mark.parametrize("framework", ["tensorflow", "jax"])
def test_the_3d_example_with_its_checks_crosschecks_with_the_frameworks(framework):
    """gradblocks crosscheck of the shipped 3-D example (the three blocks, GradCheck and
    AdjointCheck of op Conv3D): the framework's script agrees on every output, checks
    included."""
    import json
    import subprocess
    import sys

    from tests.export_support import REPO

    pytest.importorskip(framework)
    path = REPO / "assets" / "examples" / "conv3d_training_step.gbc.json"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "crosscheck", str(path),
                           "--with", framework, "--json"], capture_output=True, text=True,
                          cwd=REPO, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["frameworks"] == {framework: "ran"}
    outputs = {r["output"] for r in got["rows"]}
    assert {"check_dw.ok", "adjoint.ok", "dx.output", "dw.output", "y.output"} <= outputs
    assert all(r["agree"] for r in got["rows"]), [r for r in got["rows"] if not r["agree"]]
