"""What a node shows besides its ports: inferred shapes on output ports, error state, run badge.

The look of every node is computed from the compiled plan, the pending invalid attribute edits
and the last run, and only nodes whose look changed are touched (keeps live inference cheap).
A block's size does not follow its state: its output labels keep the room of the last shape
the plan knew (:attr:`app.node_item.BlockItem.reserved_output_width`), a stale result greys
them (no longer text), and the badge, shortened with "…" to the block's width (the whole text
in its tooltip), sits in the block's bottom row.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from PySide6 import QtCore, QtGui, QtWidgets

from app.formatting import ms_text, spec_label, spec_tooltip
from app.node_classes import ERROR_BORDER, ERROR_COLOR, NORMAL_BORDER
from blocks.registry import get_spec

BADGE_COLORS = {
    "ok": QtGui.QColor(130, 210, 140),
    "failed": QtGui.QColor(250, 120, 110),
    "error": QtGui.QColor(250, 120, 110),
    "running": QtGui.QColor(240, 200, 100),
    "stale": QtGui.QColor(150, 150, 150),
    "last_valid": QtGui.QColor(240, 190, 90),
    "": QtGui.QColor(160, 160, 160),
}


@dataclass(frozen=True)
class RunInfo:
    """Outcome of the last run for one node."""

    seconds: float | None = None
    error: str | None = None
    cached: bool = False


@dataclass(frozen=True)
class NodeLook:
    out_labels: tuple[tuple[str, str, str], ...]  # (port, label text, tooltip)
    in_tips: tuple[tuple[str, str], ...]  # (port, tooltip)
    errors: tuple[str, ...]
    badge: str
    badge_state: str
    tooltip: str
    stale: bool = False  # the output labels are greyed: the last result is not current


def node_messages(node_id: str, plan, pending: dict[str, str]) -> list[str]:
    """Error messages of a node: pending invalid edits first, then the compiler's."""
    msgs = [m for m in pending.values()]
    if plan is not None:
        for err in plan.errors.get(node_id, []):
            text = str(err)
            if text not in msgs:
                msgs.append(text)
    return msgs


def compute_look(node, plan, pending: dict[str, str], run: RunInfo | None,
                 incoming: dict[str, tuple[str, str]], running: bool = False,
                 stale: str | None = None) -> NodeLook:
    """The look of canvas ``node``; ``incoming`` maps its input ports to their sources;
    ``stale`` says why its last result is no longer current (the badge and the port labels'
    tooltips say so, the labels are greyed);
    ``pending`` maps attributes with an invalid edit to their messages: while the block is
    otherwise valid it runs with the last valid values, and its badge says so."""
    spec = get_spec(node.type)
    specs = plan.specs if plan is not None else {}
    errors = tuple(node_messages(node.id, plan, pending))
    # only invalid edits, the block itself valid: it runs with the last valid values
    last_valid = bool(pending) and plan is not None and not plan.errors.get(node.id)
    badge, state = _badge(pending, run, errors, running, last_valid, stale)
    return NodeLook(_out_labels(node, spec, specs, stale), _in_tips(spec, specs, incoming),
                    errors, badge, state, _tooltip(node, spec, errors, run, stale),
                    stale is not None)


def _out_labels(node, spec, specs, stale: str | None) -> tuple[tuple[str, str, str], ...]:
    """(port, label, tooltip) of each output port: its inferred shape, or "shape unknown"."""
    out_labels = []
    for p in spec.outputs:
        ts = specs.get((node.id, p.name))
        if ts is None:
            out_labels.append((p.name, p.name, f"{p.name}: shape unknown\n{p.doc}".strip()))
        else:
            tip = spec_tooltip(p.name, ts) + (f"\n{p.doc}" if p.doc else "")
            out_labels.append((p.name, f"{p.name}  {spec_label(ts)}", tip))
    if stale is not None:  # the port's value (last run) is not the current one
        out_labels = [(port, text, f"{tip}\nlast result is stale: {stale}")
                      for port, text, tip in out_labels]
    return tuple(out_labels)


def _in_tips(spec, specs, incoming: dict[str, tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """(port, tooltip) of each input port: its doc and what feeds it (or "not connected")."""
    in_tips = []
    for p in spec.inputs:
        src = incoming.get(p.name)
        ts = specs.get(src) if src else None
        tip = p.doc or p.name
        if src is None:
            tip += "\n(not connected)"
        elif ts is not None:
            tip += f"\nfrom {src[0]}.{src[1]}: " + spec_tooltip(p.name, ts)
        in_tips.append((p.name, tip))
    return tuple(in_tips)


def _badge(pending: dict[str, str], run: RunInfo | None, errors: tuple[str, ...],
           running: bool, last_valid: bool, stale: str | None) -> tuple[str, str]:
    """(badge text, badge state): running, last valid values, stale, failed, its time, cannot
    run, or nothing, the first that applies."""
    if running:
        return "running…", "running"
    if last_valid and (stale is None or stale.startswith("invalid")):
        return f"⚠ runs with last valid {', '.join(pending)}", "last_valid"
    if stale is not None:
        return f"stale: {_short(stale)}", "stale"
    if run is not None and run.error:
        return "✗ failed", "failed"
    if run is not None and run.seconds is not None:
        return ("✓ cached " if run.cached else "✓ ") + ms_text(run.seconds), "ok"
    if errors:
        return "⚠ cannot run", "error"
    return "", ""


def _tooltip(node, spec, errors: tuple[str, ...], run: RunInfo | None,
             stale: str | None) -> str:
    """The block's tooltip (HTML): title and id, type and op, doc, problems, the last run."""
    title = html.escape(node.title or node.id)
    parts = [f"<b>{title}</b> <span style='color:#999'>({html.escape(node.id)})</span>",
             f"{html.escape(spec.title)} — mirrors {html.escape(str(spec.op))}"]
    if spec.doc:
        parts.append(html.escape(spec.doc.strip().splitlines()[0]))
    for msg in errors:
        parts.append(f"<span style='color:#f07060'>{html.escape(msg)}</span>")
    if stale is not None:
        parts.append(f"<span style='color:#999'>last result is stale: "
                     f"{html.escape(stale)}</span>")
    if run is not None and run.error:
        parts.append(f"<span style='color:#f07060'>run failed: {html.escape(run.error)}</span>")
    elif run is not None and run.seconds is not None:
        parts.append(f"last run: {ms_text(run.seconds)}" + (" (cached)" if run.cached else ""))
    return "<br/>".join(parts)


def _text_width(text: str, font: QtGui.QFont) -> float:
    """The width of a port label item showing ``text`` (as NodeGraphQt measures its labels)."""
    item = _MEASURE.get("item")
    if item is None:
        item = _MEASURE["item"] = QtWidgets.QGraphicsTextItem()
    item.setFont(font)
    item.setPlainText(text)
    return item.boundingRect().width()


_MEASURE: dict[str, QtWidgets.QGraphicsTextItem] = {}


def _short(reason: str, limit: int = 40) -> str:
    """A stale reason short enough for a badge under a node."""
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


class Decorator:
    """Applies NodeLooks to the NodeGraphQt views of a GraphAdapter."""

    def __init__(self, adapter):
        self.adapter = adapter
        self._looks: dict[str, NodeLook] = {}
        self._badges: dict[str, QtWidgets.QGraphicsSimpleTextItem] = {}
        self._badge_text: dict[str, str] = {}
        # (node, port) -> its label with the last shape the plan knew
        self._known: dict[tuple[str, str], str] = {}
        adapter.synced.connect(self._forget_removed)

    def _forget_removed(self) -> None:
        alive = set(self.adapter.node_ids())
        for cid in list(self._looks):
            if cid not in alive:
                self._looks.pop(cid, None)
                self._badges.pop(cid, None)
        for key in [k for k in self._known if k[0] not in alive]:
            del self._known[key]
        # a node re-created by sync (undo of a delete) starts undecorated
        for cid in alive:
            badge = self._badges.get(cid)
            if badge is not None and badge.parentItem() is not self.adapter.node(cid).view:
                self._looks.pop(cid, None)
                self._badges.pop(cid, None)

    def look(self, cid: str) -> NodeLook | None:
        return self._looks.get(cid)

    def apply(self, looks: dict[str, NodeLook]) -> int:
        """Apply changed looks; returns how many nodes were redrawn."""
        changed = 0
        for cid, look in looks.items():
            if self._looks.get(cid) == look:
                continue
            try:
                node = self.adapter.node(cid)
            except KeyError:
                continue
            self._apply_one(cid, node, look, self._looks.get(cid))
            self._looks[cid] = look
            changed += 1
        self._pipe_tooltips(looks)
        return changed

    def _apply_one(self, cid: str, node, look: NodeLook, old: NodeLook | None) -> None:
        view = node.view
        relayout = old is None or old.out_labels != look.out_labels
        outs = node.outputs()
        for port, text, tip in look.out_labels:
            p = outs.get(port)
            if p is None:
                continue
            item = view.get_output_text_item(p.view)
            if item.toPlainText() != text:
                item.setPlainText(text)
            item.setToolTip(tip)
            p.view.setToolTip(tip)
        ins = node.inputs()
        for port, tip in look.in_tips:
            p = ins.get(port)
            if p is not None:
                view.get_input_text_item(p.view).setToolTip(tip)
                p.view.setToolTip(tip)
        if relayout:
            self._reserve(cid, view, outs, look)
            view.draw_node()
        if old is None or old.stale != look.stale:
            view.set_outputs_greyed(look.stale)
        base = getattr(node, "BASE_COLOR", (60, 60, 60))
        # the look goes to the view item only: BaseNode.set_color would also write the node
        # model (what NodeGraphQt serialises) and emit property_changed for a passing state
        if look.errors or look.badge_state == "failed":
            view.color = (*ERROR_COLOR, 255)
            view.border_color = (*ERROR_BORDER, 255)
        else:
            view.color = (*base, 255)
            view.border_color = (*NORMAL_BORDER, 255)
        view.setToolTip(look.tooltip)
        view.text_item.setToolTip(look.tooltip)
        badge = self._badges.get(cid)
        if badge is None:
            badge = QtWidgets.QGraphicsSimpleTextItem(view)
            badge.setFont(view.badge_font() if hasattr(view, "badge_font") else badge.font())
            self._badges[cid] = badge
        self._badge_text[cid] = look.badge
        badge.setBrush(BADGE_COLORS.get(look.badge_state, BADGE_COLORS[""]))
        badge.setToolTip(look.tooltip)
        badge.setVisible(bool(look.badge))
        self.place_badge(cid)

    def _reserve(self, cid: str, view, outs, look: NodeLook) -> None:
        """The room of ``cid``'s output labels: with the last shape the plan knew, while it
        knows none (:attr:`app.node_item.BlockItem.reserved_output_width`)."""
        widest = 0.0
        for port, text, _tip in look.out_labels:
            p = outs.get(port)
            if p is None:
                continue
            if text != port:  # the shape is known
                self._known[(cid, port)] = text
            label = self._known.get((cid, port), text)
            widest = max(widest, _text_width(label, view.get_output_text_item(p.view).font()))
        view.reserved_output_width = widest

    def place_badge(self, cid: str) -> None:
        """Put a node's run badge in its bottom row again (after its size changed), shortened
        to the block's width."""
        badge = self._badges.get(cid)
        view = badge.parentItem() if badge is not None else None
        if view is None:
            return
        room = view.boundingRect().width() - 2 * 4.0
        text = QtGui.QFontMetricsF(badge.font()).elidedText(
            self._badge_text.get(cid, ""), QtCore.Qt.ElideRight, max(room, 0.0))
        if badge.text() != text:
            badge.setText(text)
        top = view.badge_top() if hasattr(view, "badge_top") else view.boundingRect().height()
        badge.setPos(4.0, top)

    def _pipe_tooltips(self, looks: dict[str, NodeLook]) -> None:
        for cid, look in looks.items():
            try:
                outs = self.adapter.node(cid).outputs()
            except KeyError:
                continue
            for port, _text, tip in look.out_labels:
                p = outs.get(port)
                if p is None:
                    continue
                text = f"{cid}.{tip}"
                for pipe in p.view.connected_pipes:
                    if pipe.toolTip() != text:
                        pipe.setToolTip(text)
