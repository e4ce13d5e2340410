"""The reference's output sizes and paddings (tests/reference.py, from TensorFlow's documented
definition) against the engine's (engine.shapes.padding, engine.shapes.conv): a bug in either
shows."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.base.errors import InvalidArgumentError
from engine.shapes.conv import conv2d_geometry
from engine.shapes.padding import windowed_output
from tests import reference

PADDINGS = st.sampled_from(["SAME", "VALID", "EXPLICIT"])


@given(size=st.integers(0, 40), taps=st.integers(1, 7), dilation=st.integers(1, 4),
       stride=st.integers(1, 6), padding=PADDINGS, before=st.integers(0, 5),
       after=st.integers(0, 5))
def test_one_dimension_agrees(size, taps, dilation, stride, padding, before, after):
    ours = reference.window(size, taps, dilation, stride, padding, before, after)
    # TensorFlow refuses (a "negative output size") a window that overshoots the padded input
    # by two strides or more; by the definition such a dimension simply has no window
    padded = size + (before + after if padding == "EXPLICIT" else 0)
    refused = padding != "SAME" and padded + 2 * stride <= dilation * (taps - 1) + 1
    try:
        engine = tuple(windowed_output(size, taps, dilation, stride, padding, before, after))
    except InvalidArgumentError:
        assert refused and ours[0] == 0
        return
    assert not refused
    assert ours == engine


@pytest.mark.parametrize("size, taps, dilation, stride, padding, expected", [
    (5, 3, 1, 2, "SAME", (3, 1, 1)),   # ceil(5/2) = 3; 5 % 2 = 1: pad 3 - 1 = 2
    (6, 3, 1, 2, "SAME", (3, 0, 1)),   # 6 % 2 = 0: pad 3 - 2 = 1, the odd one after
    (7, 3, 2, 1, "SAME", (7, 2, 2)),   # span 5: pad 4
    (7, 3, 2, 2, "VALID", (2, 0, 0)),  # starts 0, 2 (span 5 fits 7)
    (2, 3, 1, 1, "VALID", (0, 0, 0)),
])
def test_documented_examples(size, taps, dilation, stride, padding, expected):
    assert reference.window(size, taps, dilation, stride, padding) == expected
    assert tuple(windowed_output(size, taps, dilation, stride, padding)) == expected


@st.composite
def calls(draw):
    fmt = draw(st.sampled_from(["NHWC", "NCHW"]))
    padding = draw(PADDINGS)
    spatial = (lambda a, b: [1, a, b, 1]) if fmt == "NHWC" else (lambda a, b: [1, 1, a, b])
    n, h, w, c = (draw(st.integers(0, 3)), draw(st.integers(0, 12)), draw(st.integers(0, 12)),
                  draw(st.integers(1, 4)))
    attrs = {"strides": spatial(draw(st.integers(1, 4)), draw(st.integers(1, 4))),
             "padding": padding, "data_format": fmt,
             "dilations": spatial(draw(st.integers(1, 3)), draw(st.integers(1, 3)))}
    if padding == "EXPLICIT":
        p = [draw(st.integers(0, 3)) for _ in range(4)]
        attrs["explicit_paddings"] = ([0, 0, *p, 0, 0] if fmt == "NHWC" else [0, 0, 0, 0, *p])
    in_shape = (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)
    filter_shape = (draw(st.integers(1, 4)), draw(st.integers(1, 4)), c, draw(st.integers(1, 3)))
    return in_shape, filter_shape, attrs


@given(calls(), st.booleans())
def test_whole_geometry_agrees_in_both_layouts(call, depthwise):
    in_shape, filter_shape, attrs = call
    try:
        engine = conv2d_geometry(in_shape, filter_shape, depthwise=depthwise, **attrs)
    except InvalidArgumentError:
        return
    ours = reference.geometry(in_shape, filter_shape, depthwise=depthwise, **attrs)
    for name in ("batch", "in_rows", "in_cols", "in_depth", "stride_rows", "stride_cols",
                 "dilation_rows", "dilation_cols", "out_rows", "out_cols", "pad_top",
                 "pad_bottom", "pad_left", "pad_right", "out_depth", "groups"):
        assert getattr(ours, name) == getattr(engine, name), name
    assert ours.input_shape == engine.input_shape
    assert ours.output_shape == engine.output_shape
    assert ours.filter_shape == engine.filter_shape
