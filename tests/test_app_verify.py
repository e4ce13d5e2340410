"""Run > Verify an Implementation... driven as a user: the file path typed, Load functions, the
function, convention and op picked from the combos, Run, the report's tables and diagnosis, Open
reproduction (the canvas in the main window), Cancel (no worker process left), and a file that
raises on import (one line).

``GRADBLOCKS_SAVE_SCREENSHOTS=1`` also saves assets/screenshots/verify_dialog.png and
verify_repro.png.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PySide6 import QtCore, QtWidgets
from PySide6.QtTest import QTest

from app.verify_dialog import VerifyDialog
from engine.base.dtypes import RTOL
from engine.verify.defaults import OPS
from tests.app_support import wait_run

ZOO = Path(__file__).with_name("verify_zoo.py")
SHOTS = Path(__file__).resolve().parent.parent / "assets" / "screenshots"
RUN_TIMEOUT = 120_000


def open_dialog(qtbot, window) -> VerifyDialog:
    run_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Run")
    entry = next(a for a in run_menu.actions() if a.text() == "&Verify an Implementation…")
    entry.trigger()
    dialog = window.findChild(VerifyDialog)
    qtbot.waitExposed(dialog)
    return dialog


def type_into(widget: QtWidgets.QWidget, text: str) -> None:
    widget.setFocus()
    (widget.lineEdit() if hasattr(widget, "lineEdit") else widget).selectAll()
    QTest.keyClicks(widget, text)
    QTest.keyClick(widget, QtCore.Qt.Key_Tab)


def pick(combo: QtWidgets.QComboBox, text: str) -> None:
    """Choose ``text`` from the combo's list, as a click in its popup does."""
    index = combo.findText(text)
    assert index >= 0, (text, [combo.itemText(i) for i in range(combo.count())])
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def click(button: QtWidgets.QAbstractButton) -> None:
    assert button.isEnabled(), button.text()
    QTest.mouseClick(button, QtCore.Qt.LeftButton)


def load(qtbot, dialog: VerifyDialog, path: Path) -> None:
    type_into(dialog.file_edit, str(path))
    click(dialog.load_button)
    qtbot.waitUntil(lambda: dialog.load_button.isEnabled(), timeout=60_000)


def choose(dialog: VerifyDialog, function: str | None, convention: str, op: str,
           cases: int) -> None:
    if function is not None:
        pick(dialog.function_combo, function)
    pick(dialog.convention_combo, convention)
    pick(dialog.op_combo, op)
    type_into(dialog.cases_spin, str(cases))


def run(qtbot, dialog: VerifyDialog, timeout: int = RUN_TIMEOUT) -> str:
    with qtbot.waitSignal(dialog.finished_run, timeout=timeout) as blocker:
        click(dialog.run_button)
    return blocker.args[0]


def rows(table: QtWidgets.QTableWidget) -> list[list[str]]:
    return [[table.item(r, c).text() for c in range(table.columnCount())]
            for r in range(table.rowCount())]


def worker_processes() -> list[int]:
    """Live children of this process running ``engine.verify.worker``."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == me and b"engine.verify.worker" in cmdline:
            found.append(int(entry.name))
    return found


def screenshot(widget: QtWidgets.QWidget, name: str) -> None:
    if os.environ.get("GRADBLOCKS_SAVE_SCREENSHOTS") == "1":
        assert widget.grab().save(str(SHOTS / name))


def test_batch_averaged_is_reported_diagnosed_and_reproduced(qtbot, window, tmp_path):
    dialog = open_dialog(qtbot, window)
    load(qtbot, dialog, ZOO)
    functions = [dialog.function_combo.itemText(i) for i in range(dialog.function_combo.count())]
    assert {"batch_averaged", "groups_ignored", "kernels_conv2d", "segfaults"} <= set(functions)
    assert not {"_dims", "np", "kernels", "ctypes"} & set(functions)  # defined here, public
    assert dialog.error_label.text() == ""
    choose(dialog, "batch_averaged", "tf", "Conv2DBackpropFilter", 60)
    assert run(qtbot, dialog) == "done"
    assert dialog.error_label.text() == ""

    classes = {r[0]: r[1:] for r in rows(dialog.view.class_table)}
    assert classes["batch_gt_1"] == ["1", "0", "0", "1"]  # tried, passed, unsupported, failed
    assert classes["zero_batch"] == ["1", "1", "0", "0"]
    assert sum(int(r[0]) for r in classes.values()) == 60
    failures = rows(dialog.view.failure_table)
    failed = sum(int(r[3]) for r in classes.values())
    assert len(failures) == failed > 0
    assert dialog.view.tabs.tabText(1) == f"Failures ({failed})"
    for r, row in enumerate(failures):
        assert row[0] == "wrong_values" and row[2] == "float32"
        # only a batch > 1 tells an averaged gradient apart: every failing case has one
        tip = dialog.view.failure_table.item(r, 0).toolTip()
        batch = int(tip.split("'input': {'shape': [")[1].split(",")[0])
        assert batch > 1, tip
        # |g/b - g| = (1 - 1/b) |g| <= (1 - 1/b) * bound (the sum of |products|)
        assert RTOL["float32"] < float(row[5]) <= (1 - 1 / batch) * 1.001, (row, batch)
    text = dialog.view.minimal_edit.toPlainText()
    assert text.startswith("minimal wrong_values (4 elements, structured values")
    # input arange(1, 3) and one-hot dy over a batch of 2: 1*1 + 2*0 = 1, averaged 1/2
    assert "got 0.5, expected 1" in text
    assert "diagnosis: batch_averaged: Matches batch_averaged" in text
    assert ("target.batch_averaged(input=np.array([1.0, 2.0], 'float32').reshape((2, 1, 1, 1))"
            in text)
    assert dialog.view.summary_label.text().startswith(
        f"verify_zoo:batch_averaged as tf Conv2DBackpropFilter (float32): 60 cases, "
        f"{failed} failed")
    screenshot(dialog, "verify_dialog.png")

    repro = tmp_path / "repro"
    type_into(dialog.repro_edit, str(repro))
    click(dialog.open_repro_button)
    canvas = repro / "minimal_wrong_values.gbc.json"
    assert window.doc.path == canvas.resolve()
    assert window.windowTitle().startswith("minimal_wrong_values")
    nodes = window.doc.canvas.nodes
    assert nodes["compare"].type == "Compare"
    assert nodes["compare"].title == "got - reference (error map)"
    assert nodes["reference"].type == "Conv2DBackpropFilter"
    assert (repro / "test_minimal_wrong_values.py").is_file()
    wait_run(qtbot, window)
    error_map = window.session.outputs[("compare", "output")]
    np.testing.assert_array_equal(np.ravel(error_map), [-0.5])  # got - reference
    if os.environ.get("GRADBLOCKS_SAVE_SCREENSHOTS") == "1":
        window.resize(1600, 1000)  # as app.startup's screenshot mode
        window.select_node("compare")  # the error map in the viewer
        QtWidgets.QApplication.processEvents()
        window.adapter.fit_all()
        QtWidgets.QApplication.processEvents()
        screenshot(window, "verify_repro.png")


def test_open_reproduction_asks_about_unsaved_changes(qtbot, window, tmp_path, monkeypatch):
    dialog = open_dialog(qtbot, window)
    type_into(dialog.file_edit, str(ZOO))
    type_into(dialog.function_combo, "groups_ignored")  # typed, not loaded
    choose(dialog, None, "tf", "Conv2D", 40)
    assert run(qtbot, dialog) == "done"
    assert "diagnosis: groups_ignored: Matches groups_ignored" in \
        dialog.view.minimal_edit.toPlainText()
    window.adapter.add_blocks(["Tensor"], (0.0, 0.0))
    assert window.doc.modified
    answers = iter([QtWidgets.QMessageBox.Cancel, QtWidgets.QMessageBox.Discard])
    asked = []

    def question(*args, **kw):
        asked.append(args[2])
        return next(answers)

    monkeypatch.setattr(QtWidgets.QMessageBox, "question", staticmethod(question))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the folder field left empty
    click(dialog.open_repro_button)
    assert len(asked) == 1 and "has unsaved changes" in asked[0]
    assert window.doc.path is None and list(tmp_path.glob("gradblocks-verify-*")) == []
    click(dialog.open_repro_button)  # Discard
    [folder] = tmp_path.glob("gradblocks-verify-*")
    assert window.doc.path == (folder / "minimal_wrong_values.gbc.json").resolve()
    assert window.doc.canvas.nodes["compare"].type == "Compare"
    assert not window.doc.modified


def test_torch_ops_and_a_correct_implementation(qtbot, window):
    dialog = open_dialog(qtbot, window)
    pick(dialog.convention_combo, "torch")
    assert [dialog.op_combo.itemText(i) for i in range(dialog.op_combo.count())] == \
        list(OPS["torch"])
    pick(dialog.convention_combo, "tf")
    assert [dialog.op_combo.itemText(i) for i in range(dialog.op_combo.count())] == \
        list(OPS["tf"])
    load(qtbot, dialog, ZOO)
    choose(dialog, "torch_kernels_conv_transpose2d", "torch", "conv_transpose2d", 40)
    dialog.dtype_boxes["float64"].click()
    assert run(qtbot, dialog) == "done"
    assert rows(dialog.view.failure_table) == []
    assert dialog.view.summary_label.text().startswith(
        "verify_zoo:torch_kernels_conv_transpose2d as torch conv_transpose2d (float32, "
        "float64): 40 cases, every case passed")
    assert dialog.view.minimal_edit.toPlainText().startswith("Every case passed (40 tried")
    assert not dialog.open_repro_button.isEnabled()


def test_cancel_stops_the_sweep_and_its_workers(qtbot, window):
    dialog = open_dialog(qtbot, window)
    type_into(dialog.file_edit, str(ZOO))
    type_into(dialog.function_combo, "kernels_conv2d")
    type_into(dialog.cases_spin, "100000")
    click(dialog.run_button)
    qtbot.waitUntil(lambda: dialog.progress.value() >= 20, timeout=60_000)
    assert worker_processes()  # the sweep's worker is running
    assert dialog.progress.maximum() == 100_000
    with qtbot.waitSignal(dialog.finished_run, timeout=60_000) as blocker:
        click(dialog.cancel_button)
    assert blocker.args == ["cancelled"]
    assert worker_processes() == []
    assert dialog.progress.text() == "cancelled"
    assert dialog.run_button.isEnabled() and not dialog.cancel_button.isEnabled()
    assert dialog.view.summary_label.text() == ""


def test_problems_are_one_line_in_the_dialog(qtbot, window, tmp_path):
    broken = tmp_path / "broken_conv.py"
    broken.write_text("def conv(**kw):\n    return 0\n\nraise RuntimeError('boom at import')\n")
    dialog = open_dialog(qtbot, window)
    load(qtbot, dialog, broken)
    assert dialog.error_label.text() == \
        "cannot load broken_conv.py: RuntimeError: boom at import"
    assert dialog.function_combo.count() == 0
    type_into(dialog.function_combo, "conv")
    assert run(qtbot, dialog) == "failed"
    assert dialog.error_label.text() == \
        "cannot load the target: RuntimeError: boom at import"
    assert worker_processes() == []

    type_into(dialog.file_edit, str(ZOO))
    type_into(dialog.function_combo, "no_such_function")
    assert run(qtbot, dialog) == "failed"
    line = dialog.error_label.text()
    assert "AttributeError" in line and "no_such_function" in line and "\n" not in line

    type_into(dialog.function_combo, "kernels_conv2d")
    dialog.dtype_boxes["float32"].click()
    click(dialog.run_button)
    assert dialog.error_label.text() == "choose at least one dtype"
    dialog.dtype_boxes["float32"].click()
    for path, line in ((tmp_path / "missing.py", f"{tmp_path / 'missing.py'}: no such file"),
                       (tmp_path / "notes.txt", "notes.txt: expected a Python file (.py)")):
        type_into(dialog.file_edit, str(path))
        click(dialog.run_button)
        assert dialog.error_label.text() == line
        click(dialog.load_button)
        assert dialog.error_label.text() == line
    assert dialog.thread is None and not dialog.lister.running


@pytest.mark.parametrize(("name", "text", "line"), [
    ("my-conv.py", "def conv(**kw):\n    return 0\n",
     ("my-conv.py: the file name is not a Python module name (letters, digits and _, not "
      "starting with a digit): rename it")),
    ("crashes.py", "import ctypes\nctypes.string_at(0)\n",
     "cannot load crashes.py: its import crashed"),
    ("json.py", "def conv(**kw):\n    return 0\n",
     "cannot load json.py: the module name 'json' is taken by "),
    ("empty.py", "X = 1\n", "empty.py: no top-level functions"),
])
def test_loading_a_file_that_gives_no_function_says_why(qtbot, window, tmp_path, monkeypatch,
                                                        name, text, line):
    path = tmp_path / name
    path.write_text(text)
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                        lambda *a, **k: (str(path), ""))
    dialog = open_dialog(qtbot, window)
    click(dialog.choose_button)
    assert dialog.file_edit.text() == str(path)
    assert dialog.function_combo.count() == 0  # choosing a file runs nothing
    click(dialog.load_button)
    qtbot.waitUntil(lambda: dialog.load_button.isEnabled(), timeout=60_000)
    assert dialog.error_label.text().startswith(line), dialog.error_label.text()
    assert dialog.function_combo.count() == 0


def test_the_api_stops_on_its_cancel_event():
    """engine.api.verify(..., cancel=event): the event set after 5 cases ends the sweep with
    Cancelled, its worker processes gone."""
    import threading

    from engine.api import verify
    from engine.base.cancel import Cancelled

    event, seen = threading.Event(), []

    def progress(done: int, total: int) -> None:
        seen.append(done)
        if done == 5:
            assert worker_processes()
            event.set()

    with pytest.raises(Cancelled):
        verify("verify_zoo:kernels_conv2d", "Conv2D", "tf", cases=100_000, path=str(ZOO.parent),
               progress=progress, cancel=event)
    assert seen == [1, 2, 3, 4, 5]
    assert worker_processes() == []


def test_cancel_does_not_wait_for_a_hanging_case(tmp_path):
    """A case that hangs (timeout 600 s): Cancel kills its worker and the sweep raises
    Cancelled at once, not after the timeout (the join's 60 s is only a hang guard)."""
    import threading

    from engine.api import verify
    from engine.base.cancel import Cancelled

    marker = tmp_path / "started"
    (tmp_path / "hang_conv.py").write_text(
        "import time\n"
        "def conv(**kw):\n"
        f"    open({str(marker)!r}, 'w').close()\n"
        "    time.sleep(3600)\n")
    event, outcome = threading.Event(), []

    def sweep() -> None:
        try:
            verify("hang_conv:conv", "Conv2D", "tf", cases=3, path=str(tmp_path),
                   case_timeout=600, cancel=event)
        except BaseException as err:  # noqa: BLE001 - the test inspects it
            outcome.append(err)

    thread = threading.Thread(target=sweep, daemon=True)
    thread.start()
    for _ in range(600):  # the first case has started in the worker (or the sweep failed)
        if marker.exists() or not thread.is_alive():
            break
        thread.join(0.1)
    assert marker.exists(), outcome
    event.set()
    thread.join(60)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], Cancelled)
    assert worker_processes() == []


REFUSING = """\
import sys
sys.path.insert(0, {root!r})
from tests.verify_zoo import loops_conv2d


def conv(**kw):
    s, d = kw["strides"][1:3], kw["dilations"][1:3]
    if kw["data_format"] == "NCHW":
        s, d = kw["strides"][2:], kw["dilations"][2:]
    if s[0] != s[1] or max(s) > 1 and max(d) > 1:
        raise ValueError("only equal strides, and no stride > 1 with a dilation > 1")
    return loops_conv2d(**kw)
"""


def test_the_support_field_declares_what_the_target_refuses(qtbot, window, tmp_path):
    target = tmp_path / "refusing_conv.py"
    target.write_text(REFUSING.format(root=str(ZOO.parent.parent)))
    dialog = open_dialog(qtbot, window)
    type_into(dialog.file_edit, str(target))
    type_into(dialog.function_combo, "conv")
    choose(dialog, None, "tf", "Conv2D", 20)
    assert run(qtbot, dialog) == "done"
    failures = rows(dialog.view.failure_table)
    assert failures and {r[0] for r in failures} == {"raised"}
    assert "only equal strides" in failures[0][6]

    type_into(dialog.support_edit, "equal_strides no_strided_dilation")
    assert dialog.error_label.text() == ""
    assert run(qtbot, dialog) == "done"
    assert rows(dialog.view.failure_table) == []
    assert dialog.view.summary_label.text().startswith(
        "refusing_conv:conv as tf Conv2D (float32): 20 cases, every case passed, 0 unsupported")
    table = rows(dialog.view.class_table)
    tried = {r[0] for r in table if r[3] != "excluded by --support"}
    excluded = {r[0] for r in table if r[3] == "excluded by --support"}
    assert "batch_gt_1" in tried and not {"non_square", "dilation_with_stride"} & tried
    assert {"non_square", "dilation_with_stride"} <= excluded  # the table says so


def test_a_bad_support_token_is_one_red_line_and_no_sweep(qtbot, window):
    dialog = open_dialog(qtbot, window)
    type_into(dialog.file_edit, str(ZOO))
    type_into(dialog.function_combo, "kernels_conv2d")
    line = ("--support token 'nonzero': unknown flag (one of equal_strides, no_strided_dilation, "
            "nonempty, no_remainder)")
    dialog.activateWindow()  # typing in the dialog: its fields have the focus
    qtbot.waitUntil(lambda: QtWidgets.QApplication.activeWindow() is dialog, timeout=5000)
    type_into(dialog.support_edit, "equal_strides nonzero")  # Tab: the field is left
    assert dialog.error_label.text() == line and dialog.error_label.isVisible()
    click(dialog.run_button)
    assert dialog.error_label.text() == line
    assert dialog.thread is None and worker_processes() == []
    assert dialog.view.summary_label.text() == ""
    type_into(dialog.support_edit, "equal_strides")
    assert dialog.error_label.text() == "" and not dialog.error_label.isVisible()
    assert dialog.options()["support"] == "equal_strides"
    type_into(dialog.support_edit, "   ")
    assert dialog.options()["support"] is None


def test_the_support_link_opens_the_guide_at_its_section(qtbot, window):
    from app.guide_window import GuideWindow
    from engine.cli import guide

    dialog = open_dialog(qtbot, window)
    link = dialog.support_link
    QTest.mouseClick(link, QtCore.Qt.LeftButton, pos=link.rect().center())
    shown = window.findChild(GuideWindow)
    assert shown is not None and shown.isVisible()
    assert shown.topic() == "verify"
    anchor = shown.browser.source().fragment()
    assert anchor == "declaring-what-the-implementation-supports"
    assert anchor in guide.anchors(guide.read_page("verify"))
