"""Results are stored and reported by the names people gave them: Output names as --out and
exported-script keys (valid, unique per canvas), titles otherwise; messages name blocks by title."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor
from engine.graph.labels import labels_from_titles
from engine.graph.result_names import result_keys
from engine.io.npz import write_npz
from tests.export_support import assert_same_result

REPO = Path(__file__).parents[1]


def gradblocks(*args, cwd) -> subprocess.CompletedProcess:
    """``gradblocks ARGS`` as a user runs it: a subprocess, text output."""
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)


def _grad_canvas(names: tuple[str | None, str | None] = ("dW", "dx")) -> Canvas:
    """x, dy -> Conv2DBackpropFilter (ids are machine-like, titles are what people read), and
    an Output on the gradient and one on x for each name given."""
    c = Canvas()
    c.add_node("Tensor", id="tensor_1", title="x",
               attrs={"shape": [1, 5, 5, 2], "fill": "random_normal", "seed": 1})
    c.add_node("IntVector", id="intvector_1", title="filter sizes",
               attrs={"values": [3, 3, 2, 2]})
    c.add_node("Tensor", id="tensor_2", title="dy",
               attrs={"shape": [1, 5, 5, 2], "fill": "random_normal", "seed": 2})
    c.add_node("Conv2DBackpropFilter", id="conv_1", title="filter gradient")
    c.connect(("tensor_1", "output"), ("conv_1", "input"))
    c.connect(("intvector_1", "output"), ("conv_1", "filter_sizes"))
    c.connect(("tensor_2", "output"), ("conv_1", "out_backprop"))
    for i, (name, src) in enumerate(zip(names, ("conv_1", "tensor_1"), strict=True)):
        if name is not None:
            c.add_node("Output", id=f"output_{i + 1}", title=f"save {i + 1}",
                       attrs={"name": name})
            c.connect((src, "output"), (f"output_{i + 1}", "input"))
    return c


def _engine_outputs(c: Canvas) -> dict:
    result = Executor().run(compile_canvas(c))
    assert not result.errors
    return result.outputs


# -- --out keys ------------------------------------------------------------------------------

def test_run_out_stores_each_output_block_under_its_name_and_nothing_else(tmp_path):
    c = _grad_canvas(("dW (filter gradient)", "file"))  # "file" is np.savez's own parameter
    save_canvas(c, tmp_path / "c.gbc.json")
    proc = gradblocks("run", "c.gbc.json", "--out", "r.npz", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    outputs = _engine_outputs(c)
    with np.load(tmp_path / "r.npz") as data:
        assert data.files == ["dW (filter gradient)", "file"]
        # the CLI and this process may take different kernel paths (compiled once loaded)
        assert_same_result(data["dW (filter gradient)"], outputs[("conv_1", "output")])
        np.testing.assert_array_equal(data["file"], outputs[("tensor_1", "output")])
    # the table names blocks by title; the id is only in its own last column
    header, *rows = proc.stdout.splitlines()[:-1]
    assert header.split()[:3] == ["block", "type", "port"] and header.split()[-1] == "id"
    grad_row = next(r for r in rows if r.startswith("filter gradient "))
    assert grad_row.split()[-1] == "conv_1"
    assert not any(r.startswith(("tensor_", "conv_")) for r in rows)


def test_without_output_blocks_every_output_is_stored_under_its_blocks_title(tmp_path):
    c = _grad_canvas((None, None))
    c.add_node("Tensor", id="tensor_3", title="dy", attrs={"shape": [2], "fill": "ones"})
    c.add_node("Tensor", id="tensor_4", title="a/b\\c", attrs={"shape": [1]})
    c.add_node("Compare", id="compare_1", title="check")
    c.connect(("tensor_1", "output"), ("compare_1", "a"))
    c.connect(("tensor_1", "output"), ("compare_1", "b"))
    save_canvas(c, tmp_path / "c.gbc.json")
    proc = gradblocks("run", "c.gbc.json", "--out", "r.npz", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    outputs = _engine_outputs(c)
    expected = {"x": ("tensor_1", "output"), "filter sizes": ("intvector_1", "output"),
                "dy (tensor_2)": ("tensor_2", "output"), "dy (tensor_3)": ("tensor_3", "output"),
                "filter gradient": ("conv_1", "output"), "a_b_c": ("tensor_4", "output"),
                **{f"check.{p}": ("compare_1", p)
                   for p in ("output", "max_abs_error", "max_rel_error", "agree")}}
    with np.load(tmp_path / "r.npz") as data:
        assert sorted(data.files) == sorted(expected)
        for key, ref in expected.items():
            assert_same_result(data[key], outputs[ref], key)


def test_keys_that_still_collide_get_a_number_in_step_order():
    c = Canvas()
    c.add_node("Compare", id="c1", title="a")
    c.add_node("Tensor", id="t1", title="a.output", attrs={"shape": [1]})
    c.add_node("Tensor", id="t2", title="x", attrs={"shape": [1]})
    c.connect(("t2", "output"), ("c1", "a"))
    c.connect(("t2", "output"), ("c1", "b"))
    plan = compile_canvas(c)
    keys = result_keys(plan.steps, plan.labels)
    assert len(set(keys.values())) == len(keys) == 6
    assert keys[("t1", "output")] == "a.output" and keys[("c1", "output")] == "a.output #2"


def test_exported_script_saves_the_same_keys_and_values_as_run_out(tmp_path):
    for names in (("dW", "allow_pickle"), (None, None)):
        folder = tmp_path / str(names[0])
        folder.mkdir()
        save_canvas(_grad_canvas(names), folder / "c.gbc.json")
        assert gradblocks("run", "c.gbc.json", "--out", "run.npz", cwd=folder).returncode == 0
        assert gradblocks("export", "c.gbc.json", "-o", "s.py", cwd=folder).returncode == 0
        proc = subprocess.run([sys.executable, "s.py", "script.npz"], capture_output=True,
                              text=True, cwd=folder, check=False,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.returncode == 0, proc.stderr
        with np.load(folder / "run.npz") as run, np.load(folder / "script.npz") as script:
            assert script.files == run.files
            if names[0]:
                assert run.files == list(names)
            for key in run.files:
                assert_same_result(script[key], run[key], key)
        assert [line.split(" [")[0] for line in proc.stdout.splitlines()] == run.files


def test_write_npz_takes_any_valid_key(tmp_path):
    arrays = {"file": np.arange(3), "allow_pickle": np.ones(2), "arr_0": np.zeros(1),
              "\u0394y \u00fc": np.float32(2)}
    with open(tmp_path / "r.npz", "wb") as f:
        write_npz(f, arrays)
    with np.load(tmp_path / "r.npz") as data:
        assert data.files == list(arrays)
        for key, value in arrays.items():
            np.testing.assert_array_equal(data[key], value)


# -- Output names: valid and unique ----------------------------------------------------------

def test_duplicate_output_names_are_an_invalid_canvas_naming_both_blocks(tmp_path):
    save_canvas(_grad_canvas(("dW", "dW")), tmp_path / "c.gbc.json")
    for command in (["check"], ["run", "--out", "r.npz"], ["export", "-o", "s.py"]):
        proc = gradblocks(command[0], "c.gbc.json", *command[1:], cwd=tmp_path)
        assert proc.returncode == 2
        assert ("save 2.name: name 'dW' is already used by save 1: results are stored by name, "
                "so each must be unique on the canvas") in proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r.npz").exists() and not (tmp_path / "s.py").exists()


def test_a_hand_written_canvas_with_duplicate_default_names_is_a_clear_error(tmp_path):
    """An older canvas: two Outputs without a name attribute (both the default "result")."""
    doc = json.loads(json.dumps(_grad_canvas((None, None)).to_json()))
    doc["nodes"] += [{"id": "o1", "type": "Output", "title": "first", "pos": [0, 0]},
                     {"id": "o2", "type": "Output", "title": "first", "pos": [0, 0]}]
    doc["edges"] += [{"src": ["conv_1", "output"], "dst": ["o1", "input"]},
                     {"src": ["tensor_1", "output"], "dst": ["o2", "input"]}]
    (tmp_path / "old.gbc.json").write_text(json.dumps(doc))
    proc = gradblocks("run", "old.gbc.json", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert ("first (o2).name: name 'result' is already used by first (o1)"
            in proc.stderr)


@pytest.mark.parametrize("name, why", [
    ("../x", "contains '/'"), ("a/b", "contains '/'"), ("..\\x", "contains '\\\\'"),
    ("", "is empty"), (" dW", "starts or ends with a space"), ("dW ", "starts or ends"),
    (".", "is not allowed"), ("..", "is not allowed"), ("a\x00b", "control character (U+0000)"),
    ("a\nb", "control character (U+000A)"), ("x" * 201, "more than 200"),
])
def test_names_that_are_no_safe_npz_member_name_are_refused(name, why):
    c = _grad_canvas(("dW", "ok"))
    c.nodes["output_1"].attrs["name"] = name  # as a hand-edited file holds it
    plan = compile_canvas(c)
    [err] = plan.errors["output_1"]
    assert err.attr == "name" and why in err.message
    assert str(err).startswith("save 1.name: ")


def test_hostile_names_stop_run_before_anything_is_written(tmp_path):
    doc = _grad_canvas(("../../escape", "a\\b")).to_json()
    (tmp_path / "c.gbc.json").write_text(json.dumps(doc))
    proc = gradblocks("run", "c.gbc.json", "--out", "r.npz", cwd=tmp_path)
    assert proc.returncode == 2
    assert "save 1.name: name '../../escape' contains '/'" in proc.stderr
    assert "save 2.name: name 'a\\\\b' contains '\\\\'" in proc.stderr
    assert "it becomes a file name inside the .npz" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.gbc.json"]


def test_new_output_blocks_get_unused_names():
    c = Canvas()
    names = [c.add_node("Output").attrs.get("name", "result") for _ in range(3)]
    assert names == ["result", "result 2", "result 3"]
    assert c.unused_result_name("result 2") == "result 4"
    assert c.unused_result_name("dW") == "dW"
    assert compile_canvas(c).errors.keys() == {"output_1", "output_2", "output_3"}  # unwired
    assert all(e.attr == "input" for errs in compile_canvas(c).errors.values() for e in errs)


# -- messages name blocks by title -----------------------------------------------------------

def test_labels_are_titles_with_the_id_only_where_titles_collide():
    assert labels_from_titles({"t1": "x", "t2": "dy", "t3": "dy", "t4": " ", "x": "x"}) == {
        "t1": "x (t1)", "t2": "dy (t2)", "t3": "dy (t3)", "t4": "t4", "x": "x"}


def test_compiler_messages_name_blocks_by_title():
    c = _grad_canvas()
    c.set_attr("tensor_2", "shape", [1, 5, 5])
    plan = compile_canvas(c)
    texts = [str(e) for errs in plan.errors.values() for e in errs]
    assert texts == [
        "filter gradient.out_backprop: out_backprop must be 4-D, got shape [1, 5, 5]",
        "save 1.input: input waits for filter gradient, which has a problem"]
    assert not any("tensor_2" in t or "conv_1" in t for t in texts)
    assert plan.errors["output_1"][0].node_id == "output_1"  # the id stays, as data


def _failing_source_canvas(tmp_path: Path) -> Canvas:
    """x is read from a PNG whose header is whole and whose pixel data is cut short (found
    only when it is decoded, at run time)."""
    from PIL import Image

    Image.fromarray(np.full((5, 5, 3), 200, np.uint8)).save(tmp_path / "x.png")
    data = (tmp_path / "x.png").read_bytes()
    (tmp_path / "x.png").write_bytes(data[:-25])  # into the pixel data
    c = _grad_canvas()
    c.set_attr("tensor_1", "fill", "image")
    c.set_attr("tensor_1", "path", str(tmp_path / "x.png"))
    c.set_attr("intvector_1", "values", [3, 3, 3, 2])
    return c


def test_skipped_blocks_name_the_failed_input_by_title(tmp_path):
    c = _failing_source_canvas(tmp_path)
    result = Executor().run(compile_canvas(c))
    assert set(result.errors) == {"tensor_1", "conv_1", "output_1", "output_2"}
    assert result.errors["conv_1"] == "skipped: input input (x) failed"
    assert result.errors["output_1"] == "skipped: input input (filter gradient) failed"
    save_canvas(c, tmp_path / "c.gbc.json")
    proc = gradblocks("run", "c.gbc.json", cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert "  filter gradient: skipped: input input (x) failed" in lines
    assert "  save 1: skipped: input input (filter gradient) failed" in lines
    assert any(line.startswith("  x: ") for line in lines)
