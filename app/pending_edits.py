"""Pending invalid edits: a value typed into the attribute panel that does not validate is kept
(the field shows it, the block shows its message) while the block runs with the last valid
value; Undo drops them all first.

:class:`PendingEdits` is a part of :class:`app.session.Session`; the session provides
``pending`` (node -> attr -> (raw, message)), ``doc``, the ``log``, ``pending_changed`` and
``results_changed`` signals, :meth:`~app.session.Session.stale_nodes`,
:meth:`~app.session.Session.refresh` and :meth:`~app.session.Session.label`.
"""

from __future__ import annotations

from blocks.registry import get_spec
from engine.base.names import shown


class PendingEdits:
    """The session's pending invalid edits: set, cleared, dropped, and what a run uses."""

    def set_pending(self, node_id: str, attr: str, raw: str, message: str) -> None:
        """Remember an invalid value typed into the panel: the node shows it as an error."""
        old = self.pending.get(node_id, {}).get(attr)
        stale = self.stale_nodes()
        self.pending.setdefault(node_id, {})[attr] = (raw, message)
        if old is None or old[1] != message:
            self.log.emit(message, "error", node_id)
        self.refresh()
        self.pending_changed.emit(node_id)
        if self.stale_nodes() != stale:
            self.results_changed.emit()

    def clear_pending(self, node_id: str, attr: str) -> None:
        attrs = self.pending.get(node_id)
        if attrs and attr in attrs:
            stale = self.stale_nodes()
            del attrs[attr]
            if not attrs:
                del self.pending[node_id]
            self.refresh()
            self.pending_changed.emit(node_id)
            if self.stale_nodes() != stale:
                self.results_changed.emit()

    def pending_for(self, node_id: str) -> dict[str, tuple[str, str]]:
        return dict(self.pending.get(node_id, {}))

    def last_valid_value(self, node_id: str, attr: str) -> str:
        """The value a run uses for an attribute with a pending invalid edit, as text."""
        node = self.doc.canvas.nodes[node_id]
        spec = get_spec(node.type).attr(attr)
        value = node.attrs.get(attr, spec.default)
        return value if isinstance(value, str) else shown(value)

    def last_valid_note(self, node_id: str, attr: str) -> str:
        """What the block says while ``attr`` has a pending invalid edit."""
        return (f"Until it is fixed, {self.label(node_id)} runs with the last valid value "
                f"{self.last_valid_value(node_id, attr)} of {attr}.")

    def drop_pending(self) -> bool:
        """Forget every pending invalid edit (Undo: the fields show the last valid values
        again); False when there was none."""
        if not self.pending:
            return False
        for nid in list(self.pending):
            for attr in list(self.pending.get(nid, {})):
                self.clear_pending(nid, attr)
        self.log.emit("invalid edit undone: the last valid value is shown again", "info", None)
        return True
