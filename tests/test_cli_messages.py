"""Issue 24, defect 11: ``gradblocks check`` names a block's attribute one way everywhere
(``label.attr``, engine.graph.compiler.place) and lists every problem of a file at once; the JSON
path stays for what is not a block's attribute. Run as a user runs it: a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "assets" / "examples" / "training_step.gbc.json"


def check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", "check", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)


def edited(tmp_path: Path, edit) -> Path:
    doc = json.loads(EXAMPLE.read_text())
    nodes = {n["id"]: n for n in doc["nodes"]}
    edit(doc, nodes)
    path = tmp_path / "bad.gbc.json"
    path.write_text(json.dumps(doc))
    return path


def test_every_problem_of_a_file_is_listed_and_blocks_are_named_by_title(tmp_path):
    def edit(_doc, nodes):
        nodes["dw"]["attrs"]["padding"] = "VALIDX"  # refused when the file is read
        nodes["x"]["attrs"]["colour"] = "red"  # no such attribute: refused when read
        nodes["dx"]["attrs"]["strides"] = [2, 1, 1, 1]  # found by the compiler
    proc = check(edited(tmp_path, edit))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].endswith("bad.gbc.json: 3 problems in the canvas:"), lines
    assert lines[1] == ("  x 4x12x12x3.colour: Tensor has no attribute 'colour' (it has "
                        "shape, dtype, fill, seed, values, path, color, scale, data_format)")
    assert lines[2] == "  dW (NHWC).padding: padding 'VALIDX' is not one of SAME, VALID, EXPLICIT"
    assert lines[3].startswith("  dX (NHWC).strides: strides [2, 1, 1, 1]: strides in the batch "
                               "and depth dimensions must be 1 (NHWC)"), lines
    assert len(lines) == 4
    assert "$.nodes" not in proc.stderr


def test_the_same_attribute_problem_is_named_alike_when_read_and_when_compiled(tmp_path):
    read = check(edited(tmp_path, lambda _d, n: n["dw"]["attrs"].update(strides=[1, 2, 2])))
    compiled = check(edited(tmp_path, lambda _d, n: n["dw"]["attrs"].update(
        strides=[2, 1, 1, 1])))
    assert "  dW (NHWC).strides: strides must have 4 elements" in read.stderr, read.stderr
    assert "  dW (NHWC).strides: strides [2, 1, 1, 1]" in compiled.stderr, compiled.stderr
    # the blocks fed by dW wait for it; they are not reported for a value the file lacks
    assert "dW via NCHW" not in read.stderr and "NHWC vs NCHW" not in read.stderr


def test_a_problem_outside_a_block_attribute_keeps_its_json_path(tmp_path):
    def edit(doc, nodes):
        doc["edges"][0]["src"] = ["nowhere", "output"]
        nodes["dw"]["attrs"]["padding"] = "VALIDX"
    proc = check(edited(tmp_path, edit))
    assert proc.returncode == 2
    assert "  $.edges[0].src: no node 'nowhere'" in proc.stderr
    assert "  dW (NHWC).padding: padding 'VALIDX'" in proc.stderr


def test_an_unconnected_input_reads_as_english(tmp_path):
    def edit(doc, _nodes):
        doc["edges"] = [e for e in doc["edges"] if e["dst"] != ["dw", "input"]]
    proc = check(edited(tmp_path, edit))
    assert "  dW (NHWC).input: input is not connected" in proc.stderr, proc.stderr
    assert "input input" not in proc.stderr


def test_explain_and_geometry_name_a_block_type_with_its_article(tmp_path):
    from engine.graph.canvas import Canvas
    from engine.graph.canvas_file import save_canvas

    c = Canvas()
    c.add_node("AdjointCheck", id="adj", title="adjoint")
    for port, shape in (("input", [1, 4, 4, 2]), ("filter", [3, 3, 2, 3]),
                        ("out_backprop", [1, 4, 4, 3])):
        c.add_node("Tensor", id=port, title=port, attrs={"shape": shape})
        c.connect((port, "output"), ("adj", port))
    c.add_node("Tensor", id="t", title="t")
    save_canvas(c, tmp_path / "c.gbc.json")
    for args, node in ((["geometry", "c.gbc.json", "adj", "-o", "g.png"], "adj"),
                       (["explain", "c.gbc.json", "adj", "0,0,0,0"], "adj"),
                       (["geometry", "c.gbc.json", "t", "-o", "g.png"], "t")):
        proc = subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=tmp_path,
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 2, proc.stderr
        want = "is an AdjointCheck block" if node == "adj" else "is a Tensor block"
        assert want in proc.stderr, proc.stderr
