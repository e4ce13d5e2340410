"""The bottom dock around the tensor viewer: shows the selected node's output, or compares two.

One selected node shows its output port (a port picker appears for blocks with several outputs).
Two selected nodes are compared side by side. "Pin" keeps the current tensor so that the same
node after an attribute change (or another node) is compared against it. A result that is no
longer current (:meth:`Session.stale_reason`) stays shown, greyed, its caption starting with
"stale: <why>" (:attr:`ViewerDock.stale`). The statistics and histogram of a tensor of more than
:data:`BACKGROUND_ELEMENTS` elements are computed on a worker thread (seconds for a 256 MiB
tensor), so the window stays responsive; the tensor appears when they are ready.
"""

from __future__ import annotations

import weakref
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
from PySide6 import QtCore, QtWidgets

from app.message_label import MessageLabel
from app.tensor_viewer import Summary, TensorViewer, summarize
from blocks.registry import get_spec

#: Tensors with more elements than this are summarized on a worker thread.
BACKGROUND_ELEMENTS = 1 << 22
#: Summaries kept (by array identity), so reselecting a big tensor shows it at once.
SUMMARIES_KEPT = 4
_pool = ThreadPoolExecutor(1, thread_name_prefix="gradblocks-summary")


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
        self.pin_button.setText("Pin for compare")
        self.pin_button.setCheckable(True)
        self.pin_button.setToolTip("Keep the shown tensor and compare what is selected next "
                                   "(or the same block after an edit) against it")
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
        self.pinned: tuple[str, np.ndarray, tuple | None] | None = None
        self.shown: tuple[str, ...] = ()
        #: Why the shown result is stale ("" when it is current or nothing is shown).
        self.stale = ""
        self._grey = QtWidgets.QGraphicsOpacityEffect(self.viewer)
        self._grey.setOpacity(0.45)
        self._grey.setEnabled(False)
        self.viewer.setGraphicsEffect(self._grey)
        # (weak reference to the array, its summary): never keeps a dropped result alive
        self._summaries: list[tuple[weakref.ref, Summary]] = []
        self._pending: tuple[np.ndarray, Future] | None = None
        self._poll = QtCore.QTimer(self)
        self._poll.setInterval(20)
        self._poll.timeout.connect(self._check_summary)
        session.results_changed.connect(self.update_view)

    def show_selection(self, node_ids: list[str]) -> None:
        self.selection = list(node_ids)
        self._fill_ports()
        self.update_view()

    def _fill_ports(self) -> None:
        self.port_combo.blockSignals(True)
        self.port_combo.clear()
        if len(self.selection) == 1 and self.selection[0] in self.session.doc.canvas.nodes:
            node = self.session.doc.canvas.nodes[self.selection[0]]
            ports = [p.name for p in get_spec(node.type).outputs]
            self.port_combo.addItems(ports)
            self.port_combo.setVisible(len(ports) > 1)
        else:
            self.port_combo.hide()
        self.port_combo.blockSignals(False)

    def _axes(self, node_id: str, port: str):
        plan = self.session.plan
        spec = plan.specs.get((node_id, port)) if plan is not None else None
        return getattr(spec, "axes", None)

    def _current(self, node_id: str):
        port = self.port_combo.currentText() if len(self.selection) == 1 else None
        port, arr = self.session.output(node_id, port or None)
        return port, arr

    def update_view(self) -> None:
        sel = [n for n in self.selection if n in self.session.doc.canvas.nodes]
        if self.pinned is not None and len(sel) <= 1:
            label, pinned, axes = self.pinned
            if sel:
                port, arr = self._current(sel[0])
                if arr is not None:
                    self._compare(label, pinned, f"{sel[0]}.{port}", arr, axes)
                    return
            self.viewer.show_tensor(pinned, axes=axes, title=label)
            self._caption(f"Pinned {label}: select a block to compare against it.", (label,))
            return
        if len(sel) == 2:
            (pa, a), (pb, b) = self._current(sel[0]), self._current(sel[1])
            if a is not None and b is not None:
                self._compare(f"{sel[0]}.{pa}", a, f"{sel[1]}.{pb}", b,
                              self._axes(sel[0], pa))
                self._mark_stale(*sel)
                return
            self._empty("Run the canvas to compare the outputs of the two selected blocks.")
            return
        if len(sel) != 1:
            self._empty("Select a block to see its output (two blocks to compare them)."
                        if not sel else f"{len(sel)} blocks selected: select one or two.")
            return
        nid = sel[0]
        port, arr = self._current(nid)
        if arr is None:
            errors = self.session.node_errors(nid)
            self._empty(f"{nid}: " + (errors[0] if errors else "no output yet — press F5 to run."))
            return
        title = f"{nid}.{port}"
        node = self.session.doc.canvas.nodes[nid]
        name = node.title if node.title and node.title != nid else nid
        caption = f"{name} · {get_spec(node.type).title} · port {port}"
        summary = self._summary(arr)
        if summary is None and arr.size > BACKGROUND_ELEMENTS:
            self.viewer.clear()
            self._caption(f"{caption} · computing the statistics of {arr.size:,} values…",
                          (title,))
            self._mark_stale(nid)
            return
        self.viewer.show_tensor(arr, axes=self._axes(nid, port), title=title, summary=summary)
        self._caption(caption, (title,))
        self._mark_stale(nid)

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

    def _check_summary(self) -> None:
        """Poll the worker (no signal crosses threads); show the tensor when it is done."""
        if self._pending is None:
            self._poll.stop()
            return
        arr, future = self._pending
        if not future.done():
            return
        self._pending = None
        self._poll.stop()
        kept = [(ref, s) for ref, s in self._summaries if ref() is not None]
        self._summaries = [*kept, (weakref.ref(arr), future.result())][-SUMMARIES_KEPT:]
        self.update_view()

    def _mark_stale(self, *node_ids: str) -> None:
        """Grey the viewer and prefix the caption when a shown result is not current."""
        reasons = [f"{n} {r}" if len(node_ids) > 1 else r
                   for n in node_ids if (r := self.session.stale_reason(n))]
        self.stale = "; ".join(reasons)
        if self.stale:
            self.caption.setText(f"stale: {self.stale} — {self.caption.text()}")
        self._grey.setEnabled(bool(self.stale))

    def _compare(self, ta: str, a, tb: str, b, axes) -> None:
        self.viewer.compare(a, b, ta, tb, axes)
        self._caption(f"Comparing {ta} (left) with {tb} (right)", (ta, tb))

    def _empty(self, text: str) -> None:
        self.viewer.clear()
        self._caption(text, ())

    def _caption(self, text: str, shown: tuple[str, ...]) -> None:
        self.caption.setText(text)
        self.shown = shown
        self.stale = ""
        self._grey.setEnabled(False)

    def _pin_toggled(self, on: bool) -> None:
        if not on:
            self.pinned = None
            self.update_view()
            return
        sel = [n for n in self.selection if n in self.session.doc.canvas.nodes]
        if len(sel) != 1:
            self.pin_button.setChecked(False)
            return
        port, arr = self._current(sel[0])
        if arr is None:
            self.pin_button.setChecked(False)
            return
        self.pinned = (f"{sel[0]}.{port} (pinned)", np.array(arr, copy=True),
                       self._axes(sel[0], port))
        self.update_view()
