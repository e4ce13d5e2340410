"""Canvas format version 2: frames and notes. Version 1 files load (migrated in memory), saving
writes version 2 byte-for-byte stable, a newer version is refused with a message, hostile frame
and note fields are refused at their JSON paths, and the Canvas methods validate like the
loader."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.base.errors import InvalidArgumentError
from engine.graph.canvas import Canvas, CanvasError
from engine.graph.canvas_file import dumps, load_canvas, save_canvas

V1_EXAMPLES = sorted((Path(__file__).parent / "data" / "v1_examples").glob("*.gbc.json"))


def test_the_v1_copies_are_version_1_files_of_every_shipped_example():
    shipped = {p.name for p in (Path(__file__).parents[1] / "assets" / "examples")
               .glob("*.gbc.json")}
    assert {p.name for p in V1_EXAMPLES} >= shipped
    for path in V1_EXAMPLES:
        assert json.loads(path.read_text(encoding="utf-8"))["version"] == 1, path.name


@pytest.mark.parametrize("path", V1_EXAMPLES, ids=lambda p: p.name)
def test_every_v1_example_loads_and_saves_as_version_2(path, tmp_path):
    v1 = json.loads(path.read_text(encoding="utf-8"))
    canvas = load_canvas(path)
    assert list(canvas.nodes) == [n["id"] for n in v1["nodes"]]
    assert len(canvas.edges) == len(v1["edges"])
    assert canvas.frames == {} and canvas.notes == {}
    out = tmp_path / path.name
    save_canvas(canvas, out)
    v2 = json.loads(out.read_text(encoding="utf-8"))
    assert v2["version"] == 2 and v2["frames"] == [] and v2["notes"] == []
    assert v2["nodes"] == [{**n, "pos": [float(v) for v in n["pos"]]} for n in v1["nodes"]]
    assert load_canvas(out) == canvas


def framed_canvas() -> Canvas:
    c = Canvas()
    c.add_node("Tensor", (0, 0), {"shape": [1, 4, 4, 1]}, id="x")
    c.add_node("Output", (300, 0), id="y")
    c.connect(("x", "output"), ("y", "input"))
    c.add_frame((-40, -40), (560, 200), title="Inputs \u2014 \u00e9", colour="#A40000")
    c.add_note((0, 240), "line one\n\tline <b>two</b> & <i>three</i>", colour="#fce94f")
    return c


def test_v2_round_trips_byte_for_byte(tmp_path):
    c = framed_canvas()
    path = tmp_path / "f.gbc.json"
    save_canvas(c, path)
    text = path.read_text(encoding="utf-8")
    again = load_canvas(path)
    assert again == c and dumps(again) == text
    data = json.loads(text)
    assert data["frames"] == [{"id": "frame_1", "title": "Inputs \u2014 \u00e9",
                               "colour": "#a40000", "pos": [-40.0, -40.0],
                               "size": [560.0, 200.0]}]
    assert data["notes"] == [{"id": "note_1", "colour": "#fce94f", "pos": [0.0, 240.0],
                              "size": [220.0, 120.0],
                              "text": "line one\n\tline <b>two</b> & <i>three</i>"}]


def test_optional_note_fields_take_defaults():
    doc = framed_canvas().to_json()
    doc["notes"] = [{"id": "n", "pos": [1, 2]}]
    doc["frames"] = [{"id": "f", "pos": [0, 0]}]
    c = Canvas.from_json(doc)
    assert (c.notes["n"].text, c.notes["n"].colour, c.notes["n"].size) == (
        "", "#fce94f", (220.0, 120.0))
    assert (c.frames["f"].title, c.frames["f"].size) == ("Frame", (400.0, 260.0))


def test_a_newer_version_is_refused_with_one_clear_message(tmp_path):
    doc = framed_canvas().to_json()
    doc.update(version=3, gadgets=[1])
    path = tmp_path / "new.gbc.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(CanvasError) as err:
        load_canvas(path)
    assert err.value.problems == [("$.version", (
        "this canvas was written by a newer GradBlocks (format 3); this version reads "
        "formats 1-2: update GradBlocks"))]


def test_frames_and_notes_in_a_version_1_file_are_refused():
    doc = framed_canvas().to_json()
    doc["version"] = 1
    with pytest.raises(CanvasError) as err:
        Canvas.from_json(doc)
    assert dict(err.value.problems) == {
        "$.frames": "unknown key (frames and notes need version 2)",
        "$.notes": "unknown key (frames and notes need version 2)"}


def _with(kind: str, **fields) -> dict:
    doc = framed_canvas().to_json()
    doc[kind][0].update(fields)
    return doc


@pytest.mark.parametrize("kind, fields, path, words", [
    ("frames", {"colour": "red"}, "$.frames[0].colour", "#rrggbb"),
    ("frames", {"colour": "#12345"}, "$.frames[0].colour", "got '#12345'"),
    ("frames", {"colour": 0xff0000}, "$.frames[0].colour", "#rrggbb"),
    ("frames", {"title": "a" * 201}, "$.frames[0].title", "201 characters"),
    ("frames", {"title": "a\nb"}, "$.frames[0].title", "control character"),
    ("frames", {"title": None}, "$.frames[0].title", "must be a string"),
    ("frames", {"size": [0, 10]}, "$.frames[0].size", "from 40 to 100000"),
    ("frames", {"size": [-50, 100]}, "$.frames[0].size", "from 40 to 100000"),
    ("frames", {"size": [1e9, 100]}, "$.frames[0].size", "from 40 to 100000"),
    ("frames", {"size": [100]}, "$.frames[0].size", "[width, height]"),
    ("frames", {"pos": [True, 0]}, "$.frames[0].pos", "finite numbers"),
    ("frames", {"pos": ["0", 0]}, "$.frames[0].pos", "finite numbers"),
    ("frames", {"id": "x"}, "$.frames[0].id", "duplicate id 'x'"),
    ("frames", {"id": "a b"}, "$.frames[0].id", "must be 1-64 characters"),
    ("frames", {"html": "<b>"}, "$.frames[0].html", "unknown key"),
    ("notes", {"text": "\x1b[31m"}, "$.notes[0].text", "control character (U+001B)"),
    ("notes", {"text": "a\u2028b"}, "$.notes[0].text", "line separator"),
    ("notes", {"text": "x" * 10_001}, "$.notes[0].text", "more than 10000"),
    ("notes", {"text": ["a"]}, "$.notes[0].text", "must be a string"),
    ("notes", {"id": "frame_1"}, "$.notes[0].id", "duplicate id 'frame_1'"),
    ("notes", {"colour": "#ggg000"}, "$.notes[0].colour", "#rrggbb"),
    ("notes", {"size": [40, 100_001]}, "$.notes[0].size", "from 40 to 100000"),
])
def test_hostile_frame_and_note_fields_are_refused_at_their_path(kind, fields, path, words):
    with pytest.raises(CanvasError) as err:
        Canvas.from_json(_with(kind, **fields))
    problems = dict(err.value.problems)
    assert words in problems[path], problems


@pytest.mark.parametrize("kind, value", [("frames", {}), ("notes", "x"), ("frames", [1])])
def test_frames_and_notes_must_be_lists_of_objects(kind, value):
    doc = framed_canvas().to_json()
    doc[kind] = value
    with pytest.raises(CanvasError) as err:
        Canvas.from_json(doc)
    paths = [p for p, _ in err.value.problems]
    assert paths == ([f"$.{kind}"] if not isinstance(value, list) else [f"$.{kind}[0]"])


def test_a_missing_position_is_named():
    doc = framed_canvas().to_json()
    del doc["frames"][0]["pos"]
    with pytest.raises(CanvasError) as err:
        Canvas.from_json(doc)
    assert err.value.problems == [("$.frames[0].pos", "missing")]


def test_methods_validate_and_keep_ids_unique_across_kinds():
    c = framed_canvas()
    assert c.add_frame((0, 0)).id == "frame_2"
    with pytest.raises(InvalidArgumentError, match="already on the canvas"):
        c.add_note((0, 0), id="x")
    with pytest.raises(InvalidArgumentError, match="already on the canvas"):
        c.add_node("Tensor", id="note_1")
    assert c.new_id("frame") == "frame_3"
    for call, arg in [(lambda: c.recolour_item("frame_1", "blue"), "colour"),
                      (lambda: c.resize_item("note_1", (10, 10)), "size"),
                      (lambda: c.move_item("note_1", (float("nan"), 0)), "pos"),
                      (lambda: c.retitle_frame("frame_1", "x" * 300), "title"),
                      (lambda: c.set_note_text("note_1", "\x00"), "text")]:
        before = dumps(c)
        with pytest.raises(InvalidArgumentError) as err:
            call()
        assert err.value.argument == arg and dumps(c) == before
    with pytest.raises(InvalidArgumentError, match="no frame or note 'x'"):
        c.move_item("x", (0, 0))
    with pytest.raises(InvalidArgumentError, match="no frame 'note_1'"):
        c.retitle_frame("note_1", "t")
    c.recolour_item("note_1", "#3465A4")
    c.resize_item("frame_1", (300, 300))
    c.move_item("frame_1", (5, 6))
    c.set_note_text("note_1", "new")
    c.remove_item("frame_2")
    assert (c.notes["note_1"].colour, c.frames["frame_1"].size, c.frames["frame_1"].pos,
            c.notes["note_1"].text, list(c.frames)) == (
        "#3465a4", (300.0, 300.0), (5.0, 6.0), "new", ["frame_1"])
    assert Canvas.from_json(c.to_json()) == c


def test_the_cli_checks_runs_and_exports_a_v2_file(tmp_path):
    path = tmp_path / "framed.gbc.json"
    save_canvas(framed_canvas(), path)
    for args in (["check", str(path)],
                 ["run", str(path), "--out", str(tmp_path / "r.npz")],
                 ["export", str(path), "-o", str(tmp_path / "s.py")]):
        proc = subprocess.run([sys.executable, "-m", "engine.cli", *args],
                              capture_output=True, text=True, cwd=tmp_path, check=False)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    assert (tmp_path / "r.npz").stat().st_size > 0
    proc = subprocess.run([sys.executable, str(tmp_path / "s.py")], capture_output=True,
                          text=True, cwd=Path(__file__).parents[1], check=False)
    assert proc.returncode == 0, proc.stderr


def test_the_training_step_example_shows_frames_and_a_note_that_do_not_overlap():
    path = Path(__file__).parents[1] / "assets" / "examples" / "training_step.gbc.json"
    assert json.loads(path.read_text(encoding="utf-8"))["version"] == 2
    c = load_canvas(path)
    assert len(c.frames) == 3 and len(c.notes) == 1
    rects = [(*f.pos, f.pos[0] + f.size[0], f.pos[1] + f.size[1]) for f in c.frames.values()]
    for i, a in enumerate(rects):
        for b in rects[i + 1:]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    inside = {fid: sorted(n.id for n in c.nodes.values()
                          if f.pos[0] < n.pos[0] < f.pos[0] + f.size[0]
                          and f.pos[1] < n.pos[1] < f.pos[1] + f.size[1])
              for fid, f in c.frames.items()}
    assert inside == {"inputs_frame": ["w", "x"],
                      "nhwc_frame": ["dw", "dx", "dy", "forward", "w_shape", "x_shape"],
                      "nchw_frame": ["dw_nchw", "dy_nchw", "x_nchw"]}
    assert path.read_text(encoding="utf-8") == dumps(c)  # the shipped file is canonical
