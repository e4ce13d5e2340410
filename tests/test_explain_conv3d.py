"""Explain for the Conv3D family (issue 33 item 3): the terms of every element of tiny cases
(interior, padded borders, depth stride 2 and dilation 2, a grouped filter, NCDHW) are exactly
the factor pairs of the definition, enumerated here by brute force with loops over every
output position, tap and channel (not with the closed forms of engine.explain), their padding
count is the definition's, and their sum is the kernel's element; the reverse agrees."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from engine import kernels
from engine.explain.reverse import feeds
from engine.explain.terms import OPS, explain_element

TYPES = ("Conv3D", "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2")

#: name: (input NDHWC shape, filter shape, strides (d, h, w), dilations (d, h, w), padding,
#: data_format)
CASES = {
    "interior": ((1, 4, 4, 4, 2), (2, 2, 2, 2, 3), (1, 1, 1), (1, 1, 1), "VALID", "NDHWC"),
    "padded": ((1, 3, 4, 3, 1), (3, 3, 3, 1, 2), (1, 1, 1), (1, 1, 1), "SAME", "NDHWC"),
    "depth_stride_dilation": ((2, 7, 3, 3, 1), (3, 2, 1, 1, 2), (2, 1, 1), (2, 1, 1), "SAME",
                              "NDHWC"),
    "grouped": ((1, 3, 3, 3, 4), (2, 1, 2, 2, 4), (1, 1, 2), (1, 1, 1), "SAME", "NDHWC"),
    "ncdhw": ((1, 5, 3, 4, 4), (2, 2, 2, 2, 2), (2, 1, 1), (2, 1, 1), "SAME", "NCDHW"),
}


def _window(size: int, k: int, s: int, d: int, padding: str) -> tuple[int, int]:
    """(output size, padding before) of one dimension, TensorFlow's rule."""
    span = (k - 1) * d + 1
    if padding == "VALID":
        return (size - span) // s + 1, 0
    out = -(-size // s)
    return out, max((out - 1) * s + span - size, 0) // 2


def _act(n: int, pos, ch: int, fmt: str) -> tuple[int, ...]:
    return (n, *pos, ch) if fmt == "NDHWC" else (n, ch, *pos)


def definition(case):
    """By loops over the definition: for each kind, result index -> Counter of (factor a
    index, factor b index), and result index -> padding terms."""
    xshape, fshape, strides, dils, padding, fmt = case
    batch, *sizes, depth = xshape
    *ks, q_in, out_ch = fshape
    dims = [_window(z, k, s, d, padding) for z, k, s, d in zip(sizes, ks, strides, dils)]
    outs = [o for o, _ in dims]
    per_group = out_ch // (depth // q_in)
    terms = {kind: {} for kind in ("forward", "filter", "input")}
    pads = {"forward": Counter(), "filter": Counter()}
    for n, *rest in itertools.product(range(batch), *map(range, outs), *map(range, ks),
                                      range(q_in), range(out_ch)):
        pos, tap, (q, o) = rest[:3], rest[3:6], rest[6:]
        x_pos = [p * s + t * d - before for p, t, s, d, (_, before) in
                 zip(pos, tap, strides, dils, dims)]
        y_idx = _act(n, pos, o, fmt)
        w_idx = (*tap, q, o)
        if not all(0 <= x < z for x, z in zip(x_pos, sizes)):
            pads["forward"][y_idx] += 1
            pads["filter"][w_idx] += 1
            continue
        x_idx = _act(n, x_pos, (o // per_group) * q_in + q, fmt)
        for kind, key, pair in (("forward", y_idx, (x_idx, w_idx)),
                                ("filter", w_idx, (x_idx, y_idx)),
                                ("input", x_idx, (w_idx, y_idx))):
            terms[kind].setdefault(key, Counter())[pair] += 1
    return terms, pads, outs


def _inputs(type_id: str, case, seed: int = 0):
    """float64 operands of the case and the block's inputs by port; the kernel's result."""
    xshape, fshape, strides, dils, padding, fmt = case
    rng = np.random.default_rng(seed)
    _, outs = definition(case)[1:]
    batch, *_sizes, _depth = xshape
    to_fmt = (lambda s: s) if fmt == "NDHWC" else (lambda s: (s[0], s[-1], *s[1:-1]))
    x = rng.standard_normal(to_fmt(xshape))
    w = rng.standard_normal(fshape)
    dy = rng.standard_normal(to_fmt((batch, *outs, fshape[-1])))
    attrs = {"strides": [1, *strides, 1] if fmt == "NDHWC" else [1, 1, *strides],
             "dilations": [1, *dils, 1] if fmt == "NDHWC" else [1, 1, *dils],
             "padding": padding, "data_format": fmt}
    if type_id == "Conv3D":
        return attrs, {"input": x, "filter": w}, kernels.conv3d(x, w, **attrs)
    if type_id == "Conv3DBackpropFilterV2":
        return (attrs, {"input": x, "filter_sizes": np.array(fshape), "out_backprop": dy},
                kernels.conv3d_backprop_filter(x, fshape, dy, **attrs))
    return (attrs, {"input_sizes": np.array(x.shape), "filter": w, "out_backprop": dy},
            kernels.conv3d_backprop_input(x.shape, w, dy, **attrs))


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("type_id", TYPES)
def test_every_element_is_the_definitions_sum(type_id, name):
    case = CASES[name]
    form = OPS[type_id]
    terms, pads, _ = definition(case)
    attrs, inputs, result = _inputs(type_id, case)
    for index in itertools.product(*map(range, result.shape)):
        e = explain_element(type_id, attrs, inputs, index)
        a, b = e.factors
        assert (a.port, b.port) == form.operands
        assert a.index.shape == b.index.shape == (e.terms, 5)
        got = Counter(zip(map(tuple, a.index.tolist()), map(tuple, b.index.tolist())))
        assert got == terms[form.kind].get(index, Counter()), (index, e.formula)
        assert e.padding_terms == pads.get(form.kind, Counter())[index]
        for f in e.factors:
            np.testing.assert_array_equal(f.values, inputs[f.port][tuple(f.index.T)])
        bound = float(np.abs(e.products).sum())
        assert abs(e.sum - float(result[index])) <= 1e-12 * bound + 1e-300, index
        assert e.output_shape == result.shape


@pytest.mark.parametrize("name", ["padded", "grouped", "ncdhw"])
@pytest.mark.parametrize("type_id", TYPES)
def test_the_reverse_is_the_inverse_relation(type_id, name):
    """feeds(port, element) is every result index whose terms have that element as their
    ``port`` factor."""
    case = CASES[name]
    form = OPS[type_id]
    attrs, inputs, result = _inputs(type_id, case)
    shapes = {p: (a.tolist() if p.endswith("_sizes") else a.shape) for p, a in inputs.items()}
    fed: dict[tuple[str, tuple], set] = {}
    for index in itertools.product(*map(range, result.shape)):
        e = explain_element(type_id, attrs, inputs, index)
        for f in e.factors:
            for row in map(tuple, f.index.tolist()):
                fed.setdefault((f.port, row), set()).add(index)
    for port in form.operands:
        for element in itertools.product(*map(range, inputs[port].shape)):
            got = feeds(type_id, attrs, shapes, port, element)
            assert got.shape[1:] == (5,)
            assert set(map(tuple, got.tolist())) == fed.get((port, element), set())


def test_formulas_name_the_depth_tap_and_the_planes():
    case = CASES["depth_stride_dilation"]
    texts = {}
    for type_id in TYPES:
        attrs, inputs, _ = _inputs(type_id, case)
        index = {"Conv3D": (1, 0, 1, 2, 1), "Conv3DBackpropFilterV2": (2, 1, 0, 0, 1),
                 "Conv3DBackpropInputV2": (0, 6, 2, 0, 0)}[type_id]
        e = explain_element(type_id, attrs, inputs, index)
        texts[type_id] = (e.formula, e.domain, e.terms, e.padding_terms)
    # depth: 7 planes, 3 taps 2 apart, stride 2, SAME: 4 output planes, 2 planes of padding
    # before. Output plane 0 reads planes 2a-2: tap 0 is padding (x 2 row taps)
    assert texts["Conv3D"] == (
        ("output[1,0,1,2,1] = sum over a,i,j,q of input[1, 2*a-2, i+1, j+2, q] * "
         "filter[a, i, j, q, 1]"), "a < 3, i < 2, j < 1, q < 1", 4, 2)
    # tap a=2 reads planes 2p+2: 2, 4, 6 and 8 (padding); tap i=1 reads rows r+1: row 3 is
    # padding: 2 batches x 3 planes x 2 rows x 3 cols, and 2 x (36 - 18) padding terms
    assert texts["Conv3DBackpropFilterV2"] == (
        ("dw[2,1,0,0,1] = sum over n,p,r,c of input[n, 2*p+2, r+1, c, 0] * "
         "out_backprop[n, p, r, c, 1]"), "n < 2, p < 4, r < 3, c < 3", 36, 36)
    # dx plane 6 gets output planes (8-2a)/2 = 4 (none), 3, 2: 2 depth taps x 2 row taps x 2
    # output channels of the group
    assert texts["Conv3DBackpropInputV2"] == (
        ("dx[0,6,2,0,0] = sum over a,i,j,o of filter[a, i, j, 0, o] * "
         "out_backprop[0, (8-2*a)/2, 2-i, -j, o]"),
        ("a < 3, i < 2, j < 1, o < 2, where (8-2*a)/2 is a whole number in [0, 4), 2-i one in "
         "[0, 3) and -j one in [0, 3)"), 8, 0)


def test_a_term_count_over_the_limit_is_refused_before_listing():
    from engine.explain.terms import TooManyTerms, term_bytes

    attrs, inputs, _ = _inputs("Conv3D", CASES["interior"])
    with pytest.raises(TooManyTerms) as err:
        explain_element("Conv3D", attrs, inputs, (0, 1, 1, 1, 0), max_terms=3)
    assert err.value.terms == math.prod((2, 2, 2, 2))
    assert term_bytes(2) == 128 and term_bytes(3) > term_bytes(2)


def test_verify_names_the_plane_of_the_terms_a_value_misses():
    """engine.verify.diagnose reads a 3-D element's terms: the missing ones are a plane's."""
    from engine.verify.diagnose import analyse_terms

    attrs, inputs, _ = _inputs("Conv3D", CASES["interior"])
    e = explain_element("Conv3D", attrs, inputs, (0, 1, 1, 1, 1))
    plane_1 = e.factors[0].index[:, 1] == 1
    assert analyse_terms(e, float(e.products[~plane_1].sum()), 1e-9, "NDHWC") == (
        "equals the sum of 8 of its 16 terms; missing the 8 that read input plane 1 and filter "
        "plane 0")
