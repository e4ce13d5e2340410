"""engine.explain.geometry against the shape rules, the reference loops and engine.explain."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from engine.explain.geometry import MAX_FRAMES, conv_geometry_model
from engine.explain.geometry_render import TOUCHED, overlap_caption, render_frame, render_overlap
from engine.explain.terms import OPS, explain_element
from engine.shapes.conv import conv2d_geometry
from tests import reference
from tests.test_kernels_properties import conv_attrs, conv_cases

FAMILY = {False: ("Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput"),
          True: ("DepthwiseConv2D", "DepthwiseBackpropFilter", "DepthwiseBackpropInput")}


def model_of(type_id, g, attrs):
    """The model of a ``type_id`` block on the reference geometry ``g``."""
    attrs = {"explicit_paddings": [], **attrs}
    kind = OPS[type_id].kind
    if kind == "forward":
        return conv_geometry_model(type_id, attrs, {"input": g.input_shape,
                                                    "filter": g.filter_shape})
    if kind == "filter":
        return conv_geometry_model(type_id, attrs, {"input": g.input_shape,
                                                    "out_backprop": g.output_shape},
                                   {"filter_sizes": g.filter_shape})
    return conv_geometry_model(type_id, attrs, {"filter": g.filter_shape,
                                                "out_backprop": g.output_shape},
                               {"input_sizes": g.input_shape})


def touched_padding_rows(model):
    """(rows before, rows after) of padding that some frame touches."""
    rows = set()
    for k in range(model.frame_count):
        rows |= {int(h) for h, _ in model.frame(k).pad_cells}
    return (len({h for h in rows if h < 0}), len({h for h in rows if h >= model.rows.size}))


@pytest.mark.parametrize("padding, pads, size, k, s, before, after", [
    ("SAME", [0, 0, 0, 0], 6, 3, 2, 0, 1),  # odd SAME total 1: TensorFlow puts it after
    ("SAME", [0, 0, 0, 0], 5, 4, 1, 1, 2),  # total 3: 1 before, 2 after
    ("SAME", [0, 0, 0, 0], 7, 3, 1, 1, 1),
    ("VALID", [0, 0, 0, 0], 7, 3, 2, 0, 0),
    ("EXPLICIT", [2, 1, 0, 3], 7, 3, 1, 2, 1),
])
def test_padding_cells_per_side_are_the_shape_rules(padding, pads, size, k, s, before, after):
    attrs = conv_attrs("NHWC", (s, s), (1, 1), padding, pads)
    attrs.setdefault("explicit_paddings", [])
    shape, fshape = (1, size, size, 2), (k, k, 2, 3)
    g = conv2d_geometry(shape, fshape, **attrs)
    model = conv_geometry_model("Conv2D", attrs, {"input": shape, "filter": fshape})
    assert (g.pad_top, g.pad_bottom) == (before, after)
    assert (model.rows.pad_before, model.rows.pad_after) == (before, after)
    assert (model.cols.pad_before, model.cols.pad_after) == (g.pad_left, g.pad_right)
    assert model.rows.padded == before + size + after
    if padding == "SAME":  # every SAME pad is read by some window: the frames show them all
        assert touched_padding_rows(model) == (before, after)


@settings(max_examples=60, deadline=None)
@given(st.booleans(), st.integers(0, 2), st.data())
def test_frames_are_the_reference_loops(depthwise, which, data):
    """Forward and backprop-input frame (r, c): the input cells the reference loop reads for
    that output position; backprop-filter frame (i, j): the (input, out_backprop) pairs it sums
    over; padding cells are the taps the loop skips."""
    g, attrs, _, _ = data.draw(conv_cases(depthwise=depthwise))
    assume(g.batch > 0)
    type_id = FAMILY[depthwise][which]
    model = model_of(type_id, g, attrs)
    reads, pairs = {}, {}
    for n, r, c, i, j, row, col in reference._windows(g):
        if n == 0:
            reads.setdefault((r, c), set()).add((row, col))
            pairs.setdefault((i, j), set()).add(((row, col), (r, c)))
    if model.kind == "filter":
        assert model.frame_count == g.filter_rows * g.filter_cols
        for k in range(model.frame_count):
            f = model.frame(k)
            tap = tuple(f.taps[0])
            got = {(tuple(a), tuple(b)) for a, b in zip(f.input_cells.tolist(),
                                                        f.paired.tolist(), strict=True)}
            assert got == pairs.get(tap, set())
            assert len(f.input_cells) + len(f.pad_cells) == g.out_rows * g.out_cols
    else:
        assert model.frame_count == g.out_rows * g.out_cols
        for k in range(model.frame_count):
            f = model.frame(k)
            r, c = f.output_cells[0]
            assert k == r * g.out_cols + c
            assert set(map(tuple, f.input_cells.tolist())) == reads.get((r, c), set())
            assert len(f.input_cells) + len(f.pad_cells) == g.filter_rows * g.filter_cols


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_overlap_map_counts_the_touches_by_brute_force(data):
    g, attrs, _, _ = data.draw(conv_cases())
    model = model_of("Conv2D", g, attrs)
    brute = np.zeros((g.in_rows, g.in_cols), np.int64)
    for r in range(g.out_rows):
        for c in range(g.out_cols):
            for i in range(g.filter_rows):
                for j in range(g.filter_cols):
                    h = r * g.stride_rows + i * g.dilation_rows - g.pad_top
                    w = c * g.stride_cols + j * g.dilation_cols - g.pad_left
                    if 0 <= h < g.in_rows and 0 <= w < g.in_cols:
                        brute[h, w] += 1
    np.testing.assert_array_equal(model.overlap(), brute)


def test_kernel_not_divisible_by_stride_gives_a_checkerboard():
    attrs = conv_attrs("NHWC", (2, 2), (1, 1), "VALID", [0] * 4)
    model = conv_geometry_model("Conv2D", {**attrs, "explicit_paddings": []},
                                {"input": (1, 7, 7, 1), "filter": (3, 3, 1, 1)})
    counts = model.overlap()
    assert counts[0].tolist() == [1, 1, 2, 1, 2, 1, 1]
    assert counts[2].tolist() == [2, 2, 4, 2, 4, 2, 2]
    assert overlap_caption(model, counts).startswith(
        "overlap: every input element is touched 1 to 4 times; a kernel not divisible by the "
        "stride gives this checkerboard")
    even = conv_geometry_model("Conv2D", {**attrs, "explicit_paddings": []},
                               {"input": (1, 8, 8, 1), "filter": (2, 2, 1, 1)})
    assert set(even.overlap().ravel().tolist()) == {1}
    assert overlap_caption(even, even.overlap()) == "overlap: every input element is touched 1 to 1 times"


@settings(max_examples=40, deadline=None)
@given(st.booleans(), st.data())
def test_filter_frames_pair_what_explain_lists(depthwise, data):
    """Frame (i, j) of a filter-gradient block pairs exactly the spatial (input, out_backprop)
    elements explain_element lists for dw[i, j, 0, 0] (batch element 0)."""
    g, attrs, _, _ = data.draw(conv_cases(depthwise=depthwise))
    assume(g.batch > 0 and g.filter_out > 0)
    type_id = FAMILY[depthwise][1]
    model = model_of(type_id, g, attrs)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(g.input_shape)
    dy = rng.standard_normal(g.output_shape)
    sizes = np.array(g.filter_shape, np.int32)
    h_ax, w_ax = (1, 2) if g.data_format == "NHWC" else (2, 3)
    for k in range(model.frame_count):
        f = model.frame(k)
        i, j = f.taps[0]
        e = explain_element(type_id, {"explicit_paddings": [], **attrs},
                            {"input": x, "filter_sizes": sizes, "out_backprop": dy},
                            (int(i), int(j), 0, 0))
        a, b = e.factors
        listed = Counter((tuple(ai[[h_ax, w_ax]]), tuple(bi[[h_ax, w_ax]]))
                         for ai, bi in zip(a.index, b.index, strict=True) if ai[0] == 0)
        got = Counter((tuple(p), tuple(q)) for p, q in zip(f.input_cells.tolist(),
                                                           f.paired.tolist(), strict=True))
        assert got == listed


def test_frames_are_capped_and_spread_evenly():
    attrs = {**conv_attrs("NHWC", (1, 1), (1, 1), "SAME", [0] * 4), "explicit_paddings": []}
    model = conv_geometry_model("Conv2D", attrs, {"input": (1, 224, 224, 3),
                                                  "filter": (3, 3, 3, 8)})
    assert model.frame_count == 224 * 224
    idx = model.frame_indices()
    assert len(idx) == MAX_FRAMES and idx[0] == 0 and idx[-1] == 224 * 224 - 1
    steps = np.diff(idx)
    assert steps.max() - steps.min() <= 1
    with pytest.raises(IndexError, match="out of range"):
        model.frame(224 * 224)


def test_a_224_input_renders_with_the_touched_cells_drawn():
    attrs = {**conv_attrs("NHWC", (2, 2), (1, 1), "SAME", [0] * 4), "explicit_paddings": []}
    model = conv_geometry_model("Conv2D", attrs, {"input": (1, 224, 224, 3),
                                                  "filter": (3, 3, 3, 8)})
    k = 50 * model.cols.out + 60
    image = np.asarray(render_frame(model, k, "big").convert("RGB"))
    blue = np.all(image[:-40] == TOUCHED, axis=-1)  # above the legend's swatch
    assert blue.any()
    rows, cols = np.nonzero(blue)
    side = 1 + rows.max() - rows.min()
    assert side == 1 + cols.max() - cols.min() and side % 3 in (0, 1)  # a 3x3 block of cells
    assert render_overlap(model, "big").width >= 720


@pytest.mark.parametrize("size", [600, 1000])
def test_long_grids_are_drawn_as_a_window_around_the_frame(size):
    """Past MAX_CELLS cells a dimension is a window around the frame: the picture's size does
    not grow, and the window follows the frame to the far corner."""
    attrs = {**conv_attrs("NHWC", (1, 1), (1, 1), "VALID", [0] * 4), "explicit_paddings": []}
    model = conv_geometry_model("Conv2D", attrs, {"input": (1, size, size, 1),
                                                  "filter": (3, 3, 1, 1)})
    last = render_frame(model, model.frame_count - 1, "long")
    assert last.size == render_frame(model, 0, "long").size
    assert last.height < 1000
    blue = np.all(np.asarray(last.convert("RGB"))[:-40] == TOUCHED, axis=-1)
    assert blue.any()  # the last window is drawn, not cut off
