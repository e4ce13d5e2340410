"""File handling of the window: New/Open/Save/Save As/Open Recent, the unsaved-changes prompt,
autosave to a recovery file and the restore offer after a crash, examples, dropped files.

A file that fails to load shows the loader's messages and leaves the current canvas untouched.
Save over a file that another program changed (or deleted) since it was opened or saved asks
first (Reload / Overwrite / Save As / Cancel); when the window regains focus a changed file is
reloaded (undoably), silently if the canvas has no unsaved edits, else after asking once per
disk state (app.disk_watch).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import numpy as np
from PySide6 import QtCore, QtWidgets

from app import dialog_folders, disk_watch
from app.disk_watch import DiskWatch
from app.document import Document
from engine.base.atomic import write_bytes_atomically
from engine.base.dtypes import DTYPES, dtype_name
from engine.base.errors import InvalidArgumentError
from engine.base.file_stamp import FileStamp
from engine.base.names import counted
from engine.graph.canvas import Canvas, CanvasError
from engine.graph.canvas_file import load_canvas, save_canvas
from engine.graph.report import canvas_error_lines, file_problem
from engine.io import image_source

CANVAS_SUFFIX = ".gbc.json"
FILE_FILTER = "GradBlocks canvas (*.gbc.json);;All files (*)"
AUTOSAVE_MS = 30_000
MAX_RECENT = 10
RECENT_KEY = "files/recent"
EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "assets" / "examples"
#: The pitfalls gallery (File > Examples > Pitfalls): one canvas per framework pitfall.
PITFALLS_DIR = EXAMPLES_DIR / "pitfalls"


def is_canvas_file(path: str | os.PathLike) -> bool:
    return str(path).lower().endswith(CANVAS_SUFFIX)


def display_name(path: Path | None) -> str:
    if path is None:
        return "untitled"
    name = path.name
    return name[: -len(CANVAS_SUFFIX)] if name.lower().endswith(CANVAS_SUFFIX) else name


def example_files(folder: Path = EXAMPLES_DIR) -> list[Path]:
    """The example canvases shipped in assets/examples, sorted by name."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if is_canvas_file(p))


def load_error_text(path: Path, exc: Exception) -> tuple[str, str]:
    """(summary, details) for a canvas that failed to load: every problem, a block attribute's
    named as the compiler names it, the others by JSON path (as ``gradblocks check``)."""
    problems = getattr(exc, "problems", None)
    whole = file_problem(exc) if isinstance(exc, CanvasError) else None
    if whole is not None:
        return f"Cannot open {path.name}: {whole}", whole
    if problems:
        lines = _problem_lines(exc)
        summary = f"{path.name} has {counted(len(lines), 'problem')}:"
        return summary + "\n" + "\n".join(lines[:12]), "\n".join(lines)
    if isinstance(exc, OSError):
        return f"Cannot read {path}: {exc.strerror or exc}", str(exc)
    return f"Cannot open {path.name}: {exc}", str(exc)


def load_error_line(path: Path, exc: Exception, shown: int = 3) -> str:
    """One line for a canvas that failed to load: its first problems, and how to see the rest."""
    problems = getattr(exc, "problems", None)
    if not problems or (isinstance(exc, CanvasError) and file_problem(exc) is not None):
        return " ".join(load_error_text(path, exc)[0].split())
    parts = _problem_lines(exc)
    line = f"{path.name}: " + "; ".join(" ".join(p.split()) for p in parts[:shown])
    if len(parts) > shown:
        line += f" (and {len(parts) - shown} more: `gradblocks check {path}` lists them)"
    return line


def _problem_lines(exc: Exception) -> list[str]:
    if isinstance(exc, CanvasError):
        return canvas_error_lines(exc)
    return [f"{where}: {msg}" if where else msg for where, msg in exc.problems]


def internal_error_text(path: Path, exc: Exception) -> str:
    """The message for an unexpected failure while opening ``path`` (a GradBlocks bug)."""
    return (f"Cannot open {path.name}: internal error ({type(exc).__name__}: {exc}). The canvas "
            "that was open is unchanged. Please report this with the file.")


#: Suffixes of the images a dropped file becomes a Tensor block (fill=image) for.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
TENSOR_SUFFIXES = (".npy", *IMAGE_SUFFIXES)


def _stored_path(path: Path, base_dir: Path | None) -> str:
    """``path`` relative to ``base_dir`` when the file lies below it, else as it is."""
    stored = str(path)
    if base_dir is not None:
        try:
            stored = Path(os.path.relpath(path, base_dir)).as_posix()
            if stored.startswith(".."):
                stored = str(path)
        except ValueError:  # another drive on Windows
            stored = str(path)
    return stored


def dropped_tensor_attrs(path: Path, base_dir: Path | None) -> tuple[dict, str | None]:
    """Attributes of a Tensor block reading a dropped .npy (fill=file) or PNG/JPEG image
    (fill=image) and a warning, if any."""
    if str(path).lower().endswith(IMAGE_SUFFIXES):
        return image_tensor_attrs(path, base_dir)
    return npy_tensor_attrs(path, base_dir)


def image_tensor_attrs(path: Path, base_dir: Path | None) -> tuple[dict, str | None]:
    """Attributes of a Tensor block reading the image ``path`` (fill=image): gray for a gray
    image, else rgb; the path stored as for .npy files. A header that cannot be read is a
    warning (the block shows the error on its path)."""
    attrs: dict = {"fill": "image", "path": _stored_path(path, base_dir)}
    try:
        header = image_source.read_header(str(path))
    except InvalidArgumentError as exc:
        return attrs, f"{path.name}: {exc}"
    attrs["color"] = "gray" if header.mode in image_source.GRAY_MODES else "rgb"
    return attrs, None


def npy_tensor_attrs(path: Path, base_dir: Path | None) -> tuple[dict, str | None]:
    """Attributes of a Tensor block reading ``path`` (fill=file) and a warning, if any.

    The path is stored relative to ``base_dir`` when the file lies below it; the dtype comes from
    the .npy header (read without unpickling).
    """
    stored = _stored_path(path, base_dir)
    attrs: dict = {"fill": "file", "path": stored}
    warning = None
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        return attrs, f"{path.name}: cannot read the .npy header: {exc}"
    name = dtype_name(arr.dtype)
    if name in DTYPES:
        attrs["dtype"] = name
    else:
        warning = f"{path.name}: dtype {name} is not one of {', '.join(DTYPES)}"
    return attrs, warning


def _write_json_atomic(path: Path, data: dict) -> None:
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    write_bytes_atomically(path, text.encode("utf-8"))


def _read_meta(path: Path) -> dict:
    """An autosave's note: {"path": str | None, "saved_at": str}, whatever the file holds."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = None
    meta = meta if isinstance(meta, dict) else {}
    original, when = meta.get("path"), meta.get("saved_at")
    return {"path": original if isinstance(original, str) and original
            and "\x00" not in original else None,
            "saved_at": when if isinstance(when, str) else ""}


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # gone meanwhile (another session cleaned up): last
        return 0.0


class Recovery:
    """This session's autosave file, guarded by a lock file so other sessions see it is alive.

    Files: ``session-<id>.gbc.json`` (the canvas), ``session-<id>.json`` (original path, time),
    ``session-<id>.lock`` (held while the session runs; a crash leaves it stale).
    """

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        stem = f"session-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.canvas_path = self.folder / (stem + CANVAS_SUFFIX)
        self.meta_path = self.folder / (stem + ".json")
        self.lock = QtCore.QLockFile(str(self.folder / (stem + ".lock")))
        self.lock.setStaleLockTime(0)
        self.lock.tryLock(0)

    def write(self, canvas: Canvas, original: Path | None) -> None:
        save_canvas(canvas, self.canvas_path)
        _write_json_atomic(self.meta_path, {
            "path": str(original) if original else None,
            "saved_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        })

    def discard(self) -> None:
        for p in (self.canvas_path, self.meta_path):
            p.unlink(missing_ok=True)

    def release(self) -> None:
        self.discard()
        self.lock.unlock()

    def orphans(self) -> list[tuple[Path, dict]]:
        """Autosaves of sessions that ended without cleaning up (crashed), newest first."""
        found = []
        for canvas_path in self.folder.glob("session-*" + CANVAS_SUFFIX):
            if canvas_path == self.canvas_path:
                continue
            stem = canvas_path.name[: -len(CANVAS_SUFFIX)]
            lock = QtCore.QLockFile(str(self.folder / (stem + ".lock")))
            lock.setStaleLockTime(0)
            if not lock.tryLock(0):
                continue  # that session is still running
            lock.unlock()
            found.append((canvas_path, _read_meta(self.folder / (stem + ".json"))))
        found.sort(key=lambda item: _mtime(item[0]), reverse=True)
        return found

    @staticmethod
    def remove(canvas_path: Path) -> None:
        stem = canvas_path.name[: -len(CANVAS_SUFFIX)]
        for p in (canvas_path, canvas_path.with_name(stem + ".json")):
            p.unlink(missing_ok=True)


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
