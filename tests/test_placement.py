"""app.placement (Qt-free): the nearest shift at which a group of boxes covers no box."""

from hypothesis import given
from hypothesis import strategies as st

from app.placement import _meets, free_offset

BOX = st.tuples(st.integers(-300, 300), st.integers(-300, 300), st.integers(20, 200),
                st.integers(20, 120)).map(lambda b: tuple(float(v) for v in b))


def test_a_free_group_stays_and_a_covered_one_moves_down_first():
    assert free_offset([(0, 0, 100, 50)], [(500, 500, 100, 50)]) == (0.0, 0.0)
    assert free_offset([(0, 0, 100, 50)], [(0, 0, 100, 50)]) == (0.0, 90.0)


@given(st.lists(BOX, max_size=12), st.lists(BOX, min_size=1, max_size=3))
def test_the_shifted_group_meets_no_box(occupied, group):
    dx, dy = free_offset(occupied, group, gap=12.0)
    moved = [(b[0] + dx, b[1] + dy, b[2], b[3]) for b in group]
    assert not any(_meets(m, o, 12.0) for m in moved for o in occupied)
