"""File > Import Layer... driven as a user: the menu entry, the model chosen in the (patched)
file dialog, a layer clicked in the list, an input size typed, Import -> the canvas opens with
the six blocks, and a run gives the model's own forward."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6 import QtCore, QtWidgets
from PySide6.QtTest import QTest

from app.import_dialog import ImportLayerDialog
from tests import model_files as mf
from tests.app_support import wait_run

SIX = {"input", "filter", "forward", "out_backprop", "grad_filter", "grad_input"}


def file_dialogs(monkeypatch, model: Path, canvas: Path) -> None:
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                        lambda *a, **k: (str(model), ""))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        lambda *a, **k: (str(canvas), ""))


def open_dialog(qtbot, window) -> ImportLayerDialog:
    file_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&File")
    entry = next(a for a in file_menu.actions() if a.text() == "&Import Layer…")
    entry.trigger()
    dialog = window.findChild(ImportLayerDialog)
    qtbot.waitExposed(dialog)
    QTest.mouseClick(dialog.choose_button, QtCore.Qt.LeftButton)
    return dialog


def click_row(dialog: ImportLayerDialog, name: str) -> None:
    table = dialog.table
    row = next(r for r in range(table.rowCount()) if table.item(r, 0).text() == name)
    rect = table.visualItemRect(table.item(row, 0))
    QTest.mouseClick(table.viewport(), QtCore.Qt.LeftButton, pos=rect.center())


def type_into(spin: QtWidgets.QSpinBox, text: str) -> None:
    spin.setFocus()
    spin.selectAll()
    QTest.keyClicks(spin, text)
    QTest.keyClick(spin, QtCore.Qt.Key_Tab)


def test_import_onnx_layer_opens_its_canvas_and_runs(qtbot, window, tmp_path, monkeypatch):
    model = mf.write_onnx(tmp_path / "small.onnx")
    canvas = tmp_path / "imported.gbc.json"
    file_dialogs(monkeypatch, model, canvas)
    dialog = open_dialog(qtbot, window)
    names = [dialog.table.item(r, 0).text() for r in range(dialog.table.rowCount())]
    assert names == ["conv_grouped", "conv_dw_lower", "conv_upper", "conv_valid"]
    assert "conv3d" in dialog.refused_label.text()
    assert not dialog.ok_button.isEnabled()
    click_row(dialog, "conv_dw_lower")
    assert dialog.height_spin.value() == 9  # the model's input size, shown
    type_into(dialog.height_spin, "11")
    type_into(dialog.batch_spin, "2")
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    qtbot.waitUntil(lambda: window.doc.path == canvas.resolve())
    nodes = window.doc.canvas.nodes
    assert SIX <= set(nodes)
    assert nodes["forward"].type == "DepthwiseConv2D"
    assert nodes["input"].attrs["shape"] == [2, 4, 11, 8]
    assert len(list(tmp_path.glob("imported.filter.*.npy"))) == 1  # named by its content
    wait_run(qtbot, window)
    outputs = window.session.outputs
    x = outputs[("input", "output")]
    np.testing.assert_allclose(outputs[("forward", "output")],
                               mf.onnx_forward("conv_dw_lower", x), rtol=1e-4, atol=1e-4)


def test_untranslatable_choice_says_why_and_stays_open(qtbot, window, tmp_path, monkeypatch):
    model = mf.write_onnx(tmp_path / "small.onnx")
    canvas = tmp_path / "c.gbc.json"
    file_dialogs(monkeypatch, model, canvas)
    dialog = open_dialog(qtbot, window)
    click_row(dialog, "conv_valid")  # 1x2 kernel, dilation 3: needs width >= 4
    type_into(dialog.width_spin, "3")
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    assert dialog.isVisible()
    assert "layer 'conv_valid'" in dialog.error_label.text()
    assert "empty" in dialog.error_label.text()
    assert not canvas.exists()
    assert window.doc.path is None
    QTest.mouseClick(dialog.buttons.button(QtWidgets.QDialogButtonBox.Cancel),
                     QtCore.Qt.LeftButton)
    assert not dialog.isVisible()


@pytest.mark.parametrize("bad", ["corrupt.onnx"])
def test_corrupt_model_is_a_message_in_the_dialog(qtbot, window, tmp_path, monkeypatch, bad):
    model = tmp_path / bad
    model.write_bytes(b"\x00garbage" * 20)
    file_dialogs(monkeypatch, model, tmp_path / "c.gbc.json")
    dialog = open_dialog(qtbot, window)
    assert "not a readable ONNX model" in dialog.error_label.text()
    assert dialog.table.rowCount() == 0
    assert not dialog.ok_button.isEnabled()
    dialog.reject()


def test_a_hostile_layer_name_is_shown_escaped_and_suggests_a_safe_file(qtbot, window, tmp_path,
                                                                        monkeypatch):
    """A layer named ``../\\x1b[31mred\\x07`` shows escaped in the table, and the save dialog
    starts at a plain file name in the canvas folder (never a path out of it)."""
    from tests.test_onnx_hostile import conv_model

    model = conv_model(tmp_path / "m.onnx", name="../\x1b[31mred\x07")
    asked = {}

    def save_name(parent, caption, start, *rest):
        asked["start"] = start
        return "", ""

    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                        lambda *a, **k: (str(model), ""))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName", save_name)
    dialog = open_dialog(qtbot, window)
    assert dialog.table.item(0, 0).text() == "../\\x1b[31mred\\x07"
    dialog.table.selectRow(0)
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    name = Path(asked["start"]).name
    assert name == "__x1b_31mred_x07.gbc.json"
    assert Path(asked["start"]).parent.name != ".."
    assert dialog.isVisible()  # cancelled: nothing written, still open
