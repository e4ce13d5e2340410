"""What a canvas that failed to open says: every problem for the dialog, one line for the log
(the same words as ``gradblocks check``), and the message of an unexpected loader failure."""

from __future__ import annotations

from pathlib import Path

from engine.base.names import counted
from engine.graph.canvas import CanvasError
from engine.graph.report import canvas_error_lines, file_problem


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

