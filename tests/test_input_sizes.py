"""engine.shapes.input_sizes: every input size an out_backprop shape allows, against brute force
over TensorFlow's output-size rule (engine.shapes.padding.windowed_output) and the real
Conv2DBackpropInput shape check."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.base.errors import InvalidArgumentError
from engine.shapes.conv import backprop_input_geometry
from engine.shapes.input_sizes import (
    choices_text,
    consistent_input_sizes,
    sizes_for_output,
    spatial_choices,
)
from engine.shapes.padding import windowed_output

LIMIT = 120  # every size that can give the drawn outputs is below this


def brute(out, k, d, s, padding, before, after) -> list[int]:
    found = []
    for n in range(LIMIT):
        try:
            if windowed_output(n, k, d, s, padding, before, after).out == out:
                found.append(n)
        except InvalidArgumentError:
            pass
    return found


@given(out=st.integers(0, 8), k=st.integers(1, 5), d=st.integers(1, 3), s=st.integers(1, 4),
       padding=st.sampled_from(["SAME", "VALID", "EXPLICIT"]), before=st.integers(0, 4),
       after=st.integers(0, 4))
def test_sizes_for_output_is_exactly_the_brute_force_set(out, k, d, s, padding, before, after):
    if padding != "EXPLICIT":
        before = after = 0
    assert list(sizes_for_output(out, k, d, s, padding, before, after)) == \
        brute(out, k, d, s, padding, before, after)


@given(out_h=st.integers(0, 6), out_w=st.integers(0, 6), k=st.integers(1, 4),
       s=st.integers(1, 3), d=st.integers(1, 2),
       padding=st.sampled_from(["SAME", "VALID", "EXPLICIT"]),
       pads=st.lists(st.integers(0, 3), min_size=4, max_size=4),
       fmt=st.sampled_from(["NHWC", "NCHW"]))
def test_every_listed_vector_passes_the_backprop_input_shape_check(out_h, out_w, k, s, d,
                                                                   padding, pads, fmt):
    filt = (k, k + 1, 2, 3)
    if fmt == "NHWC":
        dy = (2, out_h, out_w, 3)
        attrs = {"strides": [1, s, s, 1], "dilations": [1, d, d, 1]}
        explicit = [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0]
    else:
        dy = (2, 3, out_h, out_w)
        attrs = {"strides": [1, 1, s, s], "dilations": [1, 1, d, d]}
        explicit = [0, 0, 0, 0, pads[0], pads[1], pads[2], pads[3]]
    attrs |= {"padding": padding, "data_format": fmt,
              "explicit_paddings": explicit if padding == "EXPLICIT" else []}
    vectors = consistent_input_sizes(dy, filt, attrs)
    rows, cols = spatial_choices(dy, filt, attrs)
    assert len(vectors) == len(rows) * len(cols)
    for vec in vectors:
        backprop_input_geometry(vec, filt, dy, attrs["strides"], padding,
                                attrs["explicit_paddings"], fmt, attrs["dilations"])
    # a size just outside either set fails the check
    h_axis = 1 if fmt == "NHWC" else 2
    if vectors:
        wrong = list(vectors[-1])
        wrong[h_axis] = rows[-1] + 1
        try:
            backprop_input_geometry(wrong, filt, dy, attrs["strides"], padding,
                                    attrs["explicit_paddings"], fmt, attrs["dilations"])
        except InvalidArgumentError:
            pass
        else:
            raise AssertionError(f"{wrong} was not listed but passes")


def test_the_issue_s_example_stride_2_same_allows_7_and_8():
    attrs = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    assert spatial_choices([1, 4, 4, 8], [3, 3, 2, 8], attrs) == (range(7, 9), range(7, 9))
    assert consistent_input_sizes([1, 4, 4, 8], [3, 3, 2, 8], attrs) == [
        [1, 7, 7, 2], [1, 7, 8, 2], [1, 8, 7, 2], [1, 8, 8, 2]]
    assert choices_text(range(7, 9)) == "{7, 8}"
    assert choices_text(range(3, 10)) == "{3, 4, ..., 9}"
    assert choices_text(range(0)) == "{}"
