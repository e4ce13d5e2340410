"""Validation and bookkeeping that no other test pinned: each test here fails when one line of
the rule it names is broken (checked by hand, one mutation at a time)."""

import dataclasses
import json

import pytest

from blocks import registry
from engine.base.errors import InvalidArgumentError
from engine.graph.canvas import Canvas, CanvasError
from engine.graph.canvas_file import dumps, save_canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor
from engine.shapes.conv import conv2d_geometry


def _grad_canvas(**grad_attrs) -> Canvas:
    c = Canvas()
    c.add_node("Tensor", (0, 0), {"shape": [1, 5, 5, 2], "seed": 1}, id="x")
    c.add_node("IntVector", (0, 100), {"values": [3, 3, 2, 4]}, id="fs")
    c.add_node("Tensor", (0, 200), {"shape": [1, 5, 5, 4], "seed": 2}, id="dy")
    c.add_node("Conv2DBackpropFilter", (300, 100), grad_attrs, id="grad")
    c.connect(("x", "output"), ("grad", "input"))
    c.connect(("fs", "output"), ("grad", "filter_sizes"))
    c.connect(("dy", "output"), ("grad", "out_backprop"))
    return c


# -- the saved file -------------------------------------------------------------------------------
def test_saved_file_has_sorted_keys_two_space_indent_and_one_trailing_newline(tmp_path):
    path = tmp_path / "a.gbc.json"
    save_canvas(_grad_canvas(strides=[1, 1, 1, 1]), path)
    text = path.read_text(encoding="utf-8")
    assert text == dumps(Canvas.from_json(json.loads(text)))
    orders: list[list[str]] = []
    json.loads(text, object_pairs_hook=lambda pairs: orders.append([k for k, _ in pairs]))
    assert len(orders) > 10 and all(keys == sorted(keys) for keys in orders), orders
    lines = text.split("\n")
    assert lines[0] == "{" and lines[1] == '  "edges": ['
    assert lines[2] == "    {" and lines[3] == '      "dst": ['
    assert text.endswith("}\n") and not text.endswith("\n\n")


# -- format version -------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, -1])
def test_versions_below_one_are_refused_at_version(version):
    doc = _grad_canvas().to_json()
    doc["version"] = version
    with pytest.raises(CanvasError) as err:
        Canvas.from_json(doc)
    assert [p for p, _ in err.value.problems] == ["$.version"]
    assert f"unknown version {version}" in err.value.problems[0][1]
    doc["version"] = 2
    Canvas.from_json(doc)


# -- cache keys -----------------------------------------------------------------------------------
def _grad_key(canvas: Canvas) -> str:
    plan = compile_canvas(canvas)
    assert plan.ok, plan.errors
    return next(s.key for s in plan.steps if s.node_id == "grad")


def test_an_inactive_attribute_does_not_change_the_cache_key():
    """explicit_paddings only matters with padding EXPLICIT."""
    c = _grad_canvas(padding="SAME")
    key = _grad_key(c)
    ex = Executor()
    ex.run(compile_canvas(c))
    c.set_attr("grad", "explicit_paddings", [0, 0, 1, 1, 2, 2, 0, 0])
    assert _grad_key(c) == key
    assert ex.run(compile_canvas(c)).computed == set()


def test_an_active_attribute_changes_the_cache_key():
    c = _grad_canvas(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0])
    key = _grad_key(c)
    c.set_attr("grad", "explicit_paddings", [0, 0, 1, 1, 1, 1, 0, 0])  # the same value
    assert _grad_key(c) == key
    c.set_attr("grad", "explicit_paddings", [0, 0, 0, 2, 1, 1, 0, 0])  # same output shape
    assert _grad_key(c) != key
    changed = _grad_key(c)
    c.set_attr("grad", "padding", "SAME")
    assert _grad_key(c) not in (key, changed)


def test_the_source_port_is_part_of_the_cache_key():
    """max |a - b| = 1 and max |a - b| / max |b| = 1 / 2: rewiring Output recomputes it."""
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "values", "values": [3.0, 3.0]}, id="a")
    c.add_node("Tensor", attrs={"fill": "values", "values": [2.0, 2.0]}, id="b")
    c.add_node("Compare", id="cmp")
    c.add_node("Output", id="out")
    c.connect(("a", "output"), ("cmp", "a"))
    c.connect(("b", "output"), ("cmp", "b"))
    c.connect(("cmp", "max_abs_error"), ("out", "input"))
    ex = Executor()
    first = ex.run(compile_canvas(c))
    assert float(first.outputs[("out", "output")]) == 1.0
    c.connect(("cmp", "max_rel_error"), ("out", "input"))
    second = ex.run(compile_canvas(c))
    assert second.computed == {"out"}
    assert float(second.outputs[("out", "output")]) == 0.5


# -- a block's output must have the inferred shape ------------------------------------------------
def test_an_output_of_another_shape_than_inferred_is_that_nodes_error(monkeypatch):
    """A Transpose whose run forgets to transpose: [3, 2] comes out where [2, 3] was inferred."""
    spec = registry.REGISTRY["Transpose"]
    broken = dataclasses.replace(spec, run=lambda attrs, inputs: {"output": inputs["input"]})
    monkeypatch.setitem(registry.REGISTRY, "Transpose", broken)
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [3, 2]}, id="x")
    c.add_node("Transpose", attrs={"perm": [1, 0]}, id="t")
    c.add_node("Output", id="out")
    c.connect(("x", "output"), ("t", "input"))
    c.connect(("t", "output"), ("out", "input"))
    plan = compile_canvas(c)
    assert plan.ok and plan.specs[("t", "output")].shape == (2, 3)
    result = Executor().run(plan)
    assert result.errors["t"] == (
        "internal error in a Transpose block: RuntimeError: output output is [3, 2] float32 but "
        "[2, 3] float32 was inferred. This is a bug in GradBlocks: please report it with the "
        "block type (Transpose) and this message")
    assert ("t", "output") not in result.outputs
    assert result.errors["out"].startswith("skipped: input input (t) failed")
    assert set(result.errors) == {"t", "out"}


# -- attribute values -----------------------------------------------------------------------------
def _attr_problems(type_id: str, attrs: dict) -> dict[str, str]:
    """The loader's problems for one node of ``type_id`` with ``attrs``."""
    doc = {"format": "gradblocks.canvas", "version": 1,
           "nodes": [{"id": "n", "type": type_id, "attrs": attrs}], "edges": []}
    with pytest.raises(CanvasError) as err:
        Canvas.from_json(doc)
    return dict(err.value.problems)


@pytest.mark.parametrize("type_id, name, value, words", [
    ("Conv2D", "strides", [1, True, 1, 1], "must be a list of integers"),
    ("Conv2D", "dilations", [1, 1, True, 1], "must be a list of integers"),
    ("Tensor", "seed", True, "must be an integer"),
    ("Tensor", "seed", False, "must be an integer"),
    ("IntVector", "values", [3, True], "must be a list of integers"),
    ("Tensor", "shape", [1, True, 2], "must be a list of integers"),
    ("Tensor", "values", [[1.0, True]], "must hold numbers only"),
])
def test_booleans_are_not_integers_in_attributes(type_id, name, value, words):
    problems = _attr_problems(type_id, {name: value})
    assert words in problems[f"$.nodes[0].attrs.{name}"], problems
    c = Canvas()
    c.add_node(type_id, id="n")
    with pytest.raises(InvalidArgumentError, match=words):
        c.set_attr("n", name, value)


@pytest.mark.parametrize("name, value, words", [
    ("shape", [1, -1, 2], "sizes must be >= 0"),
    ("shape", [-3], "sizes must be >= 0"),
    ("seed", -1, "seed must be >= 0"),
    ("seed", -(2**63), "seed must be >= 0"),
])
def test_negative_shape_entries_and_seeds_are_refused(name, value, words):
    problems = _attr_problems("Tensor", {name: value})
    assert words in problems[f"$.nodes[0].attrs.{name}"], problems
    zero = [0] * len(value) if name == "shape" else 0
    assert Canvas.from_json({"format": "gradblocks.canvas", "version": 1, "edges": [],
                             "nodes": [{"id": "n", "type": "Tensor", "attrs": {name: zero}}]})


# -- conv arguments -------------------------------------------------------------------------------
def _geometry(fmt: str, **attrs):
    in_shape = (1, 6, 6, 2) if fmt == "NHWC" else (1, 2, 6, 6)
    return conv2d_geometry(in_shape, (3, 3, 2, 4), **{"strides": [1, 1, 1, 1],
                                                      "padding": "SAME", "data_format": fmt,
                                                      **attrs})


BATCH_DEPTH_PADS = [("NHWC", i) for i in (0, 1, 6, 7)] + [("NCHW", i) for i in (0, 1, 2, 3)]


@pytest.mark.parametrize("fmt, index", BATCH_DEPTH_PADS)
def test_explicit_batch_and_depth_paddings_must_be_zero(fmt, index):
    pads = [0] * 8
    pads[index] = 1
    with pytest.raises(InvalidArgumentError,
                       match="padding in the batch and depth dimensions must be 0"):
        _geometry(fmt, padding="EXPLICIT", explicit_paddings=pads)


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_explicit_spatial_paddings_are_the_ones_allowed(fmt):
    spatial = [2, 3, 4, 5] if fmt == "NHWC" else [4, 5, 6, 7]
    pads = [0] * 8
    for index, amount in zip(spatial, (1, 2, 3, 4), strict=True):
        pads[index] = amount
    g = _geometry(fmt, padding="EXPLICIT", explicit_paddings=pads)
    assert (g.pad_top, g.pad_bottom, g.pad_left, g.pad_right) == (1, 2, 3, 4)
    assert (g.out_rows, g.out_cols) == (6 + 3 - 2, 6 + 7 - 2)


@pytest.mark.parametrize("name", ["strides", "dilations"])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("index", [0, 1, 2, 3])
def test_a_zero_stride_or_dilation_anywhere_is_invalid(name, fmt, index):
    vec = [1, 1, 1, 1]
    vec[index] = 0
    with pytest.raises(InvalidArgumentError, match=name):
        _geometry(fmt, **{name: vec})
    for padding in ("VALID", "EXPLICIT"):
        pads = [0] * 8 if padding == "EXPLICIT" else []
        with pytest.raises(InvalidArgumentError, match=name):
            _geometry(fmt, **{name: vec, "padding": padding, "explicit_paddings": pads})


# -- the memory limit -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, itemsize", [("float32", 4), ("float16", 2), ("float64", 8)])
def test_an_output_of_exactly_the_limit_compiles_and_one_byte_more_does_not(dtype, itemsize):
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [3, 7, 5], "dtype": dtype, "fill": "ones"}, id="t")
    nbytes = 3 * 7 * 5 * itemsize
    assert compile_canvas(c, memory_limit=nbytes).ok
    plan = compile_canvas(c, memory_limit=nbytes - 1)  # the output is limit + 1 bytes
    assert not plan.ok and not plan.steps
    (err,) = plan.errors["t"]
    assert "more than the memory limit" in err.message
