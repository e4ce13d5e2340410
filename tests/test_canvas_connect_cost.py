"""Canvas.connect's cycle check costs at most the smaller side of the new edge: a chain wired
front to back or back to front is linear, and every cycle is still refused."""

import itertools
import random

import pytest

from engine.base.errors import InvalidArgumentError
from engine.graph.canvas import Canvas


class CountingDict(dict):
    """An edge index that counts the lookups the cycle check makes."""

    lookups = 0

    def get(self, key, default=None):
        CountingDict.lookups += 1
        return super().get(key, default)


def _chain(n: int, order: str) -> tuple[Canvas, int]:
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [2, 3]}, id="t0")
    for i in range(1, n + 1):
        c.add_node("Transpose", attrs={"perm": [1, 0]}, id=f"t{i}")
    c._into, c._out_of = CountingDict(c._into), CountingDict(c._out_of)
    CountingDict.lookups = 0
    steps = range(1, n + 1) if order == "front" else range(n, 0, -1)
    for i in steps:
        c.connect((f"t{i - 1}", "output"), (f"t{i}", "input"))
    return c, CountingDict.lookups


@pytest.mark.parametrize("order", ["front", "back"])
def test_a_chain_is_wired_with_a_bounded_number_of_lookups_per_edge(order):
    n = 3000
    c, lookups = _chain(n, order)
    assert len(c.edges) == n
    assert lookups <= 8 * n, lookups  # was n * (n + 1) / 2 wired front to back


def test_closing_a_cycle_is_refused_whichever_side_is_longer():
    c, _ = _chain(50, "front")
    c.add_node("Conv2D", id="a")
    c.connect(("t50", "output"), ("a", "input"))
    with pytest.raises(InvalidArgumentError, match="would make a cycle"):
        c.connect(("a", "output"), ("t1", "input"))
    with pytest.raises(InvalidArgumentError, match="would make a cycle"):
        c.connect(("t50", "output"), ("t1", "input"))


def test_random_graphs_refuse_exactly_the_edges_that_close_a_cycle():
    """Against the definition: an edge src -> dst closes a cycle iff src is dst or src is
    reachable from dst."""
    rng = random.Random(7)
    for _ in range(60):
        c = Canvas()
        ids = [f"n{k}" for k in range(8)]
        for i in ids:
            c.add_node("Conv2D", id=i)
        for src, dst in rng.sample(list(itertools.permutations(ids, 2)), 20):
            port = rng.choice(["input", "filter"])
            reach = {dst} | _downstream(c, dst)
            if src in reach:
                with pytest.raises(InvalidArgumentError, match="would make a cycle"):
                    c.connect((src, "output"), (dst, port))
            else:
                c.connect((src, "output"), (dst, port))


def _downstream(c: Canvas, node: str) -> set[str]:
    seen, stack = set(), [node]
    while stack:
        here = stack.pop()
        for e in c.edges:
            if e.src[0] == here and e.dst[0] not in seen:
                seen.add(e.dst[0])
                stack.append(e.dst[0])
    return seen
