"""An ONNX Conv whose only consumer is an activation (Relu, Sigmoid, ...) is imported with the
import and a note on the canvas saying the model applies it after the conv and that the canvas
computes the conv alone; a conv read by several nodes, or a graph output, says nothing."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).parents[1]


def _model(path: Path, after: list[str]) -> Path:
    """X [1, 2, 5, 5] -> Conv (W [3, 2, 3, 3]) -> c, then each op of ``after`` reads c."""
    w = numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "W")
    nodes = [helper.make_node("Conv", ["X", "W"], ["c"], name="conv", pads=[1, 1, 1, 1])]
    outputs = []
    for i, op in enumerate(after):
        nodes.append(helper.make_node(op, ["c"], [f"y{i}"], name=f"act{i}"))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None))
    if not after:
        outputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                             [1, 2, 5, 5])],
                              outputs, [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _import(tmp_path: Path, after: list[str]) -> tuple[str, list[str]]:
    model = _model(tmp_path / "m.onnx", after)
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "import", str(model), "--layer",
                           "conv", "-o", str(tmp_path / "c.gbc.json")], capture_output=True,
                          text=True, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    notes = [n["text"] for n in json.loads((tmp_path / "c.gbc.json").read_text())["notes"]]
    return proc.stdout, notes


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh"])
def test_an_activation_after_the_conv_is_said_and_noted(tmp_path, op):
    out, notes = _import(tmp_path, [op])
    assert f"activation {op}: the model applies it after the conv" in out
    assert any(op in n and "conv alone" in n for n in notes), notes


@pytest.mark.parametrize("after", [[], ["Relu", "Sigmoid"], ["Flatten"]])
def test_no_single_activation_says_nothing(tmp_path, after):
    out, notes = _import(tmp_path, after)
    assert not any(line.startswith("activation") for line in out.splitlines()), out
    assert not any("activation" in n for n in notes), notes
