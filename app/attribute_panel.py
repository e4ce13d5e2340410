"""The attribute panel: typed editors for the selected block, built from its AttrSpecs.

Every edit is validated at once with ``AttrSpec.validate``. A valid value becomes one undoable
Document edit; an invalid one stays in the field, marked with the message, and the Session marks
the node red with the same message until it is fixed. Compiler errors attributed to an attribute
(e.g. ``grad.strides: ...``) are shown on that field too. Tooltips carry the spec docs.

Messages go below the fields (each attribute's under the last field, then the block's), never
between them: a message appearing or going moves no field, so the next click lands where it was
aimed. While an invalid value is pending the block runs with the last valid one, and says so.
"""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.attr_editor_base import AttrEditor
from app.attr_editors import make_editor
from app.input_size_hint import input_size_hint
from app.message_label import MessageLabel
from blocks.check_support import OP_ATTR, rank_attrs
from blocks.conv import relayout_attrs
from blocks.registry import get_spec
from engine.base.errors import InvalidArgumentError
from engine.base.names import MAX_TITLE


def _visible(attr_spec, attrs: dict) -> bool:
    """Whether the attribute matters (e.g. explicit_paddings only while padding is EXPLICIT)."""
    return attr_spec.is_active(attrs)


class _Row:
    def __init__(self, form: QtWidgets.QFormLayout, label: QtWidgets.QLabel, editor: AttrEditor,
                 error: QtWidgets.QLabel):
        self.form, self.label, self.editor, self.error = form, label, editor, error

    def set_visible(self, visible: bool) -> None:
        self.form.setRowVisible(self.label, visible)
        self.error.setVisible(bool(self.error.text()) and visible)


class AttributePanel(QtWidgets.QWidget):
    """Editors for one selected node; empty hint otherwise."""

    def __init__(self, doc, session, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.doc, self.session = doc, session
        self.node_id: str | None = None
        self.rows: dict[str, _Row] = {}

        self.hint = QtWidgets.QLabel("Select a block to edit its attributes.", self)
        self.hint.setAlignment(QtCore.Qt.AlignCenter)
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet("color: #8a8f98; padding: 12px;")
        self._build_header()
        self._build_form()
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.hint)
        lay.addWidget(self.scroll)
        self.scroll.hide()

        doc.changed.connect(lambda _c: self.refresh())
        session.plan_changed.connect(lambda _p: self._show_errors())
        session.pending_changed.connect(self._on_pending_changed)

    def _build_header(self) -> None:
        """The block's title field, its type and doc, the input-size hint and its messages."""
        self.title_edit = QtWidgets.QLineEdit(self)
        self.title_edit.setObjectName("title_edit")
        self.title_edit.setToolTip("Title shown on the block (its id stays the same)")
        self.title_edit.setMaxLength(MAX_TITLE)
        self.title_edit.editingFinished.connect(self._title_finished)
        self.type_label = QtWidgets.QLabel(self)
        self.type_label.setWordWrap(True)
        self.type_label.setTextFormat(QtCore.Qt.RichText)
        self.doc_label = QtWidgets.QLabel(self)
        self.doc_label.setWordWrap(True)
        self.doc_label.setStyleSheet("color: #a0a6ad;")
        # every input size out_backprop allows (backprop-input blocks): app.input_size_hint
        self.sizes_label = QtWidgets.QLabel(self)
        self.sizes_label.setObjectName("input_sizes_hint")
        self.sizes_label.setWordWrap(True)
        self.sizes_label.setTextFormat(QtCore.Qt.RichText)
        self.sizes_label.setTextInteractionFlags(QtCore.Qt.TextBrowserInteraction)
        self.sizes_label.linkActivated.connect(self._choose_input_size)
        self._size_hint = None
        self.sizes_label.setStyleSheet("color: #8ec7e6;")
        self.sizes_label.hide()
        self.errors_label = MessageLabel("", self)
        self.errors_label.setStyleSheet("color: #f07868;")
        self.errors_label.setTextInteractionFlags(QtCore.Qt.TextSelectableByMouse)

    def _build_form(self) -> None:
        """The attributes' form below the header, the messages below it, in a scroll area."""
        self.form_host = QtWidgets.QWidget(self)
        self.form = QtWidgets.QFormLayout(self.form_host)
        self.form.setContentsMargins(0, 4, 0, 0)
        self.form.setLabelAlignment(QtCore.Qt.AlignRight | QtCore.Qt.AlignTop)
        self.form.setRowWrapPolicy(QtWidgets.QFormLayout.DontWrapRows)

        body = QtWidgets.QWidget(self)
        body_lay = QtWidgets.QVBoxLayout(body)
        body_lay.setContentsMargins(6, 6, 6, 6)
        body_lay.addWidget(self.title_edit)
        body_lay.addWidget(self.type_label)
        body_lay.addWidget(self.doc_label)
        body_lay.addWidget(self.sizes_label)
        body_lay.addWidget(self.form_host)
        # below the fields: a message appearing never moves a field (each attribute's, then
        # the block's)
        self.messages = QtWidgets.QVBoxLayout()
        self.messages.setContentsMargins(0, 4, 0, 0)
        self.messages.setSpacing(2)
        body_lay.addLayout(self.messages)
        body_lay.addWidget(self.errors_label)
        body_lay.addStretch(1)
        self.body = body
        scroll = QtWidgets.QScrollArea(self)
        scroll.setWidgetResizable(True)
        # narrower than its fields (app.panel_widths): a scrollbar reaches them, none is cut
        scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarAsNeeded)
        scroll.setFrameShape(QtWidgets.QFrame.NoFrame)
        scroll.setWidget(body)
        scroll.setFocusPolicy(QtCore.Qt.NoFocus)  # Tab moves between fields, not to the area
        self.scroll = scroll

    # --- selection -------------------------------------------------------------------------
    def show_selection(self, node_ids: list[str]) -> None:
        if len(node_ids) == 1:
            self.show_node(node_ids[0])
            return
        self.show_node(None)
        if node_ids:
            self.hint.setText(f"{len(node_ids)} blocks selected.\nSelect one block to edit "
                              "its attributes.")

    def show_node(self, node_id: str | None) -> None:
        if node_id is not None and node_id not in self.doc.canvas.nodes:
            node_id = None
        if node_id == self.node_id and node_id is not None:
            self.refresh()
            return
        self.node_id = node_id
        self._build()

    def _build(self) -> None:
        while self.form.rowCount():
            self.form.removeRow(0)
        for row in self.rows.values():
            self.messages.removeWidget(row.error)
            row.error.deleteLater()
        self.rows.clear()
        if self.node_id is None:
            self.hint.setText("Select a block to edit its attributes.")
            self.hint.show()
            self.scroll.hide()
            return
        node = self.doc.canvas.nodes[self.node_id]
        spec = get_spec(node.type)
        self.hint.hide()
        self.scroll.show()
        self.type_label.setText(
            f"<b>{spec.title}</b> <span style='color:#8a8f98'>· id <code>{self.node_id}</code>"
            + (f" · {spec.op}" if spec.op else "") + "</span>")
        self.doc_label.setText(spec.doc.strip())
        self.doc_label.setVisible(bool(spec.doc))
        for a in spec.attrs:
            label = QtWidgets.QLabel(a.name, self.form_host)
            label.setToolTip(a.doc or a.name)
            editor = make_editor(a, self.form_host, base_dir=lambda: self.doc.base_dir)
            editor.setObjectName(f"attr_{a.name}")
            editor.committed.connect(lambda name=a.name: self.commit(name))
            error = MessageLabel("", self.body)
            error.setObjectName(f"error_{a.name}")
            error.setStyleSheet("color: #f07868; font-size: 8pt;")
            error.hide()
            self.messages.addWidget(error)
            self.form.addRow(label, editor)
            self.rows[a.name] = _Row(self.form, label, editor, error)
        self._chain_tab_order()
        self.refresh()

    def _chain_tab_order(self) -> None:
        """Tab goes title -> each attribute's fields in order (editors are made long after the
        other docks' widgets, which the default focus chain would visit first)."""
        previous: QtWidgets.QWidget = self.title_edit
        for row in self.rows.values():
            for field in _focus_fields(row.editor):
                QtWidgets.QWidget.setTabOrder(previous, field)
                previous = field

    # --- showing values --------------------------------------------------------------------
    def refresh(self) -> None:
        """Show the node's current values (pending invalid text where there is one)."""
        if self.node_id is None:
            return
        node = self.doc.canvas.nodes.get(self.node_id)
        if node is None:
            self.show_node(None)
            return
        spec = get_spec(node.type)
        if set(self.rows) != {a.name for a in spec.attrs}:
            self._build()
            return
        if not self.title_edit.hasFocus():
            self.title_edit.setText(node.title or node.id)
        attrs = {**spec.defaults(), **node.attrs}
        pending = self.session.pending_for(self.node_id)
        for a in spec.attrs:
            row = self.rows[a.name]
            row.editor.set_context(attrs)
            if a.name in pending:
                row.editor.set_raw(pending[a.name][0])
            else:
                row.editor.set_value(attrs.get(a.name))
        self._show_errors()

    def _show_errors(self) -> None:
        if self.node_id is None or self.node_id not in self.doc.canvas.nodes:
            return
        node = self.doc.canvas.nodes[self.node_id]
        spec = get_spec(node.type)
        attrs = {**spec.defaults(), **node.attrs}
        by_attr: dict[str, list[str]] = {}
        general: list[str] = []
        for name, (_raw, msg) in self.session.pending_for(self.node_id).items():
            by_attr.setdefault(name, []).append(msg)
        plan = self.session.plan
        hint = self._size_hint = input_size_hint(self.doc.canvas, plan, self.node_id)
        self.sizes_label.setText(f"input_sizes {hint.html()}" if hint else "")
        self.sizes_label.setToolTip("Click a size to set it in the IntVector feeding input_sizes"
                                    if hint and hint.source else "")
        self.sizes_label.setVisible(hint is not None)
        for err in (plan.errors.get(self.node_id, []) if plan is not None else []):
            attr = getattr(err, "attr", None)
            if attr in self.rows and attr not in self.session.pending_for(self.node_id):
                by_attr.setdefault(attr, []).append(str(err))
            else:
                general.append(str(err))
        info = self.session.run_info.get(self.node_id)
        if info is not None and info.error:
            general.append(f"run failed: {info.error}")
        general += [self.session.last_valid_note(self.node_id, name)
                    for name in self.session.pending_for(self.node_id)]
        for name, row in self.rows.items():
            msg = "\n".join(by_attr.get(name, []))
            row.error.setText(msg)
            row.editor.set_error(msg or None)
            row.set_visible(_visible(row.editor.spec, attrs))
        self.errors_label.setText("\n".join(general))
        self.errors_label.setVisible(bool(general))

    def _on_pending_changed(self, node_id: str) -> None:
        if node_id == self.node_id:
            self.refresh()  # a dropped invalid edit (Undo) shows the last valid value again

    # --- editing ---------------------------------------------------------------------------
    def commit(self, name: str) -> bool:
        """Validate the edited field and apply it; True when the canvas accepted the value."""
        nid = self.node_id
        if nid is None or name not in self.rows:
            return False
        row = self.rows[name]
        spec = row.editor.spec
        raw = row.editor.raw_text()
        try:
            value = spec.validate(row.editor.parse())
        except InvalidArgumentError as exc:
            self.session.set_pending(nid, name, raw,
                                     _named(self.session.label(nid), name, str(exc)))
            return False
        self.session.clear_pending(nid, name)
        changes = {name: value, **self._relayout(nid, name, value)}
        label = f"Set {self.session.label(nid)}.{name}"
        if len(changes) > 1:
            label += f" ({', '.join(list(changes)[1:])} follow the axes)"

        def mutate(c) -> None:
            for attr, v in changes.items():
                c.set_attr(nid, attr, v)
        try:
            self.doc.edit(label, mutate)  # one undo step
        except InvalidArgumentError as exc:
            self.session.set_pending(nid, name, raw,
                                     _named(self.session.label(nid), name, str(exc)))
            return False
        self.refresh()
        return True

    def _relayout(self, nid: str, name: str, value) -> dict:
        """Switching data_format moves strides, dilations and explicit_paddings with the axes
        (:func:`blocks.conv.relayout_attrs`), and switching a check block's op to one of
        another rank moves them to its layout (:func:`blocks.check_support.rank_attrs`): the
        attributes that change."""
        node = self.doc.canvas.nodes[nid]
        spec = get_spec(node.type)
        attrs = {**spec.defaults(), **node.attrs}
        if name == "op" and OP_ATTR in spec.attrs:
            return {a: v for a, v in rank_attrs(attrs, value).items() if v != attrs.get(a)}
        if name != "data_format" or not {"strides", "dilations"} <= set(attrs):
            return {}
        if attrs.get("data_format") == value:
            return {}
        moved = relayout_attrs(attrs, value)
        return {a: v for a, v in moved.items() if v != attrs.get(a)}

    def _choose_input_size(self, link: str) -> None:
        """A size link of the input-size hint (``H:7``): set it in the feeding IntVector."""
        hint = self._size_hint
        if hint is None or hint.source is None or hint.source not in self.doc.canvas.nodes:
            return
        dim, size = link.split(":")
        values = hint.with_size(dim, int(size))
        src = hint.source
        self.doc.edit(f"Set {self.session.label(src)}.values",
                      lambda c: c.set_attr(src, "values", values))

    def _title_finished(self) -> None:
        nid = self.node_id
        if nid is None or nid not in self.doc.canvas.nodes:
            return
        title = self.title_edit.text().strip()
        if not title:
            self.title_edit.setText(self.doc.canvas.nodes[nid].title or nid)
            return
        try:
            self.doc.edit(f"Rename {self.session.label(nid)}", lambda c: c.set_title(nid, title))
        except InvalidArgumentError as exc:  # e.g. a title longer than 200 characters
            self.title_edit.setText(self.doc.canvas.nodes[nid].title)
            self.errors_label.setText(f"Rename {self.session.label(nid)}: {exc}")
            self.errors_label.setVisible(True)


def _named(label: str, attr: str, message: str) -> str:
    """A validation message in the compiler's form: ``grad.strides: <message>``, the block
    named by its label (its title, :mod:`engine.graph.labels`)."""
    prefix = f"{label}.{attr}: "
    return message if message.startswith(prefix) else prefix + message


def _focus_fields(editor: QtWidgets.QWidget) -> list[QtWidgets.QWidget]:
    """The widgets of ``editor`` that Tab stops at, in creation order (the editor itself when
    it takes focus directly)."""
    tabbable = QtCore.Qt.TabFocus
    fields = [w for w in editor.findChildren(QtWidgets.QWidget)
              if w.focusPolicy() & tabbable and w.focusProxy() is None
              and not w.isWindow() and not any(p.isWindow() for p in _parents(w, editor))]
    if editor.focusPolicy() & tabbable and editor.focusProxy() is None:
        fields.insert(0, editor)
    return fields


def _parents(widget: QtWidgets.QWidget, stop: QtWidgets.QWidget) -> list[QtWidgets.QWidget]:
    """``widget``'s parents below ``stop`` (a combo box's popup list sits in its own window)."""
    out, p = [], widget.parentWidget()
    while p is not None and p is not stop:
        out.append(p)
        p = p.parentWidget()
    return out
