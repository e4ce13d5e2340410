"""``gradblocks explain``, run as a user runs it (a subprocess): text, JSON, NCHW, errors."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.graph.canvas import Canvas
from engine.graph.canvas_file import load_canvas, save_canvas

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "assets" / "examples"
ENUSPACE = EXAMPLES / "enuspace_style.gbc.json"
BACKPROP_FILTER = EXAMPLES / "conv2d_backprop_filter.gbc.json"


def explain(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", "explain", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=ROOT, timeout=300)


def strict_json(text: str):
    """json.loads refusing NaN and Infinity (which JSON does not have)."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def test_json_is_exactly_the_defining_sum():
    """input 1..9 (3x3), out_backprop ones (2x2), VALID: dw[0,1] = 2 + 3 + 5 + 6 = 16."""
    proc = explain(ENUSPACE, "Conv2DBackpropFilter", "0,1,0,0", "--json", "--limit", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    doc = strict_json(proc.stdout)
    term = lambda x, dy, p: {"factors": [{"port": "input", "index": x},
                                         {"port": "out_backprop", "index": dy}], "product": p}
    assert doc == {
        "node": "Conv2DBackpropFilter", "port": "output", "index": [0, 1, 0, 0],
        "value": 16.0, "sum": 16.0, "padding_terms": 0,
        "terms": [term([0, 0, 1, 0], [0, 0, 0, 0], 2.0), term([0, 0, 2, 0], [0, 0, 1, 0], 3.0),
                  term([0, 1, 1, 0], [0, 1, 0, 0], 5.0), term([0, 1, 2, 0], [0, 1, 1, 0], 6.0)],
    }
    assert list(doc) == ["node", "port", "index", "value", "sum", "padding_terms", "terms"]
    assert proc.stdout.count("\n") == 1  # exactly one JSON object, one line


def test_text_shows_formula_counts_table_sum_and_value():
    """SAME, stride 2 on 6x6 (one pad row and column after): tap (1, 2) reads columns 2, 4, 6
    and column 6 is padding; the input is 1, 2, ... in NHWC order with 2 channels."""
    proc = explain(BACKPROP_FILTER, "grad_filter", "1, 2, 0, 3", "--limit", "2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == ("Conv2DBackpropFilter (grad_filter).output[1, 2, 0, 3]: float32, "
                        "shape [3, 3, 2, 4]")
    assert lines[1] == ("dw[1,2,0,3] = sum over n,r,c of input[n, 2*r+1, 2*c+2, 0] * "
                        "out_backprop[n, r, c, 3]")
    assert lines[2] == "  over n < 1, r < 3, c < 3"
    assert lines[3].startswith("6 term(s); 3 padding term(s)")
    assert lines[4].split() == ["#", "input", "value", "out_backprop", "value", "product"]
    # input[0, 1, 2, 0] = (1*6 + 2)*2 + 0 + 1 = 17; out_backprop is ones
    assert lines[5].split() == ["0", "[0,", "1,", "2,", "0]", "17.0", "[0,", "0,", "0,", "3]",
                                "1.0", "17"]
    assert lines[6].split()[:5] == ["1", "[0,", "1,", "4,", "0]"]
    assert lines[7] == "... 4 more term(s) (--limit N shows N, --json all)"
    # 17 + 21 + 41 + 45 + 65 + 69
    assert lines[8:] == ["sum of the 6 term(s) (float64): 258.0",
                         "value of the block (float32): 258.0", "|sum - value| = 0"]


def _nchw_canvas(path: Path) -> None:
    """Conv2D NCHW, 2 groups: input [1, 4, 3, 3] = 1, 2, ..., filter [2, 2, 2, 2] ones,
    EXPLICIT padding 1 before the rows."""
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "arange", "shape": [1, 4, 3, 3], "dtype": "float64"},
               id="x")
    c.add_node("Tensor", attrs={"fill": "ones", "shape": [2, 2, 2, 2], "dtype": "float64"},
               id="w")
    c.add_node("Conv2D", id="conv", attrs={
        "data_format": "NCHW", "padding": "EXPLICIT", "strides": [1, 1, 1, 1],
        "explicit_paddings": [0, 0, 0, 0, 1, 0, 0, 0]})
    c.set_title("conv", "grouped conv")
    c.connect(("x", "output"), ("conv", "input"))
    c.connect(("w", "output"), ("conv", "filter"))
    save_canvas(c, path)


def test_nchw_is_indexed_n_c_h_w(tmp_path):
    """Output [0, 1, 0, 1] (channel 1 of 2 outputs, group 1 of 2): rows -1 and 0 (row -1 is
    padding), columns 1 and 2, input channels 2 and 3; terms in the order (i, j, q)."""
    path = tmp_path / "nchw.gbc.json"
    _nchw_canvas(path)
    proc = explain(path, "grouped conv.output", "0,1,0,1", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = strict_json(proc.stdout)
    pairs = [(t["factors"][0]["index"], t["factors"][1]["index"]) for t in doc["terms"]]
    assert pairs == [([0, 2, 0, 1], [1, 0, 0, 1]), ([0, 3, 0, 1], [1, 0, 1, 1]),
                     ([0, 2, 0, 2], [1, 1, 0, 1]), ([0, 3, 0, 2], [1, 1, 1, 1])]
    x = np.arange(1, 37, dtype=np.float64).reshape(1, 4, 3, 3)
    expected = x[0, 2, 0, 1] + x[0, 3, 0, 1] + x[0, 2, 0, 2] + x[0, 3, 0, 2]
    assert doc["value"] == doc["sum"] == expected
    assert doc["padding_terms"] == 4  # taps (0, 0) and (0, 1) x 2 input channels
    assert doc["node"] == "conv" and doc["port"] == "output"
    text = explain(path, "conv", "0,1,0,1").stdout.splitlines()
    assert text[1] == "output[0,1,0,1] = sum over i,j,q of input[0, q+2, i-1, j+1] * " \
                      "filter[i, j, q, 1]"


def test_infinity_in_json_is_a_string(tmp_path):
    c = load_canvas(ENUSPACE)
    c.set_attr("input", "values", [[[[1.0], [2.0], [3.0]], [[4.0], [float("inf")], [6.0]],
                                    [[7.0], [8.0], [9.0]]]])
    save_canvas(c, tmp_path / "inf.gbc.json")
    proc = explain(tmp_path / "inf.gbc.json", "Conv2DBackpropFilter", "0,0,0,0", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = strict_json(proc.stdout)
    assert doc["value"] == doc["sum"] == "Infinity"
    assert [t["product"] for t in doc["terms"]] == [1.0, 2.0, 4.0, "Infinity"]


def test_a_title_shared_by_two_blocks_is_refused(tmp_path):
    c = load_canvas(ENUSPACE)
    c.set_title("input", "Conv2DBackpropFilter")
    c.set_title("Conv2DBackpropFilter", "same")
    c.set_title("out_backprop", "same")
    save_canvas(c, tmp_path / "c.gbc.json")
    proc = explain(tmp_path / "c.gbc.json", "same", "0,0,0,0")
    assert proc.returncode == 2
    assert proc.stderr == ("gradblocks: block title 'same' is shared by out_backprop, "
                           "Conv2DBackpropFilter: name the block by its id\n")
    # the id wins over another block's title
    assert explain(tmp_path / "c.gbc.json", "Conv2DBackpropFilter", "0,0,0,0").returncode == 0


BLOCK = "Conv2DBackpropFilter (Conv2DBackpropFilter)"
CONV_TYPES = ("Conv2D, Conv2DBackpropFilter, Conv2DBackpropInput, DepthwiseConv2D, "
              "DepthwiseBackpropFilter, DepthwiseBackpropInput, Conv3D, Conv3DBackpropFilterV2, "
              "Conv3DBackpropInputV2")  # the op table's order


@pytest.mark.parametrize("node, index, message", [
    ("nope", "0,0,0,0",
     f"no block 'nope' in the canvas (by id or title); its conv blocks: {BLOCK}"),
    ("Conv2DBackpropFilter.grad", "0,0,0,0", (f"{BLOCK} has no output port 'grad'; its output: "
                                              "output")),
    ("input", "0,0,0,0", (f"input (values) (input) is a Tensor block, not a conv block: explain "
                          f"takes {CONV_TYPES}")),
    ("Conv2DBackpropFilter", "0,0,0", (f"{BLOCK}.output: index [0, 0, 0] has 3 entries, the "
                                       "output has 4 dimensions (shape [2, 2, 1, 1])")),
    ("Conv2DBackpropFilter", "0,2,0,0", (f"{BLOCK}.output: index [0, 2, 0, 0]: entry 1 is 2, "
                                         "out of range for size 2 (output shape [2, 2, 1, 1])")),
    ("Conv2DBackpropFilter", "-1,0,0,0", "index '-1,0,0,0': -1 is negative, indices must be >= 0"),
    ("Conv2DBackpropFilter", "0,0,1.5,0", "index '0,0,1.5,0': '1.5' is not an integer"),
    ("Conv2DBackpropFilter", "0,,0,0", ("index '0,,0,0': expected comma-separated integers such "
                                        "as 0,1,2,3")),
])
def test_bad_node_port_or_index_is_one_line_and_exit_2(node, index, message):
    proc = explain(ENUSPACE, node, index)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"gradblocks: {message}\n"


def test_invalid_canvas_exits_2(tmp_path):
    c = load_canvas(ENUSPACE)
    c.set_attr("Conv2DBackpropFilter", "strides", [1, 2, 2, 1])  # out_backprop no longer fits
    save_canvas(c, tmp_path / "c.gbc.json")
    proc = explain(tmp_path / "c.gbc.json", "Conv2DBackpropFilter", "0,0,0,0")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "Conv2DBackpropFilter.out_backprop: out_backprop height 2 does not match" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_block_failing_at_run_time_exits_1(tmp_path):
    """A PNG whose header is whole and whose pixel data is cut short is found when it is
    decoded (at run time; check reads the header): the conv block is skipped, explain says why
    and exits 1."""
    from PIL import Image

    Image.fromarray(np.full((3, 3), 200, np.uint8)).save(tmp_path / "a.png")
    data = (tmp_path / "a.png").read_bytes()
    (tmp_path / "a.png").write_bytes(data[:-25])  # into the pixel data
    c = load_canvas(ENUSPACE)
    c.set_attr("input", "fill", "image")
    c.set_attr("input", "path", "a.png")
    c.set_attr("input", "color", "gray")
    save_canvas(c, tmp_path / "c.gbc.json")
    proc = explain(tmp_path / "c.gbc.json", "Conv2DBackpropFilter", "0,0,0,0")
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == f"gradblocks: {tmp_path / 'c.gbc.json'}: Conv2DBackpropFilter failed:"
    assert "cannot decode the PNG image (corrupt or truncated" in lines[1]
    assert lines[2] == ("  Conv2DBackpropFilter: skipped: input input (input (values)) failed")
    assert "Traceback" not in proc.stderr


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    """``explain --json | head -c 100``: 2048 terms are far more than a pipe buffers, so the
    write fails once the reader has gone; explain exits 1 quietly."""
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "ones", "shape": [8, 16, 16, 1]}, id="x")
    c.add_node("IntVector", attrs={"values": [1, 1, 1, 1]}, id="sizes")
    c.add_node("Tensor", attrs={"fill": "ones", "shape": [8, 16, 16, 1]}, id="dy")
    c.add_node("Conv2DBackpropFilter", id="dw", attrs={"padding": "VALID"})
    for src, port in (("x", "input"), ("sizes", "filter_sizes"), ("dy", "out_backprop")):
        c.connect((src, "output"), ("dw", port))
    save_canvas(c, tmp_path / "c.gbc.json")
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "explain", str(tmp_path /
                             "c.gbc.json"), "dw", "0,0,0,0", "--json"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 1
    assert head.startswith(b'{"node": "dw", "port": "output", "index": [0, 0, 0, 0]')
    assert err == ""


def test_guide_example_is_what_explain_prints():
    """The User Guide's explain example (assets/guide/cli.md), run again (the block's value and
    its distance from the sum may differ in the last digit with another BLAS; every other line
    is exact)."""
    page = (ROOT / "assets" / "guide" / "cli.md").read_text(encoding="utf-8")
    block = page.split("$ gradblocks explain ", 1)[1].split("```", 1)[0]
    command, *shown_lines = block.rstrip("\n").split("\n")
    proc = explain(*command.split())
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.rstrip("\n").split("\n")
    assert len(lines) == len(shown_lines)
    for got, want in zip(lines, shown_lines, strict=True):
        if want.startswith(("value of the block", "|sum - value|")):
            head = lambda line: re.split(r"[:=]", line)[0]
            assert head(got) == head(want)
        else:
            assert got == want
