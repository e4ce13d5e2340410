"""The geometry view of the Conv3D family: depth slices of the 2-D picture. Which input planes
each output plane reads (per depth tap, with depth stride, dilation and padding) and the overlap
count of every input element are checked against a brute-force count over the definition."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from engine.explain.geometry import conv_geometry_model
from engine.explain.geometry_render import gif_steps, render_frame, render_overlap

ATTRS = {"strides": [1, 2, 1, 2, 1], "dilations": [1, 2, 1, 1, 1], "padding": "SAME",
         "data_format": "NDHWC"}
X, W, DY = [1, 7, 4, 5, 2], [3, 2, 2, 1, 4], [1, 4, 4, 3, 4]
MODELS = {
    "Conv3D": ({"input": X, "filter": W}, None),
    "Conv3DBackpropFilterV2": ({"input": X, "out_backprop": DY}, {"filter_sizes": W}),
    "Conv3DBackpropInputV2": ({"filter": W, "out_backprop": DY}, {"input_sizes": X}),
}


def _model(type_id, attrs=ATTRS):
    shapes, sizes = MODELS[type_id]
    return conv_geometry_model(type_id, attrs, shapes, sizes)


def _pad_front(size, k, s, d):
    out = -(-size // s)
    return max((out - 1) * s + (k - 1) * d + 1 - size, 0) // 2


@pytest.mark.parametrize("type_id", MODELS)
def test_each_slice_lists_the_planes_the_definition_pairs(type_id):
    model = _model(type_id)
    front = _pad_front(7, 3, 2, 2)
    assert model.depth is not None and (model.depth.size, model.depth.out) == (7, 4)
    assert model.depth.pad_before == front == 2
    assert model.slice_count == (3 if type_id == "Conv3DBackpropFilterV2" else 4)
    for s in range(model.slice_count):
        got = model.depth_slice(s)
        pairs = [(a, p * 2 + a * 2 - front, p) for p in range(4) for a in range(3)
                 if (a if type_id == "Conv3DBackpropFilterV2" else p) == s]
        assert sorted(map(tuple, got.pairs.tolist())) == sorted(pairs)
        assert got.real.tolist() == [0 <= h < 7 for _, h, _ in map(tuple, got.pairs.tolist())]
    with pytest.raises(IndexError):
        model.depth_slice(model.slice_count)


def test_the_slice_labels_say_which_planes_and_taps():
    fwd = _model("Conv3D")
    assert fwd.depth_slice(0).label == (
        "output plane 0 reads input plane(s) 0 (tap a=1), 2 (tap a=2) (stride 2, dilation 2, "
        "padding front 2); tap(s) a=0 in padding (plane(s) -2, add nothing)")
    assert _model("Conv3DBackpropFilterV2").depth_slice(2).label == (
        "depth tap a=2 pairs input planes 2, 4, 6 with out_backprop planes 0, 1, 2 (stride 2, "
        "dilation 2, padding front 2); out_backprop plane(s) 3 with padding (plane(s) 8)")
    assert _model("Conv3DBackpropInputV2").depth_slice(1).label.startswith(
        "out_backprop plane 1 scatters into dx plane(s) 0 (tap a=0), 2 (tap a=1), 4 (tap a=2)")
    assert fwd.summary() == ("stride 2x1x2, dilation 2x1x1, filter 3x2x2 (spans 5x2x2), SAME "
                             "padding front 2 back 2 top 0 bottom 1 left 0 right 1")


def test_the_overlap_of_each_plane_is_the_definitions_count():
    model = _model("Conv3D")
    count = np.zeros((7, 4, 5), np.int64)
    pads = [_pad_front(7, 3, 2, 2), 0, 0]  # rows: 4 of 2 taps, stride 1; cols 5, stride 2
    for p, r, c, a, i, j in itertools.product(range(4), range(4), range(3), range(3), range(2),
                                              range(2)):
        h = (p * 2 + a * 2 - pads[0], r + i - pads[1], c * 2 + j - pads[2])
        if all(0 <= v < n for v, n in zip(h, (7, 4, 5))):
            count[h] += 1
    for plane in range(7):
        np.testing.assert_array_equal(model.plane_overlap(plane), count[plane])
    # the odd planes are never read with stride 2 and dilation 2: a zero map
    assert not model.plane_overlap(1).any()


def test_pictures_of_every_slice_and_plane_render():
    for type_id in MODELS:
        model = _model(type_id)
        sizes = {render_frame(model, 0, type_id, s).size for s in range(model.slice_count)}
        assert len(sizes) == 1  # a slice changes the marks, not the layout
        assert render_overlap(model, type_id, 6).size[0] >= 720
        with pytest.raises(IndexError):
            render_overlap(model, type_id, 7)
        steps = gif_steps(model)
        assert len(steps) == model.frame_count * model.slice_count
        assert steps[0] == (0, 0) and steps[-1] == (model.slice_count - 1, model.frame_count - 1)
    big = gif_steps(_model("Conv3D"), max_frames=10)
    assert len(big) == 10 and big[0] == (0, 0) and big[-1] == (3, 11)


def test_ncdhw_gives_the_same_planes():
    nc = dict(ATTRS, data_format="NCDHW", strides=[1, 1, 2, 1, 2], dilations=[1, 1, 2, 1, 1])
    shapes = {"input": [1, 2, 7, 4, 5], "filter": W}
    model = conv_geometry_model("Conv3D", nc, shapes)
    assert model.depth == _model("Conv3D").depth and model.rows == _model("Conv3D").rows
    assert math.prod((model.depth.out, model.rows.out, model.cols.out)) == 4 * 4 * 3
