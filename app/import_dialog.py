"""File > Import Layer...: pick a model file, one or several of its conv layers, an input size and
batch, where to save; then the canvas (engine.graph.layer_canvas) opens.

The list shows every conv layer of the model as ``gradblocks import --list`` plans it
(:func:`engine.graph.model_canvases.plan_model`, at the chosen batch and layout): its op, kernel,
strides..., input and output shapes; a layer that cannot be imported is greyed, cannot be
selected, and says why in its tooltip (and in the lines under the list). Selection is extended
(click, ctrl-click, shift-click, Select All). One layer imports as one canvas, with the input
size and batch given. Several layers take the model's input sizes and import either as one
canvas with a frame per layer (:func:`engine.graph.merged_canvas.write_merged_canvas`) or as one
canvas each in a folder with index.json, as ``gradblocks import --all -o DIR`` writes them
(:func:`engine.graph.model_canvases.write_model_canvases`); then the merged canvas, or the
first canvas of the folder, opens (the log and status bar say where the others are).

The dialog is window-modal but not blocking (``open``); problems (an unreadable model, a layer
that cannot be translated, an input too small) show in the dialog in red, one line, and the
dialog stays open with everything chosen so far.
"""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app import dialog_folders
from app.canvas_paths import FILE_FILTER
from engine.base.names import escaped, file_stem
from engine.graph.layer_canvas import MODEL_SUFFIXES, read_model, write_layer_canvas
from engine.graph.merged_canvas import write_merged_canvas
from engine.graph.model_canvases import (
    INDEX_NAME,
    Planned,
    importable,
    plan_model,
    write_model_canvases,
)
from engine.io.models.model_import import ConvLayer, ModelImportError, ModelLayers, list_rows

MODEL_FILTER = (f"Models ({' '.join('*' + s for s in MODEL_SUFFIXES)});;"
                "ONNX (*.onnx);;Keras (*.keras *.h5 *.hdf5);;Weights (*.safetensors *.npz);;"
                "All files (*)")
WEIGHT_SUFFIXES = (".safetensors", ".npz")
HEADER = [*list_rows([])[0], "input", "output"]
MERGED_TEXT = "One canvas, a frame per layer"
EACH_TEXT = "One canvas each (a folder, with index.json)"


def _shape(shape: tuple[int, ...] | None) -> str:
    return "x".join(map(str, shape)) if shape is not None else ""


#: Refused layers the line under the list names (the others are counted).
NAMED_REFUSED = 6


def plan_row(p: Planned) -> list[str]:
    """The list's cells for a planned layer: ``--list``'s, then the input and output shapes
    (empty for a layer the model gives no input size); for a refused layer its name and
    ``cannot import:`` with the reason (one cell spanning the others)."""
    if not importable(p):
        return [escaped(p.name), f"cannot import: {escaped(p.skipped)}"] + [""] * (
            len(HEADER) - 2)
    return [*list_rows([p.layer])[1], _shape(p.input_shape), _shape(p.output_shape)]


def refused_line(plans: list[Planned]) -> str:
    """The line under the list: the layers that cannot be imported, by name."""
    refused = [escaped(p.name, 40) for p in plans if not importable(p)]
    if not refused:
        return ""
    more = len(refused) - NAMED_REFUSED
    names = ", ".join(refused[:NAMED_REFUSED]) + (f" and {more} more" if more > 0 else "")
    return f"cannot import: {names} (greyed; the row and its tooltip say why)"


class ImportLayerDialog(QtWidgets.QDialog):
    """Choose a model and layers; ``canvas_path`` is set when the canvas has been written (the
    merged canvas, or the first canvas of the folder) and ``done_message`` says what was."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Import Layers")
        self.resize(900, 480)
        self.model_path: str | None = None
        self.found = ModelLayers([], {}, {})
        self.plans: list[Planned] = []
        self.canvas_path: Path | None = None
        self.done_message = ""
        self._selected: tuple[int, ...] = ()
        self._build_fields()
        self._lay_out()
        self._layer_chosen()

    def _build_fields(self) -> None:
        """The model's path, the layers' table, the choices and the buttons."""
        self.path_edit = QtWidgets.QLineEdit(readOnly=True, placeholderText="no model chosen")
        self.choose_button = QtWidgets.QPushButton("Choose Model…")
        self.choose_button.clicked.connect(self.choose_model)
        self.attrs_edit = QtWidgets.QLineEdit(
            placeholderText="weights files only: strides=2,2 padding=SAME groups=1 ...")
        self.attrs_edit.setEnabled(False)
        self.attrs_edit.editingFinished.connect(self.reload)
        self.table = QtWidgets.QTableWidget(0, len(HEADER))
        self.table.setHorizontalHeaderLabels(HEADER)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.ExtendedSelection)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.itemSelectionChanged.connect(self._layer_chosen)
        self.select_all_button = QtWidgets.QPushButton("Select All")
        self.select_all_button.clicked.connect(self.table.selectAll)
        self.count_label = QtWidgets.QLabel()
        self.merged_radio = QtWidgets.QRadioButton(MERGED_TEXT, checked=True)
        self.each_radio = QtWidgets.QRadioButton(EACH_TEXT)
        self.merged_radio.setToolTip("One canvas: each layer's blocks in a frame titled by its "
                                     "name; the arrays beside the canvas")
        self.each_radio.setToolTip("A folder: a canvas per layer and index.json, as "
                                   "gradblocks import --all -o DIR writes them")
        self.refused_label = QtWidgets.QLabel(wordWrap=True)
        self.depth_spin, self.height_spin, self.width_spin = (self._size_spin()
                                                              for _ in range(3))
        self.depth_label = QtWidgets.QLabel("Input depth")
        self.batch_spin = QtWidgets.QSpinBox(minimum=1, maximum=4096, value=1)
        self.batch_spin.editingFinished.connect(self.replan)
        self.layout_combo = QtWidgets.QComboBox()
        self.layout_combo.addItems(["model's own", "NHWC", "NCHW"])
        self.layout_combo.currentIndexChanged.connect(self.replan)
        self.error_label = QtWidgets.QLabel(wordWrap=True, objectName="import_error")
        self.error_label.setStyleSheet("color: #d04040")
        self.buttons = QtWidgets.QDialogButtonBox(
            QtWidgets.QDialogButtonBox.Ok | QtWidgets.QDialogButtonBox.Cancel)
        self.ok_button = self.buttons.button(QtWidgets.QDialogButtonBox.Ok)
        self.ok_button.setText("Import…")
        self.ok_button.setEnabled(False)
        self.buttons.accepted.connect(self.import_chosen)
        self.buttons.rejected.connect(self.reject)

    def _lay_out(self) -> None:
        """Top to bottom: the path, the attributes, the table, the choices, the buttons."""
        top = QtWidgets.QHBoxLayout()
        top.addWidget(self.path_edit, 1)
        top.addWidget(self.choose_button)
        several = QtWidgets.QHBoxLayout()
        several.addWidget(self.select_all_button)
        several.addWidget(self.count_label)
        several.addStretch(1)
        several.addWidget(QtWidgets.QLabel("Several layers:"))
        several.addWidget(self.merged_radio)
        several.addWidget(self.each_radio)
        sizes = QtWidgets.QHBoxLayout()
        sizes.addWidget(self.depth_label)  # shown for a 3-D layer only
        sizes.addWidget(self.depth_spin)
        for text, widget in (("Input height", self.height_spin), ("width", self.width_spin),
                             ("batch", self.batch_spin), ("layout", self.layout_combo)):
            sizes.addWidget(QtWidgets.QLabel(text))
            sizes.addWidget(widget)
        sizes.addStretch(1)
        form = QtWidgets.QVBoxLayout(self)
        form.addLayout(top)
        form.addWidget(self.attrs_edit)
        form.addWidget(self.table, 1)
        form.addLayout(several)
        form.addWidget(self.refused_label)
        form.addLayout(sizes)
        self._show_sizes(None)
        form.addWidget(self.error_label)
        form.addWidget(self.buttons)

    @staticmethod
    def _size_spin() -> QtWidgets.QSpinBox:
        spin = QtWidgets.QSpinBox(minimum=0, maximum=1 << 20)
        spin.setSpecialValueText("model's")  # 0: the size the model file gives
        return spin

    def _say(self, text: str) -> None:
        self.error_label.setText(text)

    def _layout(self) -> str | None:
        layout = self.layout_combo.currentText()
        return None if layout == "model's own" else layout

    def choose_model(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self, "Import layers from a model", dialog_folders.start("model"), MODEL_FILTER)
        if path:
            dialog_folders.remember("model", path)
            self.load_model(path)

    def load_model(self, path: str) -> None:
        """Read ``path``'s conv layers into the list."""
        self.model_path = path
        self.path_edit.setText(path)
        self.attrs_edit.setEnabled(Path(path).suffix.lower() in WEIGHT_SUFFIXES)
        self.reload()

    def reload(self) -> None:
        """Read the model again (a new file, new attributes) and list its layers."""
        if not self.model_path:
            return
        self.table.clearSelection()
        self._say("")
        try:
            attrs = self.attrs_edit.text() if self.attrs_edit.isEnabled() else None
            self.found = read_model(self.model_path, attrs or None)
        except ModelImportError as err:
            self.found = ModelLayers([], {}, {})
            self._say(str(err))
        self.replan()
        if self.model_path and not self.found.layers and not self.error_label.text():
            self._say(f"{Path(self.model_path).name}: no importable conv layers")

    def replan(self) -> None:
        """Plan every layer at the chosen batch and layout and fill the list, keeping the
        selection."""
        keep = self._selected
        self.plans = plan_model(self.found, self.batch_spin.value(), self._layout())
        table = self.table
        table.blockSignals(True)
        table.clearSelection()
        table.clearSpans()
        table.setRowCount(len(self.plans))
        for r, p in enumerate(self.plans):
            for c, text in enumerate(plan_row(p)):
                item = QtWidgets.QTableWidgetItem(text if importable(p) or c != 1 else "")
                if p.skipped is not None:
                    item.setToolTip(escaped(p.skipped))
                if not importable(p):
                    item.setFlags(QtCore.Qt.NoItemFlags)  # greyed, not selectable
                table.setItem(r, c, item)
        model = table.selectionModel()
        for r in keep:
            if r < len(self.plans) and importable(self.plans[r]):
                model.select(table.model().index(r, 0), QtCore.QItemSelectionModel.Select
                             | QtCore.QItemSelectionModel.Rows)
        table.blockSignals(False)
        table.resizeColumnsToContents()  # before the reasons: they do not widen a column
        for r, p in enumerate(self.plans):
            if not importable(p):
                table.setSpan(r, 1, 1, len(HEADER) - 1)
                table.item(r, 1).setText(plan_row(p)[1])
        self.refused_label.setText(refused_line(self.plans))
        self._layer_chosen()

    def chosen_rows(self) -> list[int]:
        return sorted(i.row() for i in self.table.selectionModel().selectedRows())

    def chosen_layers(self) -> list[ConvLayer]:
        """The selected layers, in the model's order."""
        return [self.plans[r].layer for r in self.chosen_rows()]  # type: ignore[misc]

    def chosen_layer(self) -> ConvLayer | None:
        layers = self.chosen_layers()
        return layers[0] if len(layers) == 1 else None

    def _layer_chosen(self) -> None:
        rows = tuple(self.chosen_rows())
        changed, self._selected = rows != self._selected, rows
        n = len(rows)
        self.ok_button.setEnabled(n > 0)
        self.count_label.setText(f"{n} of {sum(map(importable, self.plans))} layers selected")
        for radio in (self.merged_radio, self.each_radio):
            radio.setEnabled(n > 1)
        for spin in (self.depth_spin, self.height_spin, self.width_spin):
            spin.setEnabled(n <= 1)
            spin.setToolTip("" if n <= 1 else "several layers: each takes the model's size")
        if changed:  # a new choice: the last problem no longer applies
            self._say("")
            self._show_sizes(self.chosen_layer())

    def _show_sizes(self, layer: ConvLayer | None) -> None:
        """The chosen layer's input size from the model (0: not given), with a depth box for
        a 3-D layer."""
        three = layer is not None and layer.rank == 3
        sizes = tuple((layer.input_hw if layer is not None else None) or (0, 0, 0))
        d, h, w = ((0,) * 3 + sizes)[-3:]
        for widget in (self.depth_label, self.depth_spin):
            widget.setVisible(three)
        self.depth_spin.setValue(d if three else 0)
        self.height_spin.setValue(h)
        self.width_spin.setValue(w)

    def import_chosen(self) -> None:
        """Ask where to save, write and accept; or say why not and stay open."""
        layers = self.chosen_layers()
        if not layers or self.model_path is None:
            return
        if len(layers) == 1:
            self._import_one(layers[0])
            return
        lacking = next((la for la in layers if la.input_hw is None), None)
        if lacking is not None:
            self._say(f"layer '{escaped(lacking.name, 80)}': the model does not say its input "
                      "size: import it alone, with an input height and width")
            return
        if self.merged_radio.isChecked():
            self._import_merged(layers)
        else:
            self._import_each(layers)

    def _write(self, path: str, write) -> bool:
        """Run ``write()``; a problem is one line in the dialog."""
        QtWidgets.QApplication.setOverrideCursor(QtCore.Qt.WaitCursor)
        try:
            write()
        except ModelImportError as err:
            self._say(str(err))
            return False
        except OSError as err:
            self._say(f"cannot write {path}: {err.strerror or err} (the previous files, if any, "
                      "are unchanged)")
            return False
        finally:
            QtWidgets.QApplication.restoreOverrideCursor()
        return True

    def _import_one(self, layer: ConvLayer) -> None:
        h, w = self.height_spin.value(), self.width_spin.value()
        sizes: tuple[int, ...] = (h, w)
        if layer.rank == 3:
            sizes = (self.depth_spin.value(), h, w)
        if 0 in sizes and any(sizes):
            what = "depth, height and width" if layer.rank == 3 else "height and width"
            self._say(f"give the input {what}, or none of them (the model's size)")
            return
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self, "Save the imported canvas",
            dialog_folders.start("canvas", f"{file_stem(layer.name)}.gbc.json"), FILE_FILTER)
        if not path:
            return
        dialog_folders.remember("canvas", path)
        if self._write(path, lambda: write_layer_canvas(
                layer, path, input_hw=sizes if all(sizes) else None, batch=self.batch_spin.value(),
                layout=self._layout(), protected=(self.model_path,))):
            self._done(Path(path), f"Imported layer {escaped(layer.name, 80)} into {path}")

    def _import_merged(self, layers: list[ConvLayer]) -> None:
        stem = file_stem(Path(self.model_path).stem)  # type: ignore[arg-type]
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self, "Save the canvas of the chosen layers",
            dialog_folders.start("canvas", f"{stem}_layers.gbc.json"), FILE_FILTER)
        if not path:
            return
        dialog_folders.remember("canvas", path)
        if self._write(path, lambda: write_merged_canvas(
                layers, path, batch=self.batch_spin.value(), layout=self._layout(),
                protected=(self.model_path,))):
            self._done(Path(path), f"Imported {len(layers)} layers into {path}, a frame each")

    def _import_each(self, layers: list[ConvLayer]) -> None:
        folder = QtWidgets.QFileDialog.getExistingDirectory(
            self, "Folder for the canvases (one per layer, and index.json)",
            str(dialog_folders.folder("canvas")))
        if not folder:
            return
        dialog_folders.remember("canvas", Path(folder) / INDEX_NAME)
        index: list[dict] = []
        if not self._write(folder, lambda: index.extend(write_model_canvases(
                ModelLayers(layers, {}, {}), folder, batch=self.batch_spin.value(),
                layout=self._layout(), protected=(self.model_path,)))):
            return
        canvases = [item["canvas"] for item in index if "canvas" in item]
        if not canvases:  # every chosen layer was planned: a canvas each
            self._say(f"{folder}: no canvas written")
            return
        first = Path(folder) / canvases[0]
        self._done(first, f"Imported {len(canvases)} canvases into {folder} ({INDEX_NAME} "
                          f"lists them); opened {canvases[0]}, the others are beside it")

    def _done(self, canvas: Path, message: str) -> None:
        self.canvas_path, self.done_message = canvas, message
        self.accept()


def import_layer(window) -> ImportLayerDialog | None:
    """File > Import Layer...: after the unsaved-changes question, show the dialog; the
    written canvas opens when it closes with OK, and the log and status bar say what was
    written."""
    if not window.files.maybe_save():
        return None
    dialog = ImportLayerDialog(window)
    dialog.setAttribute(QtCore.Qt.WA_DeleteOnClose)

    def done(result: int) -> None:
        opened = (result == QtWidgets.QDialog.Accepted and dialog.canvas_path is not None
                  and window.files.open_path(dialog.canvas_path, ask=False))
        if opened:
            window.log.add(dialog.done_message, "info")
            window.statusBar().showMessage(dialog.done_message, 15000)

    dialog.finished.connect(done)
    dialog.open()
    return dialog
