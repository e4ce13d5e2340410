"""Fuzz: the shipped examples with random attribute values and wiring; whatever loads compiles
without raising, and whatever compiles runs without raising and without an internal error."""

import copy
import json
from pathlib import Path

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st

from blocks.registry import REGISTRY
from engine.graph.canvas import Canvas, CanvasError
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor

EXAMPLES = {p.name: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted((Path(__file__).parents[1] / "assets" / "examples")
                            .glob("*.gbc.json"))}

#: Integers around every boundary the engine has: 0, 1, int32, int64 and beyond.
EDGE_INTS = st.sampled_from([-(2**63), -(2**31) - 1, -1, 0, 1, 2, 3, 7, 2**31 - 1, 2**31,
                             2**62, 10**30])
SMALL_INTS = st.integers(1, 4)
ANY_INT = st.one_of(SMALL_INTS, st.integers(-1, 0), EDGE_INTS)
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3))
VALUES = st.recursive(FLOATS, lambda inner: st.lists(inner, min_size=0, max_size=3),
                      max_leaves=12)


def _attr_value(name: str):
    """A random value for attribute ``name``, mostly of the right type, sometimes not."""
    typed = {
        "strides": st.lists(ANY_INT, min_size=4, max_size=4),
        "dilations": st.lists(ANY_INT, min_size=4, max_size=4),
        "explicit_paddings": st.lists(st.one_of(st.integers(0, 3), EDGE_INTS), min_size=8,
                                      max_size=8),
        "padding": st.sampled_from(["SAME", "VALID", "EXPLICIT", "same", ""]),
        "data_format": st.sampled_from(["NHWC", "NCHW", "NCWH"]),
        "shape": st.lists(st.integers(0, 6), min_size=0, max_size=5),
        "dtype": st.sampled_from(["float16", "bfloat16", "float32", "float64", "int32"]),
        "fill": st.sampled_from(["zeros", "ones", "arange", "random_normal", "random_uniform",
                                 "values", "file"]),
        "seed": st.one_of(st.integers(0, 9), EDGE_INTS),
        "values": st.one_of(VALUES, st.lists(ANY_INT, min_size=1, max_size=5)),
        "perm": st.lists(st.integers(-1, 4), min_size=0, max_size=5),
        "path": st.sampled_from(["", "missing.npy", "/dev/null", ".", "x" * 300]),
        "name": st.text(max_size=10),
        "use_cudnn_on_gpu": st.booleans(),
    }.get(name, st.none())
    wrong = st.one_of(st.none(), st.booleans(), st.text(max_size=5), ANY_INT,
                      st.lists(ANY_INT, max_size=3))
    return st.one_of(typed, typed, typed, typed, typed, typed, typed, wrong)


@st.composite
def mutated_examples(draw):
    """An example with up to three attributes changed and up to two wires moved or dropped."""
    doc = copy.deepcopy(EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))])
    nodes, edges = doc["nodes"], doc["edges"]
    for _ in range(draw(st.integers(0, 3))):
        node = nodes[draw(st.integers(0, len(nodes) - 1))]
        names = [a.name for a in REGISTRY[node["type"]].attrs]
        if names:
            name = draw(st.sampled_from(names))
            node["attrs"][name] = draw(_attr_value(name))
    for _ in range(draw(st.integers(0, 2))):
        if edges and draw(st.integers(0, 3)) == 0:
            edges.pop(draw(st.integers(0, len(edges) - 1)))
        elif edges and draw(st.integers(0, 3)) == 0:
            edge = edges[draw(st.integers(0, len(edges) - 1))]
            edge["src"] = [draw(st.sampled_from([n["id"] for n in nodes])), "output"]
    return doc


@given(mutated_examples())
def test_whatever_loads_compiles_and_runs_without_raising(doc):
    try:
        canvas = Canvas.from_json(doc)
    except CanvasError:
        event("refused by the loader")
        return
    plan = compile_canvas(canvas, None, memory_limit=64 * 2**20)
    result = Executor(memory_limit=64 * 2**20).run(plan)
    event("every block ran" if not plan.errors and not result.errors
          else "some blocks refused by the compiler" if plan.errors
          else "some blocks failed at run time")
    for node_id, message in result.errors.items():
        assert "internal error" not in message, (node_id, message)
    for (node_id, port), value in result.outputs.items():
        spec = plan.specs[(node_id, port)]
        assert tuple(np.shape(value)) == tuple(spec.shape), (node_id, port)
