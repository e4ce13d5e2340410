"""The op table (engine.shapes.ops) is the one description of the conv ops: the blocks, the
exporters, explain and verify derive theirs from it, so an op added to the table appears in
all four with no other edit (issue 32 point 1)."""

from __future__ import annotations

import json
import subprocess
import sys

from blocks.conv import SPECS
from engine import kernels
from engine.shapes.ops import CONV_OPS, KINDS, OPERANDS, PORTS, RESULTS
from tests.export_support import REPO


def test_every_conv_block_is_a_row_of_the_table():
    rows = {op.block_type: op for op in CONV_OPS}
    assert {s.type_id for s in SPECS} == set(rows) and len(rows) == len(CONV_OPS) == 9
    for spec in SPECS:
        row = rows[spec.type_id]
        assert (spec.op, spec.title, spec.category, spec.doc) == (
            row.name, row.title, row.category, row.doc)
        assert tuple(spec.input_names()) == row.ports
        assert set(row.operands) <= set(row.ports)
        assert callable(getattr(kernels, row.kernel))
        assert ("use_cudnn_on_gpu" in {a.name for a in spec.attrs}) is row.cudnn


def test_what_a_kind_means_is_written_once():
    assert set(PORTS) == set(OPERANDS) == set(RESULTS) == set(KINDS)
    assert {op.result for op in CONV_OPS} == {"output", "filter", "input"}


#: In a fresh interpreter: a seventh row (a forward op computed by the Conv2D kernel) added to
#: the table before anything reads it; then what each consumer knows of it, as JSON.
_FAKE = """
import json
import numpy as np
from engine.shapes import ops
ops.CONV_OPS = (*ops.CONV_OPS, ops.ConvOp(
    "FakeConv2D", "FakeConv", "forward", False, "conv2d", "Fake conv",
    "A seventh op for the table test.", cudnn=False))
from blocks.registry import get_spec
from engine.api import new_canvas
from engine.explain.terms import OPS, explain_element
from engine.export.conv import CONV_OPS
from engine.verify.api import verify
from engine.verify.defaults import OPS as VERIFY_OPS
spec = get_spec("FakeConv")
c = new_canvas()
c.add("Tensor", "x", shape=[1, 4, 4, 2], fill="random_normal", seed=1)
c.add("Tensor", "w", shape=[2, 2, 2, 3], fill="random_normal", seed=2)
c.add("FakeConv", "y", padding="VALID")
c.connect("x", "y.input")
c.connect("w", "y.filter")
out = c.run()["y"]
x, w = (np.asarray(c.run()[k]) for k in ("x", "w"))
e = explain_element("FakeConv", {"strides": [1, 1, 1, 1], "padding": "VALID",
                    "explicit_paddings": [], "data_format": "NHWC",
                    "dilations": [1, 1, 1, 1]}, {"input": x, "filter": w}, (0, 1, 1, 2))
report = verify(lambda **kw: __import__("engine.kernels", fromlist=["conv2d"]).conv2d(**kw),
                op="FakeConv2D", cases=20, seed=0)
print(json.dumps({
    "block": [spec.op, list(spec.input_names()), spec.category],
    "run": out.shape == (1, 3, 3, 3) and np.allclose(out, __import__("engine.kernels",
           fromlist=["conv2d"]).conv2d(x, w, [1, 1, 1, 1], "VALID")),
    "export": CONV_OPS["FakeConv2D"],
    "explain": [OPS["FakeConv"].kind, e.terms, abs(e.sum - float(out[0, 1, 1, 2])) < 1e-5],
    "verify": ["FakeConv2D" in VERIFY_OPS["tf"], report.cases, report.failed],
}))
"""


def test_a_seventh_row_appears_in_blocks_export_explain_and_verify():
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", _FAKE], capture_output=True,
                          text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {
        "block": ["FakeConv2D", ["input", "filter"], "Convolution"],
        "run": True,
        "export": ["forward", False],
        "explain": ["forward", 8, True],  # 2x2 taps x 2 input channels
        "verify": [True, 20, 0],
    }
