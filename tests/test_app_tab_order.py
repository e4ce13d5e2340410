"""Tab walks a block's attribute panel as a form: title, then each attribute's fields in
order (a walkthrough under a real X server found Tab leaving the title for the scroll area, the
viewer's tabs and 'Pin for compare', so typed values went nowhere)."""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtWidgets

from tests.app_support import wait_run
from tests.test_app_defects_panels import open_file
from tests.test_app_input_size_hint import click_block

EXAMPLES = Path(__file__).parents[1] / "assets" / "examples"


def _owner(widget: QtWidgets.QWidget | None, panel) -> str | None:
    """The attribute (or ``title``) whose editor holds ``widget``; None outside the panel."""
    if widget is panel.title_edit:
        return "title"
    for name, row in panel.rows.items():
        if widget is row.editor or row.editor.isAncestorOf(widget):
            return name
    return None


def test_tab_from_the_title_walks_the_attribute_fields_in_order(qtbot, window, monkeypatch):
    w = window
    open_file(qtbot, w, monkeypatch, EXAMPLES / "conv2d_backprop_filter.gbc.json")
    wait_run(qtbot, w)
    click_block(w, "grad_filter")
    panel = w.attributes
    panel.title_edit.setFocus()
    qtbot.waitUntil(lambda: QtWidgets.QApplication.focusWidget() is panel.title_edit)
    seen = ["title"]
    for _ in range(40):
        qtbot.keyClick(QtWidgets.QApplication.focusWidget(), QtCore.Qt.Key_Tab)
        owner = _owner(QtWidgets.QApplication.focusWidget(), panel)
        if owner is None:
            break
        if owner != seen[-1]:
            seen.append(owner)
    visible = [name for name, row in panel.rows.items() if row.editor.isVisibleTo(panel)]
    assert seen[:len(visible) + 1] == ["title", *visible], seen
