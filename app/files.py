"""The File menu's logic for one window: New/Open/Save/Save As/Open Recent, the unsaved-changes
prompt, autosave to a recovery file (:mod:`app.recovery`) and the restore offer after a crash.

A file that fails to load shows the loader's messages and leaves the current canvas untouched.
Save over a file that another program changed (or deleted) since it was opened or saved asks
first (Reload / Overwrite / Save As / Cancel); when the window regains focus a changed file is
reloaded (undoably), silently if the canvas has no unsaved edits, else after asking once per
disk state (app.disk_watch).
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app import dialog_folders, disk_watch
from app.canvas_paths import CANVAS_SUFFIX, FILE_FILTER, display_name, is_canvas_file
from app.disk_watch import DiskWatch
from app.document import Document
from app.load_messages import internal_error_text, load_error_line, load_error_text
from app.recovery import Recovery
from engine.base.errors import InvalidArgumentError
from engine.base.file_stamp import FileStamp
from engine.graph.canvas import Canvas, CanvasError
from engine.graph.canvas_file import load_canvas, save_canvas

AUTOSAVE_MS = 30_000
MAX_RECENT = 10
RECENT_KEY = "files/recent"


class FileController(QtCore.QObject):
    """The File menu's logic for one window and its Document."""

    recent_changed = QtCore.Signal()
    message = QtCore.Signal(str, str)  # text, level

    def __init__(self, window: QtWidgets.QWidget, doc: Document, settings: QtCore.QSettings,
                 recovery_dir: Path | None = None, autosave: bool = True):
        super().__init__(window)
        self.window, self.doc, self.settings = window, doc, settings
        self.recovery = Recovery(recovery_dir) if recovery_dir is not None else None
        self.autosave_timer = QtCore.QTimer(self)
        self.autosave_timer.setInterval(AUTOSAVE_MS)
        self.autosave_timer.timeout.connect(self.autosave_now)
        if autosave and self.recovery is not None:
            self.autosave_timer.start()
        self._autosaved_snapshot: dict | None = None
        self.example_name: str | None = None  # the example open, for Save As's suggestion
        self.disk = DiskWatch()
        self._checking_disk = False
        window.installEventFilter(self)  # focus regained -> check the file on disk
        app = QtWidgets.QApplication.instance()
        if app is not None:  # back from another program while a floating panel has the focus
            app.applicationStateChanged.connect(self._on_application_state)

    # --- prompts ---------------------------------------------------------------------------
    def maybe_save(self) -> bool:
        """Ask to save unsaved changes; True when it is fine to replace the canvas."""
        if not self.doc.modified:
            return True
        name = display_name(self.doc.path)
        answer = QtWidgets.QMessageBox.question(
            self.window, "Unsaved changes",
            f"'{name}' has unsaved changes. Save them first?",
            QtWidgets.QMessageBox.Save | QtWidgets.QMessageBox.Discard
            | QtWidgets.QMessageBox.Cancel,
            QtWidgets.QMessageBox.Save,
        )
        if answer == QtWidgets.QMessageBox.Save:
            return self.save()
        return answer == QtWidgets.QMessageBox.Discard

    def _error(self, title: str, text: str, details: str = "", log: str = "") -> None:
        """A message box, and the log entry ``log`` (default: ``text``)."""
        self.message.emit(log or text, "error")
        box = QtWidgets.QMessageBox
        box.critical(self.window, title, text if not details or details in text
                     else text + "\n\n" + details)

    # --- actions ---------------------------------------------------------------------------
    def new(self) -> bool:
        if not self.maybe_save():
            return False
        self.doc.load(Canvas(nodes={}, edges=[]), None)
        self.example_name = None
        self.disk.remember(None, None)
        self._after_load()
        return True

    def open_dialog(self) -> bool:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self.window, "Open canvas", dialog_folders.start("canvas"), FILE_FILTER)
        if not path:
            return False
        dialog_folders.remember("canvas", path)
        return self.open_path(Path(path), ask=True)

    def open_path(self, path: str | os.PathLike, *, ask: bool = True,
                  as_example: bool = False) -> bool:
        """Load ``path``; on failure show every problem and keep the current canvas."""
        path = Path(path)
        if ask and not self.maybe_save():
            return False
        try:
            canvas = load_canvas(path)  # refuses huge files and FIFOs before reading them
            stamp = FileStamp.of(path)
        except (CanvasError, InvalidArgumentError, OSError, ValueError) as exc:
            summary, details = load_error_text(path, exc)
            # the log's entry is one line: the problems themselves, not only their count
            self._error("Cannot open canvas", summary, details,
                        log=load_error_line(path, exc))
            return False
        except Exception as exc:  # noqa: BLE001 - a loader bug must not cost the open canvas
            self._error("Cannot open canvas", internal_error_text(path, exc))
            return False
        before = (self.doc.canvas, self.doc.path, self.doc.example_dir, self.example_name,
                  self.disk.path, self.disk.stamp)
        try:
            self._show_loaded(canvas, path, as_example)
            self.disk.remember(None if as_example else path.resolve(), stamp)
        except Exception as exc:  # noqa: BLE001 - keep what was open, say what happened
            self.doc.load(before[0], before[1], example_dir=before[2])
            self.example_name = before[3]
            self.disk.remember(before[4], before[5])
            self._error("Cannot open canvas", internal_error_text(path, exc))
            return False
        self._after_load()
        return True

    def _show_loaded(self, canvas: Canvas, path: Path, as_example: bool) -> None:
        self.example_name = path.name if as_example else None
        if as_example:
            self.doc.load(canvas, None, example_dir=path.parent)
            self.message.emit(f"opened example {path.name} (Save As to keep a copy)", "info")
        else:
            self.doc.load(canvas, path.resolve())
            self.add_recent(path.resolve())
            self.message.emit(f"opened {path}", "info")
        self._after_load()
        return True

    def save(self) -> bool:
        """Save to the document's file, asking first when another program changed it."""
        if self.doc.path is None:
            return self.save_as()
        changed, now = self.disk.changed(self.doc.path)
        if changed:
            self.disk.first_time(now)  # answered here: regaining focus does not ask again
            answer = disk_watch.ask_save_conflict(self.window, self.doc.path, now is None)
            if answer == disk_watch.RELOAD:
                self.reload_from_disk()
                return False
            if answer == disk_watch.SAVE_AS:
                return self.save_as()
            if answer != disk_watch.OVERWRITE:
                return False
        return self.save_to(self.doc.path)

    def save_as(self) -> bool:
        """Ask for a name: the file's own, an example's name, or untitled.gbc.json."""
        name = self.doc.path.name if self.doc.path else (self.example_name or "untitled.gbc.json")
        start = (str(self.doc.path) if self.doc.path
                 else dialog_folders.start("canvas", name))
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self.window, "Save canvas as", start, FILE_FILTER)
        if not path:
            return False
        dialog_folders.remember("canvas", path)
        if not is_canvas_file(path):
            path += CANVAS_SUFFIX
        return self.save_to(Path(path))

    def save_to(self, path: Path) -> bool:
        """Write the canvas atomically; the document becomes clean on success."""
        try:
            data = save_canvas(self.doc.canvas, path)
        except (OSError, ValueError) as exc:
            why = getattr(exc, "strerror", None) or exc
            self._error("Cannot save canvas", f"Cannot save {path}: {why} (the file on disk, "
                        "if any, is unchanged)")
            return False
        self.doc.mark_saved(Path(path).resolve())
        self.disk.remember(Path(path).resolve(), FileStamp.written(path, data))
        self.add_recent(Path(path).resolve())
        if self.recovery is not None:
            self.recovery.discard()
            self._autosaved_snapshot = None
        self.message.emit(f"saved {path}", "ok")
        return True

    # --- changes on disk -------------------------------------------------------------------
    def reload_from_disk(self, *, quiet: bool = False) -> bool:
        """Show the file's version on disk as one undoable step; a file that no longer loads
        shows the loader's messages (in the log only when ``quiet``) and keeps the canvas."""
        path = self.doc.path
        if path is None:
            return False
        try:
            canvas = load_canvas(path)
            stamp = FileStamp.of(path)
        except (CanvasError, InvalidArgumentError, OSError, ValueError) as exc:
            summary, details = load_error_text(path, exc)
            if quiet:
                self.message.emit(f"not reloaded (it changed on disk): {details}", "warning")
            else:
                self._error("Cannot reload canvas", summary, details)
            return False
        self.doc.reload(canvas)
        self.disk.remember(path, stamp)
        self.message.emit(f"reloaded {path} (changed on disk; Undo brings back the canvas "
                          "it replaced)", "info")
        return True

    def check_disk(self) -> None:
        """The window regained focus: reload a file changed on disk (asking first when the
        canvas has unsaved edits), once per disk state; a deleted file is only reported."""
        if self._checking_disk:
            return
        self._checking_disk = True
        try:
            path = self.doc.path
            changed, now = self.disk.changed(path)
            if not changed or not self.disk.first_time(now):
                return
            if now is None:
                self.message.emit(f"{path} was deleted or moved on disk; Save writes it again",
                                  "warning")
            elif not self.doc.modified:
                self.reload_from_disk(quiet=True)  # perhaps half-written: no dialog for it
            elif disk_watch.ask_reload(self.window, path) == disk_watch.RELOAD:
                self.reload_from_disk()
        finally:
            self._checking_disk = False

    def _on_application_state(self, state: QtCore.Qt.ApplicationState) -> None:
        if state == QtCore.Qt.ApplicationActive:
            QtCore.QTimer.singleShot(0, self, self.check_disk)

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if watched is self.window and event.type() == QtCore.QEvent.WindowActivate:
            QtCore.QTimer.singleShot(0, self, self.check_disk)  # not inside the activation itself
        return False

    def _after_load(self) -> None:
        if self.recovery is not None:
            self.recovery.discard()
        self._autosaved_snapshot = None

    # --- recent files ----------------------------------------------------------------------
    def recent(self) -> list[Path]:
        """The recent files, newest first; values that are not a path (a hand-edited or older
        settings file) are left out."""
        value = self.settings.value(RECENT_KEY, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)):
            return []
        return [Path(p) for p in value if isinstance(p, str) and p and "\x00" not in p]

    def add_recent(self, path: Path) -> None:
        items = [str(path)] + [str(p) for p in self.recent() if str(p) != str(path)]
        self.settings.setValue(RECENT_KEY, items[:MAX_RECENT])
        self.recent_changed.emit()

    def clear_recent(self) -> None:
        self.settings.setValue(RECENT_KEY, [])
        self.recent_changed.emit()

    # --- autosave and recovery -------------------------------------------------------------
    def autosave_now(self) -> bool:
        """Write the recovery file if there are unsaved changes not yet autosaved."""
        if self.recovery is None or not self.doc.modified:
            return False
        snap = self.doc.snapshot()
        if snap == self._autosaved_snapshot:
            return False
        try:
            self.recovery.write(self.doc.canvas, self.doc.path)
        except (OSError, ValueError) as exc:
            self.message.emit(f"autosave failed: {exc}", "warning")
            return False
        self._autosaved_snapshot = snap
        return True

    def offer_recovery(self) -> bool:
        """After a crash: offer to restore the newest orphaned autosave. True if restored."""
        if self.recovery is None:
            return False
        orphans = self.recovery.orphans()
        if not orphans:
            return False
        canvas_path, meta = orphans[0]
        original = meta.get("path")
        when = meta.get("saved_at", "")
        what = f"'{Path(original).name}'" if original else "an untitled canvas"
        answer = QtWidgets.QMessageBox.question(
            self.window, "Restore unsaved work?",
            f"GradBlocks did not close normally. Restore the autosave of {what}"
            f"{' from ' + when if when else ''}?",
            QtWidgets.QMessageBox.Yes | QtWidgets.QMessageBox.No, QtWidgets.QMessageBox.Yes)
        restored = False
        if answer == QtWidgets.QMessageBox.Yes:
            try:
                canvas = load_canvas(canvas_path)
            except (CanvasError, InvalidArgumentError, OSError, ValueError) as exc:
                summary, details = load_error_text(canvas_path, exc)
                self._error("Cannot restore", summary, details)
            except Exception as exc:  # noqa: BLE001 - a loader bug must not stop start-up
                self._error("Cannot restore", internal_error_text(canvas_path, exc))
            else:
                self.doc.load(canvas, Path(original) if original else None, modified=True)
                self.disk.remember(None, None)  # what the file held then is unknown
                self.message.emit(f"restored unsaved work of {what}", "ok")
                restored = True
        for path, _meta in orphans:
            Recovery.remove(path)
        return restored

    def shutdown(self) -> None:
        """Normal exit: no crash happened, so the recovery files go."""
        self.autosave_timer.stop()
        if self.recovery is not None:
            self.recovery.release()
