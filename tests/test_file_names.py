"""File names the project writes from model contents (``import --all``): unique ignoring case
(one file on macOS and Windows) and never a Windows device name (CON, PRN, AUX, NUL, COM0-9,
LPT0-9, with any extension, in any case); index.json maps each layer's own name to its file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.base.names import RESERVED_STEMS, file_stem, safe_stems

ROOT = Path(__file__).parents[1]


def write_convs(path: Path, names: list[str], seed: int = 0) -> Path:
    """An ONNX model of one 3x3 Conv per name (with a bias every other layer), each reading the
    input X [1, 2, 6, 6]."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits, outputs = [], [], []
    for i, name in enumerate(names):
        inits.append(numpy_helper.from_array(
            rng.standard_normal((2, 2, 3, 3)).astype(np.float32), f"W{i}"))
        ins = ["X", f"W{i}"]
        if i % 2:
            inits.append(numpy_helper.from_array(rng.standard_normal(2).astype(np.float32),
                                                 f"B{i}"))
            ins.append(f"B{i}")
        nodes.append(helper.make_node("Conv", ins, [f"Y{i}"], name=name, pads=[1, 1, 1, 1]))
        outputs.append(helper.make_tensor_value_info(f"Y{i}", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "X", TensorProto.FLOAT, [1, 2, 6, 6])], outputs, initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def reserved(file_name: str) -> bool:
    return file_name.partition(".")[0].rstrip(" ").upper() in RESERVED_STEMS


def test_all_writes_distinct_unreserved_files_and_the_index_maps_each_layer(tmp_path):
    layers = ["Conv", "conv", "CON", "NUL.x", "com1", "lpt9.", "aux", "CONV"]
    model = write_convs(tmp_path / "m.onnx", layers)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "import", str(model), "--all",
                           "-o", str(out)], capture_output=True, text=True, cwd=ROOT,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    files = sorted(p.name for p in out.iterdir())
    assert len({f.lower() for f in files}) == len(files)
    assert not [f for f in files if reserved(f) or f.endswith((".", " "))]
    index = json.loads((out / "index.json").read_text())
    assert [item["layer"] for item in index] == layers
    canvases = [item["canvas"] for item in index]
    assert len({c.lower() for c in canvases}) == len(layers)
    assert set(canvases) <= set(files)
    assert canvases[:3] == ["Conv.gbc.json", "conv_2.gbc.json", "_CON.gbc.json"]
    for item in index:  # each file is that layer's: its filter is the model's weights
        canvas = json.loads((out / item["canvas"]).read_text())
        assert {n["id"] for n in canvas["nodes"]} >= {"filter", "forward"}


@pytest.mark.parametrize("name, stem", [
    ("CON", "_CON"), ("con", "_con"), ("NUL.x", "_NUL.x"), ("com1", "_com1"),
    ("LPT9.tar.gz", "_LPT9.tar.gz"), ("COM0", "_COM0"), ("aux.", "_aux"), ("prn..", "_prn"),
    ("CONV", "CONV"), ("COM10", "COM10"), ("xCON", "xCON"), ("a.", "a"), ("..", "layer"),
    ("", "layer"), ("con/../x", "con_.._x"), ("COM¹", "COM_"),
])
def test_a_stem_is_never_a_device_name_nor_ends_in_a_dot(name, stem):
    assert file_stem(name) == stem


def test_stems_are_unique_ignoring_case_in_order():
    assert safe_stems(["Conv", "conv", "CONV", "conv_2", "a", "A_2", "a"]) == [
        "Conv", "conv_2", "CONV_3", "conv_2_2", "a", "A_2", "a_3"]
