"""Start-up of the desktop app: ``gradblocks [CANVAS] [--run] [--select ID] [--screenshot PNG]``.

Screenshot mode (README pictures, checks): ``gradblocks CANVAS --run --select NODE_ID
--screenshot out.png`` opens the canvas, runs it, selects the node, saves a PNG of the window
and exits (0 ok, 1 a block failed at run time, 2 invalid canvas or usage).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app.files import internal_error_text, load_error_line
from app.main_window import APP_NAME, MainWindow
from app.theme import apply_dark_theme
from engine import accel
from engine.canvas import CanvasError, load_canvas
from engine.errors import InvalidArgumentError

SCREENSHOT_SIZE = (1600, 1000)


def default_recovery_dir() -> Path:
    base = QtCore.QStandardPaths.writableLocation(
        QtCore.QStandardPaths.AppLocalDataLocation) or str(Path.home() / ".gradblocks")
    return Path(base) / "recovery"



def install_excepthook(window: MainWindow) -> None:
    """An unexpected exception in a Qt slot goes to the log panel (and stderr), never kills
    the window with unsaved work."""
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        import traceback

        text = "".join(traceback.format_exception(exc_type, exc, tb))
        print(text, file=sys.stderr)
        try:
            window.log.add(f"internal error: {exc_type.__name__}: {exc}\n{text}", "error")
        except RuntimeError:  # the window is already gone
            previous(exc_type, exc, tb)

    sys.excepthook = hook


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gradblocks", description="GradBlocks desktop app")
    p.add_argument("canvas", nargs="?", help="canvas file (.gbc.json) to open")
    p.add_argument("--run", action="store_true", help="run the canvas after opening it")
    p.add_argument("--select", metavar="NODE_ID", help="select this block")
    p.add_argument("--screenshot", metavar="PNG",
                   help="save a picture of the window to PNG and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Start the desktop app (``gradblocks [CANVAS] [--run] [--select ID] [--screenshot PNG]``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage
        return 0 if not exc.code else 2
    qapp = QtWidgets.QApplication.instance() or QtWidgets.QApplication([sys.argv[0]])
    qapp.setApplicationName(APP_NAME)
    qapp.setOrganizationName(APP_NAME)
    apply_dark_theme(qapp)
    shot = args.screenshot is not None
    if shot:
        return _screenshot(args)
    accel.warm_up_in_background()  # never blocks: NumPy kernels run until it is done
    window = MainWindow(recovery_dir=default_recovery_dir())
    install_excepthook(window)
    window.show()
    if not window.files.offer_recovery() and args.canvas:
        window.files.open_path(args.canvas, ask=False)
    if args.canvas:
        QtCore.QTimer.singleShot(0, window.adapter.fit_to_view)
    if args.select:
        window.select_node(args.select)
    if args.run:
        window.run()
    return qapp.exec()


def _screenshot(args: argparse.Namespace) -> int:
    """Open, optionally run and select, save the window as PNG; no dialogs, no saved state."""
    settings = QtCore.QSettings(QtCore.QSettings.IniFormat, QtCore.QSettings.UserScope,
                                APP_NAME, "screenshot")
    settings.clear()
    window = MainWindow(settings=settings, recovery_dir=None, autosave=False,
                        restore_layout=False, quiet=True)
    try:
        return _shoot(window, args)
    finally:
        window.doc.undo_stack.setClean()  # nothing to save: close without asking
        window.close()
        window.deleteLater()


def _shoot(window: MainWindow, args: argparse.Namespace) -> int:
    window.resize(*SCREENSHOT_SIZE)
    window.show()
    status = 0
    if args.canvas:
        try:
            canvas = load_canvas(args.canvas)
            window.doc.load(canvas, Path(args.canvas).resolve())
        except (CanvasError, InvalidArgumentError, OSError, ValueError) as exc:
            print(f"gradblocks: {load_error_line(Path(args.canvas), exc)}", file=sys.stderr)
            return 2
        except Exception as exc:  # noqa: BLE001 - a bug: say so in one message, exit 2
            print(f"gradblocks: {' '.join(internal_error_text(Path(args.canvas), exc).split())}",
                  file=sys.stderr)
            return 2
    if args.run:
        window.run()
        window.wait_for_run()
        if any(i.error for i in window.session.run_info.values()):
            status = 1
    if args.select:
        if args.select not in window.doc.canvas.nodes:
            print(f"gradblocks: --select: no block {args.select!r} in the canvas "
                  f"(blocks: {', '.join(sorted(window.doc.canvas.nodes)) or 'none'})",
                  file=sys.stderr)
            return 2
        window.select_node(args.select)
    QtWidgets.QApplication.processEvents()
    window.adapter.fit_all()  # a picture of the whole canvas
    QtWidgets.QApplication.processEvents()
    out = Path(args.screenshot)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not window.grab().save(str(out), "PNG"):
        print(f"gradblocks: cannot write {out}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
