"""The attribute panel lists every input size consistent with a backprop-input block's
out_backprop shape (the ambiguous input_sizes pitfall)."""

from __future__ import annotations

import html
import re

from PySide6 import QtCore, QtWidgets
from PySide6.QtTest import QTest

from tests.app_support import mouse
from tests.pitfall_canvases import PITFALLS_DIR


def click_block(window, node_id: str) -> None:
    """Press and release on the block's title bar, as a user selects it."""
    view = window.adapter.node(node_id).view
    rect = view.sceneBoundingRect()
    window.adapter.viewer.centerOn(rect.center())
    point = window.adapter.viewer.mapFromScene(QtCore.QPointF(rect.center().x(),
                                                              rect.top() + 8))
    mouse(window, QtCore.QEvent.MouseButtonPress, point)
    mouse(window, QtCore.QEvent.MouseButtonRelease, point)


def hint(window) -> str | None:
    """The line as read (links and bold as plain text), None when hidden."""
    label = window.attributes.sizes_label
    return html.unescape(re.sub("<[^>]+>", "", label.text())) if label.isVisible() else None


def test_selecting_a_backprop_input_block_lists_the_consistent_input_sizes(qtbot, window):
    window.files.open_path(PITFALLS_DIR / "ambiguous_input_sizes.gbc.json", as_example=True)
    click_block(window, "dx_7")
    qtbot.waitUntil(lambda: window.attributes.node_id == "dx_7")
    assert hint(window) == ("input_sizes consistent with out_backprop [1, 4, 4, 3]: "
                            "H in {7, 8}, W in {7, 8}")
    # VALID padding: out = (n - 3 + 2) // 2 = 4 for n = 9, 10 (the 7x7 wiring is now wrong)
    combo = window.attributes.rows["padding"].editor.combo
    combo.setCurrentText("VALID")
    combo.activated.emit(combo.currentIndex())
    assert window.doc.canvas.nodes["dx_7"].attrs["padding"] == "VALID"
    assert window.session.plan.errors.get("dx_7")
    assert hint(window) == ("input_sizes consistent with out_backprop [1, 4, 4, 3]: "
                            "H in {9, 10}, W in {9, 10}")
    # a block without input_sizes shows no such line
    click_block(window, "check_7")
    qtbot.waitUntil(lambda: window.attributes.node_id == "check_7")
    assert hint(window) is None


def test_the_depthwise_backprop_input_block_gets_the_line_too(qtbot, window):
    from engine.graph.canvas import Canvas

    canvas = Canvas()
    canvas.add_node("IntVector", (0, 0), {"values": [1, 9, 9, 2]}, id="sizes")
    canvas.add_node("Tensor", (0, 150), {"shape": [3, 3, 2, 1]}, id="w")
    canvas.add_node("Tensor", (0, 300), {"shape": [1, 3, 3, 2]}, id="dy")
    canvas.add_node("DepthwiseBackpropInput", (350, 100),
                    {"strides": [1, 3, 3, 1], "padding": "VALID"}, id="dx")
    for src, port in (("sizes", "input_sizes"), ("w", "filter"), ("dy", "out_backprop")):
        canvas.connect((src, "output"), ("dx", port))
    window.doc.load(canvas, None)
    click_block(window, "dx")
    qtbot.waitUntil(lambda: window.attributes.node_id == "dx")
    # VALID, k 3, stride 3: out = (n - 3 + 3) // 3 = 3 for n = 9, 10, 11
    assert hint(window) == ("input_sizes consistent with out_backprop [1, 3, 3, 2]: "
                            "H in {9, 10, 11}, W in {9, 10, 11}")


def test_a_size_link_sets_the_intvector_feeding_input_sizes_by_keyboard(qtbot, window):
    window.files.open_path(PITFALLS_DIR / "ambiguous_input_sizes.gbc.json", as_example=True)
    click_block(window, "dx_7")
    qtbot.waitUntil(lambda: window.attributes.node_id == "dx_7")
    label = window.attributes.sizes_label
    assert "<b>7</b>" in label.text()  # the current size stands out
    window.activateWindow()
    qtbot.waitUntil(lambda: QtWidgets.QApplication.activeWindow() is window)
    label.setFocus()
    qtbot.waitUntil(label.hasFocus)
    QTest.keyClick(label, QtCore.Qt.Key_Tab)  # H 7
    QTest.keyClick(label, QtCore.Qt.Key_Tab)  # H 8
    QTest.keyClick(label, QtCore.Qt.Key_Return)
    assert window.doc.canvas.nodes["sizes_7"].attrs["values"] == [1, 8, 7, 2]
    spec = window.session.plan.specs[("dx_7", "output")]
    assert spec.shape == (1, 8, 7, 2) and not window.session.plan.errors.get("dx_7")
    window.doc.undo_stack.undo()
    assert window.doc.canvas.nodes["sizes_7"].attrs["values"] == [1, 7, 7, 2]


def test_no_links_when_input_sizes_does_not_come_from_an_intvector(qtbot, window):
    window.files.open_path(PITFALLS_DIR / "nhwc_vs_nchw.gbc.json", as_example=True)
    click_block(window, "dx")
    qtbot.waitUntil(lambda: window.attributes.node_id == "dx")
    assert hint(window) == ("input_sizes consistent with out_backprop [4, 12, 12, 8]: "
                            "H in {12}, W in {12}")
    assert "<a " not in window.attributes.sizes_label.text()  # fed by ShapeOf
