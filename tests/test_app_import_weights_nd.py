"""File > Import Layer... on a bare weights file of 5-D and 3-D tensors, with --attrs typed in
the dialog: the 3-D conv gets the depth box and imports as Conv3D at the size typed; the 1-D
conv imports as the 2-D conv of height 1 (tests/test_import_weights_nd.py checks the numbers)."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore
from PySide6.QtTest import QTest

from tests.test_app_import import click_row, file_dialogs, open_dialog, selectable_names, type_into


def test_weights_of_3d_and_1d_convs_import_in_the_dialog(qtbot, window, tmp_path, monkeypatch):
    rng = np.random.default_rng(7)
    model, canvas = tmp_path / "w.npz", tmp_path / "c.gbc.json"
    np.savez(model, **{"c3.weight": rng.standard_normal((4, 2, 3, 3, 3)).astype(np.float32),
                       "c1.weight": rng.standard_normal((3, 2, 3)).astype(np.float32)})
    file_dialogs(monkeypatch, model, canvas)
    dialog = open_dialog(qtbot, window)
    dialog.attrs_edit.setText("strides=2 pads=1,1")  # 1-D pads: the 3-D layer is refused
    dialog.reload()
    assert selectable_names(dialog) == ["c1"]
    table = dialog.table
    tip = next(table.item(r, 0).toolTip() for r in range(table.rowCount())
               if table.item(r, 0).text() == "c3")
    assert "layer 'c3': --attrs pads=1,1 has 2 numbers, expected 6 for a 3-D conv" in tip
    dialog.attrs_edit.setText("strides=2")
    dialog.reload()
    assert selectable_names(dialog) == ["c3", "c1"]
    click_row(dialog, "c3")
    assert dialog.depth_spin.isVisible()
    for spin, text in ((dialog.depth_spin, "5"), (dialog.height_spin, "6"),
                       (dialog.width_spin, "7")):
        type_into(spin, text)
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    qtbot.waitUntil(lambda: window.doc.path == canvas.resolve())
    assert window.doc.canvas.nodes["forward"].type == "Conv3D"
    assert window.doc.canvas.nodes["input"].attrs["shape"] == [1, 2, 5, 6, 7]
    assert window.doc.canvas.nodes["forward"].attrs["strides"] == [1, 1, 2, 2, 2]
