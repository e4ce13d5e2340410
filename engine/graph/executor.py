"""Runs a compiled :class:`~engine.graph.compiler.Plan`: progress, cancel, timings and a cache.

Each step's outputs are cached under the step's key (type, attributes, inputs' keys, files
read), so running again after one attribute edit recomputes only that node and what depends on
it. A failing block is recorded and its dependents are skipped (``skipped: input x (dy) failed``,
naming the failed block by its label, :mod:`engine.graph.labels`); independent blocks still run.
``RunResult`` is keyed by node id; its messages name blocks by label.

The cache is a byte-bounded LRU (:class:`OutputCache`, default :data:`DEFAULT_CACHE_BYTES`):
outputs the current plan does not use stay cached, so undoing an edit and running again is
served from the cache. Least recently used entries go when the cache passes its byte budget
(the outputs of the last plan run always stay: the plan's memory estimate already bounds them,
and running it again is then free), and before a run when the plan's memory estimate (which
counts every output the plan keeps, :mod:`engine.graph.budget`) plus the entries the plan does not
use would pass the memory limit.

Cached outputs are read-only arrays (``flags.writeable`` False): every caller (the app, the
CLI, :mod:`engine.api`) and every block that reads them gets the same arrays, so a caller
that writes into a result gets NumPy's ``assignment destination is read-only`` error instead of
changing what the next run returns.

Cancel is honoured between blocks and inside long blocks (:mod:`engine.base.cancel`: kernels and
source generation check between batch chunks); a block stopped that way is not an error, the
result is just ``cancelled``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from engine.base import cancel as cancellation
from engine.base.dtypes import dtype_name
from engine.base.errors import InvalidArgumentError
from engine.base.names import article
from engine.graph.budget import gib, limit_bytes
from engine.graph.compiler import DEFAULT_MEMORY_LIMIT, Plan, PortKey, compile_canvas

Progress = Callable[[str, int, int], None]
#: ``(node_id, fraction)`` from inside a running block (:func:`engine.base.cancel.progress`).
StepProgress = Callable[[str, float], None]


@dataclass
class RunResult:
    """Outputs of the blocks that ran (or came from the cache), their errors and wall times."""

    outputs: dict[PortKey, np.ndarray] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    computed: set[str] = field(default_factory=set)
    cancelled: bool = False


#: Default byte budget of the executor's output cache: 1 GiB.
DEFAULT_CACHE_BYTES = 2**30


@dataclass
class _Entry:
    outputs: dict[str, np.ndarray]
    seconds: float
    nbytes: int = 0


class OutputCache:
    """Step outputs by cache key, least recently used first, bounded in bytes (not
    thread-safe by itself: the executor holds its lock).

    Every operation is O(1) amortized (O(entries) when ``keep`` changes, once per run): the
    byte totals are kept as entries come and go, and the entries eviction may take (those not
    in ``keep``) have their own LRU list, so evicting never walks past the kept ones."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES):
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"the cache size must be a number of bytes >= 0, got "
                             f"{max_bytes!r}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        #: Keys of the entries not in ``_keep``, least recently used first: what may go.
        self._free: OrderedDict[str, None] = OrderedDict()
        self._keep: frozenset[str] = frozenset()
        self._kept_bytes = 0
        self.bytes = 0

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[str]:
        """Keys from least to most recently used."""
        return list(self._entries)

    def _set_keep(self, keep: frozenset[str]) -> None:
        """Make ``keep`` the entries eviction skips (O(entries) when it changes)."""
        if keep is self._keep or keep == self._keep:
            return
        self._keep = keep
        self._free = OrderedDict.fromkeys(k for k in self._entries if k not in keep)
        self._kept_bytes = sum(e.nbytes for k, e in self._entries.items() if k in keep)

    def get(self, key: str) -> _Entry | None:
        """The entry (now the most recently used) or None."""
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
            if key in self._free:
                self._free.move_to_end(key)
        return entry

    def put(self, key: str, entry: _Entry, keep: frozenset[str] = frozenset()) -> None:
        """Store ``entry`` as the most recently used, then evict down to the byte budget
        (never an entry in ``keep``, the plan being run)."""
        self._set_keep(keep)
        entry.nbytes = sum(int(np.asarray(v).nbytes) for v in entry.outputs.values())
        self._drop(key)
        self._entries[key] = entry
        self.bytes += entry.nbytes
        if key in self._keep:
            self._kept_bytes += entry.nbytes
        else:
            self._free[key] = None
        if self.bytes > self.max_bytes:  # else evict has nothing to do
            self.evict(self.max_bytes, keep)

    def _drop(self, key: str) -> _Entry | None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.bytes -= entry.nbytes
            if key in self._keep:
                self._kept_bytes -= entry.nbytes
            else:
                del self._free[key]
        return entry

    def evict(self, max_bytes: int, keep: frozenset[str] = frozenset(),
              only_free: bool = False) -> None:
        """Drop least recently used entries not in ``keep`` until the bytes of all entries
        (with ``only_free``, of the entries not in ``keep``) are at most ``max_bytes``."""
        self._set_keep(keep)
        while self._free and self.bytes - (self._kept_bytes if only_free else 0) > max_bytes:
            self._drop(next(iter(self._free)))

    def clear(self) -> None:
        self._entries.clear()
        self._free.clear()
        self._kept_bytes = 0
        self.bytes = 0


class Executor:
    """Runs plans, keeping each step's outputs by cache key across runs (an LRU of at most
    ``cache_bytes`` bytes besides the outputs of the last plan run, which are kept whatever
    their size)."""

    def __init__(self, memory_limit: int = DEFAULT_MEMORY_LIMIT,
                 cache_bytes: int = DEFAULT_CACHE_BYTES):
        self.memory_limit = limit_bytes(memory_limit)
        self._cache = OutputCache(cache_bytes)
        self._lock = threading.Lock()

    @property
    def cache_bytes(self) -> int:
        """The cache's byte budget."""
        return self._cache.max_bytes

    @cache_bytes.setter
    def cache_bytes(self, value: int) -> None:
        with self._lock:
            self._cache.max_bytes = OutputCache(value).max_bytes
            self._cache.evict(self._cache.max_bytes)

    def cached_keys(self) -> list[str]:
        """Cache keys held, least recently used first."""
        with self._lock:
            return self._cache.keys()

    def cached_bytes(self) -> int:
        with self._lock:
            return self._cache.bytes

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    def compile(self, canvas, base_dir=None) -> Plan:
        """:func:`~engine.graph.compiler.compile_canvas` with this executor's memory limit."""
        return compile_canvas(canvas, base_dir, self.memory_limit)

    def run(self, plan: Plan, progress: Progress | None = None,
            cancel: threading.Event | None = None,
            step_progress: StepProgress | None = None) -> RunResult:
        """Run every step of ``plan`` in order; ``progress(node_id, done, total)`` after each,
        and ``step_progress(node_id, fraction)`` from inside a long block that reports how far
        it is (GradCheck: rising fractions ending at 1.0, :func:`engine.base.cancel.progress`).
        With ``cancel`` set, the run stops before the next block or inside the current one
        (``result.cancelled``; the stopped block has no output and no error)."""
        result = RunResult()
        live = frozenset(s.key for s in plan.steps)
        self._make_room(plan, live)
        total = len(plan.steps)
        for index, step in enumerate(plan.steps):
            if cancel is not None and cancel.is_set():
                result.cancelled = True
                break
            failed = [f"{p} ({plan.label(src[0])})" for p, src in step.inputs.items()
                      if src[0] in result.errors]
            if failed:
                result.errors[step.node_id] = f"skipped: input {', '.join(failed)} failed"
            elif not self._run_step(step, plan, result, live, cancel, step_progress):
                result.cancelled = True
                break
            if progress is not None:
                progress(step.node_id, index + 1, total)
        with self._lock:  # the plan's own outputs stay: its next run is free
            self._cache.evict(self._cache.max_bytes, keep=live)
        return result

    def _make_room(self, plan: Plan, live: frozenset[str]) -> None:
        """Evict cached outputs ``plan`` does not use (least recently used first) until they
        and the plan's peak estimate fit the memory limit together."""
        room = max(0, self.memory_limit - plan.peak_bytes)
        with self._lock:
            self._cache.evict(room, keep=live, only_free=True)

    def _run_step(self, step, plan: Plan, result: RunResult, live: frozenset[str],
                  cancel: threading.Event | None,
                  step_progress: StepProgress | None = None) -> bool:
        """Run (or fetch from the cache) one step; False when it was cancelled."""
        with self._lock:
            entry = self._cache.get(step.key)
        if entry is None:
            inputs = {p: result.outputs[src] for p, src in step.inputs.items()}
            t0 = time.perf_counter()
            try:
                report = None if step_progress is None else partial(step_progress, step.node_id)
                with cancellation.scope(cancel, report):
                    outputs = step.spec.run(step.attrs, inputs)
                _check_outputs(step, plan, outputs)
            except cancellation.Cancelled:
                return False
            except InvalidArgumentError as err:
                result.errors[step.node_id] = str(err)
                return True
            except MemoryError:
                result.errors[step.node_id] = (
                    f"out of memory while running this block: the machine had less free memory "
                    f"than the run's memory limit {gib(self.memory_limit)}; lower the limit or "
                    f"free memory")
                return True
            except Exception as err:  # noqa: BLE001 - a bug in a block: report, keep the app alive
                result.errors[step.node_id] = internal_error(step.spec.type_id, err)
                return True
            entry = _Entry(_read_only(outputs), time.perf_counter() - t0)
            with self._lock:
                self._cache.put(step.key, entry, keep=live)
            result.computed.add(step.node_id)
        result.times[step.node_id] = entry.seconds
        for port, value in entry.outputs.items():
            result.outputs[(step.node_id, port)] = value
        return True


def internal_error(type_id: str, err: BaseException) -> str:
    """The message of an unexpected exception in a block: a bug to report, never a user's
    mistake (those are :class:`InvalidArgumentError`)."""
    what = str(err).rstrip(".")  # "I/O operation on closed file." ends with its own period
    return (f"internal error in {article(type_id)} block: {type(err).__name__}: {what}. This is a bug "
            f"in GradBlocks: please report it with the block type ({type_id}) and this message")


def _read_only(outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``outputs`` with every array made read-only: the cache hands the same arrays to every
    caller and to the blocks that read them, so none can change a cached value."""
    for value in outputs.values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return outputs


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
