"""The attribute panel: typed editors from the AttrSpecs, immediate validation shown on the field
and on the node, undoable edits, explicit_paddings only with EXPLICIT padding, tooltips."""

from __future__ import annotations

import html

import numpy as np
import pytest

from tests.app_support import close_window, grad_canvas, make_window, no_dialogs

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtWidgets

from blocks.registry import get_spec
from engine.graph.canvas import Canvas


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, grad_canvas())
    w.adapter.select(["grad"])
    yield w
    close_window(w)


def type_cells(editor, values) -> None:
    """Type into the cells of a 4/8-int editor and leave the last one (editingFinished)."""
    for cell, v in zip(editor.cells, values):
        cell.setText(str(v))
    editor.cells[-1].editingFinished.emit()


def out_label(w, node_id, port="output") -> str:
    node = w.adapter.node(node_id)
    return node.view.get_output_text_item(node.outputs()[port].view).toPlainText()


def test_panel_builds_typed_editors_with_spec_tooltips(window):
    from app.attr_editors import CheckEditor, ComboEditor
    from app.cells_editor import IntCellsEditor

    rows = window.attributes.rows
    spec = get_spec("Conv2DBackpropFilter")
    assert isinstance(rows["strides"].editor, IntCellsEditor)
    assert isinstance(rows["dilations"].editor, IntCellsEditor)
    assert isinstance(rows["explicit_paddings"].editor, IntCellsEditor)
    assert isinstance(rows["padding"].editor, ComboEditor)
    assert isinstance(rows["data_format"].editor, ComboEditor)
    assert isinstance(rows["use_cudnn_on_gpu"].editor, CheckEditor)
    combo = rows["padding"].editor.combo
    assert [combo.itemText(i) for i in range(combo.count())] == ["SAME", "VALID", "EXPLICIT"]
    for name, row in rows.items():
        assert row.label.toolTip() == spec.attr(name).doc
    # the strides cells are labelled with the data_format's axes
    assert [h.text() for h in rows["strides"].editor.headers] == ["N", "H", "W", "C"]
    assert [c.text() for c in rows["strides"].editor.cells] == ["1", "1", "1", "1"]


def test_valid_edit_updates_canvas_shapes_and_is_undoable(window):
    w = window
    assert out_label(w, "grad") == "output  3×3×2×2 f32"
    combo = w.attributes.rows["padding"].editor.combo
    combo.setCurrentText("VALID")
    combo.activated.emit(combo.currentIndex())
    assert w.doc.canvas.nodes["grad"].attrs["padding"] == "VALID"
    # VALID with a 3x3 filter on 5x5 needs a 3x3 out_backprop: the 5x5 dy is now a mismatch
    assert w.session.plan.errors.get("grad")
    assert w.adapter.node("grad").view.color[:3] == (120, 36, 36)
    w.doc.undo_stack.undo()
    assert w.doc.canvas.nodes["grad"].attrs.get("padding", "SAME") == "SAME"
    assert combo.currentText() == "SAME"
    assert not w.session.plan.errors.get("grad")
    assert w.adapter.node("grad").view.color[:3] != (120, 36, 36)


def test_strides_edit_changes_inferred_shape(window):
    w = window
    # make dy fit stride 2 (SAME: ceil(5/2) = 3) and then set strides through the cells
    w.doc.edit("dy", lambda c: c.set_attr("dy", "shape", [1, 3, 3, 2]))
    assert w.session.plan.errors.get("grad")  # stride 1 expects a 5x5 out_backprop
    type_cells(w.attributes.rows["strides"].editor, [1, 2, 2, 1])
    assert w.doc.canvas.nodes["grad"].attrs["strides"] == [1, 2, 2, 1]
    assert not w.session.plan.errors.get("grad")
    assert out_label(w, "grad") == "output  3×3×2×2 f32"


def test_invalid_value_is_marked_on_field_and_node_with_the_same_message(window):
    w = window
    row = w.attributes.rows["strides"]
    before = dict(w.doc.canvas.nodes["grad"].attrs)
    n_undo = w.doc.undo_stack.count()
    type_cells(row.editor, [1, 0, 2, 1])
    message = row.error.text()
    assert message.startswith("grad.strides: ")
    assert "0" in message and ">= 1" in message
    assert row.error.isVisible()
    assert "e0503c" in row.editor.cells[0].styleSheet()  # field marked red
    # nothing was silently applied or dropped: canvas unchanged, typed text kept, node red
    assert w.doc.canvas.nodes["grad"].attrs == before
    assert w.doc.undo_stack.count() == n_undo
    assert [c.text() for c in row.editor.cells] == ["1", "0", "2", "1"]
    view = w.adapter.node("grad").view
    assert view.color[:3] == (120, 36, 36)
    assert html.escape(message) in view.toolTip()  # the node's hover text (rich text)
    assert message in w.log.messages("error")
    # fixing it applies the value and clears every mark
    type_cells(row.editor, [1, 1, 1, 1])
    assert row.error.text() == ""
    assert view.color[:3] != (120, 36, 36)
    assert html.escape(message) not in view.toolTip()


def test_non_integer_and_empty_cells_are_rejected(window):
    row = window.attributes.rows["dilations"]
    row.editor.cells[1].setText("")
    row.editor.cells[-1].editingFinished.emit()
    assert "dilations[1] must be an integer" in row.error.text()
    assert "dilations[1] must be an integer" in window.adapter.node("grad").view.toolTip()


def test_compiler_error_is_shown_on_the_attribute_field(window):
    w = window
    type_cells(w.attributes.rows["strides"].editor, [2, 1, 1, 1])  # batch stride: TF refuses
    assert w.doc.canvas.nodes["grad"].attrs["strides"] == [2, 1, 1, 1]  # a valid int list
    errors = [str(e) for e in w.session.plan.errors["grad"]]
    assert any(e.startswith("grad.strides") for e in errors)
    assert w.attributes.rows["strides"].error.text() in errors
    assert w.adapter.node("grad").view.color[:3] == (120, 36, 36)


def test_explicit_paddings_only_shown_for_explicit_padding(window):
    w = window
    row = w.attributes.rows["explicit_paddings"]
    assert not row.editor.isVisible()
    combo = w.attributes.rows["padding"].editor.combo
    combo.setCurrentText("EXPLICIT")
    combo.activated.emit(combo.currentIndex())
    assert row.editor.isVisible()
    assert len(row.editor.cells) == 8
    # (before, after) per axis: pad H and W by 1 on each side keeps 5x5 with a 3x3 filter
    type_cells(row.editor, [0, 0, 1, 1, 1, 1, 0, 0])
    assert w.doc.canvas.nodes["grad"].attrs["explicit_paddings"] == [0, 0, 1, 1, 1, 1, 0, 0]
    assert not w.session.plan.errors.get("grad")
    w.doc.undo_stack.undo()
    w.doc.undo_stack.undo()
    assert not row.editor.isVisible()


def test_data_format_relabels_axes(window):
    combo = window.attributes.rows["data_format"].editor.combo
    combo.setCurrentText("NCHW")
    combo.activated.emit(combo.currentIndex())
    assert [h.text() for h in window.attributes.rows["strides"].editor.headers] == [
        "N", "C", "H", "W"]


def test_tensor_dtype_fill_values_and_bool_editors(window):
    w = window
    w.adapter.select(["x"])
    rows = w.attributes.rows
    assert not rows["values"].editor.isVisible()
    dtype = rows["dtype"].editor.combo
    dtype.setCurrentText("float64")
    dtype.activated.emit(dtype.currentIndex())
    assert out_label(w, "x") == "output  1×5×5×2 f64"
    fill = rows["fill"].editor.combo
    fill.setCurrentText("values")
    fill.activated.emit(fill.currentIndex())
    assert rows["values"].editor.isVisible() and not rows["seed"].editor.isVisible()
    rows["values"].editor.text.setPlainText("[[1, 2, 3], [4, 5, 6]]")
    rows["values"].editor.apply.click()
    assert w.doc.canvas.nodes["x"].attrs["values"] == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert out_label(w, "x") == "output  2×3 f64"
    rows["values"].editor.text.setPlainText("[[1, 2], [3]")
    rows["values"].editor.apply.click()
    assert rows["values"].error.text().startswith("x.values: ")
    assert w.doc.canvas.nodes["x"].attrs["values"] == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    w.adapter.select(["grad"])
    check = w.attributes.rows["use_cudnn_on_gpu"].editor.check
    check.setChecked(False)
    assert w.doc.canvas.nodes["grad"].attrs["use_cudnn_on_gpu"] is False


def test_path_editor_uses_file_picker_relative_to_canvas(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "x.npy", np.arange(50, dtype=np.float32).reshape(1, 5, 5, 2))
    c = Canvas()
    c.add_node("Tensor", id="x", attrs={"fill": "file"})
    from engine.graph.canvas_file import save_canvas

    save_canvas(c, tmp_path / "c.gbc.json")
    w = make_window(qtbot, tmp_path)
    try:
        assert w.files.open_path(tmp_path / "c.gbc.json", ask=False)
        w.adapter.select(["x"])
        monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                            staticmethod(lambda *a, **k: (str(data / "x.npy"), "")))
        editor = w.attributes.rows["path"].editor
        assert editor.isVisible()
        editor.browse()
        assert w.doc.canvas.nodes["x"].attrs["path"] == "data/x.npy"
        assert out_label(w, "x") == "output  1×5×5×2 f32"
    finally:
        close_window(w)


def test_int_vector_values_as_text_and_run_warns_about_pending_edit(qtbot, window):
    from tests.app_support import wait_run

    w = window
    w.adapter.select(["fs"])
    editor = w.attributes.rows["values"].editor
    assert editor.edit.text() == "3, 3, 2, 2"
    editor.edit.setText("[3, 3, 2, x]")
    editor.edit.editingFinished.emit()
    assert w.attributes.rows["values"].error.text() == (
        "fs.values: values[3] must be an integer, got 'x'")
    assert w.doc.canvas.nodes["fs"].attrs["values"] == [3, 3, 2, 2]
    wait_run(qtbot, w)
    assert any("fs.values has an invalid edit" in m for m in w.log.messages("warning"))
    editor.edit.setText("1 1 2 2")
    editor.edit.editingFinished.emit()
    assert w.doc.canvas.nodes["fs"].attrs["values"] == [1, 1, 2, 2]
    assert w.attributes.rows["values"].error.text() == ""
    # the inferred shape follows the edit; the port, greyed, says its last result is stale
    from app.node_item import GREYED_TEXT

    port = w.adapter.node("grad").outputs()["output"].view
    label = w.adapter.node("grad").view.get_output_text_item(port)
    assert label.toPlainText() == "output  1×1×2×2 f32"
    assert label.defaultTextColor() == GREYED_TEXT
    assert "last result is stale" in port.toolTip()


def test_letter_typed_into_an_integer_cell_is_kept_and_marked_with_a_reason(qtbot, window):
    """As every field: the letter goes in, and leaving the cell marks it red with the reason
    below the fields (a validator refused it silently, then under the cells, which moved the
    fields below)."""
    from PySide6 import QtTest

    row = window.attributes.rows["strides"]
    cell = row.editor.cells[1]
    cell.setFocus()
    cell.selectAll()
    QtTest.QTest.keyClicks(cell, "2x")
    assert cell.text() == "2x"
    QtTest.QTest.keyClick(cell, QtCore.Qt.Key_Tab)
    assert row.error.text() == "grad.strides: strides[1] must be an integer, got '2x'"
    assert not row.error.isHidden()
    cell.setFocus()
    QtTest.QTest.keyClick(cell, QtCore.Qt.Key_Backspace)
    QtTest.QTest.keyClick(cell, QtCore.Qt.Key_Tab)
    assert row.error.isHidden()  # fixed: the mark and the reason go


def test_the_panel_header_of_a_block_without_a_tf_op_has_no_dangling_separator(grad_window):
    """Seen on every source block: "Tensor · id x ·" (an empty op name after the dot)."""
    from PySide6 import QtGui

    def header(cid: str) -> str:
        grad_window.adapter.select([cid])
        doc = QtGui.QTextDocument()
        doc.setHtml(grad_window.attributes.type_label.text())
        return doc.toPlainText().strip()

    assert header("x") == "Tensor · id x"
    assert header("grad") == "Conv2D backprop filter · id grad · Conv2DBackpropFilter"
