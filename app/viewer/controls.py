"""The viewer's controls: a bar with view mode, row/column axis pickers, montage scale, index spin
boxes and the Save / Copy buttons, and the compare side choice ("Acts on: Left | Right |
Difference") shown beside the statistics while comparing.

The bar edits the viewer's :class:`engine.view.tensor_view.ViewState` (:meth:`ViewerControls.bind`)
and asks for a redraw; the buttons and the side choice are connected by the viewer.
"""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app.viewer.wrap_bar import WrapBar
from engine.view.tensor_view import SIDES, ViewState


class ViewerControls(WrapBar):
    """``leading`` (the viewer's tabs), then the combo boxes and spin boxes, then the export
    buttons: one row, or more when the viewer is narrow."""

    def __init__(self, parent: QtWidgets.QWidget | None = None,
                 leading: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.mode_combo = QtWidgets.QComboBox(self)
        self.mode_combo.addItems(["slice", "montage"])
        self.mode_combo.setToolTip("slice: one 2-D slice; montage: a 4-D filter as an in x out "
                                   "grid of kh x kw tiles (filters only)")
        self.row_combo = QtWidgets.QComboBox(self)
        self.col_combo = QtWidgets.QComboBox(self)
        self.row_combo.setToolTip("Axis shown down the image")
        self.col_combo.setToolTip("Axis shown across the image")
        self.scale_combo = QtWidgets.QComboBox(self)
        self.scale_combo.addItems(["global", "tile"])
        self.scale_combo.setToolTip("Montage colours: global = value / max |w| of the whole "
                                    "filter; tile = value / max |w| of its own tile")
        self.index_box = QtWidgets.QHBoxLayout()
        self.index_box.setSpacing(4)
        self.index_spins: dict[int, QtWidgets.QSpinBox] = {}
        self.state = ViewState()
        self._changed = lambda: None
        self._updating = False

        self.npy_button = QtWidgets.QPushButton("Save .npy", self)
        self.png_button = QtWidgets.QPushButton("Save .png", self)
        self.png_button.setToolTip("Save the picture as a PNG image")
        self.copy_button = QtWidgets.QPushButton("Copy values", self)

        # two groups that wrap onto a second row when the viewer is narrow
        self.selectors = QtWidgets.QWidget(self)
        lay = QtWidgets.QHBoxLayout(self.selectors)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        self._labelled(lay, "view", self.mode_combo)
        self._labelled(lay, "rows", self.row_combo)
        self._labelled(lay, "cols", self.col_combo)
        self._labelled(lay, "scale", self.scale_combo)
        lay.addLayout(self.index_box)
        self.buttons = QtWidgets.QWidget(self)
        lay = QtWidgets.QHBoxLayout(self.buttons)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(4)
        for b in (self.npy_button, self.png_button, self.copy_button):
            b.setParent(self.buttons)
            lay.addWidget(b)
        self.set_groups([g for g in (leading, self.selectors, self.buttons) if g is not None])
        self.show_side(None, "")

    def _labelled(self, lay: QtWidgets.QHBoxLayout, text: str, w: QtWidgets.QWidget) -> None:
        lab = QtWidgets.QLabel(text, lay.parentWidget())
        lay.addWidget(lab)
        lay.addWidget(w)
        w.setProperty("label_widget", lab)

    def set_shown(self, w: QtWidgets.QWidget, show: bool) -> None:
        """Show or hide a control together with its label."""
        w.setVisible(show)
        w.property("label_widget").setVisible(show)

    def show_side(self, side: str | None, title: str) -> None:
        """Name the side acted on (None: one tensor) and its tensor ``title`` in the Save and
        Copy buttons."""
        of = f" of {title}" if title else ""
        which = f"{side} " if side else ""
        self.npy_button.setText(f"Save {which}.npy")
        self.npy_button.setToolTip(f"Save the whole tensor{of} as a NumPy .npy file")
        self.copy_button.setText(f"Copy {which}values")
        self.copy_button.setToolTip(f"Copy the numbers of the current slice{of} (tab-separated)")
        self.arrange()  # the buttons' texts changed width

    def set_enabled(self, on: bool) -> None:
        for w in (self.mode_combo, self.scale_combo, self.row_combo, self.col_combo,
                  self.npy_button, self.png_button, self.copy_button):
            w.setEnabled(on)

    def bind(self, state: ViewState, changed) -> None:
        """Edit ``state`` from the mode, scale, axis and index controls; ``changed()`` after."""
        self.state, self._changed = state, changed
        self.mode_combo.currentTextChanged.connect(self._on_mode)
        self.scale_combo.currentTextChanged.connect(self._on_scale)
        self.row_combo.currentIndexChanged.connect(lambda i: self._on_axis_picked("row", i))
        self.col_combo.currentIndexChanged.connect(lambda i: self._on_axis_picked("col", i))

    def setup(self, new_layout: bool) -> None:
        """Controls for what the state shows; a new layout gets new axis pickers and spin
        boxes, the same layout keeps the user's."""
        st = self.state
        self._updating = True
        self.set_enabled(True)
        self.mode_combo.model().item(1).setEnabled(st.can_montage)
        self.mode_combo.setCurrentText(st.mode)
        self.scale_combo.setCurrentText(st.scale)
        if new_layout:
            self.fill_axes(st.axes, st.array.shape, st.view_axes)
        self._updating = False

    def show_view_axes(self) -> None:
        """The axis pickers show the state's (row, col) axes."""
        self._updating = True
        self.row_combo.setCurrentIndex(self.state.view_axes[0])
        self.col_combo.setCurrentIndex(self.state.view_axes[1])
        self._updating = False

    def _live(self) -> bool:
        return not self._updating and self.state.array is not None

    def _on_mode(self, mode: str) -> None:
        if self._live():
            self.state.set_mode(mode)
            self._changed()

    def _on_scale(self, scale: str) -> None:
        self.state.scale = scale
        if self._live():
            self._changed()

    def _on_index(self, *_args) -> None:
        if self._live():
            self.state.index = {ax: s.value() for ax, s in self.index_spins.items()}
            self._changed()

    def _on_axis_picked(self, which: str, axis: int) -> None:
        """A picked axis that the other picker shows swaps the two (rows and cols differ)."""
        if not self._live() or axis < 0:
            return
        self.state.pick_axis(which, axis)
        self.show_view_axes()
        self._changed()

    def show_for(self, st: ViewState) -> None:
        """Show the controls that apply: mode for filters, scale for montages, axis pickers and
        the spin boxes of the fixed axes for slices."""
        slicing = not st.montage_mode and st.array is not None and st.array.ndim >= 2
        shows_scale = st.montage_mode and not st.depth_montage
        self.set_shown(self.mode_combo, st.can_montage)
        self.set_shown(self.scale_combo, shows_scale)
        self.set_shown(self.row_combo, slicing)
        self.set_shown(self.col_combo, slicing)
        fixed = st.fixed_axes()
        for ax, spin in self.index_spins.items():
            self.set_shown(spin, ax in fixed)
        self.arrange()

    def fill_axes(self, names: tuple[str, ...], shape: tuple[int, ...],
                  view_axes: tuple[int, int]) -> None:
        """New axis pickers and one index spin box per axis."""
        labels = [f"{n} ({s})" for n, s in zip(names, shape, strict=True)]
        for combo in (self.row_combo, self.col_combo):
            combo.clear()
            combo.addItems(labels)
        self.row_combo.setCurrentIndex(view_axes[0])
        self.col_combo.setCurrentIndex(view_axes[1])
        while self.index_box.count():
            item = self.index_box.takeAt(0)
            if item.widget():  # hidden now: deleted only when the event loop runs again
                item.widget().hide()
                item.widget().deleteLater()
        self.index_spins = {}
        for ax, (name, size) in enumerate(zip(names, shape, strict=True)):
            lab = QtWidgets.QLabel(name, self.selectors)
            spin = QtWidgets.QSpinBox(self.selectors)
            top = max(0, size - 1)
            spin.setRange(0, top)
            spin.setSuffix(f" / {top}")
            spin.setToolTip(f"index along {name} (0..{top})")
            spin.valueChanged.connect(self._on_index)
            spin.setProperty("label_widget", lab)
            self.index_box.addWidget(lab)
            self.index_box.addWidget(spin)
            self.index_spins[ax] = spin
        self.arrange()


#: the chosen side reads as pressed in the dark theme too (Fusion's checked tool button is faint)
SIDE_STYLE = ("QToolButton { padding: 2px 8px; border: 1px solid #4a5058; }"
              "QToolButton:checked { background: #2f78a0; color: white; "
              "border-color: #6ab0d8; }")


class SideChoice(QtWidgets.QWidget):
    """"Acts on: Left | Right | Difference": segmented buttons choosing the tensor that Table,
    Save .npy, Copy and the histogram act on while comparing."""

    #: the user chose a side ("left", "right" or "difference")
    side_picked = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.label = QtWidgets.QLabel("Acts on:", self)
        self.buttons: dict[str, QtWidgets.QToolButton] = {}
        self.group = QtWidgets.QButtonGroup(self)
        self.group.setExclusive(True)
        self.setStyleSheet(SIDE_STYLE)
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.label)
        lay.addSpacing(4)
        for side in SIDES:
            b = QtWidgets.QToolButton(self)
            b.setText(side.capitalize())
            b.setCheckable(True)
            b.clicked.connect(lambda _on=False, s=side: self.side_picked.emit(s))
            self.group.addButton(b)
            self.buttons[side] = b
            lay.addWidget(b)
        self.buttons["left"].setChecked(True)

    def show_side(self, side: str | None, titles: dict[str, str]) -> None:
        """Check ``side`` (None: hide the choice); ``titles`` name each side's tensor."""
        self.setVisible(side is not None)
        if side is None:
            return
        for s, b in self.buttons.items():
            b.setChecked(s == side)
            b.setToolTip(f"Table, Save .npy, Copy and the histogram act on {titles[s]}")
        self.label.setToolTip(f"Table, Save .npy, Copy and the histogram act on the {side} "
                              f"tensor: {titles[side]}")
