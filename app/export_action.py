"""File > Export as Script...: the canvas as a standalone Python script, from the app.

The same files as ``gradblocks export [--to TARGET] -o FILE``, written the same way:
:func:`export_canvas` calls the engine functions the command line's export calls (the script
text from :func:`engine.export.to_numpy.export_script` or
:func:`engine.export.frameworks.export_framework_script`, the target checks of
:mod:`engine.graph.targets`: never the canvas file nor a file the canvas reads, never a folder or
a device; the script written atomically, a framework script and its ``.sources.<hash>.npz`` as
one set with :func:`engine.base.atomic.write_file_set`). A refusal or failure is one line
(:class:`ExportError`), shown in a message box; the dialog stays open to fix the path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from app import dialog_folders
from engine.base.atomic import Member, resolve_target, write_atomically, write_file_set
from engine.base.names import counted
from engine.export.frameworks import ExportRefused, export_framework_script, owned_companions
from engine.export.to_numpy import export_script
from engine.graph.canvas import Canvas
from engine.graph.compiler import Plan
from engine.graph.labels import block_labels
from engine.graph.report import problem_lines
from engine.graph.targets import canvas_protected, canvas_reads, target_problem
from engine.io.npz import write_npz

#: (target as ``gradblocks export --to`` names it, what the dialog shows), in menu order.
TARGETS = (("numpy", "NumPy (engine.kernels)"), ("tensorflow", "TensorFlow"),
           ("pytorch", "PyTorch"), ("jax", "JAX"))


class ExportError(Exception):
    """Why the export did not happen (one line)."""


@dataclass(frozen=True)
class Exported:
    """What :func:`export_canvas` wrote: the script and its companion (None for NumPy)."""

    script: Path
    companion: Path | None
    blocks: int


def protected_files(canvas: Canvas, canvas_path: Path | None, base_dir: Path) -> dict[str, str]:
    """The files an export must never overwrite: the canvas file (when saved) and every file
    the canvas reads (:func:`engine.graph.targets.canvas_protected`)."""
    if canvas_path is not None:
        return canvas_protected(str(canvas_path), canvas)
    labels = block_labels(canvas)
    return {path: f"a file the canvas reads (block {labels.get(nid, nid)!r})"
            for path, nid in canvas_reads(canvas, base_dir).items()}


def export_canvas(canvas: Canvas, plan: Plan, canvas_path: Path | None, base_dir: Path,
                  output: str, target: str = "numpy") -> Exported:
    """Write ``plan`` (compiled from ``canvas``) as the ``target`` script at ``output``, as
    ``gradblocks export --to target -o output`` does; raises :class:`ExportError`."""
    if plan.errors:
        lines = problem_lines(plan)
        raise ExportError(f"the canvas has {counted(len(lines), 'problem')}; fix them first: {lines[0]}")
    protected = protected_files(canvas, canvas_path, base_dir)
    problem = target_problem(output, protected)
    if problem:
        raise ExportError(f"{output!r} {problem}")
    source = canvas_path.name if canvas_path is not None else "canvas"
    titles = {nid: node.title for nid, node in canvas.nodes.items()}
    if target == "numpy":
        script = export_script(plan, source, titles).encode("utf-8")
        _write(output, lambda: write_atomically(output, lambda f: f.write(script)), False)
        return Exported(Path(output), None, len(plan.steps))
    try:
        real = resolve_target(output)
        exported = export_framework_script(plan, target, source, titles, real.name)
    except ExportRefused as err:
        raise ExportError(f"cannot export to {target}: {err}") from None
    except OSError as err:
        raise ExportError(f"{output!r} cannot be written: {err.strerror or err}") from None
    companion = os.path.abspath(real.parent / exported.companion)
    problem = target_problem(companion, protected)
    if problem:
        raise ExportError(f"{companion!r} {problem}")
    script = exported.script.encode("utf-8")
    member = Member(exported.companion, lambda f: write_npz(f, exported.sources))
    _write(output, lambda: write_file_set(output, lambda f: f.write(script), [member],
                                          owned_companions, list(protected)), True)
    return Exported(Path(output), Path(companion), len(plan.steps))


def _write(output: str, write, several: bool) -> None:
    try:
        write()
    except OSError as err:
        unchanged = "files, if any, are" if several else "file, if any, is"
        raise ExportError(f"cannot write {output!r}: {err.strerror or err} (the previous "
                          f"{unchanged} unchanged)") from None


class ExportDialog(QtWidgets.QDialog):
    """Choose the framework and the script's path; Export writes it (errors in a message box,
    the dialog stays open)."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.setObjectName("export_dialog")
        self.setWindowTitle("Export as Script")
        self.target = QtWidgets.QComboBox(self)
        for name, shown in TARGETS:
            self.target.addItem(shown, name)
        self.path = QtWidgets.QLineEdit(self)
        self.path.setMinimumWidth(420)
        self.path.setText(self._suggested_path("numpy"))
        browse = QtWidgets.QPushButton("Browse…", self)
        browse.clicked.connect(self.browse)
        self.note = QtWidgets.QLabel(self)
        self.note.setWordWrap(True)
        self.target.currentIndexChanged.connect(self._target_changed)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.path, 1)
        row.addWidget(browse)
        form = QtWidgets.QFormLayout()
        form.addRow("Framework:", self.target)
        form.addRow("Script:", row)
        self.buttons = QtWidgets.QDialogButtonBox(
            QtWidgets.QDialogButtonBox.Cancel, parent=self)
        self.export_button = self.buttons.addButton("Export",
                                                    QtWidgets.QDialogButtonBox.AcceptRole)
        self.buttons.accepted.connect(self.export)
        self.buttons.rejected.connect(self.reject)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.note)
        layout.addWidget(self.buttons)
        self._target_changed()

    def chosen_target(self) -> str:
        return self.target.currentData()

    def _suggested_path(self, target: str) -> str:
        doc = self.window.doc
        stem = doc.path.name.removesuffix(".gbc.json") if doc.path else "canvas"
        suffix = "" if target == "numpy" else f"_{target}"
        return dialog_folders.start("script", f"{stem}{suffix}.py")

    def _target_changed(self) -> None:
        target = self.chosen_target()
        if target == "numpy":
            self.note.setText("A script that recomputes every block with GradBlocks's kernels "
                              "(as `gradblocks export`). Run: python SCRIPT.py [results.npz]")
        else:
            self.note.setText(f"A script using {self.target.currentText()}'s own ops (as "
                              f"`gradblocks export --to {target}`); the source values go to "
                              "SCRIPT.sources.<hash>.npz beside it. Run: python SCRIPT.py "
                              "[results.npz]")
        current = Path(self.path.text())
        names = {Path(self._suggested_path(t)).name for t, _s in TARGETS}
        if current.name in names:  # still a suggestion: follow the framework
            self.path.setText(str(current.with_name(Path(self._suggested_path(target)).name)))

    def browse(self) -> None:
        path, _filter = QtWidgets.QFileDialog.getSaveFileName(
            self, "Export as Script", self.path.text(), "Python scripts (*.py)")
        if path:
            self.path.setText(path)

    def export(self) -> Exported | None:
        """Export to the chosen path; on success close and log what was written."""
        w, target, output = self.window, self.chosen_target(), self.path.text().strip()
        doc = w.doc
        plan = w.session.runner.executor.compile(doc.canvas, base_dir=doc.base_dir)
        try:
            done = export_canvas(doc.canvas, plan, doc.path, doc.base_dir, output, target)
        except ExportError as err:
            QtWidgets.QMessageBox.critical(self, "Export as Script", str(err))
            return None
        dialog_folders.remember("script", output)
        extra = f" and {done.companion}" if done.companion else ""
        w.log.add(f"exported {done.script}{extra}: {done.blocks} block(s), {target}", "ok")
        w.statusBar().showMessage(f"Exported {done.script.name} ({target})", 10000)
        self.accept()
        return done


class ExportAction(QtCore.QObject):
    """The File > Export as Script... action of ``window`` (a MainWindow)."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.dialog: ExportDialog | None = None
        self.action = QtGui.QAction("&Export as Script…", window)
        self.action.setObjectName("act_export_script")
        self.action.setShortcut(QtGui.QKeySequence("Ctrl+E"))
        self.action.setStatusTip("Write the canvas as a standalone Python script: NumPy, "
                                 "TensorFlow, PyTorch or JAX (as gradblocks export)")
        self.action.triggered.connect(lambda _checked=False: self.open())

    def open(self) -> ExportDialog:
        """Show the dialog (non-modal to the event loop: ``open``, not ``exec``)."""
        if self.dialog is not None:
            self.dialog.close()
        self.dialog = ExportDialog(self.window)
        self.dialog.open()
        return self.dialog
