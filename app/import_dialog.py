"""File > Import Layer...: pick a model file, one of its conv layers, an input size and batch,
where to save the canvas; then the canvas (engine.graph.layer_canvas) opens.

The dialog is window-modal but not blocking (``open``); problems (an unreadable model, a layer
that cannot be translated, an input too small) show in the dialog in red, one line, and the
dialog stays open with everything chosen so far.
"""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app import dialog_folders
from app.files import FILE_FILTER
from engine.base.names import file_stem
from engine.graph.layer_canvas import MODEL_SUFFIXES, read_model, write_layer_canvas
from engine.io.models.model_import import ConvLayer, ModelImportError, ModelLayers, list_rows

MODEL_FILTER = (f"Models ({' '.join('*' + s for s in MODEL_SUFFIXES)});;"
                "ONNX (*.onnx);;Keras (*.keras *.h5 *.hdf5);;Weights (*.safetensors *.npz);;"
                "All files (*)")
WEIGHT_SUFFIXES = (".safetensors", ".npz")


class ImportLayerDialog(QtWidgets.QDialog):
    """Choose a model and a layer; ``canvas_path`` is set when the canvas has been written."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Import Layer")
        self.resize(760, 420)
        self.model_path: str | None = None
        self.found = ModelLayers([], {}, {})
        self.canvas_path: Path | None = None

        self.path_edit = QtWidgets.QLineEdit(readOnly=True, placeholderText="no model chosen")
        self.choose_button = QtWidgets.QPushButton("Choose Model…")
        self.choose_button.clicked.connect(self.choose_model)
        self.attrs_edit = QtWidgets.QLineEdit(
            placeholderText="weights files only: strides=2,2 padding=SAME groups=1 ...")
        self.attrs_edit.setEnabled(False)
        self.attrs_edit.editingFinished.connect(self.reload)
        self.table = QtWidgets.QTableWidget(0, len(list_rows([])[0]))
        self.table.setHorizontalHeaderLabels(list_rows([])[0])
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.itemSelectionChanged.connect(self._layer_chosen)
        self.refused_label = QtWidgets.QLabel(wordWrap=True)
        self.height_spin, self.width_spin = (self._size_spin() for _ in range(2))
        self.batch_spin = QtWidgets.QSpinBox(minimum=1, maximum=4096, value=1)
        self.layout_combo = QtWidgets.QComboBox()
        self.layout_combo.addItems(["model's own", "NHWC", "NCHW"])
        self.error_label = QtWidgets.QLabel(wordWrap=True, objectName="import_error")
        self.error_label.setStyleSheet("color: #d04040")
        self.buttons = QtWidgets.QDialogButtonBox(
            QtWidgets.QDialogButtonBox.Ok | QtWidgets.QDialogButtonBox.Cancel)
        self.ok_button = self.buttons.button(QtWidgets.QDialogButtonBox.Ok)
        self.ok_button.setText("Import…")
        self.ok_button.setEnabled(False)
        self.buttons.accepted.connect(self.import_chosen)
        self.buttons.rejected.connect(self.reject)

        top = QtWidgets.QHBoxLayout()
        top.addWidget(self.path_edit, 1)
        top.addWidget(self.choose_button)
        sizes = QtWidgets.QHBoxLayout()
        for text, widget in (("Input height", self.height_spin), ("width", self.width_spin),
                             ("batch", self.batch_spin), ("layout", self.layout_combo)):
            sizes.addWidget(QtWidgets.QLabel(text))
            sizes.addWidget(widget)
        sizes.addStretch(1)
        form = QtWidgets.QVBoxLayout(self)
        form.addLayout(top)
        form.addWidget(self.attrs_edit)
        form.addWidget(self.table, 1)
        form.addWidget(self.refused_label)
        form.addLayout(sizes)
        form.addWidget(self.error_label)
        form.addWidget(self.buttons)

    @staticmethod
    def _size_spin() -> QtWidgets.QSpinBox:
        spin = QtWidgets.QSpinBox(minimum=0, maximum=1 << 20)
        spin.setSpecialValueText("model's")  # 0: the size the model file gives
        return spin

    def _say(self, text: str) -> None:
        self.error_label.setText(text)

    def choose_model(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self, "Import a layer from a model", dialog_folders.start("model"), MODEL_FILTER)
        if path:
            dialog_folders.remember("model", path)
            self.load_model(path)

    def load_model(self, path: str) -> None:
        """Read ``path``'s conv layers into the table."""
        self.model_path = path
        self.path_edit.setText(path)
        self.attrs_edit.setEnabled(Path(path).suffix.lower() in WEIGHT_SUFFIXES)
        self.reload()

    def reload(self) -> None:
        if not self.model_path:
            return
        self._say("")
        try:
            attrs = self.attrs_edit.text() if self.attrs_edit.isEnabled() else None
            self.found = read_model(self.model_path, attrs or None)
        except ModelImportError as err:
            self.found = ModelLayers([], {}, {})
            self._say(str(err))
        rows = list_rows(self.found.layers)[1:]
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                self.table.setItem(r, c, QtWidgets.QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        self.refused_label.setText("\n".join(f"cannot import: {m}"
                                             for m in self.found.refused.values()))
        if self.model_path and not rows and not self.error_label.text():
            self._say(f"{Path(self.model_path).name}: no importable conv layers")
        self._layer_chosen()

    def chosen_layer(self) -> ConvLayer | None:
        rows = self.table.selectionModel().selectedRows()
        return self.found.layers[rows[0].row()] if rows else None

    def _layer_chosen(self) -> None:
        layer = self.chosen_layer()
        self.ok_button.setEnabled(layer is not None)
        if layer is not None:
            h, w = layer.input_hw or (0, 0)
            self.height_spin.setValue(h)
            self.width_spin.setValue(w)

    def import_chosen(self) -> None:
        """Ask where to save, write the canvas and accept; or say why not and stay open."""
        layer = self.chosen_layer()
        if layer is None or self.model_path is None:
            return
        h, w = self.height_spin.value(), self.width_spin.value()
        if (h == 0) != (w == 0):
            self._say("give both the input height and width, or neither (the model's size)")
            return
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self, "Save the imported canvas",
            dialog_folders.start("canvas", f"{file_stem(layer.name)}.gbc.json"), FILE_FILTER)
        if not path:
            return
        dialog_folders.remember("canvas", path)
        layout = self.layout_combo.currentText()
        try:
            write_layer_canvas(layer, path, input_hw=(h, w) if h else None,
                               batch=self.batch_spin.value(),
                               layout=None if layout == "model's own" else layout,
                               protected=(self.model_path,))
        except ModelImportError as err:
            self._say(str(err))
            return
        except OSError as err:
            self._say(f"cannot write {path}: {err.strerror or err}")
            return
        self.canvas_path = Path(path)
        self.accept()


def import_layer(window) -> ImportLayerDialog | None:
    """File > Import Layer...: after the unsaved-changes question, show the dialog; the
    written canvas opens when it closes with OK."""
    if not window.files.maybe_save():
        return None
    dialog = ImportLayerDialog(window)
    dialog.setAttribute(QtCore.Qt.WA_DeleteOnClose)

    def done(result: int) -> None:
        if result == QtWidgets.QDialog.Accepted and dialog.canvas_path is not None:
            window.files.open_path(dialog.canvas_path, ask=False)

    dialog.finished.connect(done)
    dialog.open()
    return dialog
