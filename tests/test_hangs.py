"""No hang (issue 20): the executor's cache evicts in linear time (checked against a reference
LRU and by counting the work per step, never by the clock), cached results are read-only, and
a GradCheck reports its progress, stops at a cancel (the app's) or a Ctrl+C (the CLI's), and
``check`` warns, with the estimate, when one would run for more than a minute.

Wall times of the 50,000-Transpose run are measured outside the tests (see the lead's report).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blocks import gradcheck, local_loss
from engine.base import cancel
from engine.graph import executor
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor, OutputCache, _Entry

ROOT = Path(__file__).resolve().parent.parent


# -- the cache: semantics against a reference, and linear work --------------------------------

class ReferenceLRU:
    """The cache's documented rules, written the obvious (quadratic) way."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.items: list[tuple[str, int]] = []  # least recently used first

    def total(self, counted=lambda k: True) -> int:
        return sum(n for k, n in self.items if counted(k))

    def get(self, key: str) -> None:
        for i, (k, n) in enumerate(self.items):
            if k == key:
                self.items.append(self.items.pop(i))
                return

    def put(self, key: str, nbytes: int, keep: frozenset[str]) -> None:
        self.items = [(k, n) for k, n in self.items if k != key] + [(key, nbytes)]
        self.evict(self.max_bytes, keep)

    def evict(self, max_bytes: int, keep: frozenset[str], only_free: bool = False) -> None:
        counted = (lambda k: k not in keep) if only_free else (lambda k: True)
        for k, n in list(self.items):
            if self.total(counted) <= max_bytes:
                break
            if k not in keep:
                self.items.remove((k, n))


KEYS = st.sampled_from("abcdefgh")
OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), KEYS, st.integers(0, 120), st.frozensets(KEYS, max_size=4)),
    st.tuples(st.just("get"), KEYS),
    st.tuples(st.just("evict"), st.integers(0, 400), st.frozensets(KEYS, max_size=4),
              st.booleans()),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 400), OPS)
def test_the_cache_keeps_what_the_reference_lru_keeps_within_its_byte_bound(budget, ops):
    cache, ref = OutputCache(budget), ReferenceLRU(budget)
    for op in ops:
        if op[0] == "put":
            _, key, nbytes, keep = op
            cache.put(key, _Entry({"output": np.zeros(nbytes, np.uint8)}, 0.0), keep=keep)
            ref.put(key, nbytes, keep)
            # the byte bound: within the budget, or nothing is left but what it must keep
            assert cache.bytes <= budget or set(cache.keys()) <= keep
        elif op[0] == "get":
            assert (cache.get(op[1]) is None) == (op[1] not in [k for k, _ in ref.items])
            ref.get(op[1])
        else:
            _, max_bytes, keep, only_free = op
            cache.evict(max_bytes, keep, only_free=only_free)
            ref.evict(max_bytes, keep, only_free)
        held = cache.keys()
        assert held == [k for k, _ in ref.items]
        assert cache.bytes == ref.total() == sum(cache._entries[k].nbytes for k in held)


class CountingEntry(_Entry):
    """An _Entry that counts how often the cache reads its size."""

    reads = 0

    @property
    def nbytes(self) -> int:
        CountingEntry.reads += 1
        return self.__dict__.get("_nbytes", 0)

    @nbytes.setter
    def nbytes(self, value: int) -> None:
        self.__dict__["_nbytes"] = value


def chain_canvas(n: int) -> Canvas:
    """A Tensor [2, 3] (1..6) followed by ``n`` Transposes (edges made last to first: the
    canvas's cycle check walks the source's upstream)."""
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [2, 3], "fill": "arange"}, id="t0")
    for i in range(1, n + 1):
        c.add_node("Transpose", attrs={"perm": [1, 0]}, id=f"t{i}")
    for i in range(n, 0, -1):
        c.connect((f"t{i - 1}", "output"), (f"t{i}", "input"))
    return c


@pytest.mark.parametrize("budget", [2**30, 0])
def test_a_long_chain_runs_with_constant_cache_work_per_step(monkeypatch, budget):
    """The quadratic eviction read every entry's size at every step (2,000 steps: about 2
    million reads); now a step reads a bounded number, whether the budget holds everything
    or nothing but the running plan."""
    n = 2000
    monkeypatch.setattr(executor, "_Entry", CountingEntry)
    CountingEntry.reads = 0
    ex = Executor(cache_bytes=budget)
    plan = ex.compile(chain_canvas(n))
    result = ex.run(plan)
    assert not result.errors and len(result.computed) == n + 1
    assert result.outputs[(f"t{n}", "output")].tolist() == [[1, 2, 3], [4, 5, 6]]  # n even
    assert CountingEntry.reads <= 4 * (n + 1), CountingEntry.reads
    assert len(ex.cached_keys()) == n + 1  # the plan's outputs stay whatever the budget
    assert ex.run(plan).computed == set()


def test_a_10000_transpose_chain_runs():
    n = 10_001
    plan = compile_canvas(chain_canvas(n))
    assert plan.ok
    result = Executor().run(plan)
    assert not result.errors and len(result.outputs) == n + 1
    np.testing.assert_array_equal(result.outputs[(f"t{n}", "output")],
                                  np.arange(1, 7, dtype=np.float32).reshape(2, 3).T)


def test_cached_results_are_read_only_for_every_caller():
    """A result written into by one caller would be what the next run returns: the
    executor's arrays cannot be written."""
    ex = Executor()
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [2, 2], "fill": "arange"}, id="x")
    c.add_node("Transpose", attrs={"perm": [1, 0]}, id="t")
    c.connect(("x", "output"), ("t", "input"))
    plan = ex.compile(c)
    first = ex.run(plan)
    for key in (("x", "output"), ("t", "output")):
        with pytest.raises(ValueError, match="read-only"):
            first.outputs[key][...] = 99
    again = ex.run(plan)
    assert again.computed == set()
    assert again.outputs[("t", "output")].tolist() == [[1.0, 3.0], [2.0, 4.0]]


def test_a_block_writing_into_a_cached_input_fails_and_the_cache_is_unchanged():
    """Blocks get the cached arrays as inputs: one that writes into its input is a bug,
    reported as an internal error, and the value cached under the input's key is intact."""
    ex = Executor()
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [2, 2], "fill": "arange"}, id="x")
    c.add_node("Transpose", attrs={"perm": [1, 0]}, id="t")
    c.connect(("x", "output"), ("t", "input"))
    plan = ex.compile(c)
    ex.run(plan)

    def scribbles(attrs, inputs):
        inputs["input"][...] = 99
        return {"output": inputs["input"].T.copy()}

    step = plan.steps[1]
    plan.steps[1] = dataclasses.replace(step, key="another key",
                                        spec=dataclasses.replace(step.spec, run=scribbles))
    result = ex.run(plan)
    assert result.computed == set()  # x from the cache, t failed
    assert result.errors["t"].startswith("internal error in a Transpose block: ValueError: "
                                         "assignment destination is read-only")
    assert result.outputs[("x", "output")].tolist() == [[1.0, 2.0], [3.0, 4.0]]


# -- GradCheck: progress, cancel, Ctrl+C and the cost warning ----------------------------------

def gradcheck_canvas(x_shape, w_shape, wrt: str, samples: int) -> Canvas:
    """x, w, dy sources and a GradCheck ``gc`` of a Conv2D (SAME, stride 1) whose gradient is
    a source of the right shape (its values do not matter here)."""
    c = Canvas()
    dy_shape = [*x_shape[:3], w_shape[3]]
    grad_shape = x_shape if wrt == "input" else w_shape
    for node_id, shape, seed in (("x", x_shape, 1), ("w", w_shape, 2), ("dy", dy_shape, 3),
                                 ("g", grad_shape, 4)):
        c.add_node("Tensor", attrs={"shape": list(shape), "dtype": "float64", "seed": seed},
                   id=node_id)
    c.add_node("GradCheck", attrs={"wrt": wrt, "samples": samples}, id="gc")
    for port, src in (("input", "x"), ("filter", "w"), ("out_backprop", "dy"),
                      ("gradient", "g")):
        c.connect((src, "output"), ("gc", port))
    return c


@pytest.mark.parametrize("wrt", ["input", "filter"])
@pytest.mark.parametrize("kernel", [True, False])
def test_a_cancel_stops_a_gradcheck_at_the_next_element(monkeypatch, wrt, kernel):
    """The cancel event is set by the 10th forward evaluation (the 5th element's second): the
    check stops there, 10 evaluations of its 2 * 216 (input) or 2 * 144 (filter). Without the
    kernels (kernel=False: an evaluation that never reaches their checkpoints) the check's own
    checkpoint before each element stops it."""
    plan = compile_canvas(gradcheck_canvas([1, 6, 6, 6], [2, 2, 6, 6], wrt, 0))
    assert plan.ok
    event = threading.Event()
    calls = []
    real = local_loss.LocalLoss._value

    def counted(self, *args):
        calls.append(1)
        if len(calls) == 10:
            event.set()
        return real(self, *args) if kernel else 0.0

    monkeypatch.setattr(local_loss.LocalLoss, "_value", counted)
    ex = Executor()
    result = ex.run(plan, cancel=event)
    assert result.cancelled and len(calls) == 10
    assert "gc" not in result.errors and ("gc", "ok") not in result.outputs
    calls.clear()
    again = ex.run(plan, cancel=threading.Event())  # nothing stale was cached
    assert not again.cancelled and "gc" in again.computed
    assert len(calls) == 2 * (6 * 6 * 6 if wrt == "input" else 2 * 2 * 6 * 6)  # every one


def test_gradcheck_progress_rises_to_one_within_the_step_limit():
    plan = compile_canvas(gradcheck_canvas([1, 20, 20, 3], [3, 3, 3, 2], "input", 0))
    seen: list[tuple[str, float]] = []
    result = Executor().run(plan, step_progress=lambda node, f: seen.append((node, f)))
    assert not result.errors
    fractions = [f for node, f in seen if node == "gc"]
    assert {node for node, _ in seen} == {"gc"}  # the sources do not report
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert all(b > a for a, b in itertools.pairwise(fractions))
    assert all(b - a >= 1 / cancel.PROGRESS_STEPS - 1e-12 or b == 1.0
               for a, b in itertools.pairwise(fractions))
    assert 100 <= len(fractions) <= cancel.PROGRESS_STEPS + 2  # 1,200 elements, throttled


def test_progress_outside_a_scope_and_an_empty_check_end_at_one():
    cancel.progress(3, 10)  # no scope: nothing happens
    seen: list[float] = []
    with cancel.scope(None, seen.append):
        cancel.progress(0, 0)
        cancel.progress(5, 3)  # past the end and after it: reported once
    assert seen == [1.0]
    seen.clear()
    g = np.zeros((3, 3, 1, 1))
    with cancel.scope(None, seen.append):  # batch 0: no element is evaluated
        gradcheck.grad_check(np.zeros((0, 4, 4, 1)), g, np.zeros((0, 4, 4, 1)), g, "Conv2D",
                             "filter", [1, 1, 1, 1], "SAME", [], "NHWC", [1, 1, 1, 1], 1e-3,
                             0, 0)
    assert seen[-1] == 1.0 and seen == sorted(seen)


def test_ctrl_c_inside_a_gradcheck_leaves_the_run_and_caches_nothing(monkeypatch):
    """The CLI's Ctrl+C is a KeyboardInterrupt in the running thread: it must not be taken
    for a block's error, and the block must not be cached."""
    plan = compile_canvas(gradcheck_canvas([1, 6, 6, 2], [2, 2, 2, 2], "filter", 0))
    calls = []

    def interrupted(self, *args):
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(local_loss.LocalLoss, "_value", interrupted)
    ex = Executor()
    with pytest.raises(KeyboardInterrupt):
        ex.run(plan)
    assert len(calls) == 1
    monkeypatch.undo()
    assert "gc" in ex.run(plan).computed


def test_ctrl_c_of_gradblocks_run_during_a_gradcheck_prints_one_line(tmp_path):
    """A real SIGINT to ``gradblocks run`` once the GradCheck is evaluating: exit 130, one
    line, no traceback, and the check did not finish."""
    path = tmp_path / "gc.gbc.json"
    save_canvas(gradcheck_canvas([1, 64, 64, 8], [3, 3, 8, 8], "input", 0), path)
    script = (
        "import sys\n"
        "from blocks import local_loss\n"
        "real, calls = local_loss.LocalLoss._value, []\n"
        "def value(self, *a):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 1:\n"
        "        print('evaluating', flush=True)\n"
        "    return real(self, *a)\n"
        "local_loss.LocalLoss._value = value\n"
        "from engine.cli import main\n"
        "code = main(['run', sys.argv[1]])\n"
        "print('evaluations', len(calls), flush=True)\n"
        "sys.exit(code)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "evaluating\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert err.startswith("gradblocks: interrupted") and err.count("\n") == 1, err
    evaluations = int(out.split("evaluations")[1])
    assert 1 <= evaluations < 2 * 64 * 64 * 8


def expected_seconds(n: int, macs: int) -> float:
    """The model, written out: two evaluations an element (gradcheck's constants)."""
    return n * 2 * (gradcheck.EVALUATION_SECONDS + macs / gradcheck.MACS_PER_SECOND)


def test_check_warns_of_a_gradcheck_over_a_minute_with_the_estimate():
    """All 2,097,152 elements of an input gradient [1, 256, 256, 32] of a 3 x 3 x 32 x 32
    conv: each evaluation is a 3 x 3 window of 32 channels of 3 * 3 * 32 taps."""
    plan = compile_canvas(gradcheck_canvas([1, 256, 256, 32], [3, 3, 32, 32], "input", 0))
    assert plan.ok  # a warning does not stop the run
    [warning] = plan.warnings["gc"]
    macs = 3 * 3 * 32 * (3 * 3 * 32)
    seconds = expected_seconds(256 * 256 * 32, macs)
    assert seconds > 60
    fast = int(60 / (seconds / (256 * 256 * 32)))
    assert warning.attr == "samples"
    assert str(warning) == (
        f"gc.samples: samples=0 checks all 2,097,152 elements of the input gradient, each "
        f"with 2 convolutions of {macs:,} multiply-adds: about {seconds / 60:.0f} min by the "
        f"estimate (it can be cancelled while it runs); samples={fast:,} or fewer stays "
        f"under 60 s")


def test_a_filter_check_is_estimated_on_the_whole_batch():
    """wrt=filter: one output channel of the whole batch an evaluation."""
    plan = compile_canvas(gradcheck_canvas([32, 56, 56, 64], [3, 3, 64, 64], "filter", 0))
    [warning] = plan.warnings["gc"]
    macs = 32 * 56 * 56 * 3 * 3 * 64
    seconds = expected_seconds(3 * 3 * 64 * 64, macs)
    assert f"{macs:,} multiply-adds: about {seconds / 3600:.1f} h" in str(warning)


@pytest.mark.parametrize("x_shape, w_shape, wrt, samples", [
    ([1, 256, 256, 32], [3, 3, 32, 32], "input", 64),  # the same gradient, 64 samples
    ([1, 8, 8, 3], [3, 3, 3, 4], "input", 0),  # small, all elements
    ([1, 8, 8, 3], [3, 3, 3, 4], "filter", 0),
])
def test_no_warning_for_a_check_under_a_minute(x_shape, w_shape, wrt, samples):
    plan = compile_canvas(gradcheck_canvas(x_shape, w_shape, wrt, samples))
    assert plan.ok and plan.warnings == {}
    n = math.prod(x_shape if wrt == "input" else w_shape)
    seconds, checked, _ = gradcheck.estimated_seconds(
        plan.steps[-1].attrs, {p: plan.specs[(s, "output")] for p, s in (
            ("input", "x"), ("filter", "w"), ("out_backprop", "dy"), ("gradient", "g"))})
    assert checked == (n if samples == 0 else samples) and seconds <= 60


def test_the_notebook_check_report_shows_the_warning():
    from engine import api

    nb = api.NotebookCanvas(gradcheck_canvas([1, 256, 256, 32], [3, 3, 32, 32], "input", 0))
    report = nb.check()
    assert report.ok and len(report.warnings) == 1
    lines = str(report).splitlines()
    assert lines[-2].startswith("warning: gc.samples: samples=0 checks all 2,097,152")
    assert "warning: gc.samples" in report._repr_html_()



def test_gradblocks_check_prints_the_warning_and_passes(tmp_path):
    """``gradblocks check`` lists the canvas (exit 0) and names the warning on stderr."""
    from engine.graph.canvas_file import save_canvas

    path = tmp_path / "big.gbc.json"
    save_canvas(gradcheck_canvas([1, 256, 256, 32], [3, 3, 32, 32], "input", 0), path)
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "check", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    head, warning = proc.stderr.splitlines()[-2:]
    assert head.endswith("big.gbc.json: 1 warning(s):")
    assert warning.startswith("  gc.samples: samples=0 checks all 2,097,152 elements")


# -- the 2.1M-element GradCheck of issue 31 point 8: cost in check, progress in run, Ctrl+C ----

#: A filter gradient of 2,097,152 elements whose every evaluation is small (1,024
#: multiply-adds): the per-evaluation fixed cost is the whole cost (about 14 min of CPU here).
BIG_FILTER = ([1, 1, 1, 1024], [1, 1, 1024, 2048], "filter", 0)


def measured_against_estimate(x_shape, w_shape, wrt) -> tuple[float, float]:
    """CPU seconds of a GradCheck of every element (process time: a busy machine's other
    processes do not count) and :func:`gradcheck.estimated_seconds` of it."""
    import time

    plan = compile_canvas(gradcheck_canvas(x_shape, w_shape, wrt, 0))
    step = plan.steps[-1]
    estimate = gradcheck.estimated_seconds(
        step.attrs, {p: plan.specs[src] for p, src in step.inputs.items()})[0]
    ex = Executor()
    small = compile_canvas(gradcheck_canvas([1, 2, 2, 2], [1, 1, 2, 1], wrt, 0))
    ex.run(small)  # warm: the kernels' first call loads them
    t0 = time.process_time()
    assert not ex.run(plan).errors
    return time.process_time() - t0, estimate


@pytest.mark.parametrize("x_shape, w_shape, wrt", [
    ([1, 1, 1, 1024], [1, 1, 1024, 2], "filter"),  # BIG_FILTER's evaluations, 2,048 elements
    ([1, 16, 16, 8], [3, 3, 8, 8], "input"),  # 2,048 elements of 3 x 3 x 8 windows
])
def test_the_estimate_is_within_a_factor_of_three_of_the_run(x_shape, w_shape, wrt):
    """The model of :func:`gradcheck.estimated_seconds` against the CPU time of a run of a
    second or so: a generous factor (machines differ), but never the 6x under it that made
    ``check`` say "about 2 min" of BIG_FILTER, a run of 14 min."""
    measured, estimate = measured_against_estimate(x_shape, w_shape, wrt)
    assert measured / 3 <= estimate <= measured * 3, (measured, estimate)


def test_gradblocks_check_states_the_cost_of_the_big_filter_check(tmp_path):
    """``check`` of BIG_FILTER: exit 0 (a warning, as in the app: the run may go ahead), and
    one line naming gc.samples with the elements, the multiply-adds and an honest duration."""
    path = tmp_path / "big.gbc.json"
    save_canvas(gradcheck_canvas(*BIG_FILTER), path)
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "check", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    head, warning = proc.stderr.splitlines()[-2:]
    assert head.endswith("big.gbc.json: 1 warning(s):")
    assert warning.startswith("  gc.samples: samples=0 checks all 2,097,152 elements of the "
                              "filter gradient, each with 2 convolutions of 1,024 "
                              "multiply-adds: about "), warning
    minutes = int(warning.split(": about ")[1].split(" min ")[0])
    assert 8 <= minutes <= 40, warning  # 2 * 2,097,152 evaluations of 100-250 us


def run_on_a_terminal(argv: list[str]):
    """``gradblocks ARGV`` with stderr on a pseudo-terminal (stdout a pipe): the process and
    a function reading what it wrote on the terminal until a predicate holds or ``timeout``."""
    import os
    import select
    import time

    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", *argv], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = bytearray()

    def read_until(done, timeout: float) -> bytes:
        end = time.monotonic() + timeout
        while not done(bytes(seen)) and time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the process closed the terminal (it ended)
                    break
                if not chunk:
                    break
                seen.extend(chunk)
        return bytes(seen)

    return proc, read_until, master


def test_ctrl_c_of_the_big_gradcheck_run_shows_progress_then_one_line(tmp_path):
    """``run --out`` of BIG_FILTER on a terminal: its cost warning and a progress line on
    stderr; Ctrl+C then ends it within seconds (of a 14-minute run) with exit 130 and one
    line, the progress line erased first, no traceback, and the existing --out file kept."""
    import os
    import time

    path = tmp_path / "big.gbc.json"
    save_canvas(gradcheck_canvas(*BIG_FILTER), path)
    out = tmp_path / "results.npz"
    out.write_bytes(b"the previous results")
    proc, read_until, master = run_on_a_terminal(["run", str(path), "--out", str(out)])
    try:
        text = read_until(lambda b: b"% done" in b, timeout=60)
        assert b"gc (GradCheck): 0.0% done" in text, text
        assert b"gc.samples: samples=0 checks all 2,097,152 elements" in text, text
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        proc.wait(timeout=20)
        stopped = time.monotonic() - t0
        text = read_until(lambda b: False, timeout=0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 130, text
    assert stopped < 20
    assert b"Traceback" not in text
    tail = text.rsplit(b"\r\x1b[K", 1)[1]  # after the erased progress line
    assert tail == b"gradblocks: interrupted (files being written are left as they were)\r\n"
    assert out.read_bytes() == b"the previous results"
    assert proc.stdout.read() == b""  # no table: the run did not finish


def test_the_progress_line_is_rewritten_a_few_times_a_second_and_erased():
    """:class:`engine.cli.progress.StepProgress` on a fake clock: the first fraction shows, the
    rest at most 4 times a second with the time left once a second has passed, the end (and a
    stop) erases the line; a label's control characters are escaped."""
    import io

    from engine.cli.progress import ERASE, StepProgress

    now = [100.0]
    stream = io.StringIO()
    report = StepProgress(stream, lambda n: f"{n}\x1b[31m (GradCheck)", clock=lambda: now[0])
    writes = []
    for k in range(201):  # the executor's 200 steps over 10 s
        now[0] = 100.0 + k * 0.05
        before = stream.tell()
        report("gc", k / 200)
        if stream.tell() != before:
            writes.append(stream.getvalue()[before:])
    assert writes[0] == f"{ERASE}gc\\x1b[31m (GradCheck): 0.0% done"
    assert writes[-1] == ERASE  # the end erases the line
    assert len(writes) == 10 * 4 + 1  # every 0.25 s from the first (0.0), then the end
    assert writes[25].startswith(f"{ERASE}gc\\x1b[31m (GradCheck): 62.5% done, about 4 s left")
    with StepProgress(stream, str, clock=lambda: 0.0) as stopped:  # Ctrl+C in the block
        stopped("gc", 0.25)
        assert not stream.getvalue().endswith(ERASE)
    assert stream.getvalue().endswith(f"25.0% done{ERASE}")


def test_a_run_with_stderr_piped_says_the_cost_and_draws_no_progress(tmp_path):
    """Not a terminal: ``run`` prints the cost warning before running, and no progress line."""
    path = tmp_path / "mid.gbc.json"
    save_canvas(gradcheck_canvas([1, 6, 6, 2], [2, 2, 2, 2], "filter", 0), path)
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "PASS" in proc.stdout or "FAIL" in proc.stdout
