"""engine.graph.executor's byte-bounded LRU cache and engine.base.cancel's checkpoints inside
blocks."""

import threading

import numpy as np
import pytest

from engine.base import cancel
from engine.graph.canvas import Canvas
from engine.graph.executor import Executor, OutputCache, _Entry
from engine.kernels import compute
from tests.test_compiler_executor import grad_canvas


def test_undo_then_run_is_served_from_the_cache_with_equal_values():
    ex = Executor()
    c = grad_canvas()
    first = ex.run(ex.compile(c))
    assert first.computed == set(first.times)  # everything computed once
    c.set_attr("x", "seed", 7)  # an edit: x and everything after it recompute
    edited = ex.run(ex.compile(c))
    assert not edited.errors and edited.computed == {"x", "y", "grad"}
    c.set_attr("x", "seed", 1)  # undo
    again = ex.run(ex.compile(c))
    assert again.computed == set() and not again.errors
    for key, value in first.outputs.items():
        np.testing.assert_array_equal(again.outputs[key], value)


def _entry(nbytes: int) -> _Entry:
    return _Entry({"output": np.zeros(nbytes, np.uint8)}, 0.0)


def test_the_cache_evicts_least_recently_used_entries_by_bytes():
    cache = OutputCache(max_bytes=300)
    for key in "abc":
        cache.put(key, _entry(100))
    assert cache.keys() == ["a", "b", "c"] and cache.bytes == 300
    cache.get("a")  # now b is the least recently used
    cache.put("d", _entry(150))  # 450 bytes: b (100) and c (100) must go
    assert cache.keys() == ["a", "d"] and cache.bytes == 250
    cache.put("e", _entry(50), keep=frozenset("a"))  # exactly 300: nothing goes
    assert cache.keys() == ["a", "d", "e"]
    cache.put("f", _entry(200), keep=frozenset("a"))  # a is kept: d and e go instead
    assert cache.keys() == ["a", "f"] and cache.bytes == 300
    cache.put("g", _entry(400))  # bigger than the budget: everything else goes, then itself
    assert cache.keys() == [] and cache.bytes == 0


def test_the_cache_budget_is_configurable_and_checked():
    """With no budget only the last plan's outputs stay (running it again is free); undoing
    an edit then recomputes what the edit changed. With the default budget it does not."""
    for budget, recomputed in ((0, {"x", "y", "grad"}), (2**30, set())):
        ex = Executor(cache_bytes=budget)
        c = grad_canvas()
        ex.run(ex.compile(c))
        assert len(ex.cached_keys()) == len(c.nodes) and ex.cache_bytes == budget
        assert ex.run(ex.compile(c)).computed == set()
        c.set_attr("x", "seed", 7)
        ex.run(ex.compile(c))
        c.set_attr("x", "seed", 1)
        assert ex.run(ex.compile(c)).computed == recomputed, budget
    ex.cache_bytes = 0  # shrinking the budget evicts at once
    assert ex.cached_bytes() == 0
    with pytest.raises(ValueError, match="cache size"):
        Executor(cache_bytes=-1)


def test_checkpoint_raises_only_inside_a_cancelled_scope_and_in_worker_threads():
    cancel.checkpoint()  # no scope: nothing happens
    event = threading.Event()
    with cancel.scope(event):
        cancel.checkpoint()
        event.set()
        with pytest.raises(cancel.Cancelled):
            cancel.checkpoint()
        seen = []
        task = cancel.bound(lambda: seen.append("ran"))

        def worker() -> None:
            try:
                task()
            except cancel.Cancelled:
                seen.append("cancelled")

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert seen == ["cancelled"]
    cancel.checkpoint()  # the scope ended


def big_grad_canvas(batch: int = 64) -> Canvas:
    """A Conv2DBackpropFilter on a batch large enough to take many chunks."""
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [batch, 56, 56, 64]}, id="x")
    c.add_node("IntVector", attrs={"values": [3, 3, 64, 64]}, id="fs")
    c.add_node("Tensor", attrs={"shape": [batch, 56, 56, 64], "seed": 1}, id="dy")
    c.add_node("Conv2DBackpropFilter", attrs={"padding": "SAME"}, id="grad")
    c.connect(("x", "output"), ("grad", "input"))
    c.connect(("fs", "output"), ("grad", "filter_sizes"))
    c.connect(("dy", "output"), ("grad", "out_backprop"))
    return c


def test_a_cancel_during_a_long_kernel_stops_it_between_chunks(monkeypatch):
    """Cancel set by the first chunk of the conv: the kernel stops at its next checkpoint,
    the run is cancelled, the block has neither output nor error, nothing stale is cached."""
    ex = Executor()
    plan = ex.compile(big_grad_canvas(batch=4))
    event = threading.Event()
    chunks = []
    real = compute._backprop_filter_chunk

    def first_chunk_cancels(*args):
        chunks.append(1)
        event.set()
        return real(*args)

    monkeypatch.setattr(compute, "_backprop_filter_chunk", first_chunk_cancels)
    monkeypatch.setattr(compute, "CHUNK_BYTES", 1)  # one image per chunk: 4 chunks
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numpy")  # these chunks are the NumPy path's
    result = ex.run(plan, cancel=event)
    assert result.cancelled and chunks == [1]
    assert "grad" not in result.times and "grad" not in result.errors
    assert ("grad", "output") not in result.outputs
    assert {"x", "fs", "dy"} <= set(result.times)
    monkeypatch.undo()
    again = ex.run(plan, cancel=threading.Event())
    assert not again.cancelled and again.computed == {"grad"}, again.errors


def test_a_cancelled_source_stops_between_its_chunks(monkeypatch):
    from engine.io import sources

    monkeypatch.setattr(sources, "CHUNK", 1000)
    made = []
    real = sources._float32_values

    def chunk(*args):
        made.append(1)
        if len(made) == 3:
            event.set()
        return real(*args)

    monkeypatch.setattr(sources, "_float32_values", chunk)
    event = threading.Event()
    with cancel.scope(event), pytest.raises(cancel.Cancelled):
        sources.generate("random_normal", (100, 1000), "float32", seed=0)
    assert len(made) == 3  # of 100 chunks
