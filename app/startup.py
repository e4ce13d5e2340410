"""Start-up of the desktop app: ``gradblocks [CANVAS] [--run] [--select ID] [--screenshot PNG]``.

Screenshot mode (the pictures of the README and the User Guide, checks): ``gradblocks CANVAS
--run --select NODE_ID --screenshot out.png`` opens the canvas, runs it, selects the node, saves
a PNG of the window and exits (0 ok, 1 a block failed at run time, 2 invalid canvas or usage).

Ctrl+C in the terminal: while the app starts, ``gradblocks`` (:mod:`engine.cli.commands`) ends at
once with one line, exit 130; once the window is up, one line and the window closes as its close
button closes it (unsaved work offered for saving first), then exit 130.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app import platform_check
from app.load_messages import internal_error_text, load_error_line
from app.main_window import APP_NAME, MainWindow
from app.theme import apply_dark_theme
from engine.base.errors import InvalidArgumentError
from engine.cli.commands import EXIT_INTERRUPTED
from engine.graph.canvas import CanvasError
from engine.graph.canvas_file import load_canvas
from engine.kernels import accel

SCREENSHOT_SIZE = (1600, 1000)
#: Qt's warnings that say only that a screenless platform plugin lacks a window-manager
#: feature (offscreen docks call it); screenshot mode drops them, and prints every other one.
PLATFORM_NOISE = ("This plugin does not support propagateSizeHints()",)


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
    qapp = QtWidgets.QApplication.instance()
    if qapp is None:
        why = platform_check.problem()
        if why:  # Qt would abort with a core dump
            print(f"gradblocks: {why}", file=sys.stderr)
            return 2
        qapp = QtWidgets.QApplication([sys.argv[0]])
    qapp.setApplicationName(APP_NAME)
    qapp.setOrganizationName(APP_NAME)
    apply_dark_theme(qapp)
    shot = args.screenshot is not None
    if shot:
        return _screenshot(args)
    accel.warm_up_in_background()  # never blocks; a large run's first call waits for it
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
    with ctrl_c_closes(window) as interrupted:
        status = qapp.exec()
    return EXIT_INTERRUPTED if interrupted() else status


@contextlib.contextmanager
def ctrl_c_closes(window: MainWindow) -> Iterator[Callable[[], bool]]:
    """While the event loop runs, Ctrl+C (SIGINT) prints one line and closes ``window`` as its
    close button does; yields whether that closed it. Qt's loop runs no Python while it waits,
    so the signal also wakes it: Python writes a byte to a socket Qt watches
    (``signal.set_wakeup_fd``), and the watcher's slot lets the handler run. Does nothing outside
    the main thread or where SIGINT is ignored."""
    came: list[bool] = []
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) == signal.SIG_IGN):
        yield lambda: False
        return

    def close() -> None:
        # closed, or closing once a running block stops (the window is then disabled); a
        # cancelled save prompt keeps the app running, as if Ctrl+C had not come
        if not window.close() and window.isEnabled():
            came.clear()

    def on_sigint(_signum, _frame) -> None:
        came.append(True)
        print("gradblocks: interrupted", file=sys.stderr, flush=True)
        QtCore.QTimer.singleShot(0, close)

    reader, writer = socket.socketpair()
    for end in (reader, writer):
        end.setblocking(False)
    watcher = QtCore.QSocketNotifier(reader.fileno(), QtCore.QSocketNotifier.Type.Read)
    watcher.activated.connect(lambda *_: _drain(reader))
    previous = signal.signal(signal.SIGINT, on_sigint)
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    try:
        yield lambda: bool(came)
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
        watcher.setEnabled(False)
        reader.close()
        writer.close()


def _drain(sock: socket.socket) -> None:
    """Read what the signal wrote (the Python handler runs as this slot starts)."""
    with contextlib.suppress(OSError):
        sock.recv(256)


def _print_qt_message(_kind, _context, message: str) -> None:
    if message not in PLATFORM_NOISE:
        print(message, file=sys.stderr)


def _screenshot(args: argparse.Namespace) -> int:
    """Open, optionally run and select, save the window as PNG; no dialogs, no saved state."""
    QtCore.qInstallMessageHandler(_print_qt_message)
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
