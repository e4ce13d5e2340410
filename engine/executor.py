"""Runs a compiled :class:`~engine.compiler.Plan`: progress, cancel, timings and a cache.

Each step's outputs are cached under the step's key (type, attributes, inputs' keys, files
read), so running again after one attribute edit recomputes only that node and what depends on
it. A failing block is recorded and its dependents are skipped (``skipped: input x (dy) failed``,
naming the failed block by its label, :mod:`engine.labels`); independent blocks still run.
``RunResult`` is keyed by node id; its messages name blocks by label.
Cancel is honoured between blocks. A run first drops the cached outputs the plan cannot reuse,
so that memory is free before anything is computed (the plan's memory estimate counts every
output it keeps, :mod:`engine.memory`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engine.compiler import DEFAULT_MEMORY_LIMIT, Plan, PortKey, compile_canvas
from engine.dtypes import dtype_name
from engine.errors import InvalidArgumentError
from engine.memory import gib, limit_bytes

Progress = Callable[[str, int, int], None]


@dataclass
class RunResult:
    """Outputs of the blocks that ran (or came from the cache), their errors and wall times."""

    outputs: dict[PortKey, np.ndarray] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    computed: set[str] = field(default_factory=set)
    cancelled: bool = False


@dataclass
class _Entry:
    outputs: dict[str, np.ndarray]
    seconds: float


class Executor:
    """Runs plans, keeping each step's outputs by cache key across runs."""

    def __init__(self, memory_limit: int = DEFAULT_MEMORY_LIMIT):
        self.memory_limit = limit_bytes(memory_limit)
        self._cache: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    def compile(self, canvas, base_dir=None) -> Plan:
        """:func:`~engine.compiler.compile_canvas` with this executor's memory limit."""
        return compile_canvas(canvas, base_dir, self.memory_limit)

    def run(self, plan: Plan, progress: Progress | None = None,
            cancel: threading.Event | None = None) -> RunResult:
        """Run every step of ``plan`` in order; ``progress(node_id, done, total)`` after each."""
        result = RunResult()
        self._keep_only(plan)
        total = len(plan.steps)
        for index, step in enumerate(plan.steps):
            if cancel is not None and cancel.is_set():
                result.cancelled = True
                break
            failed = [f"{p} ({plan.label(src[0])})" for p, src in step.inputs.items()
                      if src[0] in result.errors]
            if failed:
                result.errors[step.node_id] = f"skipped: input {', '.join(failed)} failed"
            else:
                self._run_step(step, plan, result)
            if progress is not None:
                progress(step.node_id, index + 1, total)
        self._keep_only(plan)
        return result

    def _keep_only(self, plan: Plan) -> None:
        """Drop the cached outputs ``plan`` cannot reuse."""
        with self._lock:
            live = {s.key for s in plan.steps}
            self._cache = {k: v for k, v in self._cache.items() if k in live}

    def _run_step(self, step, plan: Plan, result: RunResult) -> None:
        with self._lock:
            entry = self._cache.get(step.key)
        if entry is None:
            inputs = {p: result.outputs[src] for p, src in step.inputs.items()}
            t0 = time.perf_counter()
            try:
                outputs = step.spec.run(step.attrs, inputs)
                _check_outputs(step, plan, outputs)
            except InvalidArgumentError as err:
                result.errors[step.node_id] = str(err)
                return
            except MemoryError:
                result.errors[step.node_id] = (
                    f"out of memory while running this block: the machine had less free memory "
                    f"than the run's memory limit {gib(self.memory_limit)}; lower the limit or "
                    f"free memory")
                return
            except Exception as err:  # noqa: BLE001 - a bug in a block: report, keep the app alive
                result.errors[step.node_id] = internal_error(step.spec.type_id, err)
                return
            entry = _Entry(outputs, time.perf_counter() - t0)
            with self._lock:
                self._cache[step.key] = entry
            result.computed.add(step.node_id)
        result.times[step.node_id] = entry.seconds
        for port, value in entry.outputs.items():
            result.outputs[(step.node_id, port)] = value


def internal_error(type_id: str, err: BaseException) -> str:
    """The message of an unexpected exception in a block: a bug to report, never a user's
    mistake (those are :class:`InvalidArgumentError`)."""
    return (f"internal error in a {type_id} block: {type(err).__name__}: {err}. This is a bug "
            f"in GradBlocks: please report it with the block type ({type_id}) and this message")


def _check_outputs(step, plan: Plan, outputs: dict[str, np.ndarray]) -> None:
    """The run must give exactly the inferred shapes and dtypes (a mismatch is an engine bug,
    reported as an internal error)."""
    for port in step.spec.output_names():
        expected = plan.specs[(step.node_id, port)]
        actual = np.asarray(outputs[port])
        if tuple(actual.shape) != tuple(expected.shape) or \
                dtype_name(actual.dtype) != expected.dtype:
            raise RuntimeError(f"output {port} is {list(actual.shape)} "
                               f"{dtype_name(actual.dtype)} but {expected.describe()} was "
                               f"inferred")
