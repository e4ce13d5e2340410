"""Run > Verify an Implementation...: ``gradblocks verify`` in a dialog.

Choose a Python file (imported from its folder, as ``--path DIR`` does) and a function in it
(``Load functions`` lists its top-level callables: only when asked, in a separate process), the
convention and op, dtypes, cases, seed and case timeout, and what the implementation supports
(``--support``'s SPEC, checked when the field is left and on Run; its link opens the guide's
section on it); Run sweeps on a worker thread (:mod:`app.verify_worker`) with a progress bar
and Cancel. The report: pass counts per edge class, the failures (verdict, max abs/rel error,
message), each minimal failure with its diagnosis; ``Open reproduction`` writes the ``--repro``
files (:mod:`engine.verify.repro`) to the chosen folder (or a new temporary one) and opens the
minimal failure's canvas in the window, after the unsaved-changes question as File > Open asks
it. Problems are one red line.

The only code run is the file named here, always in the sweep's worker processes (a
``MODULE:FUNCTION`` target), never in the app's; a canvas never names code to run.
``engine.verify`` is imported when the dialog first opens, not at the app's start.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6 import QtCore, QtWidgets

from app import dialog_folders
from app.formatting import progress_format_literal
from app.message_label import MessageLabel
from app.verify_report import ReportView
from engine.base.dtypes import DTYPES
from engine.base.errors import InvalidArgumentError

if TYPE_CHECKING:
    from app.verify_worker import VerifyThread
    from engine.verify.report import VerifyReport

RUNS_CODE = ("Load functions and Run import this file in separate Python processes: its "
             "top-level code runs, then the function runs on every case. Use files you trust.")
#: The User Guide's section on --support (verify.md), which the Support field links to.
SUPPORT_GUIDE = ("verify", "declaring-what-the-implementation-supports")


class VerifyDialog(QtWidgets.QDialog):
    """The dialog of Run > Verify an Implementation... for ``window`` (a MainWindow)."""

    finished_run = QtCore.Signal(str)  # "done", "failed" or "cancelled"

    def __init__(self, window: QtWidgets.QWidget):
        from app.verify_worker import FunctionLister

        super().__init__(window)
        self.window_ = window
        self.setObjectName("verify_dialog")
        self.setWindowTitle("Verify an Implementation")
        self.resize(980, 820)
        self.report: VerifyReport | None = None
        self.thread: VerifyThread | None = None
        self.repro_canvas: Path | None = None
        self.lister = FunctionLister(self)
        self.lister.listed.connect(self._listed)
        self.lister.failed.connect(self._list_failed)
        self._build()
        self._set_running(False)
        self.say("")

    # --- construction ----------------------------------------------------------------------
    def _build(self) -> None:
        self._build_case_fields()
        self._build_run_fields()
        self._lay_out()

    def _build_case_fields(self) -> None:
        """What to verify: the file, the function, the convention and op, the dtypes, the
        cases and what the implementation supports."""
        from engine.verify.defaults import CONVENTIONS, DEFAULT_CASES, DEFAULT_TIMEOUT, MAX_CASES

        self.file_edit = QtWidgets.QLineEdit(placeholderText="a Python file (.py)")
        self.choose_button = QtWidgets.QPushButton("Choose…")
        self.choose_button.clicked.connect(self.choose_file)
        self.load_button = QtWidgets.QPushButton("Load functions")
        self.load_button.setToolTip(RUNS_CODE)
        self.load_button.clicked.connect(self.load_functions)
        self.runs_label = QtWidgets.QLabel(RUNS_CODE, wordWrap=True)
        self.runs_label.setStyleSheet("color: #b07000")
        self.function_combo = QtWidgets.QComboBox(editable=True)
        self.function_combo.lineEdit().setPlaceholderText("Load functions, or type a name")
        self.convention_combo = QtWidgets.QComboBox()
        self.convention_combo.addItems(list(CONVENTIONS))
        self.op_combo = QtWidgets.QComboBox()
        self.convention_combo.currentTextChanged.connect(self._fill_ops)
        self._fill_ops(self.convention_combo.currentText())
        self.dtype_boxes = {name: QtWidgets.QCheckBox(name) for name in DTYPES}
        self.dtype_boxes["float32"].setChecked(True)
        self.cases_spin = QtWidgets.QSpinBox(minimum=1, maximum=min(MAX_CASES, 2**31 - 1),
                                             value=DEFAULT_CASES)
        self.seed_spin = QtWidgets.QSpinBox(minimum=0, maximum=2**31 - 1, value=0)
        self.timeout_spin = QtWidgets.QDoubleSpinBox(minimum=0.1, maximum=3600.0, decimals=1,
                                                     value=DEFAULT_TIMEOUT, suffix=" s")
        self.timeout_spin.setToolTip("A case running longer is a timeout")
        self.support_edit = QtWidgets.QLineEdit(
            placeholderText="everything (e.g. strides<=2 equal_strides nonempty padding=SAME)")
        self.support_edit.setToolTip("What the implementation supports (--support SPEC): only "
                                     "such cases are generated; a refusal declared here is "
                                     "never a failure")
        self.support_edit.editingFinished.connect(self.check_support)
        self.support_link = QtWidgets.QLabel('<a href="guide">What can be declared</a>')
        self.support_link.setTextInteractionFlags(QtCore.Qt.LinksAccessibleByMouse
                                                  | QtCore.Qt.LinksAccessibleByKeyboard)
        self.support_link.linkActivated.connect(self.open_support_guide)

    def _build_run_fields(self) -> None:
        """Run and Cancel, the progress, the report and the reproduction folder."""
        self.run_button = QtWidgets.QPushButton("Run")
        self.run_button.setDefault(True)
        self.run_button.clicked.connect(self.run)
        self.cancel_button = QtWidgets.QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = QtWidgets.QProgressBar(textVisible=True)
        self.progress.setFormat("idle")
        self.error_label = MessageLabel()
        self.error_label.setObjectName("verify_error")
        self.error_label.setStyleSheet("color: #d04040")
        self.view = ReportView()
        self.repro_edit = QtWidgets.QLineEdit(placeholderText="a new temporary folder")
        self.repro_choose = QtWidgets.QPushButton("Choose…")
        self.repro_choose.clicked.connect(self.choose_repro_folder)
        self.open_repro_button = QtWidgets.QPushButton("Open reproduction")
        self.open_repro_button.setToolTip("Write the minimal failures' canvases and pytest "
                                          "files to the folder and open the first canvas")
        self.open_repro_button.clicked.connect(self.open_reproduction)
        self.close_button = QtWidgets.QPushButton("Close")
        self.close_button.clicked.connect(self.reject)

    def _lay_out(self) -> None:
        """The form, the run row, the report and the reproduction row, top to bottom."""
        form = QtWidgets.QFormLayout()
        form.addRow("Python file", self._row(self.file_edit, self.choose_button,
                                             self.load_button))
        form.addRow(self.runs_label)
        form.addRow("Function", self.function_combo)
        form.addRow("Convention", self._row(self.convention_combo, QtWidgets.QLabel("op"),
                                            self.op_combo, stretch=True))
        form.addRow("Dtypes", self._row(*self.dtype_boxes.values(), stretch=True))
        form.addRow("Cases", self._row(self.cases_spin, QtWidgets.QLabel("seed"),
                                       self.seed_spin, QtWidgets.QLabel("case timeout"),
                                       self.timeout_spin, stretch=True))
        form.addRow("Support", self._row(self.support_edit, self.support_link))
        box = QtWidgets.QVBoxLayout(self)
        box.addLayout(form)
        box.addLayout(self._row(self.run_button, self.cancel_button, self.progress))
        box.addWidget(self.error_label)
        box.addWidget(self.view, 1)
        box.addLayout(self._row(QtWidgets.QLabel("Reproduction folder"), self.repro_edit,
                                self.repro_choose, self.open_repro_button, self.close_button))

    @staticmethod
    def _row(*widgets: QtWidgets.QWidget, stretch: bool = False) -> QtWidgets.QHBoxLayout:
        row = QtWidgets.QHBoxLayout()
        for w in widgets:
            row.addWidget(w, 1 if isinstance(w, (QtWidgets.QLineEdit, QtWidgets.QProgressBar))
                          else 0)
        if stretch:
            row.addStretch(1)
        return row

    def _fill_ops(self, convention: str) -> None:
        from engine.verify.defaults import OPS

        self.op_combo.clear()
        self.op_combo.addItems(list(OPS.get(convention, ())))

    # --- choosing --------------------------------------------------------------------------
    def say(self, text: str) -> None:
        """One line in red (empty: none)."""
        from app.verify_worker import one_line

        self.error_label.setText(one_line(text) if text else "")
        self.error_label.setVisible(bool(text))
        self.support_said = False  # whether the line is the Support field's

    def choose_file(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self, "The Python file of the implementation", dialog_folders.start("code"),
            "Python files (*.py);;All files (*)")
        if path:
            dialog_folders.remember("code", path)
            self.file_edit.setText(path)

    def choose_repro_folder(self) -> None:
        path = QtWidgets.QFileDialog.getExistingDirectory(
            self, "Folder for the reproduction", dialog_folders.start("canvas"))
        if path:
            self.repro_edit.setText(path)

    def support_spec(self) -> str | None:
        """The Support field's SPEC (None: blank); raises InvalidArgumentError naming a bad
        token (:func:`engine.verify.support.parse_support`)."""
        from engine.verify.support import parse_support

        text = self.support_edit.text().strip()
        parse_support(text)
        return text or None

    def check_support(self) -> bool:
        """The Support field left: a bad token is the red line (a good SPEC clears it)."""
        try:
            self.support_spec()
        except InvalidArgumentError as err:
            self.say(str(err))
            self.support_said = True
            return False
        if self.support_said:
            self.say("")
        return True

    def open_support_guide(self) -> None:
        """The User Guide at its section on declaring what the implementation supports."""
        from app.guide_window import show_guide

        show_guide(self.window_).open_topic(*SUPPORT_GUIDE)

    def load_functions(self) -> None:
        """List the file's top-level callables (its code runs, in a separate process)."""
        self.say("")
        if self.lister.start(self.file_edit.text().strip()):
            self.load_button.setEnabled(False)
            self.load_button.setText("Loading…")

    def _loaded(self) -> None:
        self.load_button.setEnabled(True)
        self.load_button.setText("Load functions")

    def _listed(self, names: list[str]) -> None:
        self._loaded()
        typed = self.function_combo.currentText()
        self.function_combo.clear()
        self.function_combo.addItems(names)
        if typed in names:
            self.function_combo.setCurrentText(typed)
        if not names:
            self.say(f"{Path(self.file_edit.text()).name}: no top-level functions")

    def _list_failed(self, line: str) -> None:
        self._loaded()
        self.say(line)

    # --- running ---------------------------------------------------------------------------
    def options(self) -> dict:
        """verify()'s arguments from the fields; raises InvalidArgumentError (one line)."""
        from app.verify_worker import module_of

        folder, module = module_of(self.file_edit.text().strip())
        function = self.function_combo.currentText().strip()
        if not function:
            raise InvalidArgumentError("choose a function (Load functions lists them)",
                                       "function")
        if not all(p.isidentifier() for p in function.split(".")):
            raise InvalidArgumentError(f"function {function!r} is not a Python name",
                                       "function")
        dtypes = [n for n, box in self.dtype_boxes.items() if box.isChecked()]
        if not dtypes:
            raise InvalidArgumentError("choose at least one dtype", "dtype")
        return {"fn": f"{module}:{function}", "op": self.op_combo.currentText(),
                "convention": self.convention_combo.currentText(), "dtype": dtypes,
                "cases": self.cases_spin.value(), "seed": self.seed_spin.value(),
                "case_timeout": self.timeout_spin.value(), "support": self.support_spec(),
                "path": folder}

    def run(self) -> bool:
        """Start the sweep; False (and one line) when an option is bad or one is running."""
        from app.verify_worker import VerifyThread

        if self.thread is not None:
            return False
        self.say("")
        try:
            options = self.options()
        except InvalidArgumentError as err:
            self.say(str(err))
            self.support_said = err.argument == "support"
            return False
        self.show_report(None)
        thread = VerifyThread(options)
        thread.progress.connect(self._progress)
        thread.done.connect(self._done)
        thread.failed.connect(self._failed)
        thread.cancelled.connect(self._cancelled)
        self.thread = thread
        self.progress.setMaximum(options["cases"])
        self.progress.setValue(0)
        self.progress.setFormat("starting the workers…")
        self._set_running(True)
        thread.start()
        return True

    def cancel(self) -> None:
        """Stop the sweep (its worker processes are stopped, a running case's killed)."""
        if self.thread is not None:
            self.thread.cancel()
            self.cancel_button.setEnabled(False)
            self.progress.setFormat("cancelling…")

    def _set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.open_repro_button.setEnabled(not running and self.report is not None
                                          and not self.report.ok)

    def _progress(self, done: int, total: int) -> None:
        self.progress.setMaximum(max(total, 1))
        self.progress.setValue(done)
        if self.thread is not None and self.thread.cancelling:
            return  # the bar keeps saying it is cancelling
        self.progress.setFormat("%v/%m cases" if done < total else
                                "%v/%m cases; shrinking and diagnosing the failures…")

    def _end(self, state: str, text: str) -> None:
        thread, self.thread = self.thread, None
        if thread is not None:
            thread.wait()
            thread.deleteLater()
        self.progress.setFormat(text)
        self._set_running(False)
        self.finished_run.emit(state)

    def _done(self, report: VerifyReport) -> None:
        self.show_report(report)
        self.progress.setValue(self.progress.maximum())
        state = "ok" if report.ok else f"{report.failed} failed"
        self._end("done", f"{report.cases} cases, {state} ({report.seconds:.1f} s)")

    def _failed(self, line: str) -> None:
        self.say(line)
        self._end("failed", "stopped")

    def _cancelled(self) -> None:
        self._end("cancelled", "cancelled")

    def shutdown(self) -> None:
        """Cancel a sweep and a listing and wait for them (before the window closes)."""
        self.lister.stop()
        if self.thread is not None:
            self.thread.cancel()
            self.thread.wait()

    def reject(self) -> None:
        """Close: a sweep still running is cancelled."""
        self.cancel()
        self.lister.stop()
        self._loaded()
        super().reject()

    # --- the report ------------------------------------------------------------------------
    def show_report(self, report: VerifyReport | None) -> None:
        """Show ``report`` (None: clear the report)."""
        self.report = report
        self.repro_canvas = None
        self.view.show_report(report)

    def open_reproduction(self) -> bool:
        """Write the reproduction and open the minimal failure's canvas in the window."""
        from engine.verify.repro import write_repro

        report = self.report
        if report is None or report.ok or self.thread is not None:
            return False
        files = self.window_.files
        if not files.maybe_save():
            return False
        folder = self.repro_edit.text().strip() or tempfile.mkdtemp(prefix="gradblocks-verify-")
        try:
            written = write_repro(report, folder)
        except (OSError, ValueError) as err:
            self.say(f"cannot write the reproduction in {folder}: "
                     f"{getattr(err, 'strerror', None) or err}")
            return False
        self.repro_canvas = Path(written[0])
        if not files.open_path(self.repro_canvas, ask=False):
            return False
        self.say("")
        self.progress.setFormat(progress_format_literal(f"opened {self.repro_canvas}"))
        return True
