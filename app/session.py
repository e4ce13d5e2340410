"""Live state of the open canvas: the compiled plan (shapes, errors), pending invalid edits,
the last run's outputs, times and errors; pushes all of it onto the nodes.

After every Document change the canvas is recompiled (shape inference, no running) and the
outputs of changed nodes and everything downstream are dropped, so a stale result is never shown.

Log messages name blocks by title (:mod:`engine.labels`); the node id travels with each message
as data (the ``log`` signal's third argument: the log entry's click target and tooltip).
"""

from __future__ import annotations

import time

from PySide6 import QtCore

from app.document import Change, Document
from app.node_decorations import Decorator, RunInfo, compute_look
from app.run_worker import RunController
from engine.labels import block_labels, label_list


class Session(QtCore.QObject):
    """Plan, pending edits and results of the Document shown by a GraphAdapter."""

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
        self.run_info: dict[str, RunInfo] = {}
        self._known_errors: set[str] = set()
        self._running_node: str | None = None
        self._dirty_during_run: set[str] = set()
        self._run_started = 0.0
        self._run_plan = None
        self._run_order: list[str] = []
        self.runner.progress.connect(self._on_progress)
        self.runner.finished.connect(self._on_run_finished)
        self.runner.crashed.connect(self._on_run_crashed)
        doc.changed.connect(self._on_doc_changed)
        self.recompile()

    # --- compile ---------------------------------------------------------------------------
    def _on_doc_changed(self, change: Change) -> None:
        if change.reloaded:
            self.outputs.clear()
            self.run_info.clear()
            self.pending.clear()
            self._known_errors.clear()
            dirty = set(self.doc.canvas.nodes)
        else:
            dirty = change.dirty_nodes()
            for key in [k for k in self.outputs if k[0] in dirty]:
                del self.outputs[key]
            for nid in dirty:
                self.run_info.pop(nid, None)
            for nid in [n for n in self.pending if n not in self.doc.canvas.nodes]:
                del self.pending[nid]
        if self.runner.running:
            self._dirty_during_run |= dirty
        self.recompile()
        if dirty:
            self.results_changed.emit()

    def recompile(self) -> None:
        """Infer shapes and errors of the whole canvas and update every node's look."""
        t0 = time.perf_counter()
        self.plan = self.runner.executor.compile(self.doc.canvas, base_dir=self.doc.base_dir)
        self.compile_seconds = time.perf_counter() - t0
        self._log_new_errors()
        self.refresh()
        self.plan_changed.emit(self.plan)

    def _log_new_errors(self) -> None:
        current = set()
        for nid, errs in self.plan.errors.items():
            for err in errs:
                text = str(err)
                current.add(text)
                if text not in self._known_errors:
                    self.log.emit(text, "error", nid)
        self._known_errors = current

    def refresh(self) -> None:
        """Recompute and apply the look of every node (cheap when nothing changed)."""
        canvas = self.doc.canvas
        incoming: dict[str, dict[str, tuple[str, str]]] = {}
        for e in canvas.edges:
            incoming.setdefault(e.dst[0], {})[e.dst[1]] = tuple(e.src)
        looks = {}
        for nid, node in canvas.nodes.items():
            pending = {a: msg for a, (_raw, msg) in self.pending.get(nid, {}).items()}
            looks[nid] = compute_look(node, self.plan, pending, self.run_info.get(nid),
                                      incoming.get(nid, {}), running=nid == self._running_node)
        self.decorator.apply(looks)

    # --- pending invalid edits -------------------------------------------------------------
    def set_pending(self, node_id: str, attr: str, raw: str, message: str) -> None:
        """Remember an invalid value typed into the panel: the node shows it as an error."""
        old = self.pending.get(node_id, {}).get(attr)
        self.pending.setdefault(node_id, {})[attr] = (raw, message)
        if old is None or old[1] != message:
            self.log.emit(message, "error", node_id)
        self.refresh()
        self.pending_changed.emit(node_id)

    def clear_pending(self, node_id: str, attr: str) -> None:
        attrs = self.pending.get(node_id)
        if attrs and attr in attrs:
            del attrs[attr]
            if not attrs:
                del self.pending[node_id]
            self.refresh()
            self.pending_changed.emit(node_id)

    def pending_for(self, node_id: str) -> dict[str, tuple[str, str]]:
        return dict(self.pending.get(node_id, {}))

    def node_errors(self, node_id: str) -> list[str]:
        msgs = [m for _raw, m in self.pending.get(node_id, {}).values()]
        if self.plan is not None:
            msgs += [str(e) for e in self.plan.errors.get(node_id, []) if str(e) not in msgs]
        info = self.run_info.get(node_id)
        if info is not None and info.error:
            msgs.append(f"run failed: {info.error}")
        return msgs

    # --- running ---------------------------------------------------------------------------
    def run(self) -> bool:
        """Run the canvas in the background (False when a run is already going)."""
        if self.runner.running:
            return False
        plan = self.runner.executor.compile(self.doc.canvas, base_dir=self.doc.base_dir)
        for nid, attrs in self.pending.items():
            for attr in attrs:
                self.log.emit(f"{plan.label(nid)}.{attr} has an invalid edit; running with the "
                              f"last valid value", "warning", nid)
        self._dirty_during_run = set()
        self._run_started = time.perf_counter()
        self._run_order = [step.node_id for step in plan.steps]
        self._run_plan = plan
        if not self.runner.start(plan):
            return False
        self._running_node = self._run_order[0] if self._run_order else None
        self.refresh()
        self.log.emit(f"run started: {len(plan.steps)} block(s)", "info", None)
        return True

    def cancel(self) -> None:
        if self.runner.running:
            self.runner.cancel()
            self.log.emit("cancelling after the current block…", "warning", None)

    def _on_progress(self, node_id: str, done: int, total: int) -> None:
        """``node_id`` finished (the ``done``-th of ``total``): mark the next one as running."""
        order = self._run_order
        self._running_node = order[done] if done < len(order) else None
        self.refresh()

    def _on_run_finished(self, result) -> None:
        self._running_node = None
        alive = self.doc.canvas.nodes
        skip = self._dirty_during_run | {nid for nid in result.times if nid not in alive} | {
            nid for nid in result.errors if nid not in alive}
        for key, value in result.outputs.items():
            if key[0] not in skip:
                self.outputs[key] = value
        computed = set(getattr(result, "computed", set()))
        for nid, seconds in result.times.items():
            if nid not in skip:
                self.run_info[nid] = RunInfo(seconds=seconds, cached=nid not in computed)
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

    def _on_run_crashed(self, message: str) -> None:
        self._running_node = None
        self.log.emit(f"run stopped by an internal error: {message}", "error", None)
        self.refresh()

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
        from blocks.registry import get_spec

        for p in get_spec(node.type).outputs:
            if (node_id, p.name) in self.outputs:
                return p.name, self.outputs[(node_id, p.name)]
        outs = get_spec(node.type).outputs
        return (outs[0].name if outs else None), None


def run_summary(result, plan, canvas) -> str:
    """``"3 ok, 1 skipped (invalid: dW), 0 failed"``: blocks that ran or came from the cache,
    blocks not run (invalid in the plan, or after a failed input), and blocks that failed, named
    by title (:mod:`engine.labels`; the id where a node is gone)."""
    labels = block_labels(canvas)
    ok = [n for n in result.times if n not in result.errors]
    after_failure = [n for n, m in result.errors.items() if m.startswith("skipped")]
    failed = [n for n in result.errors if n not in after_failure]
    invalid = list(plan.errors) if plan is not None else []
    parts = []
    if invalid:
        parts.append(f"invalid: {label_list(labels, invalid)}")
    if after_failure:
        parts.append(f"after a failed input: {label_list(labels, after_failure)}")
    skipped = len(invalid) + len(after_failure)
    text = f"{len(ok)} ok, {skipped} skipped" + (f" ({'; '.join(parts)})" if parts else "")
    return text + f", {len(failed)} failed" + (f" ({label_list(labels, failed)})" if failed
                                               else "")
