"""GradBlocks's version, from the installed package's metadata (pyproject.toml)."""

from __future__ import annotations

from importlib import metadata


def version() -> str:
    """The installed version, e.g. ``0.1.0`` ("unknown" when run from an uninstalled tree)."""
    try:
        return metadata.version("gradblocks")
    except metadata.PackageNotFoundError:
        return "unknown"
