"""Compiler (validation, order, inference) and executor (cache, progress, cancel, failures)."""

import dataclasses
import threading

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine.graph.canvas import Canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor


def grad_canvas(strides=(1, 1, 1, 1), padding="SAME") -> Canvas:
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [2, 7, 6, 3], "seed": 1}, id="x")
    c.add_node("Tensor", attrs={"shape": [3, 3, 3, 4], "seed": 2}, id="w")
    c.add_node("Conv2D", attrs={"strides": list(strides), "padding": padding}, id="y")
    c.add_node("Tensor", attrs={"shape": [1], "seed": 3}, id="dy_seed")
    c.add_node("ShapeOf", id="ws")
    c.add_node("Conv2DBackpropFilter", attrs={"strides": list(strides), "padding": padding},
               id="grad")
    c.connect(("x", "output"), ("y", "input"))
    c.connect(("w", "output"), ("y", "filter"))
    c.connect(("w", "output"), ("ws", "input"))
    c.connect(("x", "output"), ("grad", "input"))
    c.connect(("ws", "output"), ("grad", "filter_sizes"))
    c.connect(("y", "output"), ("grad", "out_backprop"))
    return c


def test_inference_predicts_every_shape_before_running():
    plan = compile_canvas(grad_canvas(strides=(1, 2, 2, 1)))
    assert plan.ok
    assert plan.specs[("y", "output")].shape == (2, 4, 3, 4)
    assert plan.specs[("grad", "output")].shape == (3, 3, 3, 4)
    assert plan.specs[("grad", "output")].axes == ("kh", "kw", "in", "out")
    assert [s.node_id for s in plan.steps].index("ws") < [s.node_id for s in
                                                          plan.steps].index("grad")
    result = Executor().run(plan)
    assert not result.errors
    for key, ts in plan.specs.items():
        assert result.outputs[key].shape == ts.shape


def test_errors_name_node_and_attribute_and_downstream_waits():
    c = grad_canvas()
    c.set_attr("y", "strides", [2, 1, 1, 1])
    c.add_node("Conv2DBackpropInput", id="gi")
    plan = compile_canvas(c)
    (err,) = plan.errors["y"]
    assert str(err).startswith("y.strides: strides [2, 1, 1, 1]")
    assert "waits for y" in str(plan.errors["grad"][0])
    assert {e.attr for e in plan.errors["gi"]} == {"input_sizes", "filter", "out_backprop"}
    assert "filter is not connected" in [e.message for e in plan.errors["gi"]]
    assert [s.node_id for s in plan.steps] == ["x", "w", "dy_seed", "ws"]


def test_shape_mismatch_is_attributed_to_the_port():
    c = grad_canvas()
    c.add_node("Tensor", attrs={"shape": [2, 5, 6, 4]}, id="bad_dy")
    c.connect(("bad_dy", "output"), ("grad", "out_backprop"))
    (err,) = compile_canvas(c).errors["grad"]
    assert err.attr == "out_backprop"
    assert "out_backprop height 5 does not match the computed output height 7" in err.message


def test_memory_limit_refuses_huge_tensors():
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [1024, 1024, 1024], "dtype": "float32"}, id="big")
    (err,) = compile_canvas(c).errors["big"]
    assert "4.00 GiB, more than the memory limit 2.00 GiB" in err.message
    assert compile_canvas(c, memory_limit=8 * 2**30).ok


def _count_runs(monkeypatch):
    from blocks import registry

    counts: dict[str, int] = {}
    for type_id, spec in list(registry.REGISTRY.items()):
        def run(attrs, inputs, _run=spec.run, _t=type_id):
            counts[_t] = counts.get(_t, 0) + 1
            return _run(attrs, inputs)
        monkeypatch.setitem(registry.REGISTRY, type_id,
                            dataclasses.replace(spec, run=run))
    return counts


def test_cache_recomputes_only_the_edited_node_and_its_dependents(monkeypatch):
    counts = _count_runs(monkeypatch)
    ex, c = Executor(), grad_canvas()
    first = ex.run(compile_canvas(c))
    assert first.computed == {"x", "w", "y", "dy_seed", "ws", "grad"}
    again = ex.run(compile_canvas(c))
    assert again.computed == set() and counts["Conv2D"] == 1
    np.testing.assert_array_equal(again.outputs[("grad", "output")],
                                  first.outputs[("grad", "output")])
    c.set_attr("grad", "padding", "SAME")  # same value: nothing to do
    assert ex.run(compile_canvas(c)).computed == set()
    c.set_attr("y", "dilations", [1, 2, 1, 1])
    c.set_attr("grad", "dilations", [1, 2, 1, 1])
    third = ex.run(compile_canvas(c))
    assert third.computed == {"y", "grad"}
    assert counts == {"Tensor": 3, "Conv2D": 2, "ShapeOf": 1, "Conv2DBackpropFilter": 2}


def test_progress_and_cancel_between_nodes():
    plan = compile_canvas(grad_canvas())
    seen, cancel = [], threading.Event()

    def progress(node_id, done, total):
        seen.append((node_id, done, total))
        if done == 2:
            cancel.set()

    result = Executor().run(plan, progress=progress, cancel=cancel)
    assert result.cancelled and [s[1] for s in seen] == [1, 2]
    assert set(result.times) == {seen[0][0], seen[1][0]}


def test_a_failing_block_is_reported_and_independent_blocks_still_run(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((1, 5, 5, 3)))
    c = grad_canvas()
    c.add_node("Tensor", attrs={"fill": "file", "path": "a.npy"}, id="f")
    c.add_node("Transpose", attrs={"perm": [0, 3, 1, 2]}, id="t")
    c.connect(("f", "output"), ("t", "input"))
    plan = compile_canvas(c, base_dir=tmp_path)
    assert plan.ok
    (tmp_path / "a.npy").write_bytes(b"garbage")  # broken after compiling
    result = Executor().run(plan)
    assert "f" in result.errors and result.errors["t"] == "skipped: input input (f) failed"
    assert ("grad", "output") in result.outputs


def test_editing_a_file_invalidates_the_cache(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((2, 2)))
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "file", "path": "a.npy", "dtype": "float64"}, id="f")
    ex = Executor()
    assert ex.run(compile_canvas(c, tmp_path)).outputs[("f", "output")].sum() == 4
    np.save(tmp_path / "a.npy", np.full((2, 3), 2.0))
    plan = compile_canvas(c, tmp_path)
    assert plan.specs[("f", "output")].shape == (2, 3)
    assert ex.run(plan).outputs[("f", "output")].sum() == 12


@given(st.integers(1, 3), st.integers(1, 3), st.sampled_from(["SAME", "VALID", "EXPLICIT"]),
       st.sampled_from(["NHWC", "NCHW"]), st.integers(1, 2), st.integers(0, 10**6))
def test_inferred_shapes_equal_actual_shapes_on_random_canvases(k, s, padding, fmt, d, seed):
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(3, 9, 2))
    cin, cout = 2, 3
    attrs = {"strides": [1, s, s, 1] if fmt == "NHWC" else [1, 1, s, s], "padding": padding,
             "data_format": fmt, "dilations": [1, d, 1, 1] if fmt == "NHWC" else [1, 1, d, 1],
             "explicit_paddings": [0, 0, 1, 0, 0, 2, 0, 0] if fmt == "NHWC"
             else [0, 0, 0, 0, 1, 0, 0, 2]}
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [2, h, w, cin] if fmt == "NHWC" else [2, cin, h, w]},
               id="x")
    c.add_node("Tensor", attrs={"shape": [k, k, cin, cout]}, id="w")
    for type_id, ports in (("Conv2D", ("input", "filter")),):
        c.add_node(type_id, attrs=attrs, id="y")
        c.connect(("x", "output"), ("y", ports[0]))
        c.connect(("w", "output"), ("y", ports[1]))
    c.add_node("ShapeOf", id="xs")
    c.connect(("x", "output"), ("xs", "input"))
    c.add_node("Conv2DBackpropInput", attrs=attrs, id="gi")
    c.connect(("xs", "output"), ("gi", "input_sizes"))
    c.connect(("w", "output"), ("gi", "filter"))
    c.connect(("y", "output"), ("gi", "out_backprop"))
    plan = compile_canvas(c)
    if not plan.ok:  # an invalid geometry must be explained on the conv node
        assert "y" in plan.errors and plan.errors["y"][0].message
        return
    result = Executor().run(plan)
    assert not result.errors
    for key, ts in plan.specs.items():
        assert result.outputs[key].shape == ts.shape
        assert str(result.outputs[key].dtype) == ts.dtype


def test_sources_get_axis_names_from_their_consumer():
    c = grad_canvas()
    c.set_attr("y", "data_format", "NCHW")
    c.set_attr("x", "shape", [2, 3, 7, 6])
    plan = compile_canvas(c)
    assert plan.specs[("x", "output")].axes == ("N", "C", "H", "W")
    assert plan.specs[("w", "output")].axes == ("kh", "kw", "in", "out")
    assert plan.specs[("dy_seed", "output")].axes is None


def test_an_internal_error_message_ends_its_sentence_once():
    from engine.graph.executor import internal_error

    text = internal_error("Conv2D", ValueError("I/O operation on closed file."))
    assert "closed file. This is a bug in GradBlocks" in text and ".." not in text
