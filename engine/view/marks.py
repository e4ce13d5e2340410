"""Marking tensor elements on a view, without Qt: which picture cells show a set of indices, and
the slice that shows a given element.

Used by the explain panel (the contributing elements of a sum, the output elements an input
element feeds) over the same :class:`engine.view.tensor_view.ViewState` the viewer uses, so a marked
cell is exactly the pixel :meth:`ViewState.pixel_index` maps back to that index.
"""

from __future__ import annotations

import numpy as np

from engine.view import depth_tiles
from engine.view.tensor_view import ViewState


def show_element(state: ViewState, index: tuple[int, ...]) -> None:
    """Fix every axis the view does not show at ``index``'s value there (a filter's montage
    shows every element already; a depth montage, those of one batch index and channel)."""
    if state.array is None or (state.montage_mode and not state.depth_montage):
        return
    for ax in state.fixed_axes():
        state.index[ax] = int(index[ax])


def shown_cells(state: ViewState, indices: np.ndarray) -> np.ndarray:
    """The ``(k, 2)`` int64 (row, col) picture cells showing those of ``indices`` (``(m, ndim)``
    tensor indices) that the current view shows; an index off the view (another slice) has no
    cell."""
    idx = np.asarray(indices, dtype=np.int64)
    a = state.array
    if a is None or idx.ndim != 2 or len(idx) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if state.montage_mode:
        kh, kw = state.tiles_shape()[:2]
        _, at = depth_tiles.tile_positions(a.shape, state.axes, state.index, idx)
        rows = at[:, 2] * (kh + 1) + at[:, 0]
        cols = at[:, 3] * (kw + 1) + at[:, 1]
        return np.stack([rows, cols], axis=1)
    if a.ndim < 2:
        cols = idx[:, 0] if a.ndim == 1 else np.zeros(len(idx), dtype=np.int64)
        return np.stack([np.zeros_like(cols), cols], axis=1)
    keep = np.ones(len(idx), dtype=bool)
    for ax in state.fixed_axes():
        keep &= idx[:, ax] == state.index.get(ax, 0)
    r, c = state.view_axes
    return np.stack([idx[keep, r], idx[keep, c]], axis=1)
