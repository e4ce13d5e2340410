"""A picture of the explain panel for the User Guide (assets/guide/app.md):
``python -m app.explain.shot CANVAS NODE I,J,K,L OUT.png [--window]``.

Opens CANVAS in a window (no saved settings, no dialogs), runs it, selects NODE, explains its
output element I,J,K,L through the same call a click in the viewer makes, and saves the explain
panel (``--window``: the whole window) as a PNG. Exit 0; 2 for a bad canvas, node or index, or a
PNG that cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app.main_window import MainWindow
from app.theme import apply_dark_theme
from engine.graph.canvas_file import load_canvas

SIZE = (1500, 1000)


def _index(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not comma-separated integers") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m app.explain.shot", description=__doc__)
    p.add_argument("canvas")
    p.add_argument("node")
    p.add_argument("index", type=_index)
    p.add_argument("out")
    p.add_argument("--window", action="store_true", help="save the whole window")
    args = p.parse_args(argv)
    qapp = QtWidgets.QApplication.instance() or QtWidgets.QApplication([sys.argv[0]])
    apply_dark_theme(qapp)
    settings = QtCore.QSettings(QtCore.QSettings.IniFormat, QtCore.QSettings.UserScope,
                                "GradBlocks", "explain-shot")
    settings.clear()
    window = MainWindow(settings=settings, recovery_dir=None, autosave=False,
                        restore_layout=False, quiet=True)
    try:
        window.resize(*SIZE)
        window.show()
        window.doc.load(load_canvas(args.canvas), Path(args.canvas).resolve())
        window.run()
        window.wait_for_run()
        if args.node not in window.doc.canvas.nodes:
            print(f"explain_shot: no block {args.node!r}", file=sys.stderr)
            return 2
        window.select_node(args.node)
        QtWidgets.QApplication.processEvents()
        port, _ = window.session.output(args.node)
        window.explain_link.explain(args.node, port, args.index)
        if window.explain_panel.request is None:
            print(f"explain_shot: {window.explain_panel.title.text()}", file=sys.stderr)
            return 2
        viewer = window.viewer_dock_widget
        window.resizeDocks([viewer], [560], QtCore.Qt.Vertical)  # room for pictures and terms
        window.resizeDocks([viewer, window.explain_dock], [600, 900], QtCore.Qt.Horizontal)
        window.adapter.fit_to_view()
        for _ in range(3):
            QtWidgets.QApplication.processEvents()
        widget = window if args.window else window.explain_dock
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        if not widget.grab().save(str(out), "PNG"):
            print(f"explain_shot: cannot write {out}", file=sys.stderr)
            return 2
        return 0
    finally:
        window.doc.undo_stack.setClean()
        window.close()
        window.deleteLater()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
