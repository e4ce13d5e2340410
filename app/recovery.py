"""Autosave files: this session's recovery file (guarded by a lock file while the session
runs) and the autosaves of sessions that crashed, offered back at the next start."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from PySide6 import QtCore

from app.canvas_paths import CANVAS_SUFFIX
from engine.base.atomic import write_bytes_atomically
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas


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

