"""engine.view.marks: the cells marked for a set of indices are exactly the pixels the view maps
back to those indices (slice and montage), and show_element picks the slice of an element."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from engine.view.marks import show_element, shown_cells
from engine.view.tensor_view import ViewState


@given(st.data())
def test_marked_cells_map_back_to_the_indices_in_view(data):
    filt = data.draw(st.booleans())
    shape = tuple(data.draw(st.integers(1, 4)) for _ in range(4))
    axes = ("kh", "kw", "in", "out") if filt else ("N", "H", "W", "C")
    state = ViewState()
    state.show(np.zeros(shape, np.float32), axes, "t")
    if filt and data.draw(st.booleans()):
        state.set_mode("slice")
    all_idx = np.array(list(np.ndindex(*shape)))
    pick = data.draw(st.lists(st.integers(0, len(all_idx) - 1), unique=True, max_size=20))
    focus = tuple(all_idx[data.draw(st.integers(0, len(all_idx) - 1))])
    show_element(state, focus)
    cells = shown_cells(state, all_idx[pick])
    back = {state.pixel_index(int(r), int(c)) for r, c in cells}
    in_view = {tuple(i) for i in all_idx[pick].tolist()
               if all(i[ax] == state.index.get(ax, 0) for ax in state.fixed_axes())}
    assert back == in_view and len(cells) == len(in_view)
    # the focus element is always in view after show_element
    (r, c), = shown_cells(state, np.array([focus]))
    assert state.pixel_index(int(r), int(c)) == focus


def test_nothing_shown_marks_nothing():
    assert shown_cells(ViewState(), np.zeros((3, 4), np.int64)).shape == (0, 2)
