"""The Geometry dock: what the selected conv block's attributes mean on its shapes.

It shows the pictures ``gradblocks geometry`` writes (the Qt-free model of
:mod:`engine.explain.geometry`, drawn by :mod:`engine.explain.geometry_render`, shown as a QPixmap):
a slider and a Play/Pause button step through the frames (output positions, or filter taps for the
filter-gradient blocks), "Overlap" shows the overlap-count map instead, and "Export PNG..." /
"Export GIF..." write the still shown or the animation. A 3-D block (Conv3D and its gradients)
is drawn as depth slices of the 2-D picture: the slice box picks the output plane (the filter
gradient: the depth tap; with Overlap, the input plane). It follows the selection and redraws
when the plan changes (an attribute or an upstream shape changed); a block that is not a conv
block, or whose shapes are invalid, gets a message instead of a picture.
"""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from app import dialog_folders
from engine.base.atomic import write_atomically
from engine.base.errors import InvalidArgumentError
from engine.base.names import article
from engine.explain.geometry import GeometryModel, model_for_step
from engine.explain.geometry_render import (
    frame_duration_ms,
    picture_title,
    render_frame,
    render_overlap,
    write_gif,
    write_png,
)
from engine.explain.terms import OPS


def to_pixmap(image) -> QtGui.QPixmap:
    """A Pillow RGB image as a QPixmap (the bytes copied)."""
    rgb = image.convert("RGB")
    data = rgb.tobytes()
    qimage = QtGui.QImage(data, rgb.width, rgb.height, 3 * rgb.width,
                          QtGui.QImage.Format_RGB888)
    return QtGui.QPixmap.fromImage(qimage.copy())


class GeometryView(QtWidgets.QWidget):
    """Picture, frame slider, Play/Pause, Overlap toggle and the export buttons."""

    def __init__(self, session, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.session = session
        #: The selected conv block and its model (None when there is nothing to draw).
        self.node_id: str | None = None
        self.model: GeometryModel | None = None
        self.title = ""
        #: The Pillow image shown (a frame or the overlap map).
        self.image = None
        self.selection: list[str] = []

        self.message = QtWidgets.QLabel("Select a conv block to see its geometry.", self)
        self.message.setObjectName("geometry_message")
        self.message.setWordWrap(True)
        self.picture = QtWidgets.QLabel(self)
        self.picture.setObjectName("geometry_picture")
        self.picture.setAlignment(QtCore.Qt.AlignLeft | QtCore.Qt.AlignTop)
        scroll = QtWidgets.QScrollArea(self)
        scroll.setWidget(self.picture)
        scroll.setWidgetResizable(True)

        self.play_button = self._button("Play", "geometry_play", checkable=True)
        self.play_button.toggled.connect(self._play_toggled)
        self.slider = QtWidgets.QSlider(QtCore.Qt.Horizontal, self)
        self.slider.setObjectName("geometry_slider")
        self.slider.valueChanged.connect(lambda _v: self._draw())
        self.frame_label = QtWidgets.QLabel("", self)
        self.frame_label.setObjectName("geometry_frame")
        self.overlap_button = self._button("Overlap", "geometry_overlap", checkable=True)
        self.overlap_button.setToolTip("Colour every input element by how many (output "
                                       "position, tap) pairs touch it")
        self.overlap_button.toggled.connect(lambda _on: self._slice_range())
        self.slice_label = QtWidgets.QLabel("Slice", self)
        self.slice_box = QtWidgets.QSpinBox(self)
        self.slice_box.setObjectName("geometry_slice")
        self.slice_box.valueChanged.connect(lambda _v: self._draw())
        self.png_button = self._button("Export PNG...", "geometry_export_png")
        self.png_button.clicked.connect(self.ask_export_png)
        self.gif_button = self._button("Export GIF...", "geometry_export_gif")
        self.gif_button.clicked.connect(self.ask_export_gif)

        controls = QtWidgets.QHBoxLayout()
        controls.setContentsMargins(4, 2, 4, 0)
        for w in (self.play_button, self.slider, self.frame_label, self.slice_label,
                  self.slice_box, self.overlap_button, self.png_button, self.gif_button):
            controls.addWidget(w, 1 if w is self.slider else 0)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(controls)
        lay.addWidget(self.message)
        lay.addWidget(scroll, 1)

        self.timer = QtCore.QTimer(self)
        self.timer.timeout.connect(self.step)
        session.plan_changed.connect(lambda _plan: self.refresh())
        self.refresh()

    def _button(self, text: str, name: str, checkable: bool = False) -> QtWidgets.QToolButton:
        b = QtWidgets.QToolButton(self)
        b.setText(text)
        b.setObjectName(name)
        b.setCheckable(checkable)
        return b

    # --- what is shown ---------------------------------------------------------------------
    def show_selection(self, node_ids: list[str]) -> None:
        self.selection = list(node_ids)
        self.refresh()

    def _find_model(self) -> tuple[str | None, GeometryModel | None, str]:
        """(node id, model, message): the model of the one selected conv block, or why not."""
        canvas, plan = self.session.doc.canvas, self.session.plan
        sel = [n for n in self.selection if n in canvas.nodes]
        if len(sel) != 1:
            return None, None, "Select one conv block to see its geometry."
        node_id, node = sel[0], canvas.nodes[sel[0]]
        if node.type not in OPS:
            return None, None, (f"{node.title or node_id} is {article(node.type)} block: the geometry "
                                f"view shows the conv blocks ({', '.join(OPS)}).")
        errors = self.session.node_errors(node_id) if plan is not None else []
        step = next((s for s in plan.steps if s.node_id == node_id), None) if plan else None
        if errors or step is None:
            why = errors[0] if errors else "its inputs are not all connected"
            return node_id, None, f"No geometry: the block's shapes are not valid ({why})."
        try:
            model = model_for_step(step, plan.specs)
        except (InvalidArgumentError, KeyError, ValueError) as err:
            return node_id, None, f"No geometry: {err}"
        return node_id, model, ""

    def refresh(self) -> None:
        """Rebuild the model for the selection (after a selection or plan change)."""
        node_id, model, message = self._find_model()
        self.node_id, self.model = node_id, model
        self.message.setText(message)
        self.message.setVisible(bool(message))
        frames = model.frame_count if model is not None else 0
        for w in (self.slider, self.play_button, self.overlap_button, self.png_button,
                  self.gif_button):
            w.setEnabled(model is not None)
        if model is None:
            self.play_button.setChecked(False)
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(frames - 1, 0))
        self.slider.blockSignals(False)
        if model is not None:
            plan = self.session.plan
            node = self.session.doc.canvas.nodes[node_id]
            self.title = picture_title(plan.label(node_id), node_id, node.type)
            self.timer.setInterval(frame_duration_ms(len(model.frame_indices())))
        self._slice_range()

    def _slice_range(self) -> None:
        """The slice box of a 3-D block: its output planes (the filter gradient: depth taps),
        or with the overlap map its input planes; hidden for a 2-D block. Then redraw."""
        model = self.model
        depth = model.depth if model is not None else None
        for w in (self.slice_label, self.slice_box):
            w.setVisible(depth is not None)
        if model is not None and depth is not None:
            overlap = self.overlap_button.isChecked() or not model.frame_count
            count = max(depth.size if overlap else model.slice_count, 1)
            what = ("input plane" if overlap else "depth tap" if model.kind == "filter"
                    else "output plane")
            self.slice_label.setText(what.capitalize())
            self.slice_box.setToolTip(f"The depth slice shown: the {what} (0 to {count - 1})")
            self.slice_box.blockSignals(True)
            self.slice_box.setRange(0, count - 1)
            self.slice_box.blockSignals(False)
        self._draw()

    @property
    def depth_slice(self) -> int:
        """The depth slice shown (0 for a 2-D block)."""
        model = self.model
        return self.slice_box.value() if model is not None and model.depth is not None else 0

    @property
    def frame(self) -> int:
        return self.slider.value()

    def _draw(self) -> None:
        model = self.model
        if model is None:
            self.image = None
            self.picture.clear()
            self.frame_label.setText("")
            return
        if self.overlap_button.isChecked() or not model.frame_count:
            self.image = render_overlap(model, self.title, self.depth_slice)
            self.frame_label.setText("overlap map")
        else:
            self.image = render_frame(model, self.frame, self.title, self.depth_slice)
            what = "tap" if model.kind == "filter" else "position"
            self.frame_label.setText(f"{what} {self.frame + 1} / {model.frame_count}")
        self.picture.setPixmap(to_pixmap(self.image))

    # --- animation -------------------------------------------------------------------------
    def _play_toggled(self, on: bool) -> None:
        self.play_button.setText("Pause" if on else "Play")
        if on and self.model is not None:
            self.overlap_button.setChecked(False)
            self.timer.start()
        else:
            self.timer.stop()

    def step(self) -> None:
        """The next frame (after the last: the first again)."""
        if self.model is None or not self.model.frame_count:
            return
        self.slider.setValue((self.frame + 1) % self.model.frame_count)

    # --- export ----------------------------------------------------------------------------
    def _ask(self, caption: str, name: str, filters: str) -> str:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self, caption, dialog_folders.start("image", name), filters)
        if path:
            dialog_folders.remember("image", path)
        return path

    def ask_export_png(self) -> None:
        """Ask for a .png and write the picture shown (frame or overlap map) there."""
        if self.image is None:
            return
        path = self._ask("Export geometry picture", "geometry.png", "PNG image (*.png)")
        if path:
            if not path.lower().endswith(".png"):
                path += ".png"
            image = self.image
            self._write(path, lambda f: write_png(image, f))

    def ask_export_gif(self) -> None:
        """Ask for a .gif and write the animation there (as ``gradblocks geometry`` does)."""
        if self.model is None:
            return
        path = self._ask("Export geometry animation", "geometry.gif", "GIF animation (*.gif)")
        if path:
            if not path.lower().endswith(".gif"):
                path += ".gif"
            model, title = self.model, self.title
            self._write(path, lambda f: write_gif(model, title, f))

    def _write(self, path: str, write) -> None:
        QtWidgets.QApplication.setOverrideCursor(QtCore.Qt.WaitCursor)
        try:
            write_atomically(path, write)
        except OSError as err:
            QtWidgets.QApplication.restoreOverrideCursor()
            QtWidgets.QMessageBox.warning(self, "Export geometry",
                                          f"Could not write {path}: {err.strerror or err}")
            return
        QtWidgets.QApplication.restoreOverrideCursor()
