"""The canvas model and file format v1: round trips, determinism, atomic save, load errors."""

import json

import pytest

from engine.base.errors import InvalidArgumentError
from engine.graph.canvas import Canvas, CanvasError
from engine.graph.canvas_file import dumps, load_canvas, save_canvas


def _grad_canvas() -> Canvas:
    c = Canvas()
    c.add_node("Tensor", (0, 0), {"shape": [1, 5, 5, 2], "seed": 1}, id="x")
    c.add_node("IntVector", (0, 100), {"values": [3, 3, 2, 4]}, id="fs")
    c.add_node("Tensor", (0, 200), {"shape": [1, 5, 5, 4]}, id="dy")
    c.add_node("Conv2DBackpropFilter", (300, 100), {"strides": [1, 1, 1, 1]}, id="grad")
    c.connect(("x", "output"), ("grad", "input"))
    c.connect(("fs", "output"), ("grad", "filter_sizes"))
    c.connect(("dy", "output"), ("grad", "out_backprop"))
    return c


def test_round_trip_keeps_ids_attrs_edges_and_is_deterministic(tmp_path):
    c = _grad_canvas()
    path = tmp_path / "a.gbc.json"
    save_canvas(c, path)
    text = path.read_text()
    assert text.endswith("}\n") and '\n  "edges"' in text
    again = load_canvas(path)
    assert again.to_json() == c.to_json()
    assert list(again.nodes) == ["x", "fs", "dy", "grad"]
    save_canvas(again, tmp_path / "b.gbc.json")
    assert (tmp_path / "b.gbc.json").read_text() == text
    assert json.loads(text)["format"] == "gradblocks.canvas"


def test_new_ids_are_stable_and_unique():
    c = Canvas()
    a = c.add_node("Conv2DBackpropFilter")
    b = c.add_node("Conv2DBackpropFilter")
    assert (a.id, b.id) == ("conv2dbackpropfilter_1", "conv2dbackpropfilter_2")
    c.remove_node(a.id)
    assert c.add_node("Conv2DBackpropFilter").id == "conv2dbackpropfilter_1"


def test_connect_replaces_the_wire_into_an_input_and_refuses_cycles():
    c = _grad_canvas()
    c.add_node("Tensor", id="x2")
    c.connect(("x2", "output"), ("grad", "input"))
    assert c.inputs_of("grad")["input"] == ("x2", "output")
    assert len(c.edges) == 3
    c.add_node("Transpose", id="t")
    c.connect(("grad", "output"), ("t", "input"))
    with pytest.raises(InvalidArgumentError, match="cycle"):
        c.connect(("t", "output"), ("grad", "out_backprop"))
    with pytest.raises(InvalidArgumentError, match="has no input port 'filter'"):
        c.connect(("x", "output"), ("grad", "filter"))


def test_atomic_save_leaves_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "a.gbc.json"
    save_canvas(_grad_canvas(), path)
    before = path.read_text()
    import engine.graph.canvas_file as mod

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(mod.os, "replace", boom)
    c = _grad_canvas()
    c.set_attr("grad", "padding", "VALID")
    with pytest.raises(OSError):
        save_canvas(c, path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["a.gbc.json"]


def _problems(data) -> list[tuple[str, str]]:
    with pytest.raises(CanvasError) as info:
        Canvas.from_json(data)
    return info.value.problems


def _doc(nodes=(), edges=(), **extra):
    return {"format": "gradblocks.canvas", "version": 1, "nodes": list(nodes),
            "edges": list(edges), **extra}


def test_not_json_and_missing_file(tmp_path):
    bad = tmp_path / "bad.gbc.json"
    bad.write_text("{nodes: ")
    with pytest.raises(CanvasError, match="not JSON") as info:
        load_canvas(bad)
    assert str(bad) in str(info.value)
    with pytest.raises(CanvasError, match="no such file"):
        load_canvas(tmp_path / "nope.gbc.json")


def test_wrong_format_and_newer_version():
    assert _problems({"format": "x", "version": 1, "nodes": [], "edges": []}) == [
        ("$.format", "expected 'gradblocks.canvas', got 'x'")]
    (path, msg), = _problems(_doc(version=3))
    assert path == "$.version" and msg == (
        "this canvas was written by a newer GradBlocks (format 3); this version reads "
        "formats 1-2: update GradBlocks")


def test_every_problem_is_reported_with_its_json_path():
    nodes = [
        {"id": "x", "type": "Tensor", "attrs": {"shape": [1, 5, 5, 2], "colour": "red"}},
        {"id": "g", "type": "Conv2DBackpropFilter", "attrs": {"strides": [1, 1, 1],
                                                              "padding": "FULL"}},
        {"id": "q", "type": "Conv4D"},
        {"id": "x", "type": "Tensor"},
    ]
    edges = [
        {"src": ["x", "output"], "dst": ["g", "input"]},
        {"src": ["x", "output"], "dst": ["g", "input"]},
        {"src": ["nobody", "output"], "dst": ["g", "out_backprop"]},
        {"src": ["x", "out"], "dst": ["g", "filter_sizes"]},
    ]
    problems = dict(_problems(_doc(nodes, edges)))
    assert "no attribute 'colour'" in problems["$.nodes[0].attrs.colour"]
    assert "strides must have 4 elements" in problems["$.nodes[1].attrs.strides"]
    assert "padding 'FULL' is not one of" in problems["$.nodes[1].attrs.padding"]
    assert "unknown block type 'Conv4D'" in problems["$.nodes[2].type"]
    assert problems["$.nodes[3].id"] == "duplicate node id 'x'"
    assert "already has an edge" in problems["$.edges[1].dst"]
    assert problems["$.edges[2].src"] == "no node 'nobody'"
    assert "has no output port 'out'" in problems["$.edges[3].src"]


def test_cycles_are_reported():
    nodes = [{"id": "a", "type": "Transpose"}, {"id": "b", "type": "Transpose"}]
    edges = [{"src": ["a", "output"], "dst": ["b", "input"]},
             {"src": ["b", "output"], "dst": ["a", "input"]}]
    (path, msg), = _problems(_doc(nodes, edges))
    assert path == "$.edges" and msg.startswith("cycle through node")


def test_attributes_left_out_take_defaults_and_dumps_is_canonical():
    c = Canvas.from_json(_doc([{"id": "g", "type": "Conv2DBackpropFilter"}]))
    assert c.nodes["g"].attrs == {} and c.nodes["g"].title == "g"
    assert dumps(c) == dumps(Canvas.from_json(json.loads(dumps(c))))


def test_unknown_attribute_on_add_and_set_is_a_clear_error():
    c = Canvas()
    with pytest.raises(InvalidArgumentError, match="Tensor has no attribute 'colour'"):
        c.add_node("Tensor", attrs={"colour": "red"})
    c.add_node("Tensor", id="x")
    with pytest.raises(InvalidArgumentError, match=r"no attribute 'strides' \(it has shape"):
        c.set_attr("x", "strides", [1, 1, 1, 1])
