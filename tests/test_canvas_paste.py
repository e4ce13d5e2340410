"""Canvas.paste and Canvas.fragment: a fragment is validated by the canvas file loader (every
problem with its JSON path, the canvas untouched), pasted blocks get fresh ids, inner edges are
rewired to them and positions shift by the offset."""

from __future__ import annotations

import copy

import pytest

from engine.graph.canvas import Canvas, CanvasError, parse_fragment
from engine.graph.canvas_document import MAX_COORD
from engine.graph.canvas_file import dumps


def grad_canvas() -> Canvas:
    c = Canvas()
    c.add_node("Tensor", (0, 0), {"shape": [1, 5, 5, 2], "seed": 1}, id="x")
    c.add_node("IntVector", (0, 100), {"values": [3, 3, 2, 2]}, id="fs")
    c.add_node("Tensor", (0, 200), {"shape": [1, 5, 5, 2]}, id="dy", title="upstream grad")
    c.add_node("Conv2DBackpropFilter", (300, 100), {"padding": "VALID"}, id="grad")
    c.connect(("x", "output"), ("grad", "input"))
    c.connect(("fs", "output"), ("grad", "filter_sizes"))
    c.connect(("dy", "output"), ("grad", "out_backprop"))
    return c


def test_paste_gives_fresh_ids_rewires_inner_edges_and_shifts_positions():
    c = grad_canvas()
    frag = c.fragment(["x", "dy", "grad"])
    assert [n["id"] for n in frag["nodes"]] == ["x", "dy", "grad"]
    assert len(frag["edges"]) == 2  # fs -> grad is not inside the fragment
    new = c.paste(frag, (10.0, -20.0))
    assert new == ["tensor_1", "tensor_2", "conv2dbackpropfilter_1"]
    x2, dy2, g2 = (c.nodes[n] for n in new)
    assert (x2.pos, dy2.pos, g2.pos) == ((10.0, -20.0), (10.0, 180.0), (310.0, 80.0))
    assert x2.title == "tensor_1"  # the title was the old id: it follows the new id
    assert dy2.title == "upstream grad"  # a title of its own is kept
    assert g2.attrs == {"padding": "VALID"} and x2.attrs == {"shape": [1, 5, 5, 2], "seed": 1}
    assert c.inputs_of(g2.id) == {"input": ("tensor_1", "output"),
                                  "out_backprop": ("tensor_2", "output")}
    assert c.inputs_of("grad")["input"] == ("x", "output")  # the originals are untouched


def test_pasting_a_whole_canvas_document_works_too():
    c = Canvas()
    assert c.paste(grad_canvas().to_json()) == ["tensor_1", "intvector_1", "tensor_2",
                                                "conv2dbackpropfilter_1"]
    assert len(c.edges) == 3


def _tensor(**fields) -> dict:
    return {"id": "t", "type": "Tensor", "pos": [0, 0], "attrs": {"shape": [2]}, **fields}


def _frag(*nodes, edges=(), **extra) -> dict:
    return {"format": "gradblocks.fragment", "nodes": list(nodes), "edges": list(edges),
            **extra}


BAD_FRAGMENTS = [
    (_frag(_tensor(title=5)), "$.nodes[0].title", "string"),
    (_frag(_tensor(type="Conv9D")), "$.nodes[0].type", "unknown block type 'Conv9D'"),
    (_frag(_tensor(attrs={"shape": "big"})), "$.nodes[0].attrs.shape", ""),
    (_frag(_tensor(attrs={"colour": 1})), "$.nodes[0].attrs.colour", ""),
    (_frag(_tensor(pos=[float("nan"), 0])), "$.nodes[0].pos", "finite"),
    (_frag(_tensor(pos=[1e300, 0])), "$.nodes[0].pos", "within"),
    (_frag(_tensor(id="a b")), "$.nodes[0].id", ""),
    (_frag(_tensor(), _tensor()), "$.nodes[1].id", "duplicate"),
    (_frag(_tensor(), edges=[{"src": ["elsewhere", "output"], "dst": ["t", "x"]}]),
     "$.edges[0].src", "no node 'elsewhere'"),
    (_frag(_tensor(), edges=[{"src": ["t", "output"]}]), "$.edges[0].dst", "expected"),
    (_frag(_tensor(), clutter=1), "$.clutter", "unknown key"),
    (_frag(_tensor(), version=99), "$.version", "newer"),
    (_frag(), "$.nodes", "no blocks"),
    ({"format": "something else", "nodes": [_tensor()]}, "$.format", "gradblocks.fragment"),
    ({"nodes": "all of them"}, "$.nodes", "expected a list"),
    (["not", "an", "object"], "$", "expected a JSON object"),
]


@pytest.mark.parametrize(("frag", "path", "words"), BAD_FRAGMENTS)
def test_a_bad_fragment_is_refused_with_its_path_and_changes_nothing(frag, path, words):
    c = grad_canvas()
    before = dumps(c)
    with pytest.raises(CanvasError) as info:
        c.paste(copy.deepcopy(frag), (0.0, 0.0), source="clipboard")
    assert path in [p for p, _m in info.value.problems], info.value.problems
    assert words in str(info.value) and str(info.value).startswith("clipboard: ")
    assert dumps(c) == before


def test_a_cycle_inside_a_fragment_is_refused():
    a, b = (dict(_tensor(), id=i, type="Transpose", attrs={"perm": [0]}) for i in "ab")
    edges = [{"src": ["a", "output"], "dst": ["b", "input"]},
             {"src": ["b", "output"], "dst": ["a", "input"]}]
    with pytest.raises(CanvasError, match="cycle"):
        parse_fragment(_frag(a, b, edges=edges))


def test_an_offset_that_pushes_blocks_too_far_is_refused_with_the_node_path():
    c = Canvas()
    with pytest.raises(CanvasError) as info:
        c.paste(_frag(_tensor(), _tensor(id="u", pos=[MAX_COORD, 0])), (1.0, 0.0))
    assert [p for p, _m in info.value.problems] == ["$.nodes[1].pos"]
    assert c.nodes == {}
    with pytest.raises(Exception, match="finite"):
        c.paste(_frag(_tensor()), (float("inf"), 0.0))


def test_a_file_with_a_position_beyond_the_limit_is_refused():
    doc = Canvas().to_json()
    doc["nodes"] = [_tensor(pos=[0, -2 * MAX_COORD])]
    with pytest.raises(CanvasError, match=r"\$\.nodes\[0\]\.pos"):
        Canvas.from_json(doc)
    with pytest.raises(Exception, match="within"):
        grad_canvas().move("x", (MAX_COORD * 2, 0))


def test_frames_notes_and_output_names_are_pasted_with_fresh_ids_and_free_names():
    c = grad_canvas()
    out = c.add_node("Output", pos=(300.0, 0.0), attrs={"name": "dW"}, id="out")
    c.connect(("grad", "output"), ("out", "input"))
    frame = c.add_frame((-20.0, -20.0), (400.0, 300.0), title="Inputs", colour="#4e9a06")
    note = c.add_note((0.0, 400.0), "look at dW\n<b>plain</b>")
    frag = c.fragment(["out", frame.id, note.id])
    assert [f["id"] for f in frag["frames"]] == [frame.id]
    new = c.paste(frag, (1000.0, 0.0))
    assert len(new) == 3
    new_out, new_frame, new_note = new
    assert c.nodes[new_out].attrs["name"] == "dW 2"  # result names stay unique
    assert c.nodes[out.id].attrs["name"] == "dW"
    pasted_frame, pasted_note = c.frames[new_frame], c.notes[new_note]
    assert (pasted_frame.title, pasted_frame.colour, pasted_frame.size) == (
        "Inputs", "#4e9a06", (400.0, 300.0))
    assert pasted_frame.pos == (980.0, -20.0)
    assert (pasted_note.text, pasted_note.pos) == ("look at dW\n<b>plain</b>", (1000.0, 400.0))
    assert new_frame != frame.id and new_note != note.id
    assert Canvas.from_json(c.to_json()) == c  # the result saves and loads


def test_a_fragment_of_only_a_note_pastes_and_an_empty_one_is_refused():
    c = Canvas()
    note = c.add_note((0.0, 0.0), "hello")
    new = c.paste(c.fragment([note.id]), (0.0, 200.0))
    assert c.notes[new[0]].text == "hello"
    before = dumps(c)
    with pytest.raises(CanvasError, match="no blocks, frames or notes to paste"):
        c.paste(c.fragment([]))
    assert dumps(c) == before
