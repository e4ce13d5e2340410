"""Live state of the open canvas: the compiled plan (shapes, errors), pending invalid edits,
the last run's outputs, times and errors; pushes all of it onto the nodes.

After every Document change the canvas is recompiled (shape inference, no running). Results are
kept with the cache key of the plan step that made them; a result whose node's current key
differs (an attribute the run reads changed, an input changed, a file it reads changed) or whose
node is now invalid is *stale*: still shown, greyed and labelled, until the block runs again. The
key is the executor's cache key, so the app and the engine share one rule (an inactive
attribute changes nothing; a rewritten .npy file does). Files the plan reads are watched, so a
rewritten file is noticed without an edit.

Opening another canvas (or New) cancels a run of the old one; what it delivers is dropped.

Log messages name blocks by title (:mod:`engine.graph.labels`); the node id travels with each
message as data (the ``log`` signal's third argument: the log entry's click target and tooltip).

Auto-run (:attr:`Session.auto_run`): after a change, when every block to recompute ran before in
under :data:`AUTO_RUN_SECONDS` in total, a run starts by itself after :data:`AUTO_RUN_DELAY_MS`.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6 import QtCore

from app.document import Change, Document
from app.node_decorations import Decorator, RunInfo, compute_look
from app.pending_edits import PendingEdits
from app.run_summary import element_counts, run_summary
from app.run_worker import RunController
from blocks.registry import get_spec
from blocks.spec import read_paths

#: Auto-run re-runs what changed when those blocks' last runs took less than this in total.
AUTO_RUN_SECONDS = 0.2
#: Auto-run waits this long after the last edit (typing in a cell, dragging a value).
AUTO_RUN_DELAY_MS = 150


class Session(PendingEdits, QtCore.QObject):
    """Plan, pending edits (:class:`app.pending_edits.PendingEdits`) and results of the
    Document shown by a GraphAdapter."""

    plan_changed = QtCore.Signal(object)  # Plan
    results_changed = QtCore.Signal()
    log = QtCore.Signal(str, str, object)  # message, level, node id or None
    pending_changed = QtCore.Signal(str)  # node id
    run_summary = QtCore.Signal(str, bool)  # "3 ok, 1 skipped (invalid: dW), 0 failed", cancelled

    def __init__(self, doc: Document, adapter, runner: RunController | None = None,
                 parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.doc, self.adapter = doc, adapter
        self.decorator = Decorator(adapter)
        self.runner = runner or RunController(parent=self)
        self.plan = None
        self.compile_seconds = 0.0
        self.pending: dict[str, dict[str, tuple[str, str]]] = {}  # node -> attr -> (raw, msg)
        self.outputs: dict[tuple[str, str], object] = {}
        #: Axis names of each held output, from the plan that made it (a block made invalid
        #: since has none in the current plan; its stale result keeps its layout).
        self.output_axes: dict[tuple[str, str], tuple[str, ...] | None] = {}
        self.run_info: dict[str, RunInfo] = {}
        #: Cache key of the plan step each node's shown result (or run error) came from.
        self.result_keys: dict[str, str] = {}
        #: The last computed (not cached) run time of each node, for auto-run, and how many
        #: output elements it made then (a block made bigger is expected to take longer).
        self.last_seconds: dict[str, float] = {}
        self.last_elements: dict[str, int] = {}
        self.auto_run = False
        self._auto_timer = QtCore.QTimer(self)
        self._auto_timer.setSingleShot(True)
        self._auto_timer.setInterval(AUTO_RUN_DELAY_MS)
        self._auto_timer.timeout.connect(self._auto_run_now)
        self._watcher = QtCore.QFileSystemWatcher(self)
        self._watcher.fileChanged.connect(self._on_file_changed)
        self._known_errors: set[str] = set()
        self._running_node: str | None = None
        self._run_started = 0.0
        self._run_plan = None
        self._run_order: list[str] = []
        #: Counts opened canvases: a run's results belong to the canvas it started on.
        self._canvas_generation = 0
        self._run_generation = 0
        self.runner.progress.connect(self._on_progress)
        self.runner.finished.connect(self._on_run_finished)
        self.runner.crashed.connect(self._on_run_crashed)
        doc.changed.connect(self._on_doc_changed)
        self.recompile()

    # --- compile ---------------------------------------------------------------------------
    def _on_doc_changed(self, change: Change) -> None:
        if change.reloaded:
            self._canvas_generation += 1  # a run of the old canvas delivers nothing here
            if self.runner.running:
                self.runner.cancel()
                self.log.emit("run cancelled: another canvas was opened", "warning", None)
            self.outputs.clear()
            self.output_axes.clear()
            self.run_info.clear()
            self.result_keys.clear()
            self.last_seconds.clear()
            self.last_elements.clear()
            self.pending.clear()
            self._known_errors.clear()
        else:
            alive = self.doc.canvas.nodes
            for key in [k for k in self.outputs if k[0] not in alive]:
                del self.outputs[key]
                self.output_axes.pop(key, None)
            for table in (self.run_info, self.result_keys, self.last_seconds,
                          self.last_elements, self.pending):
                for nid in [n for n in table if n not in alive]:
                    del table[nid]
        self._recompile_and_show()

    def _recompile_and_show(self) -> None:
        before = self.stale_nodes()
        self.recompile()
        if self.stale_nodes() != before or not self.outputs:
            self.results_changed.emit()
        self._schedule_auto_run()

    def recompile(self) -> None:
        """Infer shapes and errors of the whole canvas and update every node's look."""
        t0 = time.perf_counter()
        self.plan = self.runner.executor.compile(self.doc.canvas, base_dir=self.doc.base_dir)
        self.compile_seconds = time.perf_counter() - t0
        self._watch_files()
        self._log_new_errors()
        self.refresh()
        self.plan_changed.emit(self.plan)

    # --- staleness -------------------------------------------------------------------------
    def plan_keys(self) -> dict[str, str]:
        """The current cache key of every node the plan can run."""
        return {step.node_id: step.key for step in self.plan.steps} if self.plan else {}

    def stale_reason(self, node_id: str, keys: dict[str, str] | None = None) -> str | None:
        """Why the node's shown result (or run error) is not current, or None when it is (or
        there is none): ``"invalid: <problem>"`` or ``"changed since it ran"``. ``keys``:
        :meth:`plan_keys`, when the caller has them."""
        held = self.result_keys.get(node_id)
        if held is None or self.plan is None:
            return None
        if node_id in self.pending or node_id in self.plan.errors:
            errors = self.node_errors(node_id)
            return "invalid: " + (errors[0] if errors else "the block has a problem")
        key = (self.plan_keys() if keys is None else keys).get(node_id)
        if key == held:
            return None
        return "changed since it ran" if key is not None else "not in the current run"

    def stale_nodes(self) -> dict[str, str]:
        """Node -> why its shown result is stale, for every node with a stale result."""
        keys = self.plan_keys()
        out = {}
        for nid, held in self.result_keys.items():
            if keys.get(nid) != held or nid in self.pending:
                reason = self.stale_reason(nid, keys)
                if reason is not None:
                    out[nid] = reason
        return out

    def _watch_files(self) -> None:
        """Watch the files the plan reads (a rewritten .npy makes its reader stale)."""
        wanted = set()
        for step in self.plan.steps if self.plan else ():
            wanted.update(p for p in read_paths(step.spec, step.attrs) if Path(p).is_file())
        watched = set(self._watcher.files())
        if watched - wanted:
            self._watcher.removePaths(sorted(watched - wanted))
        if wanted - watched:
            self._watcher.addPaths(sorted(wanted - watched))

    def _on_file_changed(self, path: str) -> None:
        """A read file changed (or was replaced: watch it again): recompile, keys follow."""
        self._watcher.removePath(path)
        self._recompile_and_show()

    # --- auto-run --------------------------------------------------------------------------
    def to_compute(self) -> list[str]:
        """Nodes of the current plan whose outputs are not in the executor's cache."""
        cached = set(self.runner.executor.cached_keys())
        return [s.node_id for s in self.plan.steps if s.key not in cached] if self.plan else []

    def auto_run_due(self) -> bool:
        """True when auto-run should run now: something to compute, every such block ran
        before (its time known) and their expected times add up to under AUTO_RUN_SECONDS. A
        block's expected time is its last one, times how many times more output elements it
        makes now (a shape typed 1000x bigger is not a fast block any more)."""
        nodes = self.to_compute()
        if not nodes or any(n not in self.last_seconds for n in nodes):
            return False
        expected, counts = 0.0, element_counts(self.plan)
        for n in nodes:
            then, now = self.last_elements.get(n, 0), counts.get(n, 0)
            expected += self.last_seconds[n] * (max(1.0, now / then) if then else 1.0)
        return expected < AUTO_RUN_SECONDS

    def _schedule_auto_run(self) -> None:
        if self.auto_run and self.auto_run_due():
            self._auto_timer.start()  # restarts: debounced

    def _auto_run_now(self) -> None:
        if not self.auto_run:
            return
        if self.runner.running:  # try again when this run ends
            return
        if self.auto_run_due():
            self.run(auto=True)

    def _log_new_errors(self) -> None:
        """Log each new problem of the plan, and each new warning (a GradCheck estimated to
        take long: :attr:`engine.graph.compiler.Plan.warnings`, as ``gradblocks check`` prints
        them)."""
        current = set()
        for table, level in ((self.plan.errors, "error"), (self.plan.warnings, "warning")):
            for nid, errs in table.items():
                for err in errs:
                    text = str(err)
                    current.add(text)
                    if text not in self._known_errors:
                        self.log.emit(text, level, nid)
        self._known_errors = current

    def refresh(self) -> None:
        """Recompute and apply the look of every node (cheap when nothing changed)."""
        canvas = self.doc.canvas
        incoming: dict[str, dict[str, tuple[str, str]]] = {}
        for e in canvas.edges:
            incoming.setdefault(e.dst[0], {})[e.dst[1]] = tuple(e.src)
        looks = {}
        stale = self.stale_nodes()
        for nid, node in canvas.nodes.items():
            pending = {a: f"{msg}\n{self.last_valid_note(nid, a)}"
                       for a, (_raw, msg) in self.pending.get(nid, {}).items()}
            looks[nid] = compute_look(node, self.plan, pending, self.run_info.get(nid),
                                      incoming.get(nid, {}), running=nid == self._running_node,
                                      stale=stale.get(nid))
        self.decorator.apply(looks)

    def node_errors(self, node_id: str) -> list[str]:
        msgs = [m for _raw, m in self.pending.get(node_id, {}).values()]
        if self.plan is not None:
            msgs += [str(e) for e in self.plan.errors.get(node_id, []) if str(e) not in msgs]
        info = self.run_info.get(node_id)
        if info is not None and info.error:
            msgs.append(f"run failed: {info.error}")
        return msgs

    # --- running ---------------------------------------------------------------------------
    def run(self, auto: bool = False) -> bool:
        """Run the canvas in the background (False when a run is already going)."""
        if self.runner.running:
            return False
        self._auto_timer.stop()
        plan = self.runner.executor.compile(self.doc.canvas, base_dir=self.doc.base_dir)
        for nid, attrs in self.pending.items():
            for attr in attrs:
                self.log.emit(f"{plan.label(nid)}.{attr} has an invalid edit: running with the "
                              f"last valid value {self.last_valid_value(nid, attr)}", "warning",
                              nid)
        to_compute = set(self.to_compute())
        for nid, warnings in plan.warnings.items():
            if nid in to_compute:  # a cached result costs nothing
                for warning in warnings:
                    self.log.emit(str(warning), "warning", nid)
        self._run_started = time.perf_counter()
        self._run_order = [step.node_id for step in plan.steps]
        self._run_plan = plan
        self._run_generation = self._canvas_generation
        if not self.runner.start(plan):
            return False
        self._running_node = self._run_order[0] if self._run_order else None
        self.refresh()
        self.log.emit(f"{'auto-run' if auto else 'run'} started: {len(plan.steps)} block(s)",
                      "info", None)
        return True

    def cancel(self) -> None:
        if self.runner.running:
            self.runner.cancel()
            self.log.emit("cancelling…", "warning", None)

    def _on_progress(self, node_id: str, done: int, total: int) -> None:
        """``node_id`` finished (the ``done``-th of ``total``): mark the next one as running."""
        order = self._run_order
        self._running_node = order[done] if done < len(order) else None
        self.refresh()

    def _on_run_finished(self, result) -> None:
        self._running_node = None
        if self._run_generation != self._canvas_generation:  # its canvas was replaced
            self.run_summary.emit("cancelled", True)
            self.refresh()
            return
        alive = self.doc.canvas.nodes
        ran_keys = {s.node_id: s.key for s in self._run_plan.steps} if self._run_plan else {}
        skip = {nid for nid in result.times if nid not in alive} | {
            nid for nid in result.errors if nid not in alive}
        for nid in (set(result.times) | set(result.errors)) - skip:
            # a new result replaces the old one (and is stale itself if edited meanwhile)
            for key in [k for k in self.outputs if k[0] == nid]:
                del self.outputs[key]
                self.output_axes.pop(key, None)
            self.result_keys[nid] = ran_keys.get(nid, "")
        for key, value in result.outputs.items():
            if key[0] not in skip:
                self.outputs[key] = value
                spec = self._run_plan.specs.get(key) if self._run_plan else None
                self.output_axes[key] = getattr(spec, "axes", None)
        computed = set(getattr(result, "computed", set()))
        counts = element_counts(self._run_plan)
        for nid, seconds in result.times.items():
            if nid not in skip:
                self.run_info[nid] = RunInfo(seconds=seconds, cached=nid not in computed)
                if nid in computed:
                    self.last_seconds[nid] = seconds
                    self.last_elements[nid] = counts.get(nid, 0)
        for nid, message in result.errors.items():
            if nid not in skip:
                self.run_info[nid] = RunInfo(error=message)
                label = self._run_plan.label(nid) if self._run_plan else self.label(nid)
                self.log.emit(f"{label}: {message}", "error", nid)
        elapsed = time.perf_counter() - self._run_started
        summary = run_summary(result, self._run_plan, self.doc.canvas)
        if result.cancelled:
            self.log.emit(f"run cancelled after {elapsed:.2f} s: {summary}", "warning", None)
        else:
            level = "error" if result.errors else "ok"
            self.log.emit(f"run finished in {elapsed:.2f} s: {summary}, "
                          f"{len(computed)} recomputed", level, None)
        self.run_summary.emit("cancelled" if result.cancelled else summary, result.cancelled)
        self.refresh()
        self.results_changed.emit()
        if not result.cancelled:
            self._schedule_auto_run()  # edits made during the run

    def _on_run_crashed(self, message: str) -> None:
        self._running_node = None
        self.log.emit(f"run stopped by an internal error: {message}", "error", None)
        self.refresh()

    def axes(self, node_id: str, port: str) -> tuple[str, ...] | None:
        """Axis names of the node's output as shown: those of the held result (the plan that
        made it), else those the current plan infers."""
        if (node_id, port) in self.output_axes:
            return self.output_axes[(node_id, port)]
        spec = self.plan.specs.get((node_id, port)) if self.plan is not None else None
        return getattr(spec, "axes", None)

    def label(self, node_id: str) -> str:
        """How a person reads ``node_id``: its title (``title (id)`` when titles collide), from
        the plan of the current canvas (O(1))."""
        return self.plan.label(node_id) if self.plan is not None else node_id

    def output(self, node_id: str, port: str | None = None):
        """(port, array) of a node's last output (its first output port by default)."""
        if port is not None:
            return port, self.outputs.get((node_id, port))
        node = self.doc.canvas.nodes.get(node_id)
        if node is None:
            return None, None
        for p in get_spec(node.type).outputs:
            if (node_id, p.name) in self.outputs:
                return p.name, self.outputs[(node_id, p.name)]
        outs = get_spec(node.type).outputs
        return (outs[0].name if outs else None), None
