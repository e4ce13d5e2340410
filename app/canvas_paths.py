"""Canvas file names: the suffix a canvas file has, its name as the window shows it, and the
example canvases shipped in assets/examples (File > Examples, with its Pitfalls gallery)."""

from __future__ import annotations

import os
from pathlib import Path

CANVAS_SUFFIX = ".gbc.json"
FILE_FILTER = "GradBlocks canvas (*.gbc.json);;All files (*)"
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

