"""The main window's commands: its actions (``window.act_*``, with their shortcuts, tips and
icons), the menu bar (File with Open Recent and Examples, Edit, View, Run, Help), the toolbar
and the canvas's right-click menu.

Each function takes the :class:`app.main_window.MainWindow` it builds for; the actions call the
window's parts (its files, edits, adapter and session), which exist before they are built.
"""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from app.canvas_paths import PITFALLS_DIR, display_name, example_files
from app.editing import UndoAction
from app.guide_window import show_guide
from app.icons import icon
from app.import_dialog import import_layer


def make_action(window: QtWidgets.QMainWindow, text: str, slot, shortcut=None, tip: str = "",
                icon_name: str | None = None) -> QtGui.QAction:
    """A window action calling ``slot``: its shortcut (or shortcuts), status tip, tooltip
    (text and shortcut) and icon."""
    act = QtGui.QAction(text, window)
    if shortcut is not None:
        if isinstance(shortcut, (list, tuple)):
            act.setShortcuts([QtGui.QKeySequence(s) for s in shortcut])
        else:
            act.setShortcut(QtGui.QKeySequence(shortcut))
    if tip:
        act.setStatusTip(tip)
        act.setToolTip(f"{text.replace('&', '')} ({act.shortcut().toString()})"
                       if shortcut is not None else tip)
    if icon_name:
        act.setIcon(icon(icon_name))
    act.triggered.connect(lambda _checked=False: slot())
    window.addAction(act)
    return act


def build_actions(window) -> None:
    """Every ``window.act_*`` action, in the order the menus list them."""
    _file_actions(window)
    _edit_actions(window)
    build_view_actions(window)
    _run_actions(window)
    _help_actions(window)


def _file_actions(window) -> None:
    K, f = QtGui.QKeySequence, window.files
    window.act_new = make_action(window, "&New", f.new, K.New, "Start an empty canvas", "new")
    window.act_open = make_action(window, "&Open…", f.open_dialog, K.Open,
                                  "Open a canvas file", "open")
    window.act_import_layer = make_action(
        window, "&Import Layer…", lambda: import_layer(window), tip="A conv layer of an ONNX or "
        "Keras model (or .safetensors/.npz weights) as a canvas with its gradients")
    window.act_save = make_action(window, "&Save", f.save, K.Save, "Save the canvas", "save")
    window.act_save_as = make_action(window, "Save &As…", f.save_as, K.SaveAs,
                                     "Save the canvas under a new name")
    window.act_quit = make_action(window, "&Quit", window.close, "Ctrl+Q", "Close the window")


def _edit_actions(window) -> None:
    K, edits = QtGui.QKeySequence, window.edits
    stack = window.doc.undo_stack
    window.act_undo = UndoAction(stack, window.session, window)  # drops an invalid edit first
    window.act_undo.setShortcut(K.Undo)
    window.act_undo.setIcon(icon("undo"))
    window.act_redo = stack.createRedoAction(window, "&Redo")
    window.act_redo.setShortcuts([K("Ctrl+Shift+Z"), K("Ctrl+Y")])
    window.act_redo.setIcon(icon("redo"))
    window.act_undo.setProperty("help_name", "Undo")  # its text names the next command
    window.act_redo.setProperty("help_name", "Redo")
    window.addActions([window.act_undo, window.act_redo])
    window.act_copy = make_action(window, "&Copy", edits.copy_selection, K.Copy,
                                  "Copy the selected blocks")
    window.act_cut = make_action(window, "Cu&t", edits.cut_selection, K.Cut,
                                 "Cut the selected blocks")
    window.act_paste = make_action(window, "&Paste", edits.paste, K.Paste, "Paste blocks")
    window.act_duplicate = make_action(window, "&Duplicate", edits.duplicate_selection,
                                       "Ctrl+D", "Duplicate the selected blocks")
    window.act_delete = make_action(window, "De&lete", edits.delete_selection,
                                    [K.Delete, K("Backspace")],
                                    "Delete the selected blocks and their wires")
    window.act_select_all = make_action(window, "Select &All", edits.select_all, K.SelectAll,
                                        "Select every block")
    window.act_add_block = make_action(window, "Add &Block…", window.tab_filter.open, "Tab",
                                       "Search a block and add it at the cursor")
    window.act_add_block.setShortcutContext(QtCore.Qt.WidgetShortcut)


def build_view_actions(window) -> None:
    """View menu: zoom in / out, 100 %, fit all, frame selected (app.view_zoom)."""
    a = window.adapter
    window.act_zoom_in = make_action(window, "Zoom &In", a.zoom_in, ["Ctrl++", "Ctrl+="],
                                     "Magnify the canvas")
    window.act_zoom_out = make_action(window, "Zoom &Out", a.zoom_out, "Ctrl+-",
                                      "Show more of the canvas")
    window.act_zoom_100 = make_action(window, "&Actual Size (100%)", a.zoom_actual_size,
                                      "Ctrl+0", "Zoom to 100 %")
    window.act_fit = make_action(window, "&Fit All", a.fit_all, "F",
                                 "Zoom to show every block (text stays readable)", "fit")
    window.act_frame_selected = make_action(window, "Frame &Selected", a.frame_selected,
                                            "Shift+F", "Zoom to the selected blocks")


def _run_actions(window) -> None:
    window.act_reset_layout = make_action(window, "&Reset Layout", window.reset_layout, None,
                                          "Put the panels back where they started")
    window.act_run = make_action(window, "&Run", window.run, "F5",
                                 "Run the canvas (only changed blocks are recomputed)", "run")
    window.act_cancel = make_action(
        window, "&Cancel Run", window.session.cancel, "Shift+F5",
        "Stop the run (a long block stops at its next batch chunk)", "cancel")
    window.act_cancel.setEnabled(False)
    window.act_auto_run = make_action(
        window, "&Auto-run", lambda: None, None,
        "After an edit, re-run what changed when it last ran in under 200 ms (larger "
        "canvases wait for F5)")
    window.act_auto_run.setCheckable(True)
    window.act_auto_run.setChecked(_setting_bool(window.settings, "run/auto_run", True))
    window.session.auto_run = window.act_auto_run.isChecked()

    def auto_run_toggled(on: bool) -> None:
        window.session.auto_run = on
        window.settings.setValue("run/auto_run", on)

    window.act_auto_run.toggled.connect(auto_run_toggled)


def _help_actions(window) -> None:
    window.act_shortcuts = make_action(window, "&Keyboard Shortcuts", window.show_shortcuts,
                                       QtGui.QKeySequence.HelpContents,
                                       "List the keyboard shortcuts")
    window.act_guide = make_action(window, "&User Guide…", lambda: show_guide(window), None,
                                   "The manual: the app, the kernels, the command line, ...")
    window.act_about = make_action(window, "&About GradBlocks", window.show_about, None,
                                   "About")


def _setting_bool(settings: QtCore.QSettings, key: str, default: bool) -> bool:
    """A boolean setting (INI files give back the strings "true"/"false")."""
    value = settings.value(key, default)
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def build_menus(window) -> None:
    """The menu bar: File, Edit (``window.edit_menu``), View, Run, Help."""
    bar = window.menuBar()
    m = bar.addMenu("&File")
    m.addActions([window.act_new, window.act_open])
    window.recent_menu = m.addMenu("Open &Recent")
    window.examples_menu = m.addMenu("&Examples")
    m.addAction(window.act_import_layer)
    m.addAction(window.export.action)
    m.addSeparator()
    m.addActions([window.act_save, window.act_save_as])
    m.addSeparator()
    m.addAction(window.act_quit)
    fill_recent(window)
    fill_examples(window)
    m = window.edit_menu = bar.addMenu("&Edit")
    m.addActions([window.act_undo, window.act_redo])
    m.addSeparator()
    m.addActions([window.act_cut, window.act_copy, window.act_paste, window.act_duplicate,
                  window.act_delete])
    m.addSeparator()
    m.addActions([window.act_select_all, window.act_add_block])
    _view_menu(window, bar.addMenu("&View"))
    m = bar.addMenu("&Run")
    m.addActions([window.act_run, window.act_cancel])
    m.addSeparator()
    m.addAction(window.act_auto_run)
    m.addSeparator()
    m.addAction(window.crosscheck.action)
    m.addAction(window.verify.action)
    m = bar.addMenu("&Help")
    m.addActions([window.act_guide, window.act_shortcuts, window.act_about])


def _view_menu(window, m: QtWidgets.QMenu) -> None:
    m.addActions([window.act_zoom_in, window.act_zoom_out, window.act_zoom_100])
    m.addSeparator()
    m.addActions([window.act_fit, window.act_frame_selected])
    m.addSeparator()
    m.addAction(window.previews.action)
    m.addSeparator()
    for dock in (window.palette_dock, window.attributes_dock, window.viewer_dock_widget,
                 window.log_dock, window.explain_dock, window.geometry_dock):
        m.addAction(dock.toggleViewAction())
    m.addSeparator()
    m.addAction(window.act_reset_layout)


def build_context_menu(window) -> None:
    """Right-click on the canvas: the common editing actions."""
    menu = window.adapter.viewer.context_menus()["graph"]
    menu.addActions([window.act_add_block, window.act_paste, window.act_duplicate,
                     window.act_delete])
    menu.addSeparator()
    menu.addActions([window.act_fit, window.act_run])
    window.annotations.install(window.edit_menu, menu)  # Add Frame, Add Note, colours


def build_toolbar(window) -> None:
    """The main toolbar: files, undo and redo, fit, run and cancel, the progress bar."""
    tb = window.addToolBar("Main")
    tb.setObjectName("toolbar_main")
    tb.setToolButtonStyle(QtCore.Qt.ToolButtonTextBesideIcon)
    tb.setIconSize(QtCore.QSize(18, 18))
    tb.addActions([window.act_new, window.act_open, window.act_save])
    tb.addSeparator()
    tb.addActions([window.act_undo, window.act_redo])
    for act in (window.act_undo, window.act_redo):  # their text names the command: too long
        tb.widgetForAction(act).setToolButtonStyle(QtCore.Qt.ToolButtonIconOnly)
    tb.addSeparator()
    tb.addAction(window.act_fit)
    tb.addSeparator()
    tb.addActions([window.act_run, window.act_cancel])
    tb.addWidget(window.progress)


def fill_recent(window) -> None:
    """File > Open Recent: the recent files (newest first) and Clear Recent."""
    menu, files = window.recent_menu, window.files
    menu.clear()
    recent = files.recent()
    for path in recent:
        act = menu.addAction(f"{display_name(path)}    {path.parent}")
        act.triggered.connect(lambda _c=False, p=path: files.open_path(p))
    if recent:
        menu.addSeparator()
        menu.addAction("Clear Recent", files.clear_recent)
    menu.setEnabled(bool(recent))


def fill_examples(window) -> None:
    """File > Examples: the example canvases, then the Pitfalls submenu
    (``window.pitfalls_menu``)."""
    window.examples_menu.clear()
    examples = example_files()
    _add_examples(window, window.examples_menu, examples)
    pitfalls = example_files(PITFALLS_DIR)
    window.pitfalls_menu = window.examples_menu.addMenu("&Pitfalls")
    _add_examples(window, window.pitfalls_menu, pitfalls)
    window.pitfalls_menu.menuAction().setVisible(bool(pitfalls))
    window.examples_menu.setEnabled(bool(examples or pitfalls))


def _add_examples(window, menu: QtWidgets.QMenu, paths: list[Path]) -> None:
    for path in paths:
        act = menu.addAction(display_name(path))
        act.setStatusTip(str(path))
        act.triggered.connect(
            lambda _c=False, p=path: window.files.open_path(p, as_example=True))
