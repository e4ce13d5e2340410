"""One memory limit for the whole run (engine.graph.budget): every kept output plus the running
block's workspace, estimated at compile time; the estimates bound what the blocks really
allocate."""

import json
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from blocks.registry import get_spec
from engine.graph.budget import GIB, Budget, gib, gib_to_bytes, limit_bytes
from engine.graph.canvas import Canvas, CanvasError
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor
from engine.kernels import compute, sparse

SHAPE_042 = [int(0.42 * GIB) // 4]  # 0.42 GiB of float32


def many_outputs(count: int) -> Canvas:
    c = Canvas()
    for i in range(count):
        c.add_node("Tensor", attrs={"shape": SHAPE_042, "fill": "zeros"}, id=f"t{i}")
    return c


def test_the_limit_covers_every_output_of_the_run_not_each_output():
    plan = compile_canvas(many_outputs(20), memory_limit=GIB // 2)
    assert [s.node_id for s in plan.steps] == ["t0"]  # the steps that remain fit
    assert sorted(plan.errors) == sorted(f"t{i}" for i in range(1, 20))
    (err,) = plan.errors["t1"]
    assert err.message.startswith("the run would need about 0.84 GiB while this block runs, "
                                  "more than the memory limit 0.50 GiB: 0.42 GiB of outputs of "
                                  "earlier blocks")
    assert "biggest: output t1.output 0.42 GiB, output t0.output 0.42 GiB" in err.message
    assert plan.peak_bytes == SHAPE_042[0] * 4
    assert compile_canvas(many_outputs(20), memory_limit=9 * GIB).ok


def test_the_estimate_is_outputs_kept_plus_the_biggest_workspace_at_its_step():
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [256, 1024], "fill": "zeros"}, id="a")  # 1 MiB
    c.add_node("Tensor", attrs={"shape": [256, 1024], "fill": "ones"}, id="b")
    c.add_node("Compare", id="cmp")
    c.connect(("a", "output"), ("cmp", "a"))
    c.connect(("b", "output"), ("cmp", "b"))
    c.add_node("Output", id="out")  # passes its input through: adds nothing
    c.connect(("cmp", "output"), ("out", "input"))
    plan = compile_canvas(c)
    # a, b: 1 MiB each; Compare: a - b in float64 (2 MiB) + two float64 and one bool scalar
    # (17 bytes) and a workspace of float64 copies of a and b and one |.| temporary (6 MiB)
    assert plan.peak_bytes == 2**20 + 2**20 + 2 * 2**20 + 17 + 6 * 2**20
    assert compile_canvas(c, memory_limit=plan.peak_bytes).ok
    assert "cmp" in compile_canvas(c, memory_limit=plan.peak_bytes - 1).errors


def test_an_output_over_the_limit_names_the_attribute_that_sizes_it(tmp_path):
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [2**30, 2**30]}, id="big")  # one NumPy can index
    c.add_node("Tensor", attrs={"fill": "values", "values": [[0.0] * 300] * 300}, id="lit")
    np.save(tmp_path / "a.npy", np.zeros((64, 64)))
    c.add_node("Tensor", attrs={"fill": "file", "path": str(tmp_path / "a.npy")}, id="f")
    plan = compile_canvas(c, memory_limit=10_000)
    (big,) = plan.errors["big"]
    assert big.attr == "shape" and "more than the memory limit 9.8 KiB" in big.message
    assert "[1073741824, 1073741824] float32 would need " in big.message
    assert plan.errors["lit"][0].attr == "values" and plan.errors["f"][0].attr == "path"


def test_a_shape_entry_beyond_int64_is_a_problem_of_the_attribute():
    doc = {"format": "gradblocks.canvas", "version": 1, "nodes": [
        {"id": "t", "type": "Tensor", "attrs": {"shape": [10**400, 2]}}], "edges": []}
    with pytest.raises(CanvasError) as info:
        Canvas.from_json(doc)
    ((path, message),) = info.value.problems
    assert path == "$.nodes[0].attrs.shape" and "must be <= 9223372036854775807" in message


def test_limits_must_be_positive_and_may_be_huge():
    huge = 10**300 * GIB
    plan = compile_canvas(many_outputs(3), memory_limit=huge)
    assert plan.ok
    assert gib(huge) == "1.000e+300 GiB"
    assert gib_to_bytes("1e300") == huge and gib_to_bytes("0.5") == GIB // 2
    assert limit_bytes(1e300) == int(1e300)
    assert "1.000e+300 GiB" in Budget(huge).charge("x", {"output": huge * 2}, 0)
    for bad in (0, -1, 0.4):
        with pytest.raises(ValueError, match="positive"):
            compile_canvas(Canvas(), memory_limit=bad)
        with pytest.raises(ValueError, match="positive"):
            Executor(memory_limit=bad)
    for text in ("0", "-2", "nan", "inf", "", "x"):
        with pytest.raises(ValueError):
            gib_to_bytes(text)


def test_cli_takes_a_huge_limit_and_refuses_a_non_positive_one(tmp_path):
    path = tmp_path / "c.gbc.json"
    path.write_text(json.dumps(many_outputs(2).to_json()))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                              text=True, timeout=60, check=False)

    assert cli("check", str(path), "--memory-limit-gib", "1e300").returncode == 0
    for bad in ("0", "-1", "nan", "inf"):
        proc = cli("check", str(path), "--memory-limit-gib", bad)
        assert proc.returncode == 2 and "--memory-limit-gib" in proc.stderr, bad
        assert "Traceback" not in proc.stderr
    proc = cli("check", str(path), "--memory-limit-gib", "0.5")
    assert proc.returncode == 2 and "t1: the run would need about 0.84 GiB" in proc.stderr


def test_a_run_evicts_unused_cached_outputs_before_computing_when_memory_needs_the_room(
        monkeypatch):
    """Outputs the plan does not use stay cached (undo is free) unless they and the plan's
    estimate would pass the memory limit: then they go before anything is computed."""
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [1024], "seed": 1}, id="x")  # 4 KiB
    seen = []
    spec = get_spec("Tensor")
    real_run = spec.run
    peak = compile_canvas(c).peak_bytes  # 4 KiB of output and the source's workspace
    for limit, kept in ((2**30, True), (peak + 100, False)):
        ex = Executor(memory_limit=limit)
        ex.run(compile_canvas(c))
        stale = set(ex.cached_keys())
        c.set_attr("x", "seed", 2)
        seen.clear()
        monkeypatch.setattr(type(spec), "run", property(lambda self, ex=ex: (
            lambda attrs, inputs: seen.append(set(ex.cached_keys()))
            or real_run(attrs, inputs))), raising=False)
        ex.run(ex.compile(c))
        monkeypatch.undo()
        assert stale and seen == [stale if kept else set()], limit
        assert (stale <= set(ex.cached_keys())) == kept
        c.set_attr("x", "seed", 1)


def _conv_canvas(kind: str, depthwise: bool, dtype: str, nan: bool, attrs: dict) -> Canvas:
    """A conv block of ``kind`` fed by sources (literal values holding a NaN when ``nan``)."""
    type_id = {("forward", False): "Conv2D", ("filter", False): "Conv2DBackpropFilter",
               ("input", False): "Conv2DBackpropInput", ("forward", True): "DepthwiseConv2D",
               ("filter", True): "DepthwiseBackpropFilter",
               ("input", True): "DepthwiseBackpropInput"}[(kind, depthwise)]
    x_shape, w_shape = [2, 64, 48, 8], [3, 3, 8, 2 if depthwise else 16]
    c = Canvas()
    rng = np.random.default_rng(0)

    def source(node_id, shape):
        if nan:
            values = rng.standard_normal(shape)
            values.reshape(-1)[3] = np.nan
            c.add_node("Tensor", attrs={"fill": "values", "values": values.tolist(),
                                        "dtype": dtype}, id=node_id)
        else:
            c.add_node("Tensor", attrs={"shape": shape, "dtype": dtype}, id=node_id)

    source("x", x_shape)
    source("w", w_shape)
    c.add_node("Conv2D" if not depthwise else "DepthwiseConv2D", attrs=attrs, id="y")
    c.connect(("x", "output"), ("y", "input"))
    c.connect(("w", "output"), ("y", "filter"))
    c.add_node("ShapeOf", id="xs")
    c.connect(("x", "output"), ("xs", "input"))
    c.add_node("ShapeOf", id="ws")
    c.connect(("w", "output"), ("ws", "input"))
    c.add_node(type_id, attrs=attrs, id="k")
    ports = {"forward": {"input": "x", "filter": "w"},
             "filter": {"input": "x", "filter_sizes": "ws", "out_backprop": "y"},
             "input": {"input_sizes": "xs", "filter": "w", "out_backprop": "y"}}[kind]
    for port, src in ports.items():
        c.connect((src, "output"), ("k", port))
    return c


def workspace_and_peak(plan, node_id: str, warm: bool = False, runs: int = 3):
    """(the compiler's workspace estimate of block ``node_id``, its output, the least peak
    traced memory of ``runs`` more runs on the plan's inputs); ``warm``: first wait for a
    background compile (its allocations are traced too) and run it once untraced.

    tracemalloc counts every thread's allocations: a thread an earlier test left running (an
    app's QThread, a verify call past its timeout) can add to one run's peak, never to what
    the kernel allocates in each, so the least of a few runs is the kernel's own."""
    step = next(s for s in plan.steps if s.node_id == node_id)
    inputs = {p: plan.specs[src] for p, src in step.inputs.items()}
    workspace = step.spec.workspace(step.attrs, inputs,
                                    {"output": plan.specs[(node_id, "output")]})
    result = Executor().run(plan)
    arrays = {p: result.outputs[src] for p, src in step.inputs.items()}
    if warm:
        from engine.kernels import accel

        loading = accel._warm_thread  # an app test's background compile
        if loading is not None:
            loading.join()
        step.spec.run(step.attrs, arrays)  # lazy imports and first-call set-up happen before
    peaks = []
    for _ in range(runs):
        tracemalloc.start()
        try:
            out = step.spec.run(step.attrs, arrays)["output"]
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    return workspace, out, min(peaks)


@pytest.mark.parametrize("kind", ["forward", "filter", "input"])
@pytest.mark.parametrize("depthwise", [False, True])
@pytest.mark.parametrize(("dtype", "nan"), [("float32", False), ("float16", False),
                                            ("float64", True), ("bfloat16", True)])
@pytest.mark.parametrize("attrs", [
    {"strides": [1, 2, 1, 1], "dilations": [1, 1, 2, 1], "padding": "SAME"},
    # computed tap by tap (engine.kernels.sparse): the phase layout would be mostly padding
    {"strides": [1, 20000, 3, 1], "dilations": [1, 1, 2**20, 1], "padding": "SAME"},
], ids=["phase-layout", "tap-spans"])
def test_conv_workspace_bounds_what_the_kernel_allocates(monkeypatch, kind, depthwise, dtype,
                                                         nan, attrs):
    monkeypatch.setattr(compute, "CHUNK_BYTES", 2**16)  # many batch chunks
    monkeypatch.setattr(sparse, "CHUNK_BYTES", 2**16)
    plan = compile_canvas(_conv_canvas(kind, depthwise, dtype, nan, attrs))
    assert plan.ok, plan.errors
    step = next(s for s in plan.steps if s.node_id == "k")
    inputs = {p: plan.specs[src] for p, src in step.inputs.items()}
    assert all(inputs[p].finite for p in inputs if inputs[p].dtype == dtype) != nan
    workspace, out, peak = workspace_and_peak(plan, "k")
    # (the tap-span geometry never reads the NaN's column: padding contributes nothing)
    assert np.isnan(out).any() == nan or kind != "forward" or attrs["strides"][1] > 2
    assert peak - out.nbytes <= workspace


@pytest.mark.parametrize(("stored", "dtype"), [(np.int64, "float16"), (np.float64, "float32"),
                                               (np.float32, "float32")])
def test_source_workspace_bounds_reading_a_file(tmp_path, stored, dtype):
    np.save(tmp_path / "a.npy", np.asfortranarray(np.ones((64, 300, 70), stored)))
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "file", "path": str(tmp_path / "a.npy"),
                                "dtype": dtype}, id="x")
    plan = compile_canvas(c)
    (step,) = plan.steps
    workspace = step.spec.workspace(step.attrs, {}, {"output": plan.specs[("x", "output")]})
    tracemalloc.start()
    try:
        out = step.spec.run(step.attrs, {})["output"]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - out.nbytes <= workspace + 2**16
