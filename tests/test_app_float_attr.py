"""The float attribute editor (GradCheck's epsilon): typed text + Enter sets the canvas value;
text that is no number, or a number the spec refuses, is a message on the field."""

from __future__ import annotations

import pytest

from tests.app_support import close_window, make_window, no_dialogs

QtCore = pytest.importorskip("PySide6.QtCore")
from PySide6 import QtTest

from tests.test_gradcheck import check_canvas


@pytest.fixture
def check_window(qtbot, tmp_path, monkeypatch):
    no_dialogs(monkeypatch)
    w = make_window(qtbot, tmp_path, check_canvas("Conv2D", "float32", {}, samples=4))
    w.adapter.select(["gc_filter"])
    yield w
    close_window(w)


def type_and_enter(editor, text: str) -> None:
    edit = editor.edit
    edit.setFocus()
    edit.selectAll()
    QtTest.QTest.keyClick(edit, QtCore.Qt.Key_Backspace)
    QtTest.QTest.keyClicks(edit, text)
    QtTest.QTest.keyClick(edit, QtCore.Qt.Key_Return)


def test_typing_a_float_and_enter_sets_the_attribute(check_window, tmp_path):
    from app.attr_editors import FloatEditor

    w = check_window
    row = w.attributes.rows["epsilon"]
    assert isinstance(row.editor, FloatEditor)
    assert row.editor.edit.text() == "0.001"  # the default, as Python writes it
    type_and_enter(row.editor, "2.5e-4")
    assert w.doc.canvas.nodes["gc_filter"].attrs["epsilon"] == 2.5e-4
    assert row.error.text() == ""
    assert row.editor.edit.text() == "0.00025"
    w.grab().save(str(tmp_path / "float_editor.png"))
    w.doc.undo_stack.undo()
    assert "epsilon" not in w.doc.canvas.nodes["gc_filter"].attrs
    assert row.editor.edit.text() == "0.001"


@pytest.mark.parametrize(("text", "message"), [
    ("abc", "gc_filter.epsilon: epsilon must be a number (e.g. 0.001 or 1e-3), got 'abc'"),
    ("", "gc_filter.epsilon: epsilon must be a number (e.g. 0.001 or 1e-3), got an empty field"),
    ("nan", "gc_filter.epsilon: epsilon must be a finite number, got nan"),
    ("0", "gc_filter.epsilon: epsilon must be >= 1e-12, got 0.0"),
])
def test_bad_text_is_a_message_on_the_field_and_changes_nothing(check_window, text, message):
    w = check_window
    row = w.attributes.rows["epsilon"]
    n_undo = w.doc.undo_stack.count()
    type_and_enter(row.editor, text)
    assert row.error.text() == message and row.error.isVisible()
    assert "e0503c" in row.editor.edit.styleSheet()
    assert row.editor.edit.text() == text  # what was typed stays to be fixed
    assert "epsilon" not in w.doc.canvas.nodes["gc_filter"].attrs
    assert w.doc.undo_stack.count() == n_undo
    type_and_enter(row.editor, "0.5")
    assert w.doc.canvas.nodes["gc_filter"].attrs["epsilon"] == 0.5
    assert row.error.text() == ""
