"""Validation edges a mutation probe found unguarded: each test fails when the named check is
weakened (the mutant is in the test's docstring)."""

import numpy as np
import pytest

from engine.base.errors import InvalidArgumentError
from engine.graph.canvas import Canvas, Edge
from engine.graph.compiler import compile_canvas, topological_order
from engine.io.models.model_import import ConvLayer, translate
from engine.shapes.conv import conv2d_geometry


def _canvas_json(pos) -> dict:
    return {"format": "gradblocks.canvas", "version": 2,
            "nodes": [{"id": "x", "type": "Tensor", "pos": pos, "attrs": {"shape": [1]}}],
            "edges": []}


@pytest.mark.parametrize("pos", [[1, 2, 3], [1], [], [1, 2, 3, 4]])
def test_a_position_must_have_exactly_two_numbers(pos):
    """Mutant ``len(pos) >= 2``: ``[1, 2, 3]`` loaded as ``(1.0, 2.0)``."""
    with pytest.raises(InvalidArgumentError, match=r"pos must be \[x, y\]"):
        Canvas.from_json(_canvas_json(pos))
    assert Canvas.from_json(_canvas_json([1, 2])).nodes["x"].pos == (1.0, 2.0)


def test_nodes_on_a_cycle_are_still_in_the_order():
    """Mutant: the nodes left on a cycle dropped from ``topological_order``. A hand-built
    canvas (edges given to the constructor, not through ``connect``) can hold a cycle; its
    nodes come last, in canvas order, so the compiler still reports each of them."""
    c = Canvas()
    for node_id in ("a", "b", "c", "d"):
        c.add_node("Transpose", id=node_id)
    c.add_node("Tensor", attrs={"shape": [2, 3, 4, 5]}, id="src")
    c.connect(("src", "output"), ("d", "input"))
    looped = Canvas(nodes=c.nodes, edges=[*c.edges, Edge(("a", "output"), ("b", "input")),
                                          Edge(("b", "output"), ("c", "input")),
                                          Edge(("c", "output"), ("a", "input"))])
    assert topological_order(looped) == ["src", "d", "a", "b", "c"]
    plan = compile_canvas(looped)
    assert set(plan.errors) == {"a", "b", "c"}


def test_a_source_keeps_its_own_axis_names():
    """Mutant: ``_name_axes_from_consumers`` overwriting axes a producer already named. A
    Conv2D's NHWC output wired into another conv's filter keeps N, H, W, C; the unnamed
    Tensor wired into the same filter port gets the port's names."""
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [3, 3, 2, 2], "seed": 1}, id="x")
    c.add_node("Tensor", attrs={"shape": [1, 1, 2, 2], "seed": 2}, id="w")
    c.add_node("Conv2D", attrs={"padding": "VALID"}, id="y")
    c.add_node("Conv2D", attrs={"padding": "VALID"}, id="z")
    c.connect(("x", "output"), ("y", "input"))
    c.connect(("w", "output"), ("y", "filter"))
    c.connect(("x", "output"), ("z", "input"))
    c.connect(("y", "output"), ("z", "filter"))
    plan = compile_canvas(c)
    assert plan.ok, plan.errors
    assert plan.specs[("y", "output")].axes == ("N", "H", "W", "C")
    assert plan.specs[("w", "output")].axes == ("kh", "kw", "in", "out")


@pytest.mark.parametrize("data_format, shape", [("NHWC", (1, 5, 5, 0)),
                                                ("NCHW", (1, 0, 5, 5))])
def test_an_input_of_depth_zero_is_an_invalid_argument(data_format, shape):
    """Mutant ``depth % fin`` without ``depth == 0``: a ZeroDivisionError (groups 0) instead of
    a message naming the input's depth."""
    with pytest.raises(InvalidArgumentError, match="depth 0 must be a positive multiple"):
        conv2d_geometry(shape, (3, 3, 2, 4), strides=[1, 1, 1, 1], padding="SAME",
                        data_format=data_format)


def test_same_lower_with_odd_padding_on_the_columns_only_becomes_explicit():
    """Mutant: SAME_LOWER compared on the rows alone. A 3x3 stride-2 filter on a 5x6 input
    pads the rows 1 + 1 (as SAME) but the columns 1 before and 0 after (SAME puts the odd one
    after): EXPLICIT ``[0, 0, 1, 1, 1, 0, 0, 0]``, not SAME."""
    layer = ConvLayer(name="c", kernel=(3, 3), strides=(2, 2), dilations=(1, 1),
                      padding="SAME_LOWER", pads=(0, 0, 0, 0), groups=1, in_channels=1,
                      out_channels=1, data_format="NHWC",
                      weights=np.ones((3, 3, 1, 1), np.float32))
    conv = translate(layer, (5, 6))
    assert conv.attrs["padding"] == "EXPLICIT"
    assert conv.attrs["explicit_paddings"] == [0, 0, 1, 1, 1, 0, 0, 0]
    assert translate(layer, (5, 5)).attrs["padding"] == "SAME"
