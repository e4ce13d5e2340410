"""The bottom dock around the tensor viewer: shows the selected node's output, or compares two.

One selected node shows its output port (a port picker appears for blocks with several outputs).
A block with a ``view_pair`` (GradCheck) shows that pair first, compared: the
tensor wired into its input beside its output, their difference mapping the error.
Two selected nodes are compared side by side. "Pin" (a toggle) keeps the current tensor so that the
same node after an attribute change (or another node) is compared against it; opening another
canvas drops the pin. Captions, statistics and compare headers name blocks by their titles; the
internal ``node_id.port`` is in tooltips, and in :attr:`ViewerDock.shown`.

A result that is no longer current (:meth:`Session.stale_reason`) stays shown, greyed, its caption
starting with "stale: <why>" (:attr:`ViewerDock.stale`). The statistics and histogram of a tensor
of more than :data:`BACKGROUND_ELEMENTS` elements are computed on a worker thread (seconds for a
256 MiB tensor), so the window stays responsive; the tensor appears when they are ready.
"""

from __future__ import annotations

import weakref
from concurrent.futures import Future

import numpy as np
from PySide6 import QtCore, QtWidgets

from app.background import DaemonWorker
from app.document import Change
from app.message_label import MessageLabel
from app.stale_veil import StaleVeil
from app.viewer.tensor_viewer import PairSummary, Summary, TensorViewer, summarize, summarize_pair
from blocks.gradcheck import sampled_mask
from blocks.registry import get_spec
from engine.view.stats import diff_stats, tensor_stats

#: a pressed Pin reads as pressed in the dark theme too
PIN_STYLE = ("QToolButton#pin_button { padding: 2px 8px; }"
             "QToolButton#pin_button:checked { background: #2f78a0; color: white; "
             "border: 1px solid #6ab0d8; border-radius: 3px; }")
#: Tensors with more elements than this are summarized on a worker thread.
BACKGROUND_ELEMENTS = 1 << 22
#: The port picker's entry for a block's ``view_pair`` (its item data).
PAIR = "view_pair"
#: Summaries kept (by array identity), so reselecting a big tensor shows it at once.
SUMMARIES_KEPT = 4
_pool = DaemonWorker("gradblocks-summary")  # not waited for at exit


class ViewerDock(QtWidgets.QWidget):
    """Header (what is shown, port picker, pin) above the TensorViewer."""

    def __init__(self, session, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.viewer = TensorViewer(self)
        self.viewer.setObjectName("tensor_viewer")
        self.caption = MessageLabel("Select a block to see its output.", self)
        self.caption.setObjectName("viewer_caption")
        self.caption.setStyleSheet("color: #a0a6ad;")
        self.port_combo = QtWidgets.QComboBox(self)
        self.port_combo.setToolTip("Output port to show")
        self.port_combo.hide()
        self.port_combo.activated.connect(lambda _i: self.update_view())
        self.pin_button = QtWidgets.QToolButton(self)
        self.pin_button.setObjectName("pin_button")
        self.pin_button.setCheckable(True)
        self.pin_button.setStyleSheet(PIN_STYLE)
        self.pin_button.toggled.connect(self._pin_toggled)
        head = QtWidgets.QHBoxLayout()
        head.setContentsMargins(4, 2, 4, 0)
        head.addWidget(self.caption, 1)
        head.addWidget(self.port_combo)
        head.addWidget(self.pin_button)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(head)
        lay.addWidget(self.viewer, 1)
        self.selection: list[str] = []
        #: (title, node_id.port, tensor, axes) of the pinned tensor
        self.pinned: tuple[str, str, np.ndarray, tuple | None] | None = None
        #: node_id.port of what is shown (the pinned one first)
        self.shown: tuple[str, ...] = ()
        self._titles_shown: dict[str, str] = {}  # node id -> title used in what is shown
        self._show_pin_state()
        #: Why the shown result is stale ("" when it is current or nothing is shown).
        self.stale = ""
        self._grey = StaleVeil(self.viewer)  # greys a stale result
        # (weak reference to the array, its summary): never keeps a dropped result alive
        self._summaries: list[tuple[weakref.ref, Summary]] = []
        self._pending: tuple[np.ndarray, Future] | None = None
        # the same for compared pairs: (weak a, weak b, summary), and the one being computed
        self._pair_summaries: list[tuple[weakref.ref, weakref.ref, PairSummary]] = []
        self._pending_pair: tuple[np.ndarray, np.ndarray, Future] | None = None
        self._poll = QtCore.QTimer(self)
        self._poll.setInterval(20)
        self._poll.timeout.connect(self._check_summary)
        session.results_changed.connect(self.update_view)
        # a message shown instead of a tensor (an error, "no output yet") follows every edit
        session.plan_changed.connect(lambda _p: self.shown or self.update_view())
        session.doc.changed.connect(self._on_doc_changed)

    def show_selection(self, node_ids: list[str]) -> None:
        self.selection = list(node_ids)
        self._fill_ports()
        self.update_view()

    def _fill_ports(self) -> None:
        self.port_combo.blockSignals(True)
        self.port_combo.clear()
        if len(self.selection) == 1 and self.selection[0] in self.session.doc.canvas.nodes:
            node = self.session.doc.canvas.nodes[self.selection[0]]
            spec = get_spec(node.type)
            ports = [p.name for p in spec.outputs]
            if spec.view_pair is not None:  # first and default: the pair (BlockSpec.view_pair)
                self.port_combo.addItem(" vs ".join(spec.view_pair), PAIR)
            self.port_combo.addItems(ports)
            self.port_combo.setVisible(self.port_combo.count() > 1)
        else:
            self.port_combo.hide()
        self.port_combo.blockSignals(False)

    def _axes(self, node_id: str, port: str):
        return self.session.axes(node_id, port)  # a stale result keeps the layout it had

    def _pair_chosen(self) -> bool:
        return len(self.selection) == 1 and self.port_combo.currentData() == PAIR

    def _current(self, node_id: str):
        port = self.port_combo.currentText() if len(self.selection) == 1 else None
        if self._pair_chosen():
            port = None  # the block's own output where one tensor is wanted (pin, compare)
        port, arr = self.session.output(node_id, port or None)
        return port, arr

    def _title(self, node_id: str, port: str) -> str:
        """What a person reads for a node's output: its title (and the port when it has
        several)."""
        node = self.session.doc.canvas.nodes.get(node_id)
        if node is None:
            return f"{node_id}.{port}"
        title = self._titles_shown[node_id] = node.title or node_id
        return title if len(get_spec(node.type).outputs) <= 1 else f"{title} · {port}"

    def update_view(self) -> None:
        self._titles_shown = {}
        sel = [n for n in self.selection if n in self.session.doc.canvas.nodes]
        if self.pinned is not None and len(sel) <= 1:
            label, source, pinned, axes = self.pinned
            if sel:
                port, arr = self._current(sel[0])
                if arr is not None:
                    self._compare((label, source, pinned),
                                  (self._title(sel[0], port), f"{sel[0]}.{port}", arr), axes)
                    return
            self.viewer.show_tensor(pinned, axes=axes, title=label, source=source)
            self._caption(f"Pinned {label}: select a block to compare against it.", (source,))
            return
        if len(sel) == 2:
            (pa, a), (pb, b) = self._current(sel[0]), self._current(sel[1])
            if a is not None and b is not None:
                self._compare((self._title(sel[0], pa), f"{sel[0]}.{pa}", a),
                              (self._title(sel[1], pb), f"{sel[1]}.{pb}", b),
                              self._axes(sel[0], pa))
                self._mark_stale(*sel)
                return
            self._empty("Run the canvas to compare the outputs of the two selected blocks.",
                        body="No results to compare yet.")
            return
        if len(sel) != 1:
            self._empty("Select a block to see its output (two blocks to compare them)."
                        if not sel else f"{len(sel)} blocks selected: select one or two.")
            return
        nid = sel[0]
        if self._pair_chosen() and self._show_pair(nid):
            return
        port, arr = self._current(nid)
        node = self.session.doc.canvas.nodes[nid]
        name = self._titles_shown[nid] = node.title or nid
        if arr is None:
            errors = self.session.node_errors(nid)
            self._empty(f"{name}: " + (errors[0] if errors else "no output yet — press F5 to run."),
                        f"{nid}.{port}",
                        "No result: see the message above." if errors
                        else "No result yet: press F5 to run.")
            return
        source = f"{nid}.{port}"
        caption = f"{name} · {get_spec(node.type).title} · port {port}"
        summary = self._summary(arr)
        if summary is None and arr.size > BACKGROUND_ELEMENTS:
            self.viewer.clear()
            self._caption(f"{caption} · computing the statistics of {arr.size:,} values…",
                          (source,))
            self._mark_stale(nid)
            return
        self.viewer.show_tensor(arr, axes=self._axes(nid, port), title=self._title(nid, port),
                                source=source, summary=summary)
        self._caption(caption, (source,))
        self._mark_stale(nid)

    def _show_pair(self, nid: str) -> bool:
        """Compare the block's ``view_pair``: the tensor wired into its input (left) with its
        output (right); False (nothing shown) until both exist."""
        inp, out = get_spec(self.session.doc.canvas.nodes[nid].type).view_pair
        src = self.session.doc.canvas.inputs_of(nid).get(inp)
        a = self.session.outputs.get(tuple(src)) if src is not None else None
        b = self.session.outputs.get((nid, out))
        if a is None or b is None or np.shape(a) != np.shape(b):
            return False
        node = self.session.doc.canvas.nodes[nid]
        name = self._titles_shown[nid] = node.title or nid
        shown = (f"{src[0]}.{src[1]}", f"{nid}.{out}")
        sampled = sampled_mask(np.shape(b), node.attrs)
        # an element not sampled has no number to differ from: not a NaN/Inf mismatch
        summary = PairSummary(tensor_stats(a), tensor_stats(b),
                              diff_stats(np.where(sampled, a, np.nan), b))
        self.viewer.compare(a, b, f"{name} · {inp}", f"{name} · {out}", self._axes(nid, out),
                            sources=shown, summary=summary)
        count = int(np.count_nonzero(sampled))
        note = "" if count == sampled.size else f"; {count:,} of {sampled.size:,} elements sampled"
        self._caption(f"{name}: {inp} (left) vs {out} (right){note}; the difference maps the "
                      "error (blank where not sampled)", shown)
        self._mark_stale(nid)
        return True

    def _summary(self, arr: np.ndarray) -> Summary | None:
        """The summary of ``arr`` if known; a big array's is started on the worker thread."""
        for known, summary in self._summaries:
            if known() is arr:
                return summary
        if arr.size <= BACKGROUND_ELEMENTS:
            return None
        if self._pending is None or self._pending[0] is not arr:
            self._pending = (arr, _pool.submit(summarize, arr))
            self._poll.start()
        return None

    def _pair_summary(self, a: np.ndarray, b: np.ndarray) -> PairSummary | None:
        """The comparison numbers of ``a`` and ``b`` if known; else started on the worker."""
        for ka, kb, summary in self._pair_summaries:
            if ka() is a and kb() is b:
                return summary
        pending = self._pending_pair
        if pending is None or pending[0] is not a or pending[1] is not b:
            self._pending_pair = (a, b, _pool.submit(summarize_pair, a, b))
            self._poll.start()
        return None

    def _check_summary(self) -> None:
        """Poll the worker (no signal crosses threads); show the tensor(s) when done."""
        done = False
        if self._pending is not None and self._pending[1].done():
            arr, future = self._pending
            self._pending = None
            kept = [(ref, s) for ref, s in self._summaries if ref() is not None]
            self._summaries = [*kept, (weakref.ref(arr), future.result())][-SUMMARIES_KEPT:]
            done = True
        if self._pending_pair is not None and self._pending_pair[2].done():
            a, b, future = self._pending_pair
            self._pending_pair = None
            kept = [t for t in self._pair_summaries if t[0]() is not None and t[1]() is not None]
            self._pair_summaries = [*kept, (weakref.ref(a), weakref.ref(b),
                                            future.result())][-SUMMARIES_KEPT:]
            done = True
        if self._pending is None and self._pending_pair is None:
            self._poll.stop()
        if done:
            self.update_view()

    def _mark_stale(self, *node_ids: str) -> None:
        """Grey the viewer and prefix the caption when a shown result is not current."""
        reasons = [f"{self.session.label(n)} {r}" if len(node_ids) > 1 else r
                   for n in node_ids if (r := self.session.stale_reason(n))]
        self.stale = "; ".join(reasons)
        if self.stale:
            self.caption.setText(f"stale: {self.stale} — {self.caption.text()}")
        self._grey.set_on(bool(self.stale))

    def _compare(self, left: tuple, right: tuple, axes) -> None:
        """Compare ``left`` and ``right``, each (title, node_id.port, tensor)."""
        (ta, sa, a), (tb, sb, b) = left, right
        summary = None
        if np.shape(a) == np.shape(b) and np.size(a) > BACKGROUND_ELEMENTS:
            summary = self._pair_summary(a, b)  # seconds for big tensors: off the GUI thread
            if summary is None:
                self.viewer.clear(f"Computing the comparison of 2 × {np.size(a):,} values…")
                self._caption(f"Comparing {ta} (left) with {tb} (right) · computing the "
                              f"comparison of 2 × {np.size(a):,} values…", (sa, sb))
                return
        self.viewer.compare(a, b, ta, tb, axes, sources=(sa, sb), summary=summary)
        self._caption(f"Comparing {ta} (left) with {tb} (right)", (sa, sb))

    def _empty(self, text: str, source: str = "", body: str = "No tensor selected.") -> None:
        """Nothing to show: ``text`` in the caption, ``body`` in the viewer."""
        self.viewer.clear(body)
        self._caption(text, (source,) if source else ())
        self.shown = ()

    def _caption(self, text: str, shown: tuple[str, ...]) -> None:
        self.caption.setText(text)
        ids = ", ".join(shown)
        self.caption.setToolTip(text + ("\n" + ids if ids else "") if len(text) > 60 else ids)
        self.shown = shown
        self.stale = ""
        self._grey.set_on(False)

    def _pin_toggled(self, on: bool) -> None:
        if not on:
            self.pinned = None
            self._show_pin_state()
            self.update_view()
            return
        sel = [n for n in self.selection if n in self.session.doc.canvas.nodes]
        port, arr = self._current(sel[0]) if len(sel) == 1 else (None, None)
        if arr is None:  # nothing (or two blocks) shown: nothing to pin
            self.pin_button.setChecked(False)
            return
        self.pinned = (f"{self._title(sel[0], port)} (pinned)", f"{sel[0]}.{port}",
                       np.array(arr, copy=True), self._axes(sel[0], port))
        self._show_pin_state()
        self.update_view()

    def _show_pin_state(self) -> None:
        """The pin button says whether a tensor is pinned, and which."""
        if self.pinned is None:
            self.pin_button.setText("Pin for compare")
            self.pin_button.setToolTip("Keep the shown tensor and compare what is selected next "
                                       "(or the same block after an edit) against it")
        else:
            label, source = self.pinned[:2]
            self.pin_button.setText("Pinned")
            self.pin_button.setToolTip(f"Pinned: {label} ({source}); click to unpin")

    def _on_doc_changed(self, change: Change) -> None:
        """Another canvas (open, new, restore) drops the pin: it belongs to the old canvas. A
        renamed block shown here shows its new title (a rename changes no result)."""
        if change.reloaded:
            if self.pinned is not None:
                self.pin_button.setChecked(False)
            return
        nodes = self.session.doc.canvas.nodes
        if any(n in nodes and nodes[n].title != t for n, t in self._titles_shown.items()):
            self.update_view()
