"""File > Import Layer... driven as a user: the menu entry, the model chosen in the (patched)
file dialog, a layer clicked in the list, an input size typed, Import -> the canvas opens with
the six blocks, and a run gives the model's own forward. Several layers ctrl-clicked: one canvas
with a frame per layer (each frame holding its layer's blocks, each layer's results those of its
own import) or one canvas each in a folder (index.json as `import --all` writes it); a refused
layer greyed and not selectable; problems one line in the dialog.

``GRADBLOCKS_SAVE_SCREENSHOTS=1`` also saves assets/screenshots/import_layers.png."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6 import QtCore, QtWidgets
from PySide6.QtTest import QTest

import engine
from app.import_dialog import EACH_TEXT, MERGED_TEXT, ImportLayerDialog
from engine.graph.layer_canvas import read_model, write_layer_canvas
from tests import model_files as mf
from tests.app_support import wait_run

SIX = {"input", "filter", "forward", "out_backprop", "grad_filter", "grad_input"}
ROOT = Path(__file__).parents[1]
SHOTS = ROOT / "assets" / "screenshots"
#: float32 conv against the float64 definition (sums of at most a few hundred products).
FORWARD_TOL = 1e-4


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


def click_row(dialog: ImportLayerDialog, name: str,
              modifier=QtCore.Qt.KeyboardModifier.NoModifier) -> None:
    """A click (ctrl-click with ``modifier`` ControlModifier) on the layer's name in the list."""
    table = dialog.table
    row = next(r for r in range(table.rowCount()) if table.item(r, 0).text() == name)
    rect = table.visualItemRect(table.item(row, 0))
    QTest.mouseClick(table.viewport(), QtCore.Qt.LeftButton, modifier, rect.center())


def row_names(dialog: ImportLayerDialog, selectable: bool) -> list[str]:
    table = dialog.table
    return [table.item(r, 0).text() for r in range(table.rowCount())
            if bool(table.item(r, 0).flags() & QtCore.Qt.ItemIsSelectable) == selectable]


def selectable_names(dialog: ImportLayerDialog) -> list[str]:
    return row_names(dialog, True)


def greyed_names(dialog: ImportLayerDialog) -> list[str]:
    return row_names(dialog, False)


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
    assert selectable_names(dialog) == ["conv_grouped", "conv_dw_lower", "conv_upper",
                                        "conv_valid", "conv3d"]
    assert greyed_names(dialog) == ["conv_same_dilated"]  # refused: listed, greyed
    assert "conv_same_dilated" in dialog.refused_label.text()
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


def gb(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], check=False,
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def screenshot(widget: QtWidgets.QWidget, name: str) -> None:
    if os.environ.get("GRADBLOCKS_SAVE_SCREENSHOTS") == "1":
        assert widget.grab().save(str(SHOTS / name))


def choose(dialog: ImportLayerDialog, text: str) -> None:
    radio = next(r for r in (dialog.merged_radio, dialog.each_radio) if r.text() == text)
    assert radio.isEnabled()
    QTest.mouseClick(radio, QtCore.Qt.LeftButton)
    assert radio.isChecked()


CTRL = QtCore.Qt.KeyboardModifier.ControlModifier
THREE = ("conv_grouped", "conv_dw_lower", "conv_valid")


def test_three_layers_make_one_canvas_a_frame_each(qtbot, window, tmp_path, monkeypatch):
    model = mf.write_onnx(tmp_path / "small.onnx")
    canvas = tmp_path / "three.gbc.json"
    file_dialogs(monkeypatch, model, canvas)
    dialog = open_dialog(qtbot, window)
    rows = {dialog.table.item(r, 0).text(): r for r in range(dialog.table.rowCount())}
    assert [dialog.table.item(rows["conv_dw_lower"], c).text() for c in (1, 9, 10)] == [
        "depthwise", "1x4x9x8", "1x8x5x4"]  # op, input and output shapes
    click_row(dialog, THREE[0])
    assert not dialog.merged_radio.isEnabled()  # one layer: the single import
    for name in THREE[1:]:
        click_row(dialog, name, CTRL)
    assert [la.name for la in dialog.chosen_layers()] == list(THREE)
    assert dialog.count_label.text() == "3 of 5 layers selected"
    assert not dialog.height_spin.isEnabled()  # several layers: the model's sizes
    screenshot(dialog, "import_layers.png")
    choose(dialog, MERGED_TEXT)
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    qtbot.waitUntil(lambda: window.doc.path == canvas.resolve())
    assert "Imported 3 layers into" in window.statusBar().currentMessage()

    doc = window.doc.canvas
    assert [f.title for f in doc.frames.values()] == [
        "conv_grouped (grouped)", "conv_dw_lower (depthwise)", "conv_valid (Conv2D)"]
    boxes = window.adapter.node_boxes()  # the blocks as drawn
    held = {}
    for f in doc.frames.values():
        fx, fy, fw, fh = (*f.pos, *f.size)
        held[f.title.split(" ")[0]] = {
            cid for cid, (x, y, w, h) in boxes.items()
            if fx <= x and fy <= y and x + w <= fx + fw and y + h <= fy + fh}
        touching = {cid for cid, (x, y, w, h) in boxes.items()
                    if x < fx + fw and fx < x + w and y < fy + fh and fy < y + h}
        assert touching == held[f.title.split(" ")[0]]
    for name in THREE:
        assert held[name] == {cid for cid in doc.nodes if cid.startswith(f"{name}__")}
        assert SIX <= {cid.split("__")[1] for cid in held[name]}
    check = gb("check", canvas)
    assert check.returncode == 0, check.stdout + check.stderr

    wait_run(qtbot, window)
    outputs = window.session.outputs
    found = read_model(str(model))
    for name in THREE:
        single = tmp_path / f"{name}.gbc.json"
        write_layer_canvas(found.find(name, str(model)), str(single))
        alone = engine.load(single).run()
        for result in ("forward", "grad_filter", "grad_input"):
            np.testing.assert_array_equal(outputs[(f"{name}__{result}", "output")],
                                          alone[result])
        x = outputs[(f"{name}__input", "output")]
        np.testing.assert_allclose(outputs[(f"{name}__forward", "output")],
                                   mf.onnx_forward(name, x), rtol=FORWARD_TOL, atol=FORWARD_TOL)


def test_select_all_one_canvas_each_writes_the_folder_as_import_all(qtbot, window, tmp_path,
                                                                   monkeypatch):
    model = mf.write_onnx(tmp_path / "small.onnx")
    folder = tmp_path / "layers"
    folder.mkdir()
    file_dialogs(monkeypatch, model, tmp_path / "unused.gbc.json")
    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory",
                        lambda *a, **k: str(folder))
    dialog = open_dialog(qtbot, window)
    QTest.mouseClick(dialog.select_all_button, QtCore.Qt.LeftButton)
    assert [la.name for la in dialog.chosen_layers()] == [
        "conv_grouped", "conv_dw_lower", "conv_upper", "conv_valid", "conv3d"]
    choose(dialog, EACH_TEXT)
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    qtbot.waitUntil(lambda: window.doc.path == (folder / "conv_grouped.gbc.json").resolve())
    message = window.statusBar().currentMessage()
    assert f"Imported 5 canvases into {folder} (index.json lists them)" in message
    index = json.loads((folder / "index.json").read_text())
    cli = gb("import", model, "--all", "-o", tmp_path / "cli")
    assert cli.returncode == 0, cli.stderr
    expected = [item for item in json.loads((tmp_path / "cli" / "index.json").read_text())
                if "canvas" in item]  # the CLI's index also lists the refused layer
    assert index == expected
    assert gb("check", folder / index[0]["canvas"]).returncode == 0  # the one that opened


def test_a_refused_layer_is_greyed_and_cannot_be_selected(qtbot, window, tmp_path,
                                                         monkeypatch):
    model = mf.write_onnx(tmp_path / "small.onnx")
    file_dialogs(monkeypatch, model, tmp_path / "c.gbc.json")
    dialog = open_dialog(qtbot, window)
    table = dialog.table
    row = next(r for r in range(table.rowCount())
               if table.item(r, 0).text() == "conv_same_dilated")
    assert table.item(row, 0).toolTip().startswith(
        "layer 'conv_same_dilated': auto_pad SAME_UPPER with dilations [2, 2]")
    assert not table.item(row, 0).flags() & QtCore.Qt.ItemIsEnabled  # drawn greyed
    click_row(dialog, "conv_same_dilated")
    assert dialog.chosen_layers() == [] and not dialog.ok_button.isEnabled()
    click_row(dialog, "conv_upper")
    click_row(dialog, "conv_same_dilated", CTRL)
    assert [la.name for la in dialog.chosen_layers()] == ["conv_upper"]
    QTest.mouseClick(dialog.select_all_button, QtCore.Qt.LeftButton)
    assert len(dialog.chosen_layers()) == 5
    dialog.reject()


def test_problems_are_one_line_in_the_dialog(qtbot, window, tmp_path, monkeypatch):
    """A folder holding a file of the user's that the set would replace; a merged canvas
    saved over the model itself: one line each, nothing written, the dialog stays open."""
    model = mf.write_onnx(tmp_path / "small.onnx")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "conv_upper.gbc.json").write_text("my own notes")
    file_dialogs(monkeypatch, model, model)  # the save dialog answers the model's own path
    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory",
                        lambda *a, **k: str(folder))
    dialog = open_dialog(qtbot, window)
    click_row(dialog, "conv_grouped")
    click_row(dialog, "conv_upper", CTRL)
    choose(dialog, EACH_TEXT)
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    text = dialog.error_label.text()
    assert "holds 'conv_upper.gbc.json', a file no earlier `import --all` wrote" in text
    assert "\n" not in text
    assert sorted(p.name for p in folder.iterdir()) == ["conv_upper.gbc.json"]
    assert (folder / "conv_upper.gbc.json").read_text() == "my own notes"
    before = model.read_bytes()
    choose(dialog, MERGED_TEXT)
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    text = dialog.error_label.text()
    assert "the model being read" in text and "\n" not in text
    assert model.read_bytes() == before
    assert dialog.isVisible() and window.doc.path is None
    dialog.reject()


def test_several_layers_without_input_sizes_say_to_import_one_alone(qtbot, window, tmp_path,
                                                                    monkeypatch):
    """Bare weights state no input size: each layer is selectable (its row's tooltip says what
    it needs) and imports alone with a size typed; two of them say so in one line."""
    rng = np.random.default_rng(5)
    model = tmp_path / "w.npz"
    np.savez(model, **{"a.weight": rng.standard_normal((3, 2, 3, 3)).astype(np.float32),
                       "b.weight": rng.standard_normal((4, 3, 1, 1)).astype(np.float32)})
    canvas = tmp_path / "a.gbc.json"
    file_dialogs(monkeypatch, model, canvas)
    dialog = open_dialog(qtbot, window)
    assert selectable_names(dialog) == ["a", "b"]
    assert "give --input-size H,W" in dialog.table.item(0, 0).toolTip()
    click_row(dialog, "a")
    click_row(dialog, "b", CTRL)
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    assert dialog.error_label.text() == ("layer 'a': the model does not say its input size: "
                                         "import it alone, with an input height and width")
    click_row(dialog, "a")
    type_into(dialog.height_spin, "6")
    type_into(dialog.width_spin, "5")
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    qtbot.waitUntil(lambda: window.doc.path == canvas.resolve())
    assert window.doc.canvas.nodes["input"].attrs["shape"] == [1, 2, 6, 5]


def test_a_3d_layer_gets_a_depth_box_and_imports_at_the_size_typed(qtbot, window, tmp_path,
                                                                   monkeypatch):
    """Import Layer on an ONNX model with a 3-D conv: choosing it shows an Input depth box
    with the model's D, H, W; the size typed (D, H and W) is the canvas's input; a 2-D layer
    hides the box again."""
    from tests import nd_models as nd
    from tests.test_import_conv3d import ONNX_INPUTS, ONNX_NODES

    model, canvas = tmp_path / "m3.onnx", tmp_path / "c.gbc.json"
    nd.write_onnx(model, [n for n in ONNX_NODES if n[0] == "c_valid"], ONNX_INPUTS)
    file_dialogs(monkeypatch, model, canvas)
    dialog = open_dialog(qtbot, window)
    assert not dialog.depth_spin.isVisible()  # nothing chosen yet
    click_row(dialog, "c_valid")
    assert dialog.depth_spin.isVisible() and dialog.depth_spin.isEnabled()
    assert (dialog.depth_spin.value(), dialog.height_spin.value(),
            dialog.width_spin.value()) == (5, 6, 7)
    type_into(dialog.depth_spin, "0")
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    assert dialog.error_label.text() == ("give the input depth, height and width, or none of "
                                         "them (the model's size)")
    type_into(dialog.depth_spin, "9")
    type_into(dialog.width_spin, "8")
    QTest.mouseClick(dialog.ok_button, QtCore.Qt.LeftButton)
    qtbot.waitUntil(lambda: window.doc.path == canvas.resolve())
    assert window.doc.canvas.nodes["input"].attrs["shape"] == [1, 4, 9, 6, 8]  # NCDHW, as ONNX
    assert window.doc.canvas.nodes["forward"].type == "Conv3D"
