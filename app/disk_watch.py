"""Changes made on disk by someone else to the open canvas file, and the questions they raise.

:class:`DiskWatch` keeps the :class:`~engine.base.file_stamp.FileStamp` of the file as last opened,
saved or reloaded, and tells whether the file differs now. ``ask_save_conflict`` (before Save
writes over a changed file) and ``ask_reload`` (the window regained focus, the canvas has unsaved
edits and the file changed) are the two dialogs; both are QMessageBox instances with named
buttons, run by ``exec``.
"""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtWidgets

from engine.base.file_stamp import FileStamp

RELOAD, OVERWRITE, SAVE_AS, CANCEL, KEEP = "reload", "overwrite", "save_as", "cancel", "keep"


class DiskWatch:
    """The stamp of the document's file and which disk state the user was already told about."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.stamp: FileStamp | None = None
        self._told: tuple | None = None  # the disk state already reported (not asked twice)

    def remember(self, path: Path | None, stamp: FileStamp | None) -> None:
        """``path`` is now in step with the canvas, as ``stamp`` (None: unknown, no checks)."""
        self.path, self.stamp, self._told = (Path(path) if path else None), stamp, None

    def changed(self, path: Path | None) -> tuple[bool, FileStamp | None]:
        """(whether ``path`` differs on disk from what the canvas was read from or saved to,
        its stamp now); False when it is not the file we know."""
        if path is None or self.stamp is None or self.path != Path(path):
            return False, None
        now = FileStamp.of(path, previous=self.stamp)
        return self.stamp.differs(now), now

    def first_time(self, now: FileStamp | None) -> bool:
        """True the first time this disk state is reported (then never again for it)."""
        key = None if now is None else (now.size, now.sha256)
        if self._told == ("state", key):
            return False
        self._told = ("state", key)
        return True


def _ask(parent: QtWidgets.QWidget, title: str, text: str,
         buttons: list[tuple[str, str, QtWidgets.QMessageBox.ButtonRole]], default: str) -> str:
    box = QtWidgets.QMessageBox(QtWidgets.QMessageBox.Warning, title, text,
                                QtWidgets.QMessageBox.NoButton, parent)
    chosen = {}
    for label, answer, role in buttons:
        button = box.addButton(label, role)
        chosen[button] = answer
        if answer == default:
            box.setDefaultButton(button)
    box.exec()
    return chosen.get(box.clickedButton(), CANCEL)


def ask_save_conflict(parent: QtWidgets.QWidget, path: Path, deleted: bool) -> str:
    """RELOAD, OVERWRITE, SAVE_AS or CANCEL: ``path`` changed (or went) since it was opened."""
    role = QtWidgets.QMessageBox.ButtonRole
    if deleted:
        text = (f"{path.name} was deleted or moved on disk since it was opened or saved.\n\n"
                f"Write it again at {path}, or save the canvas somewhere else?")
        buttons = [("Save Here", OVERWRITE, role.AcceptRole)]
    else:
        text = (f"{path.name} was changed on disk by another program since it was opened or "
                "saved.\n\nReload: show the disk version (Undo brings your canvas back).\n"
                "Overwrite: replace the disk version with your canvas.\n"
                "Save As: keep both.")
        buttons = [("Reload", RELOAD, role.DestructiveRole),
                   ("Overwrite", OVERWRITE, role.AcceptRole)]
    buttons += [("Save As...", SAVE_AS, role.ActionRole), ("Cancel", CANCEL, role.RejectRole)]
    return _ask(parent, "File changed on disk", text, buttons, CANCEL)


def ask_reload(parent: QtWidgets.QWidget, path: Path) -> str:
    """RELOAD or KEEP: ``path`` changed on disk while the canvas has unsaved edits."""
    role = QtWidgets.QMessageBox.ButtonRole
    text = (f"{path.name} was changed on disk by another program, and the canvas here has unsaved "
            "edits.\n\nReload the disk version (Undo brings your edits back), or keep yours "
            "(saving will ask before overwriting)?")
    return _ask(parent, "File changed on disk", text,
                [("Reload", RELOAD, role.DestructiveRole), ("Keep Mine", KEEP, role.RejectRole)],
                KEEP)
