"""The tensor viewer: statistics, a 2-D slice as a picture, filter montages, a histogram, the
slice's numbers, export, copy, and a side-by-side comparison of two tensors.

All numbers come from :mod:`engine.tensor_stats`; this module only lays them out.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from engine.tensor_stats import (
    default_axes,
    default_view_axes,
    montage,
    slice_2d,
    tensor_stats,
)

pg.setConfigOptions(imageAxisOrder="row-major", antialias=False)

#: The numeric table shows at most this many rows and columns of a slice.
TABLE_LIMIT = 256
DIVERGING = "CET-D1"
SEQUENTIAL = "viridis"


class SliceModel(QtCore.QAbstractTableModel):
    """A read-only table of a 2-D array (capped to TABLE_LIMIT x TABLE_LIMIT)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._a = np.zeros((0, 0))

    def set_array(self, a: np.ndarray) -> None:
        self.beginResetModel()
        self._a = a[:TABLE_LIMIT, :TABLE_LIMIT]
        self.endResetModel()

    def rowCount(self, parent=None):
        return 0 if parent is not None and parent.isValid() else self._a.shape[0]

    def columnCount(self, parent=None):
        return 0 if parent is not None and parent.isValid() else self._a.shape[1]

    def data(self, index, role=QtCore.Qt.DisplayRole):
        if role == QtCore.Qt.DisplayRole and index.isValid():
            return f"{self._a[index.row(), index.column()]:.6g}"
        if role == QtCore.Qt.TextAlignmentRole:
            return int(QtCore.Qt.AlignRight | QtCore.Qt.AlignVCenter)
        return None

    def headerData(self, section, orientation, role=QtCore.Qt.DisplayRole):
        return str(section) if role == QtCore.Qt.DisplayRole else None


class ImagePanel(pg.GraphicsLayoutWidget):
    """One image with a title and a colour bar; diverging around 0 for signed data."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setBackground("#1e2124")
        self.plot = self.addPlot()
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.plot.hideButtons()
        self.image = pg.ImageItem()
        self.plot.addItem(self.image)
        self.bar = pg.ColorBarItem(colorMap=pg.colormap.get(DIVERGING), interactive=False,
                                   width=12)
        self.bar.setImageItem(self.image, insert_in=self.plot)
        self.data = np.zeros((1, 1))

    def set_image(self, a: np.ndarray, title: str = "", symmetric: bool | None = None) -> None:
        """Show ``a``; NaN pixels (montage separators) are drawn transparent."""
        self.data = a
        finite = a[np.isfinite(a)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if symmetric is None:
            symmetric = lo < 0 < hi
        if symmetric:
            m = max(abs(lo), abs(hi)) or 1.0
            lo, hi = -m, m
            self.bar.setColorMap(pg.colormap.get(DIVERGING))
        else:
            self.bar.setColorMap(pg.colormap.get(SEQUENTIAL))
        if hi <= lo:
            hi = lo + 1.0
        self.image.setImage(a, autoLevels=False, levels=(lo, hi))
        self.bar.setLevels((lo, hi))
        self.plot.setTitle(title, color="#d0d4d8", size="9pt")
        self.plot.autoRange(padding=0.02)


class TensorViewer(QtWidgets.QWidget):
    """Shows one tensor (:meth:`show_tensor`) or compares two (:meth:`compare`)."""

    view_changed = QtCore.Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.array: np.ndarray | None = None
        self.other: np.ndarray | None = None
        self.axes: tuple[str, ...] = ()
        self.title = ""
        self.titles = ("a", "b")
        self._updating = False
        self._build()
        self.clear()

    # -- layout --------------------------------------------------------------------------------
    def _build(self) -> None:
        self.stats_label = QtWidgets.QLabel(self)
        self.stats_label.setObjectName("stats")
        self.stats_label.setTextInteractionFlags(QtCore.Qt.TextSelectableByMouse)
        self.mode_combo = QtWidgets.QComboBox(self)
        self.mode_combo.addItems(["slice", "montage"])
        self.mode_combo.setToolTip("slice: one 2-D slice; montage: a 4-D filter as an in x out "
                                   "grid of kh x kw tiles")
        self.scale_combo = QtWidgets.QComboBox(self)
        self.scale_combo.addItems(["global", "tile"])
        self.scale_combo.setToolTip("Montage colour scale: one for the whole filter (global) or "
                                    "one per tile")
        self.row_combo = QtWidgets.QComboBox(self)
        self.col_combo = QtWidgets.QComboBox(self)
        self.row_combo.setToolTip("Axis shown down the image")
        self.col_combo.setToolTip("Axis shown across the image")
        self.index_box = QtWidgets.QHBoxLayout()
        self.index_spins: dict[int, QtWidgets.QSpinBox] = {}
        controls = QtWidgets.QHBoxLayout()
        for label, w in (("view", self.mode_combo), ("rows", self.row_combo),
                         ("cols", self.col_combo), ("scale", self.scale_combo)):
            lab = QtWidgets.QLabel(label, self)
            controls.addWidget(lab)
            controls.addWidget(w)
            w.setProperty("label_widget", lab)
        controls.addLayout(self.index_box)
        controls.addStretch(1)
        self.npy_button = QtWidgets.QPushButton("Save .npy", self)
        self.png_button = QtWidgets.QPushButton("Save .png", self)
        self.copy_button = QtWidgets.QPushButton("Copy values", self)
        for b in (self.npy_button, self.png_button, self.copy_button):
            controls.addWidget(b)

        self.panels = [ImagePanel(self), ImagePanel(self), ImagePanel(self)]
        images = QtWidgets.QWidget(self)
        img_lay = QtWidgets.QHBoxLayout(images)
        img_lay.setContentsMargins(0, 0, 0, 0)
        for p in self.panels:
            img_lay.addWidget(p)
        self.histogram = pg.PlotWidget(self)
        self.histogram.setBackground("#1e2124")
        self.histogram.setLabel("bottom", "value")
        self.histogram.setLabel("left", "count")
        self.table = QtWidgets.QTableView(self)
        self.table_model = SliceModel(self)
        self.table.setModel(self.table_model)
        self.table.horizontalHeader().setDefaultSectionSize(72)
        self.tabs = QtWidgets.QTabWidget(self)
        self.tabs.addTab(images, "Image")
        self.tabs.addTab(self.histogram, "Histogram")
        self.tabs.addTab(self.table, "Table")

        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(4, 2, 4, 2)
        lay.addWidget(self.stats_label)
        lay.addLayout(controls)
        lay.addWidget(self.tabs, 1)

        self.mode_combo.currentIndexChanged.connect(self._on_controls)
        self.scale_combo.currentIndexChanged.connect(self._on_controls)
        self.row_combo.currentIndexChanged.connect(self._on_controls)
        self.col_combo.currentIndexChanged.connect(self._on_controls)
        self.npy_button.clicked.connect(self._ask_npy)
        self.png_button.clicked.connect(self._ask_png)
        self.copy_button.clicked.connect(self.copy_values)

    # -- public API ----------------------------------------------------------------------------
    def clear(self) -> None:
        """Show nothing."""
        self.array = self.other = None
        self.stats_label.setText("No tensor selected.")
        self._set_enabled(False)
        for p in self.panels:
            p.image.clear()
            p.plot.setTitle("")
        self.panels[1].hide()
        self.panels[2].hide()
        self.histogram.clear()
        self.table_model.set_array(np.zeros((0, 0)))

    def show_tensor(self, array: np.ndarray, axes: tuple[str, ...] | None = None,
                    title: str = "") -> None:
        """Show one tensor; ``axes`` names its axes (N, H, W, C / kh, kw, in, out ...)."""
        self.array, self.other, self.title = np.asarray(array), None, title
        self._setup_axes(self.array, axes)
        st = tensor_stats(self.array)
        self.stats_label.setText((f"{title}:  " if title else "") + st.summary())
        self._draw_histogram(self.array)
        self._redraw()

    def compare(self, a: np.ndarray, b: np.ndarray, title_a: str = "a", title_b: str = "b",
                axes: tuple[str, ...] | None = None) -> None:
        """Show ``a`` and ``b`` side by side with the same slice, and ``a - b``."""
        a, b = np.asarray(a), np.asarray(b)
        self.array, self.other, self.titles = a, b, (title_a, title_b)
        self.title = f"{title_a} vs {title_b}"
        self._setup_axes(a, axes)
        if a.shape != b.shape:
            self.stats_label.setText(f"{title_a} shape {list(a.shape)} and {title_b} shape "
                                     f"{list(b.shape)} differ: nothing to compare")
            self.other = None
            self._redraw()
            return
        diff = a.astype(np.float64) - b.astype(np.float64)
        max_abs = float(np.nanmax(np.abs(diff))) if diff.size else 0.0
        max_b = float(np.nanmax(np.abs(b.astype(np.float64)))) if b.size else 0.0
        rel = max_abs / max_b if max_b > 0 else (0.0 if max_abs == 0 else float("inf"))
        self.max_abs_error, self.max_rel_error = max_abs, rel
        self.stats_label.setText(f"{title_a} vs {title_b}:  shape {list(a.shape)}  "
                                 f"max abs error {max_abs:.6g}  max rel error {rel:.6g}")
        self._draw_histogram(diff)
        self._redraw()

    def current_image(self) -> np.ndarray:
        """The 2-D array the (first) image shows now."""
        return self.panels[0].data

    def set_mode(self, mode: str) -> None:
        self.mode_combo.setCurrentText(mode)

    def set_view_axes(self, row_axis: int, col_axis: int) -> None:
        self._updating = True
        self.row_combo.setCurrentIndex(row_axis)
        self.col_combo.setCurrentIndex(col_axis)
        self._updating = False
        self._on_controls()

    def set_index(self, axis: int, value: int) -> None:
        self.index_spins[axis].setValue(value)

    def export_npy(self, path: str) -> None:
        """Save the whole tensor (bfloat16 exactly as float32: .npy has no bfloat16)."""
        a = self.array
        if a is None:
            return
        if a.dtype.name == "bfloat16":
            a = a.astype(np.float32)
        np.save(path, a, allow_pickle=False)

    def export_png(self, path: str) -> bool:
        """Save what the image tab shows as a picture."""
        return self.tabs.widget(0).grab().save(path)

    def copy_values(self) -> str:
        """Copy the current slice to the clipboard as tab-separated text; returns it."""
        a = self.current_image()
        text = "\n".join("\t".join(f"{v:.9g}" for v in row) for row in a)
        QtWidgets.QApplication.clipboard().setText(text)
        return text

    # -- internals -----------------------------------------------------------------------------
    def _set_enabled(self, on: bool) -> None:
        for w in (self.mode_combo, self.scale_combo, self.row_combo, self.col_combo,
                  self.npy_button, self.png_button, self.copy_button):
            w.setEnabled(on)

    def _setup_axes(self, a: np.ndarray, axes: tuple[str, ...] | None) -> None:
        self._updating = True
        self._set_enabled(True)
        names = tuple(axes) if axes and len(axes) == a.ndim else default_axes(a.ndim)
        same = names == self.axes and all(
            s.maximum() == n - 1 for s, n in zip(self.index_spins.values(),
                                                 [a.shape[i] for i in self.index_spins],
                                                 strict=True))
        self.axes = names
        is_filter = a.ndim == 4 and names[:2] == ("kh", "kw")
        self.mode_combo.model().item(1).setEnabled(is_filter)
        if not is_filter:
            self.mode_combo.setCurrentIndex(0)
        elif not same:  # a new filter starts as a montage of all its tiles
            self.mode_combo.setCurrentIndex(1)
        if not same:
            labels = [f"{n} ({s})" for n, s in zip(names, a.shape, strict=True)]
            for combo in (self.row_combo, self.col_combo):
                combo.clear()
                combo.addItems(labels)
            r, c = default_view_axes(names)
            self.row_combo.setCurrentIndex(r)
            self.col_combo.setCurrentIndex(c)
            self._rebuild_spins(a)
        self._updating = False

    def _rebuild_spins(self, a: np.ndarray) -> None:
        while self.index_box.count():
            item = self.index_box.takeAt(0)
            if item.widget():
                item.widget().deleteLater()
        self.index_spins = {}
        for ax, (name, size) in enumerate(zip(self.axes, a.shape, strict=True)):
            lab = QtWidgets.QLabel(name, self)
            spin = QtWidgets.QSpinBox(self)
            spin.setRange(0, max(0, size - 1))
            spin.setToolTip(f"index along {name} (0..{max(0, size - 1)})")
            spin.valueChanged.connect(self._on_controls)
            spin.setProperty("label_widget", lab)
            self.index_box.addWidget(lab)
            self.index_box.addWidget(spin)
            self.index_spins[ax] = spin

    def _on_controls(self, *_args) -> None:
        if not self._updating and self.array is not None:
            self._redraw()

    def _view(self, a: np.ndarray) -> np.ndarray:
        if self.mode_combo.currentText() == "montage" and a.ndim == 4:
            return montage(a, self.scale_combo.currentText())
        r, c = self.row_combo.currentIndex(), self.col_combo.currentIndex()
        if a.ndim >= 2 and r == c:
            c = (r + 1) % a.ndim
        index = {ax: s.value() for ax, s in self.index_spins.items()}
        return slice_2d(a, r, c, index)

    def _redraw(self) -> None:
        a = self.array
        montage_mode = self.mode_combo.currentText() == "montage"
        self.scale_combo.setVisible(montage_mode)
        self.scale_combo.property("label_widget").setVisible(montage_mode)
        slicing = not montage_mode and a is not None and a.ndim >= 2
        for combo in (self.row_combo, self.col_combo):
            combo.setVisible(slicing)
            combo.property("label_widget").setVisible(slicing)
        r, c = self.row_combo.currentIndex(), self.col_combo.currentIndex()
        for ax, spin in self.index_spins.items():
            show = slicing and ax not in (r, c)
            spin.setVisible(show)
            spin.property("label_widget").setVisible(show)
        if a is None:
            return
        view = self._view(a)
        symmetric = True if montage_mode else None
        if self.other is None:
            self.panels[0].set_image(view, self.title, symmetric)
            self.panels[1].hide()
            self.panels[2].hide()
        else:
            other = self._view(self.other)
            self.panels[0].set_image(view, self.titles[0], symmetric)
            self.panels[1].set_image(other, self.titles[1], symmetric)
            self.panels[2].set_image(view - other, "difference", True)
            self.panels[1].show()
            self.panels[2].show()
        self.table_model.set_array(np.nan_to_num(view, nan=0.0) if montage_mode else view)
        self.view_changed.emit()

    def _draw_histogram(self, a: np.ndarray) -> None:
        self.histogram.clear()
        v = np.asarray(a, np.float64).ravel()
        v = v[np.isfinite(v)]
        if v.size == 0:
            return
        counts, edges = np.histogram(v, bins=min(64, max(1, int(np.sqrt(v.size)))))
        self.hist_counts = counts
        self.histogram.addItem(pg.BarGraphItem(x0=edges[:-1], x1=edges[1:], height=counts,
                                               brush="#5a9bd4", pen=None))

    def _ask_npy(self) -> None:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Save tensor", "tensor.npy",
                                                        "NumPy array (*.npy)")
        if path:
            self.export_npy(path)

    def _ask_png(self) -> None:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Save picture", "tensor.png",
                                                        "PNG image (*.png)")
        if path and not self.export_png(path):
            QtWidgets.QMessageBox.warning(self, "Save picture", f"Could not write {path}.")


