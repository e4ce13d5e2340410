"""Graph work is linear: topological order of long chains and many loose blocks (correctness
only; times are measured by ``python -m engine.bench.graph``)."""

from engine.graph.canvas import Canvas
from engine.graph.compiler import compile_canvas, topological_order
from engine.graph.executor import Executor


def _chain_doc(n: int, reverse: bool) -> dict:
    nodes = [{"id": "t0", "type": "Tensor", "attrs": {"shape": [2, 1], "fill": "arange"}}]
    nodes += [{"id": f"t{i}", "type": "Transpose", "attrs": {"perm": [1, 0]}}
              for i in range(1, n)]
    edges = [{"src": [f"t{i - 1}", "output"], "dst": [f"t{i}", "input"]} for i in range(1, n)]
    if reverse:  # the canvas lists every block after the block it feeds
        nodes.reverse()
    return {"format": "gradblocks.canvas", "version": 1, "nodes": nodes, "edges": edges}


def test_a_5000_block_chain_listed_backwards_compiles_and_runs_in_chain_order():
    n = 5000
    canvas = Canvas.from_json(_chain_doc(n, reverse=True))
    plan = compile_canvas(canvas)
    assert plan.ok
    assert plan.order == [f"t{i}" for i in range(n)]
    assert [s.node_id for s in plan.steps] == plan.order
    assert plan.specs[(f"t{n - 1}", "output")].shape == (1, 2)  # n - 1 = 4999 transposes
    result = Executor().run(plan)
    assert not result.errors
    assert result.outputs[(f"t{n - 1}", "output")].tolist() == [[1.0, 2.0]]


def test_ties_keep_the_canvas_order():
    c = Canvas()
    for node_id in ("c", "a", "b"):
        c.add_node("Tensor", id=node_id)
    c.add_node("Compare", id="cmp")
    c.add_node("Output", id="z")
    c.add_node("ShapeOf", id="s")
    c.connect(("b", "output"), ("cmp", "a"))
    c.connect(("a", "output"), ("cmp", "b"))
    c.connect(("c", "output"), ("s", "input"))
    c.connect(("cmp", "output"), ("z", "input"))
    # ready first: c, a, b (canvas order); s becomes ready after c, before cmp (after b)
    assert topological_order(c) == ["c", "a", "b", "cmp", "z", "s"]
