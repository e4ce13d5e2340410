"""The GradBlocks main window: one window editing one canvas.

Centre: the NodeGraphQt canvas. Left: block palette. Right: attribute panel. Bottom: tensor
viewer and log. Docks can be rearranged; layout and geometry persist in QSettings. The window's
actions, menus and toolbar are built by :mod:`app.window_menus`, its progress bar is
:mod:`app.run_progress`; start-up and screenshot mode live in :mod:`app.startup`.
"""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from app import dialog_folders, gc_guard, window_menus
from app.annotation_actions import AnnotationActions
from app.attribute_panel import AttributePanel
from app.canvas_paths import CANVAS_SUFFIX, display_name, is_canvas_file
from app.crosscheck_action import CrossCheckAction
from app.document import Document
from app.dropped_tensors import TENSOR_SUFFIXES
from app.editing import EditActions
from app.explain.geometry_view import GeometryView
from app.explain.link import ExplainLink
from app.explain.panel import ExplainPanel
from app.export_action import ExportAction
from app.files import FileController
from app.graph_adapter import GraphAdapter
from app.help import about_text, shortcuts_html
from app.icons import icon
from app.log_panel import LogPanel
from app.node_previews import NodePreviews
from app.palette import BlockPalette, BlockSearchPopup, TabKeyFilter
from app.panel_widths import PanelWidths
from app.run_progress import RunProgress
from app.session import Session
from app.verify_action import VerifyAction
from app.viewer.dock import ViewerDock
from app.wire_drop import WireDrop

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
        self._build_model(recovery_dir, autosave)
        self._build_panels()
        self._build_docks()
        self.progress = RunProgress(self.session, self)
        window_menus.build_actions(self)
        window_menus.build_menus(self)
        window_menus.build_toolbar(self)
        window_menus.build_context_menu(self)
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
    def _build_model(self, recovery_dir: Path | None, autosave: bool) -> None:
        """The document, its view on the canvas, the run session and the editing parts."""
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

    def _build_panels(self) -> None:
        """The panels and the actions that own a dialog (before the docks hold them)."""
        self.palette = BlockPalette(self)
        self.attributes = AttributePanel(self.doc, self.session, self)
        self.viewer_dock = ViewerDock(self.session, self)
        self.geometry_view = GeometryView(self.session, self)
        self.log = LogPanel(self)
        self.crosscheck = CrossCheckAction(self)  # Run > Cross-check (app.crosscheck_action)
        self.export = ExportAction(self)  # File > Export as Script (app.export_action)
        self.verify = VerifyAction(self)  # Run > Verify an Implementation (app.verify_action)
        self.search_popup = BlockSearchPopup(self)
        self.tab_filter = TabKeyFilter(self.adapter.viewer, self.search_popup)
        self.wire_drop = WireDrop(self.adapter, self.session, self)

    def _build_docks(self) -> None:
        """Blocks left, Attributes right; the viewer, Explain, Log and Geometry below."""
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
        self.files.recent_changed.connect(lambda: window_menus.fill_recent(self))
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
        self.session.runner.running_changed.connect(self._on_running_changed)

    def _on_canvas_changed(self, change) -> None:
        """Another canvas (open, new, restore): nothing of the old one stays shown in the
        Explain panel or the progress bar."""
        if not change.reloaded:
            return
        self.explain_link.clear()
        self.progress.show_idle()

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

    # --- help ------------------------------------------------------------------------------
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

    def _on_running_changed(self, running: bool) -> None:
        self.act_run.setEnabled(not running)
        self.act_cancel.setEnabled(running)

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


