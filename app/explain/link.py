"""Connects the tensor viewer to the explain panel.

A left click on an element of the viewer's image, or its context menu's "Explain element",
explains that element when the viewer shows a conv block's output; when it shows a tensor that
feeds a conv block (an array operand of one), it shows what that element feeds (the first such
block in the plan's order). Clicks on the panel's pictures explain an output element or show
what an input element feeds; an index typed in the panel's entry is explained in the block the
viewer shows (four entries for the 2-D blocks, five for the 3-D ones). The panel's dock is raised when something is shown; a new run
refreshes what it shows, a result that is not current is refused with the reason.
"""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from app.explain.panel import HINT, OUTPUT, ExplainPanel, ExplainRequest, Operand
from engine.base.errors import InvalidArgumentError
from engine.explain.reverse import feeds
from engine.explain.terms import OPS, OUTPUT_NAMES, explain_element

EXPLAIN_ACTION = "Explain element"


class ExplainLink(QtCore.QObject):
    """The viewer dock's clicks and context menu -> the explain panel (in ``dock``)."""

    def __init__(self, session, viewer_dock, panel: ExplainPanel,
                 dock: QtWidgets.QDockWidget | None = None):
        super().__init__(panel)
        self.session, self.viewer_dock, self.panel, self.dock = session, viewer_dock, panel, dock
        #: (node_id, port, index): the last thing shown, redone after a run
        self.last: tuple[str, str, tuple[int, ...]] | None = None
        self._pressed: tuple[int, int] | None = None  # image pixel of the last mouse press
        image = viewer_dock.viewer.panels[0]
        self.image = image
        image.plot.scene().sigMouseClicked.connect(self._viewer_clicked)
        # the press position says which element the context menu is about (pyqtgraph's menu
        # event does not reach its actions): watch presses on the image's viewport
        image.viewport().installEventFilter(self)
        menu = image.plot.vb.menu  # pyqtgraph's view menu (public attribute, a QMenu)
        self.action = QtGui.QAction(EXPLAIN_ACTION, menu)
        menu.insertAction(menu.actions()[0] if menu.actions() else None, self.action)
        menu.insertSeparator(menu.actions()[1])
        menu.aboutToShow.connect(self._menu_about_to_show)
        self.action.triggered.connect(self._explain_pressed)
        panel.element_clicked.connect(self._panel_clicked)
        panel.index_entered.connect(self.typed_element)
        session.results_changed.connect(self.refresh)
        session.plan_changed.connect(self._forget_deleted)
        self._dirty = False
        if dock is not None:
            dock.visibilityChanged.connect(lambda on: on and self._dirty and self.refresh())

    # -- the viewer ----------------------------------------------------------------------------
    def eventFilter(self, obj, event) -> bool:
        if event.type() == QtCore.QEvent.MouseButtonPress:
            scene = self.image.mapToScene(event.position().toPoint())
            self._pressed = self.image.pixel_at(scene)
        return False

    def shown(self) -> tuple[str, str] | None:
        """(node_id, port) of the one tensor the viewer shows (None when comparing, pinned or
        empty)."""
        shown = self.viewer_dock.shown
        viewer = self.viewer_dock.viewer
        if len(shown) != 1 or viewer.other is not None or self.viewer_dock.pinned is not None:
            return None
        node_id, port = shown[0].rsplit(".", 1)
        return (node_id, port) if node_id in self.session.doc.canvas.nodes else None

    def _viewer_index(self, pixel) -> tuple[int, ...] | None:
        if pixel is None:
            return None
        return self.viewer_dock.viewer.pixel_index(*pixel)

    def _viewer_clicked(self, ev) -> None:
        if ev.button() != QtCore.Qt.LeftButton or ev.double():
            return
        self.viewer_element(self._viewer_index(self.image.pixel_at(ev.scenePos())))

    def _menu_about_to_show(self) -> None:
        index = self._viewer_index(self._pressed)
        target = self.target() if index is not None else None
        self.action.setEnabled(target is not None)
        self.action.setText(EXPLAIN_ACTION if index is None else f"{EXPLAIN_ACTION} "
                            f"[{', '.join(str(i) for i in index)}]")

    def _explain_pressed(self) -> None:
        self.viewer_element(self._viewer_index(self._pressed))

    def target(self) -> tuple[str, str, str] | None:
        """What a click on the viewer explains: ``(conv node, "output", port)`` when it shows a
        conv block's output, ``(conv node, operand port, "")`` when it shows an operand of a
        conv block; None otherwise."""
        shown = self.shown()
        plan = self.session.plan
        if shown is None or plan is None:
            return None
        node_id, port = shown
        nodes = self.session.doc.canvas.nodes
        if nodes[node_id].type in OPS:
            return node_id, OUTPUT, port
        for step in plan.steps:
            form = OPS.get(nodes[step.node_id].type) if step.node_id in nodes else None
            if form is None:
                continue
            for operand in form.operands:
                if step.inputs.get(operand) == (node_id, port):
                    return step.node_id, operand, ""
        return None

    def viewer_element(self, index: tuple[int, ...] | None) -> bool:
        """Explain (or show the reverse of) the viewer's element ``index``; False when the
        viewer shows nothing explainable there."""
        target = self.target() if index is not None else None
        if target is None:
            return False
        node_id, what, port = target
        if what == OUTPUT:
            self.explain(node_id, port, index)
        else:
            self.reverse(node_id, what, index)
        return True

    def typed_element(self, index: tuple[int, ...]) -> None:
        """The panel's index entry: explain that element of the conv block the viewer shows (or
        show what that element of the operand it shows feeds); else of the block explained
        last."""
        if self.viewer_element(tuple(index)):
            return
        if self.last is not None and self.last[0] in self.session.doc.canvas.nodes:
            node_id, port, _ = self.last
            if port.startswith("@"):
                return self.reverse(node_id, port[1:], index)
            return self.explain(node_id, port, index)
        self._message("Select a conv block (the viewer shows its output) to explain an element "
                      "typed here.", True)

    # -- the panel -----------------------------------------------------------------------------
    def _panel_clicked(self, port: str, index: tuple) -> None:
        if self.last is None:
            return
        node_id, _, _ = self.last
        if port == OUTPUT:
            self.explain(node_id, self._out_port(node_id), index)
        else:
            self.reverse(node_id, port, index)

    def _out_port(self, node_id: str) -> str:
        port, _ = self.session.output(node_id)
        return port

    def clear(self) -> None:
        """Explain nothing: the panel shows its hint (another canvas, or the block deleted)."""
        self.last = None
        self._dirty = False
        self.panel.show_message(HINT)

    def _forget_deleted(self, *_args) -> None:
        """The block explained is gone (deleted): clear the panel instead of a message about
        a block that no longer exists."""
        if self.last is not None and self.last[0] not in self.session.doc.canvas.nodes:
            self.clear()

    def refresh(self) -> None:
        """Redo the last explanation with the current results (after a run); while the panel
        is hidden, when it is shown again."""
        if self.last is None:
            return
        if self.last[0] not in self.session.doc.canvas.nodes:
            return self.clear()
        if self.dock is not None and not self.dock.isVisible():
            self._dirty = True
            return
        self._dirty = False
        node_id, port, index = self.last
        if port.startswith("@"):
            self.reverse(node_id, port[1:], index, raise_dock=False)
        else:
            self.explain(node_id, port, index, raise_dock=False)

    def _gather(self, node_id: str):
        """(label, type, attrs, inputs by port, operands) of a conv node, or an error text."""
        plan, nodes = self.session.plan, self.session.doc.canvas.nodes
        node = nodes.get(node_id)
        label = self.session.label(node_id)
        if node is None or node.type not in OPS or plan is None:
            return f"{label} is not a conv block: explain takes {', '.join(OPS)}."
        step = next((s for s in plan.steps if s.node_id == node_id), None)
        if step is None:
            return f"{label} is not valid now: fix it and run to explain its elements."
        stale = self.session.stale_reason(node_id)
        if stale:
            return f"{label}'s result is stale ({stale}): run the canvas (F5) to explain it."
        inputs = {p: self.session.outputs.get(src) for p, src in step.inputs.items()}
        missing = [p for p, a in inputs.items() if a is None]
        if missing:
            return f"{label}: no result for input {', '.join(missing)}: run the canvas (F5)."
        operands = tuple(
            Operand(p, np.asarray(inputs[p]), self._axes(step.inputs[p]),
                    self.session.label(step.inputs[p][0]))
            for p in OPS[node.type].operands)
        return label, node.type, step.attrs, inputs, operands

    def _axes(self, key):
        spec = self.session.plan.specs.get(key) if self.session.plan is not None else None
        return getattr(spec, "axes", None)

    def _output(self, node_id: str, port: str, type_id: str) -> Operand | None:
        arr = self.session.outputs.get((node_id, port))
        if arr is None:
            return None
        return Operand(OUTPUT_NAMES[OPS[type_id].kind], np.asarray(arr),
                       self._axes((node_id, port)), self.session.label(node_id))

    def explain(self, node_id: str, port: str, index, raise_dock: bool = True) -> None:
        """Show the defining sum of ``node_id.port[index]``."""
        self.last = (node_id, port, tuple(index))
        got = self._gather(node_id)
        if isinstance(got, str):
            return self._message(got, raise_dock)
        label, type_id, attrs, inputs, operands = got
        output = self._output(node_id, port, type_id)
        if output is None:
            return self._message(f"{label}: no output yet: run the canvas (F5).", raise_dock)
        try:
            e = explain_element(type_id, attrs, inputs, index)
        except InvalidArgumentError as err:
            return self._message(f"{label}: cannot explain {list(index)}: {err}", raise_dock)
        self.panel.show_explanation(ExplainRequest(f"{label} ({node_id})", operands, output,
                                                   e.index, explanation=e))
        self._raise(raise_dock)

    def reverse(self, node_id: str, port: str, index, raise_dock: bool = True) -> None:
        """Show every element of ``node_id``'s output that element ``index`` of its operand
        ``port`` feeds."""
        self.last = (node_id, f"@{port}", tuple(index))
        got = self._gather(node_id)
        if isinstance(got, str):
            return self._message(got, raise_dock)
        label, type_id, attrs, inputs, operands = got
        output = self._output(node_id, self._out_port(node_id), type_id)
        if output is None:
            return self._message(f"{label}: no output yet: run the canvas (F5).", raise_dock)
        shapes = {p: (np.asarray(a).tolist() if p.endswith("_sizes") else np.shape(a))
                  for p, a in inputs.items()}
        try:
            fed = feeds(type_id, attrs, shapes, port, index)
        except InvalidArgumentError as err:
            return self._message(f"{label}: {port} {list(index)}: {err}", raise_dock)
        self.panel.show_feeds(ExplainRequest(f"{label} ({node_id})", operands, output,
                                             tuple(int(i) for i in index), port=port, feeds=fed))
        self._raise(raise_dock)

    def _message(self, text: str, raise_dock: bool) -> None:
        self.panel.show_message(text)
        self._raise(raise_dock)

    def _raise(self, raise_dock: bool) -> None:
        dock = self.dock
        if dock is None or not raise_dock:
            return
        first = not dock.isVisible()
        dock.show()
        dock.raise_()
        window = dock.parentWidget()
        if first and isinstance(window, QtWidgets.QMainWindow) and not dock.isFloating():
            # the first time it opens, share the bottom area evenly with the viewer
            viewer = self.viewer_dock.parentWidget()
            if isinstance(viewer, QtWidgets.QDockWidget):
                half = max(300, (viewer.width() + dock.width()) // 2)
                window.resizeDocks([viewer, dock], [half, half], QtCore.Qt.Horizontal)
