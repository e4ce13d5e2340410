"""Before the QApplication exists: can Qt's xcb platform plugin start on this Linux desktop?

Qt aborts the process (SIGABRT, a core dump) when its platform plugin cannot load or cannot
reach the display, and names a library that may not be the missing one. :func:`problem` finds
out first, with the dynamic loader itself: it loads the plugin as Qt would, lists which of the
X11 libraries the plugin needs cannot be loaded (with their Debian/Ubuntu packages, the list
the guide's "Starting the app" gives) and connects to the X server once. ``None`` means Qt
will start; otherwise the one line to print.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

#: The X11 libraries Qt 6's xcb plugin loads that minimal desktops lack, with the Debian/Ubuntu
#: package of each (assets/guide/app.md gives the same list).
XCB_PACKAGES: dict[str, str] = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
}
GUIDE = "the User Guide's 'Starting the app'"


def uses_xcb(env: os._Environ[str] | dict[str, str]) -> bool:
    """Whether Qt will start its xcb plugin: Linux, and QT_QPA_PLATFORM names xcb alone, or is
    unset outside a Wayland session."""
    if not sys.platform.startswith("linux"):
        return False
    chosen = env.get("QT_QPA_PLATFORM", "")
    if chosen:
        return chosen.split(":")[0] == "xcb"  # a ';' list falls back by itself
    return not (env.get("WAYLAND_DISPLAY") and env.get("XDG_SESSION_TYPE") == "wayland")


def plugin_path(env: os._Environ[str] | dict[str, str]) -> Path:
    """Where Qt looks for ``libqxcb.so``: QT_QPA_PLATFORM_PLUGIN_PATH, else PySide6's plugins."""
    if env.get("QT_QPA_PLATFORM_PLUGIN_PATH"):
        return Path(env["QT_QPA_PLATFORM_PLUGIN_PATH"]) / "libqxcb.so"
    from PySide6 import QtCore

    plugins = QtCore.QLibraryInfo.path(QtCore.QLibraryInfo.LibraryPath.PluginsPath)
    return Path(plugins) / "platforms" / "libqxcb.so"


def _loads(name: str) -> str:
    """'' when the loader loads ``name``, else its error."""
    try:
        ctypes.CDLL(name)
    except OSError as exc:
        return str(exc)
    return ""


def missing_libraries(plugin: Path) -> list[str]:
    """The libraries the plugin needs that cannot be loaded ([] when it loads)."""
    error = _loads(str(plugin))
    if not error:
        return []
    missing = [name for name in XCB_PACKAGES if _loads(name)]
    named = error.split(":")[0].strip()  # "libfoo.so.1: cannot open shared object file: ..."
    if named != str(plugin) and named not in missing:
        missing.append(named)
    return missing


def display_error(display: str) -> str:
    """'' when an X server answers on ``display``, else why not."""
    if _loads("libxcb.so.1"):
        return ""  # the plugin check has named it
    xcb = ctypes.CDLL("libxcb.so.1")
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    connection = xcb.xcb_connect(display.encode(), None)
    try:
        failed = xcb.xcb_connection_has_error(connection)
    finally:
        xcb.xcb_disconnect(connection)
    return f"no X server answers on DISPLAY {display!r}" if failed else ""


def problem(env: os._Environ[str] | dict[str, str] | None = None) -> str | None:
    """The one line saying why Qt's xcb plugin would abort, or None when it will start."""
    env = os.environ if env is None else env
    if not uses_xcb(env):
        return None
    plugin = plugin_path(env)
    if not plugin.is_file():
        return None  # Qt says which plugins it has; nothing aborts for want of a library
    missing = missing_libraries(plugin)
    if missing:
        packages = [XCB_PACKAGES[name] for name in missing if name in XCB_PACKAGES]
        install = (f"install them (Debian/Ubuntu): sudo apt-get install {' '.join(packages)}"
                   if packages else f"install the package holding it (see {GUIDE})")
        return (f"the desktop app cannot start: Qt's xcb platform plugin needs "
                f"{', '.join(missing)}, not found; {install}")
    why = display_error(env.get("DISPLAY", ""))
    if why:
        return (f"the desktop app cannot start: {why}. Use `gradblocks check|run|export "
                f"CANVAS` headless, or QT_QPA_PLATFORM=offscreen with --screenshot.")
    return None
