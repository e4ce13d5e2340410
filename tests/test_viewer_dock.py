"""The viewer dock in the window: block titles where a person reads, the Pin toggle, the side
that Table / Copy / Save act on while comparing, and the pin dropped with its canvas."""

import numpy as np
from PySide6 import QtCore, QtWidgets

from engine.view.stats import montage
from tests.app_support import grad_canvas, wait_run

Qt = QtCore.Qt


def copied_montage() -> np.ndarray:
    """The clipboard's tab-separated montage as floats (empty separator cells as NaN)."""
    rows = QtWidgets.QApplication.clipboard().text().splitlines()
    return np.array([[float(v) if v else np.nan for v in r.split("\t")] for r in rows])


def titled(w) -> None:
    """Give the blocks titles that differ from their ids, as users do."""
    w.doc.edit("titles", lambda c: (c.set_title("dy", "upstream grad"),
                                    c.set_title("grad", "dW")))


def test_viewer_names_blocks_by_title_with_the_id_in_tooltips(qtbot, grad_window):
    w = grad_window
    titled(w)
    wait_run(qtbot, w)
    w.adapter.select(["dy"])
    viewer = w.viewer_dock.viewer
    assert viewer.stats_label.text().startswith("upstream grad:  shape [1, 5, 5, 2]")
    assert "dy.output" not in viewer.stats_label.text()
    assert "dy.output" in viewer.stats_label.toolTip()
    assert "upstream grad: H down × W across" in viewer.info_label.text()
    assert w.viewer_dock.caption.text().startswith("upstream grad · ")
    assert w.viewer_dock.caption.toolTip() == "dy.output"
    w.doc.edit("rename", lambda c: c.set_title("dy", "dL/dy"))  # renaming reruns nothing
    assert viewer.stats_label.text().startswith("dL/dy:  shape")
    assert w.viewer_dock.caption.text().startswith("dL/dy · ")
    w.adapter.select(["x", "dy"])
    shown = w.viewer_dock.shown
    titles = {"x.output": "x", "dy.output": "dL/dy"}
    heads = [p.plot.titleLabel.text for p in viewer.panels]
    assert heads == [titles[shown[0]], titles[shown[1]],
                     f"{titles[shown[0]]} − {titles[shown[1]]}"]
    text = viewer.stats_label.text()
    assert "dL/dy:  shape" in text and "dy.output" not in text
    assert "dy.output" in viewer.stats_label.toolTip()
    assert w.viewer_dock.caption.text() == (f"Comparing {titles[shown[0]]} (left) with "
                                            f"{titles[shown[1]]} (right)")


def test_pin_is_a_toggle_and_copy_and_save_follow_the_chosen_side(qtbot, grad_window, tmp_path,
                                                                  monkeypatch):
    w = grad_window
    titled(w)
    wait_run(qtbot, w)
    w.adapter.select(["grad"])
    dock, viewer = w.viewer_dock, w.viewer_dock.viewer
    pinned = w.session.outputs[("grad", "output")].copy()
    assert not dock.pin_button.isChecked() and dock.pin_button.text() == "Pin for compare"
    qtbot.mouseClick(dock.pin_button, Qt.LeftButton)
    assert dock.pin_button.isChecked() and dock.pin_button.text() == "Pinned"
    assert "dW (pinned)" in dock.pin_button.toolTip()
    w.doc.edit("dy seed", lambda c: c.set_attr("dy", "seed", 9))
    wait_run(qtbot, w)
    now = w.session.outputs[("grad", "output")]
    assert not np.array_equal(now, pinned)
    assert viewer.titles == ("dW (pinned)", "dW") and viewer.side_choice.isVisible()
    assert viewer.npy_button.text() == "Save left .npy"
    qtbot.mouseClick(viewer.copy_button, Qt.LeftButton)  # left: the pinned tensor
    np.testing.assert_allclose(copied_montage(), montage(pinned, "none"), rtol=1e-6)
    qtbot.mouseClick(viewer.side_buttons["right"], Qt.LeftButton)
    qtbot.mouseClick(viewer.copy_button, Qt.LeftButton)  # right: the tensor after the edit
    np.testing.assert_allclose(copied_montage(), montage(now, "none"), rtol=1e-6)
    assert dock.grab().save("/tmp/viewer_dock_pinned.png")
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        lambda *args, **kw: (str(tmp_path / "right.npy"), ""))
    assert viewer.npy_button.text() == "Save right .npy"
    qtbot.mouseClick(viewer.npy_button, Qt.LeftButton)
    np.testing.assert_array_equal(np.load(tmp_path / "right.npy"), now)


def test_opening_another_canvas_drops_the_pin(qtbot, grad_window):
    w = grad_window
    wait_run(qtbot, w)
    w.adapter.select(["grad"])
    dock = w.viewer_dock
    qtbot.mouseClick(dock.pin_button, Qt.LeftButton)
    assert dock.pinned is not None and dock.pin_button.isChecked()
    w.doc.undo_stack.setClean()  # nothing to save: New asks nothing
    w.act_new.trigger()
    assert not w.doc.canvas.nodes
    assert dock.pinned is None and not dock.pin_button.isChecked()
    assert dock.pin_button.text() == "Pin for compare" and dock.viewer.array is None
    w.doc.load(grad_canvas(), None)  # the same canvas again: nothing pinned either
    wait_run(qtbot, w)
    w.adapter.select(["grad"])
    assert dock.shown == ("grad.output",) and dock.viewer.other is None


def test_a_selected_block_without_a_result_is_not_called_no_tensor_selected(qtbot, grad_window):
    """Seen in the error screenshot: a block in error was selected, and the viewer said
    "No tensor selected." twice under its message."""
    from tests.test_app_attributes import type_cells

    w = grad_window
    w.adapter.select(["grad"])
    viewer = w.viewer_dock.viewer
    assert viewer.stats_label.text() == "No result yet: press F5 to run."
    assert viewer.image_page.placeholder.text() == "No result yet: press F5 to run."
    type_cells(w.attributes.rows["strides"].editor, [2, 1, 1, 1])  # invalid: cannot run
    assert w.viewer_dock.caption.text().startswith("grad: grad.strides")
    assert viewer.stats_label.text() == "No result: see the message above."
    w.adapter.select([])
    assert viewer.stats_label.text() == "No tensor selected."
