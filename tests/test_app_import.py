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
    assert (tmp_path / "imported.filter.npy").exists()
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
