"""The GradBlocks main window: one window editing one canvas.

Centre: the NodeGraphQt canvas. Left: block palette. Right: attribute panel. Bottom: tensor
viewer and log. Docks can be rearranged; layout and geometry persist in QSettings. Start-up and
screenshot mode live in :mod:`app.startup`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from app import dialog_folders, gc_guard
from app.annotation_actions import AnnotationActions
from app.attribute_panel import AttributePanel
from app.crosscheck_action import CrossCheckAction
from app.document import Document
from app.editing import EditActions, UndoAction
from app.explain.geometry_view import GeometryView
from app.explain.link import ExplainLink
from app.explain.panel import ExplainPanel
from app.export_action import ExportAction
from app.files import (
    CANVAS_SUFFIX,
    PITFALLS_DIR,
    TENSOR_SUFFIXES,
    FileController,
    display_name,
    example_files,
    is_canvas_file,
)
from app.formatting import progress_format_literal
from app.graph_adapter import GraphAdapter
from app.guide_window import show_guide
from app.help import shortcuts_html
from app.icons import icon
from app.import_dialog import import_layer
from app.log_panel import LogPanel
from app.node_previews import NodePreviews
from app.palette import BlockPalette, BlockSearchPopup, TabKeyFilter
from app.panel_widths import PanelWidths
from app.session import Session
from app.verify_dialog import VerifyAction
from app.viewer.dock import ViewerDock
from app.wire_drop import WireDrop
from engine.base.version import version

APP_NAME = "GradBlocks"


def default_settings() -> QtCore.QSettings:
    return QtCore.QSettings(APP_NAME, APP_NAME)


class MainWindow(QtWidgets.QMainWindow):
    """One window editing one canvas."""

    def __init__(self, settings: QtCore.QSettings | None = None,
                 recovery_dir: Path | None = None, *, autosave: bool = True,
                 restore_layout: bool = True, quiet: bool = False):
        super().__init__()
        gc_guard.install()  # Qt objects must never be collected in a background thread
        self.setObjectName("MainWindow")
        self.settings = settings if settings is not None else default_settings()
        self.quiet = quiet  # screenshot mode: errors go to stderr instead of dialogs
        self.setWindowIcon(icon("gradblocks"))
        self.setAcceptDrops(True)
        self.setDockOptions(QtWidgets.QMainWindow.AnimatedDocks
                            | QtWidgets.QMainWindow.AllowTabbedDocks
                            | QtWidgets.QMainWindow.AllowNestedDocks)

        self.doc = Document(self)
        self.adapter = GraphAdapter(self.doc, self)
        self.session = Session(self.doc, self.adapter, parent=self)
        self.previews = NodePreviews(self.session, self.settings, self)
        self.edits = EditActions(self.doc, self.adapter, self)
        self.annotations = AnnotationActions(self.doc, self.adapter, self)
        self.files = FileController(self, self.doc, self.settings, recovery_dir,
                                    autosave=autosave)
        dialog_folders.bind(self.settings,
                            lambda: self.doc.path.parent if self.doc.path else None)
        self.setCentralWidget(self.adapter.widget)

        self.palette = BlockPalette(self)
        self.attributes = AttributePanel(self.doc, self.session, self)
        self.viewer_dock = ViewerDock(self.session, self)
        self.geometry_view = GeometryView(self.session, self)
        self.log = LogPanel(self)
        self.crosscheck = CrossCheckAction(self)  # Run > Cross-check (app.crosscheck_action)
        self.export = ExportAction(self)  # File > Export as Script (app.export_action)
        self.verify = VerifyAction(self)  # Run > Verify an Implementation (app.verify_dialog)
        self.search_popup = BlockSearchPopup(self)
        self.tab_filter = TabKeyFilter(self.adapter.viewer, self.search_popup)
        self.wire_drop = WireDrop(self.adapter, self.session, self)

        self.palette_dock = self._dock("Blocks", "dock_blocks", self.palette,
                                       QtCore.Qt.LeftDockWidgetArea)
        self.attributes_dock = self._dock("Attributes", "dock_attributes", self.attributes,
                                          QtCore.Qt.RightDockWidgetArea)
        self.viewer_dock_widget = self._dock("Tensor viewer", "dock_viewer", self.viewer_dock,
                                             QtCore.Qt.BottomDockWidgetArea)
        self.explain_panel = ExplainPanel(self)  # beside the viewer, shown on its first use
        self.explain_dock = self._dock("Explain", "dock_explain", self.explain_panel,
                                       QtCore.Qt.BottomDockWidgetArea)
        self.splitDockWidget(self.viewer_dock_widget, self.explain_dock, QtCore.Qt.Horizontal)
        self.explain_dock.hide()
        self.log_dock = self._dock("Log", "dock_log", self.log, QtCore.Qt.BottomDockWidgetArea)
        self.tabifyDockWidget(self.viewer_dock_widget, self.log_dock)
        self.geometry_dock = self._dock("Geometry", "dock_geometry", self.geometry_view,
                                        QtCore.Qt.BottomDockWidgetArea)
        self.tabifyDockWidget(self.viewer_dock_widget, self.geometry_dock)
        self.viewer_dock_widget.raise_()
        self.explain_link = ExplainLink(self.session, self.viewer_dock, self.explain_panel,
                                        self.explain_dock)

        self.progress = QtWidgets.QProgressBar(self)
        self.progress.setObjectName("run_progress")
        self.progress.setFixedWidth(300)  # a run summary of three blocks fits
        self.progress.setTextVisible(True)
        self.progress.setFormat("idle")
        self.progress.setValue(0)

        self._build_actions()
        self._build_menus()
        self._build_toolbar()
        self._build_context_menu()
        self.statusBar().showMessage("Drag blocks from the left onto the canvas; F5 runs.")
        self._wire()
        self.resize(1400, 880)
        self.resizeDocks([self.palette_dock, self.attributes_dock], [210, 340],
                         QtCore.Qt.Horizontal)
        self.resizeDocks([self.viewer_dock_widget], [360], QtCore.Qt.Vertical)
        self._default_state = self.saveState()
        # minimums once shown (a saved layout squeezing a panel is not kept): app.panel_widths
        self.panel_widths = PanelWidths(self, [self.palette_dock, self.attributes_dock])
        self._shown_once = False
        if restore_layout:
            self.restore_layout()
        self.update_title()

    # --- construction ----------------------------------------------------------------------
    def _dock(self, title: str, name: str, widget: QtWidgets.QWidget,
              area: QtCore.Qt.DockWidgetArea) -> QtWidgets.QDockWidget:
        dock = QtWidgets.QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        dock.setFeatures(QtWidgets.QDockWidget.DockWidgetMovable
                         | QtWidgets.QDockWidget.DockWidgetFloatable
                         | QtWidgets.QDockWidget.DockWidgetClosable)
        self.addDockWidget(area, dock)
        return dock

    def _action(self, text: str, slot, shortcut=None, tip: str = "",
                icon_name: str | None = None) -> QtGui.QAction:
        act = QtGui.QAction(text, self)
        if shortcut is not None:
            if isinstance(shortcut, (list, tuple)):
                act.setShortcuts([QtGui.QKeySequence(s) for s in shortcut])
            else:
                act.setShortcut(QtGui.QKeySequence(shortcut))
        if tip:
            act.setStatusTip(tip)
            act.setToolTip(f"{text.replace('&', '')} ({act.shortcut().toString()})"
                           if shortcut is not None else tip)
        if icon_name:
            act.setIcon(icon(icon_name))
        act.triggered.connect(lambda _checked=False: slot())
        self.addAction(act)
        return act

    def _build_actions(self) -> None:
        K = QtGui.QKeySequence
        f = self.files
        self.act_new = self._action("&New", f.new, K.New, "Start an empty canvas", "new")
        self.act_open = self._action("&Open…", f.open_dialog, K.Open, "Open a canvas file",
                                     "open")
        self.act_import_layer = self._action(
            "&Import Layer…", lambda: import_layer(self), tip="A conv layer of an ONNX or Keras "
            "model (or .safetensors/.npz weights) as a canvas with its gradients")
        self.act_save = self._action("&Save", f.save, K.Save, "Save the canvas", "save")
        self.act_save_as = self._action("Save &As…", f.save_as, K.SaveAs,
                                        "Save the canvas under a new name")
        self.act_quit = self._action("&Quit", self.close, "Ctrl+Q", "Close the window")
        stack = self.doc.undo_stack
        self.act_undo = UndoAction(stack, self.session, self)  # drops an invalid edit first
        self.act_undo.setShortcut(K.Undo)
        self.act_undo.setIcon(icon("undo"))
        self.act_redo = stack.createRedoAction(self, "&Redo")
        self.act_redo.setShortcuts([K("Ctrl+Shift+Z"), K("Ctrl+Y")])
        self.act_redo.setIcon(icon("redo"))
        self.act_undo.setProperty("help_name", "Undo")  # its text names the next command
        self.act_redo.setProperty("help_name", "Redo")
        self.addActions([self.act_undo, self.act_redo])
        self.act_copy = self._action("&Copy", self.edits.copy_selection, K.Copy,
                                     "Copy the selected blocks")
        self.act_cut = self._action("Cu&t", self.edits.cut_selection, K.Cut,
                                    "Cut the selected blocks")
        self.act_paste = self._action("&Paste", self.edits.paste, K.Paste, "Paste blocks")
        self.act_duplicate = self._action("&Duplicate", self.edits.duplicate_selection, "Ctrl+D",
                                          "Duplicate the selected blocks")
        self.act_delete = self._action("De&lete", self.edits.delete_selection,
                                       [K.Delete, K("Backspace")],
                                       "Delete the selected blocks and their wires")
        self.act_select_all = self._action("Select &All", self.edits.select_all, K.SelectAll,
                                           "Select every block")
        self.act_add_block = self._action("Add &Block…", self.tab_filter.open, "Tab",
                                          "Search a block and add it at the cursor")
        self.act_add_block.setShortcutContext(QtCore.Qt.WidgetShortcut)
        self._build_view_actions()
        self.act_reset_layout = self._action("&Reset Layout", self.reset_layout, None,
                                             "Put the panels back where they started")
        self.act_run = self._action("&Run", self.run, "F5",
                                    "Run the canvas (only changed blocks are recomputed)", "run")
        self.act_cancel = self._action("&Cancel Run", self.session.cancel, "Shift+F5",
                                       "Stop the run (a long block stops at its next batch chunk)", "cancel")
        self.act_cancel.setEnabled(False)
        self.act_auto_run = self._action(
            "&Auto-run", lambda: None, None,
            "After an edit, re-run what changed when it last ran in under 200 ms (larger "
            "canvases wait for F5)")
        self.act_auto_run.setCheckable(True)
        self.act_auto_run.setChecked(_setting_bool(self.settings, "run/auto_run", True))
        self.session.auto_run = self.act_auto_run.isChecked()
        self.act_auto_run.toggled.connect(self._auto_run_toggled)
        self.act_shortcuts = self._action("&Keyboard Shortcuts", self.show_shortcuts, K.HelpContents,
                                          "List the keyboard shortcuts")
        self.act_guide = self._action("&User Guide…", lambda: show_guide(self), None,
                                      "The manual: the app, the kernels, the command line, ...")
        self.act_about = self._action("&About GradBlocks", self.show_about, None, "About")

    def _build_view_actions(self) -> None:
        """View menu: zoom in / out, 100 %, fit all, frame selected (app.view_zoom)."""
        a = self.adapter
        self.act_zoom_in = self._action("Zoom &In", a.zoom_in, ["Ctrl++", "Ctrl+="],
                                        "Magnify the canvas")
        self.act_zoom_out = self._action("Zoom &Out", a.zoom_out, "Ctrl+-",
                                         "Show more of the canvas")
        self.act_zoom_100 = self._action("&Actual Size (100%)", a.zoom_actual_size, "Ctrl+0",
                                         "Zoom to 100 %")
        self.act_fit = self._action("&Fit All", a.fit_all, "F",
                                    "Zoom to show every block (text stays readable)", "fit")
        self.act_frame_selected = self._action("Frame &Selected", a.frame_selected, "Shift+F",
                                               "Zoom to the selected blocks")

    def _build_menus(self) -> None:
        bar = self.menuBar()
        m = bar.addMenu("&File")
        m.addActions([self.act_new, self.act_open])
        self.recent_menu = m.addMenu("Open &Recent")
        self.examples_menu = m.addMenu("&Examples")
        m.addAction(self.act_import_layer)
        m.addAction(self.export.action)
        m.addSeparator()
        m.addActions([self.act_save, self.act_save_as])
        m.addSeparator()
        m.addAction(self.act_quit)
        self._fill_recent()
        self._fill_examples()
        m = self.edit_menu = bar.addMenu("&Edit")
        m.addActions([self.act_undo, self.act_redo])
        m.addSeparator()
        m.addActions([self.act_cut, self.act_copy, self.act_paste, self.act_duplicate,
                      self.act_delete])
        m.addSeparator()
        m.addActions([self.act_select_all, self.act_add_block])
        m = bar.addMenu("&View")
        m.addActions([self.act_zoom_in, self.act_zoom_out, self.act_zoom_100])
        m.addSeparator()
        m.addActions([self.act_fit, self.act_frame_selected])
        m.addSeparator()
        m.addAction(self.previews.action)
        m.addSeparator()
        for dock in (self.palette_dock, self.attributes_dock, self.viewer_dock_widget,
                     self.log_dock, self.explain_dock, self.geometry_dock):
            m.addAction(dock.toggleViewAction())
        m.addSeparator()
        m.addAction(self.act_reset_layout)
        m = bar.addMenu("&Run")
        m.addActions([self.act_run, self.act_cancel])
        m.addSeparator()
        m.addAction(self.act_auto_run)
        m.addSeparator()
        m.addAction(self.crosscheck.action)
        m.addAction(self.verify.action)
        m = bar.addMenu("&Help")
        m.addActions([self.act_guide, self.act_shortcuts, self.act_about])

    def _build_context_menu(self) -> None:
        """Right-click on the canvas: the common editing actions."""
        menu = self.adapter.viewer.context_menus()["graph"]
        menu.addActions([self.act_add_block, self.act_paste, self.act_duplicate,
                         self.act_delete])
        menu.addSeparator()
        menu.addActions([self.act_fit, self.act_run])
        self.annotations.install(self.edit_menu, menu)  # Add Frame, Add Note, colours

    def _build_toolbar(self) -> None:
        tb = self.addToolBar("Main")
        tb.setObjectName("toolbar_main")
        tb.setToolButtonStyle(QtCore.Qt.ToolButtonTextBesideIcon)
        tb.setIconSize(QtCore.QSize(18, 18))
        tb.addActions([self.act_new, self.act_open, self.act_save])
        tb.addSeparator()
        tb.addActions([self.act_undo, self.act_redo])
        for act in (self.act_undo, self.act_redo):  # their text names the command: too long
            tb.widgetForAction(act).setToolButtonStyle(QtCore.Qt.ToolButtonIconOnly)
        tb.addSeparator()
        tb.addAction(self.act_fit)
        tb.addSeparator()
        tb.addActions([self.act_run, self.act_cancel])
        tb.addWidget(self.progress)

    def _edit_message(self, text: str, level: str) -> None:
        """An edit's message goes to the log; a refused edit's first line to the status bar too
        (the log may be a hidden tab)."""
        self.log.add(text, level)
        if level in ("warning", "error"):
            self.statusBar().showMessage(text.partition("\n")[0], 15000)

    def _session_message(self, text: str, level: str, node_id) -> None:
        """The session's messages go to the log; its warnings (a run with the last valid value
        of an invalid edit, a slow GradCheck) to the status bar too (the log may be a hidden
        tab)."""
        self.log.add(text, level, node_id)
        if level == "warning":
            self.statusBar().showMessage(text.partition("\n")[0], 15000)

    def _wire(self) -> None:
        self.doc.changed.connect(self._on_canvas_changed)
        self.doc.modified_changed.connect(lambda _m: self.update_title())
        self.doc.path_changed.connect(self.update_title)
        self.files.recent_changed.connect(self._fill_recent)
        self.files.message.connect(lambda text, level: self.log.add(text, level))
        self.edits.message.connect(self._edit_message)
        self.annotations.message.connect(self._edit_message)
        self.adapter.selection_changed.connect(self._on_selection)
        self.adapter.files_dropped.connect(self.handle_files)
        self.adapter.edit_failed.connect(lambda msg: self._edit_message(msg, "error"))
        self.palette.add_requested.connect(
            lambda t: self.adapter.add_blocks([t], self.edits.free_spot()))
        self.search_popup.chosen.connect(
            lambda t, pos: self.adapter.add_blocks([t], pos, visible=True))
        self.session.log.connect(self._session_message)
        self.log.node_activated.connect(self.select_node)
        runner = self.session.runner
        runner.started.connect(self._on_run_started)
        runner.progress.connect(self._on_run_progress)
        runner.step_progress.connect(self._on_step_progress)
        runner.running_changed.connect(self._on_running_changed)
        self.session.run_summary.connect(self._on_run_summary)

    def _on_canvas_changed(self, change) -> None:
        """Another canvas (open, new, restore): nothing of the old one stays shown in the
        Explain panel or the progress bar."""
        if not change.reloaded:
            return
        self.explain_link.clear()
        if not self.session.runner.running:
            self.progress.setValue(0)
            self.progress.setFormat("idle")
            self.progress.setToolTip("")

    # --- title and layout ------------------------------------------------------------------
    def update_title(self) -> None:
        name = display_name(self.doc.path)
        if self.doc.path is None and self.doc.example_dir is not None:
            name += " (example)"
        star = "*" if self.doc.modified else ""
        self.setWindowTitle(f"{name}{star} — {APP_NAME}")

    def restore_layout(self) -> None:
        geometry = self.settings.value("window/geometry")
        state = self.settings.value("window/state")
        if isinstance(geometry, (QtCore.QByteArray, bytes)):
            self.restoreGeometry(geometry)
        if isinstance(state, (QtCore.QByteArray, bytes)):
            self.restoreState(state)

    def save_layout(self) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.settings.sync()

    def reset_layout(self) -> None:
        for dock in (self.palette_dock, self.attributes_dock, self.viewer_dock_widget,
                     self.log_dock, self.geometry_dock):
            dock.setFloating(False)
            dock.show()
        self.restoreState(self._default_state)
        QtCore.QTimer.singleShot(0, self.panel_widths.remember)

    # --- menus -----------------------------------------------------------------------------
    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        recent = self.files.recent()
        for path in recent:
            act = self.recent_menu.addAction(f"{display_name(path)}    {path.parent}")
            act.triggered.connect(lambda _c=False, p=path: self.files.open_path(p))
        if recent:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear Recent", self.files.clear_recent)
        self.recent_menu.setEnabled(bool(recent))

    def _fill_examples(self) -> None:
        self.examples_menu.clear()
        examples = example_files()
        self._add_examples(self.examples_menu, examples)
        pitfalls = example_files(PITFALLS_DIR)
        self.pitfalls_menu = self.examples_menu.addMenu("&Pitfalls")
        self._add_examples(self.pitfalls_menu, pitfalls)
        self.pitfalls_menu.menuAction().setVisible(bool(pitfalls))
        self.examples_menu.setEnabled(bool(examples or pitfalls))

    def _add_examples(self, menu: QtWidgets.QMenu, paths: list[Path]) -> None:
        for path in paths:
            act = menu.addAction(display_name(path))
            act.setStatusTip(str(path))
            act.triggered.connect(
                lambda _c=False, p=path: self.files.open_path(p, as_example=True))

    def show_shortcuts(self) -> None:
        QtWidgets.QMessageBox.information(self, "Keyboard shortcuts", shortcuts_html(self))

    def show_about(self) -> None:
        QtWidgets.QMessageBox.about(self, "About GradBlocks", about_text())

    # --- selection and viewer --------------------------------------------------------------
    def _on_selection(self, ids: list[str]) -> None:
        self.attributes.show_selection(ids)
        self.viewer_dock.show_selection(ids)
        self.geometry_view.show_selection(ids)

    def select_node(self, node_id: str) -> None:
        if node_id in self.doc.canvas.nodes:
            self.adapter.select([node_id])

    # --- dropped files ---------------------------------------------------------------------
    def handle_files(self, paths: list[str], scene_pos: tuple[float, float] | None = None
                     ) -> None:
        """A .gbc.json opens; each .npy becomes a Tensor block reading it (fill=file), each
        PNG/JPEG one reading the image (fill=image)."""
        canvases = [Path(p) for p in paths if is_canvas_file(p)]
        arrays = [Path(p) for p in paths if str(p).lower().endswith(TENSOR_SUFFIXES)]
        for p in paths:
            if not is_canvas_file(p) and not str(p).lower().endswith(TENSOR_SUFFIXES):
                self.log.add(f"cannot use dropped file {p}: expected a {CANVAS_SUFFIX} canvas, "
                             "a .npy array or a PNG/JPEG image", "warning")
        if canvases:
            self.files.open_path(canvases[0])
        elif arrays:
            self.edits.add_npy_tensors(arrays, scene_pos)

    def showEvent(self, event: QtGui.QShowEvent) -> None:
        super().showEvent(event)
        if not self._shown_once:  # NodeGraphQt rescales while the window is laid out: fit
            self._shown_once = True  # once laid out (an empty canvas at 100 %)
            QtCore.QTimer.singleShot(0, self._laid_out)
        QtCore.QTimer.singleShot(0, self.adapter.place_hint)

    def _laid_out(self) -> None:
        """Once first laid out: a restored layout that squeezes a side panel below its minimum
        gives way to the default one; then the panels' minimums hold (app.panel_widths)."""
        if self.panel_widths.squeezed():
            self.restoreState(self._default_state)
        self.panel_widths.set_minimums()
        self.layout().activate()
        self.panel_widths.remember()
        self.adapter.fit_to_view()

    def dragEnterEvent(self, event: QtGui.QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QtGui.QDropEvent) -> None:
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.handle_files(paths)

    # --- running ---------------------------------------------------------------------------
    def run(self) -> bool:
        return self.session.run()

    def _auto_run_toggled(self, on: bool) -> None:
        self.session.auto_run = on
        self.settings.setValue("run/auto_run", on)

    def _on_run_started(self, total: int) -> None:
        self.progress.setMaximum(max(total, 1))
        self.progress.setValue(0)
        self.progress.setFormat("running %v/%m")

    def _on_run_progress(self, node_id: str, index: int, total: int) -> None:
        self.progress.setMaximum(max(total, 1))
        self.progress.setValue(index)
        self.progress.setFormat("%v/%m  " + progress_format_literal(self.session.label(node_id)))

    def _on_step_progress(self, node_id: str, fraction: float) -> None:
        """Inside a long block (a GradCheck): the bar shows how far that block got."""
        if not self.session.runner.running:
            return
        label = progress_format_literal(self.session.label(node_id))
        self.progress.setFormat(f"%v/%m  {label} {100 * fraction:.0f}%")

    def _on_running_changed(self, running: bool) -> None:
        self.act_run.setEnabled(not running)
        self.act_cancel.setEnabled(running)
        if not running:
            self.progress.setValue(self.progress.maximum())
            self.progress.setFormat("done" if self.progress.maximum() else "idle")

    def _on_run_summary(self, summary: str, cancelled: bool) -> None:
        """The progress bar ends on what happened: "cancelled" or "3 ok, 1 skipped, 0 failed"."""
        room = self.progress.contentsRect().width() - 12  # the style's text margins
        shown = self.progress.fontMetrics().elidedText(summary, QtCore.Qt.ElideRight, room)
        self.progress.setFormat(progress_format_literal(shown))  # one line: elided, not cut
        self.progress.setToolTip(summary)

    def wait_for_run(self, timeout_ms: int = 120_000) -> bool:
        """Block (processing events) until the current run has finished."""
        if not self.session.runner.running:
            return True
        loop = QtCore.QEventLoop()
        self.session.runner.running_changed.connect(lambda r: None if r else loop.quit())
        QtCore.QTimer.singleShot(timeout_ms, loop.quit)
        if self.session.runner.running:
            loop.exec()
        return not self.session.runner.running

    # --- closing ---------------------------------------------------------------------------
    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        """Close (after the save prompt); a run is cancelled first. The worker normally stops
        within a batch chunk; if it has not after 1 s, the window is disabled and closes when
        it has (a QThread must never be destroyed while it runs)."""
        if not self.files.maybe_save():
            event.ignore()
            return
        runner = self.session.runner
        if runner.running and not runner.shutdown(1000):
            # a block without cancel checkpoints: close once it ends (a hidden window would
            # not quit the application when it finally closes)
            event.ignore()
            self.setEnabled(False)
            self.statusBar().showMessage("Closing when the running block stops…")
            runner.running_changed.connect(lambda running: running or self.close())
            return
        if not self.quiet:
            self.save_layout()
        self.files.shutdown()
        self.crosscheck.wait()  # a QThread must not be destroyed while it runs
        self.verify.shutdown()  # cancels a sweep and waits for it
        event.accept()


def _setting_bool(settings: QtCore.QSettings, key: str, default: bool) -> bool:
    """A boolean setting (INI files give back the strings "true"/"false")."""
    value = settings.value(key, default)
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def about_text() -> str:
    """Help > About: what GradBlocks is, its version and the versions a bug report needs."""
    import NodeGraphQt
    import numpy
    import PySide6

    return (f"GradBlocks {version()}\n\n"
            "A block editor for seeing and checking TensorFlow convolution gradients "
            "(Conv2DBackpropFilter, Conv2DBackpropInput, DepthwiseConv2dNativeBackpropFilter "
            "and their forward ops).\n\n"
            f"Python {sys.version.split()[0]}, NumPy {numpy.__version__}, "
            f"PySide6 {PySide6.__version__} (Qt {QtCore.qVersion()}), "
            f"NodeGraphQt {NodeGraphQt.__version__}")
