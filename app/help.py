"""The Help menu's texts: the list of keyboard shortcuts and canvas gestures, and About."""

from __future__ import annotations

import html
import sys

from PySide6 import QtCore, QtGui, QtWidgets

from engine.base.version import version

GESTURES = (
    ("Drag a block from the palette", "add it where it is dropped"),
    ("Tab over the canvas", "search a block and add it at the cursor"),
    ("Drag from an output port to an input port", "connect (replaces the input's wire)"),
    ("Drag a wire from a port onto empty canvas", "add a fitting block there, wired to it"),
    ("Drag a wire end away from a port", "disconnect"),
    ("Alt+Shift+drag across wires", "cut those wires"),
    ("Double-click a block title", "rename the block"),
    ("Drag empty space / Shift or Ctrl+drag", "select blocks (extend / deselect)"),
    ("Middle-drag or Alt+drag; mouse wheel", "pan; zoom"),
    ("Drop a .gbc.json file", "open it"),
    ("Drop a .npy file or a PNG/JPEG image", "add a Tensor block reading it"),
)


def shortcut_rows(window: QtWidgets.QMainWindow) -> list[tuple[str, str]]:
    """(action, shortcuts) for every window action that has a shortcut, in menu order."""
    rows = []
    seen = set()
    for menu_action in window.menuBar().actions():
        menu = menu_action.menu()
        if menu is None:
            continue
        for act in menu.actions():
            keys = [k.toString(QtGui.QKeySequence.NativeText) for k in act.shortcuts()]
            keys = [k for k in keys if k]
            if keys and act.text() and id(act) not in seen:
                seen.add(id(act))
                name = act.property("help_name") or act.text().replace("&", "").rstrip("…")
                rows.append((name, ", ".join(keys)))
    return rows


def shortcuts_html(window: QtWidgets.QMainWindow) -> str:
    """The shortcuts and gestures as an HTML table (for the Help dialog)."""
    def rows(pairs):
        return "".join(f"<tr><td><b>{html.escape(a)}</b></td><td>&nbsp;&nbsp;{html.escape(b)}"
                       f"</td></tr>" for a, b in pairs)

    keys = [(k, name) for name, k in shortcut_rows(window)]
    return ("<h3>Keyboard shortcuts</h3><table>" + rows(keys) + "</table>"
            "<h3>On the canvas</h3><table>" + rows(GESTURES) + "</table>")


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
