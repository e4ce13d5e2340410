"""Element provenance (engine.explain): the listed terms are the defining sum of the element.

The hypothesis tests compare, over random geometries of all six ops (both layouts, every
padding, strides, dilations, groups, multipliers, every dtype), the explanation with (1) the
kernel's value, (2) the exact multiset of factor pairs enumerated by the slow reference's own
loops (tests/reference.py, which shares no code with engine.explain), and (3) a padding count
from the reference's geometry formula.
"""

import re
from collections import Counter

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from blocks.conv import SPECS
from engine import kernels
from engine.base.dtypes import DTYPES, RTOL
from engine.base.errors import InvalidArgumentError
from engine.explain.terms import OPS, check_index, explain_element
from tests import reference
from tests.test_kernels_properties import conv_attrs, conv_cases

FAMILY = {
    False: ("Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput"),
    True: ("DepthwiseConv2D", "DepthwiseBackpropFilter", "DepthwiseBackpropInput"),
}


def _layout(index, fmt):
    """An NHWC-ordered (n, h, w, c) index in ``fmt``'s own order."""
    n, h, w, c = index
    return (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)


def reference_terms(g):
    """Every term of every output element of the three ops, from the reference's loops:
    ``{op kind: {output index: Counter((a index, b index))}}``, indices in own layouts."""
    out = {"forward": {}, "filter": {}, "input": {}}
    fmt = g.data_format
    for ci, co in reference._pairs(g):
        for n, r, c, i, j, row, col in reference._windows(g):
            for q in range(ci.start, ci.stop):
                for o in range(co.start, co.stop):
                    wq, wo = (q, o - co.start) if g.depthwise else (q - ci.start, o)
                    x = _layout((n, row, col, q), fmt)
                    w = (i, j, wq, wo)
                    dy = _layout((n, r, c, o), fmt)
                    y = _layout((n, r, c, o), fmt)
                    out["forward"].setdefault(y, Counter())[(x, w)] += 1
                    out["filter"].setdefault(w, Counter())[(x, dy)] += 1
                    out["input"].setdefault(x, Counter())[(w, dy)] += 1
    return out


def reference_padding_terms(g, kind, index):
    """Padding terms from the reference geometry: forward, taps reading padding (times the
    group's input channels for Conv2D); filter gradient, (n, r, c) reading padding."""
    def real(pos, size):
        return 0 <= pos < size

    if kind == "input":
        return 0
    if kind == "forward":
        _, r, c, _ = index if g.data_format == "NHWC" else (index[0], *index[2:], index[1])
        taps = sum(1 for i in range(g.filter_rows) for j in range(g.filter_cols)
                   if not (real(r * g.stride_rows + i * g.dilation_rows - g.pad_top, g.in_rows)
                           and real(c * g.stride_cols + j * g.dilation_cols - g.pad_left,
                                    g.in_cols)))
        return taps * (1 if g.depthwise else g.filter_in_depth)
    i, j = index[0], index[1]
    return g.batch * sum(
        1 for r in range(g.out_rows) for c in range(g.out_cols)
        if not (real(r * g.stride_rows + i * g.dilation_rows - g.pad_top, g.in_rows)
                and real(c * g.stride_cols + j * g.dilation_cols - g.pad_left, g.in_cols)))


def _run(type_id, g, attrs, x, w, dy):
    """The block's kernel output and its inputs by port."""
    if type_id in ("Conv2D", "DepthwiseConv2D"):
        fn = kernels.conv2d if type_id == "Conv2D" else kernels.depthwise_conv2d_native
        return fn(x, w, **attrs), {"input": x, "filter": w}
    if "Filter" in type_id:
        fn = (kernels.conv2d_backprop_filter if type_id == "Conv2DBackpropFilter"
              else kernels.depthwise_conv2d_native_backprop_filter)
        sizes = np.array(g.filter_shape, np.int32)
        return fn(x, sizes, dy, **attrs), {"input": x, "filter_sizes": sizes, "out_backprop": dy}
    fn = (kernels.conv2d_backprop_input if type_id == "Conv2DBackpropInput"
          else kernels.depthwise_conv2d_native_backprop_input)
    sizes = np.array(g.input_shape, np.int32)
    return fn(sizes, w, dy, **attrs), {"input_sizes": sizes, "filter": w, "out_backprop": dy}


@st.composite
def explained_cases(draw):
    depthwise = draw(st.booleans())
    g, attrs, dtype, seed = draw(conv_cases(depthwise=depthwise))
    type_id = draw(st.sampled_from(FAMILY[depthwise]))
    shape = {"forward": g.output_shape, "filter": g.filter_shape,
             "input": g.input_shape}[OPS[type_id].kind]
    assume(all(s > 0 for s in shape))
    index = tuple(draw(st.integers(0, s - 1)) for s in shape)
    return type_id, g, attrs, dtype, seed, index


@given(explained_cases())
def test_listed_terms_are_the_defining_sum_of_the_element(case):
    type_id, g, attrs, dtype, seed, index = case
    form = OPS[type_id]
    rng = np.random.default_rng(seed)
    rand = lambda shape: rng.standard_normal(shape).astype(DTYPES[dtype])
    x, w, dy = rand(g.input_shape), rand(g.filter_shape), rand(g.output_shape)
    out, inputs = _run(type_id, g, attrs, x, w, dy)
    e = explain_element(type_id, attrs, inputs, index)

    # the terms are exactly the reference's factor pairs of this element, in the port order
    a, b = e.factors
    assert (a.port, b.port) == form.operands
    got = Counter(zip(map(tuple, a.index.tolist()), map(tuple, b.index.tolist()), strict=True))
    assert got == reference_terms(g)[form.kind].get(index, Counter())
    assert e.padding_terms == reference_padding_terms(g, form.kind, index)

    # indices are in range and the values are the arrays' elements there
    for f in e.factors:
        arr = inputs[f.port]
        assert f.index.shape == (e.terms, 4)
        assert np.all(f.index >= 0) and np.all(f.index < np.array(arr.shape))
        np.testing.assert_array_equal(f.values, arr[tuple(f.index.T)])

    # the float64 sum of the products is the block's value within the dtype's tolerance
    bound = float(np.sum(np.abs(e.products)))
    tiny = float(ml_dtypes.finfo(DTYPES[dtype]).smallest_subnormal)
    assert e.output_shape == out.shape and e.dtype == dtype
    assert abs(e.sum - float(out[index])) <= RTOL[dtype] * bound + tiny


@given(explained_cases(), st.data())
def test_nonfinite_values_follow_from_the_listed_terms(case, data):
    """NaN and infinities sprinkled over the inputs: the block's element is NaN, +Inf or -Inf
    exactly when the float64 sum of the listed terms is (padding contributes nothing), and
    otherwise agrees with it as above."""
    type_id, g, attrs, dtype, seed, index = case
    rng = np.random.default_rng(seed)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0])

    def rand(shape):
        a = rng.standard_normal(shape)
        hit = rng.random(shape) < data.draw(st.sampled_from([0.05, 0.3]))
        a[hit] = rng.choice(specials, size=int(hit.sum()))
        return a.astype(DTYPES[dtype])

    x, w, dy = rand(g.input_shape), rand(g.filter_shape), rand(g.output_shape)
    out, inputs = _run(type_id, g, attrs, x, w, dy)
    e = explain_element(type_id, attrs, inputs, index)
    value, total = float(out[index]), e.sum
    if not np.isfinite(total):
        assert np.isnan(value) if np.isnan(total) else value == total
    else:
        bound = float(np.sum(np.abs(e.products)))
        tiny = float(ml_dtypes.finfo(DTYPES[dtype]).smallest_subnormal)
        assert abs(total - value) <= RTOL[dtype] * bound + tiny


def test_ops_table_agrees_with_the_conv_blocks():
    assert set(OPS) == {s.type_id for s in SPECS}
    for spec in SPECS:
        form = OPS[spec.type_id]
        assert form.name == spec.op
        ports = spec.input_names()
        assert set(form.operands) <= set(ports)
        assert sorted(form.operands, key=ports.index) == list(form.operands)


def _terms(e):
    a, b = e.factors
    return [(tuple(ai), tuple(bi), p) for ai, bi, p in
            zip(a.index.tolist(), b.index.tolist(), e.products.tolist(), strict=True)]


def test_backprop_filter_by_hand():
    """input 1..9 (3x3), out_backprop [[1,2],[3,4]], VALID: dw[0,1] = 2*1 + 3*2 + 5*3 + 6*4."""
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1)
    dy = np.array([1, 2, 3, 4], np.float32).reshape(1, 2, 2, 1)
    attrs = conv_attrs("NHWC", (1, 1), (1, 1), "VALID", [])
    e = explain_element("Conv2DBackpropFilter", attrs,
                        {"input": x, "filter_sizes": [2, 2, 1, 1], "out_backprop": dy},
                        (0, 1, 0, 0))
    assert _terms(e) == [((0, 0, 1, 0), (0, 0, 0, 0), 2.0), ((0, 0, 2, 0), (0, 0, 1, 0), 6.0),
                         ((0, 1, 1, 0), (0, 1, 0, 0), 15.0), ((0, 1, 2, 0), (0, 1, 1, 0), 24.0)]
    assert e.sum == 47.0 and e.padding_terms == 0
    assert e.formula == ("dw[0,1,0,0] = sum over n,r,c of input[n, r, c+1, 0] * "
                         "out_backprop[n, r, c, 0]")


def test_the_issue_example_formula():
    x = np.ones((2, 5, 6, 1), np.float64)
    dy = np.ones((2, 4, 4, 4), np.float64)
    e = explain_element("Conv2DBackpropFilter", conv_attrs("NHWC", (1, 1), (1, 1), "VALID", []),
                        {"input": x, "filter_sizes": [2, 3, 1, 4], "out_backprop": dy},
                        (1, 2, 0, 3))
    assert e.formula == ("dw[1,2,0,3] = sum over n,r,c of input[n, r+1, c+2, 0] * "
                         "out_backprop[n, r, c, 3]")
    assert e.terms == 2 * 4 * 4 and e.sum == 32.0


def test_strided_padded_backprop_filter_counts_padding_by_hand():
    """SAME, stride 2, 6 rows, filter 3: one pad row after; tap i=2 reads rows 2, 4, 6 and row
    6 is padding, so dw[2, 2] has 2 x 2 terms and 3 x 3 - 2 x 2 = 5 padding terms."""
    x = np.arange(36, dtype=np.float64).reshape(1, 6, 6, 1)
    dy = np.ones((1, 3, 3, 1))
    e = explain_element("Conv2DBackpropFilter", conv_attrs("NHWC", (2, 2), (1, 1), "SAME", []),
                        {"input": x, "filter_sizes": [3, 3, 1, 1], "out_backprop": dy},
                        (2, 2, 0, 0))
    assert [t[0] for t in _terms(e)] == [(0, 2, 2, 0), (0, 2, 4, 0), (0, 4, 2, 0), (0, 4, 4, 0)]
    assert e.padding_terms == 5
    assert e.formula.endswith("input[n, 2*r+2, 2*c+2, 0] * out_backprop[n, r, c, 0]")


def test_strided_dilated_backprop_input_by_hand():
    """Rows: stride 2, dilation 2, EXPLICIT pad 1 before; dx row 3 is read by output row r and
    tap i with 2*r + 2*i - 1 = 3, i.e. (r, i) in {(2, 0), (1, 1), (0, 2)} (with 3 output rows).
    Columns: 1 column, 1 tap. Two output channels."""
    w = np.arange(1, 7, dtype=np.float64).reshape(3, 1, 1, 2)  # w[i, 0, 0, o] = 2*i + o + 1
    dy = np.arange(1, 7, dtype=np.float64).reshape(1, 3, 1, 2) * 10  # dy[0, r, 0, o]
    attrs = conv_attrs("NHWC", (2, 1), (2, 1), "EXPLICIT", [1, 0, 0, 0])
    e = explain_element("Conv2DBackpropInput", attrs,
                        {"input_sizes": [1, 8, 1, 1], "filter": w, "out_backprop": dy},
                        (0, 3, 0, 0))
    assert [(t[0], t[1]) for t in _terms(e)] == [
        ((0, 0, 0, 0), (0, 2, 0, 0)), ((0, 0, 0, 1), (0, 2, 0, 1)),
        ((1, 0, 0, 0), (0, 1, 0, 0)), ((1, 0, 0, 1), (0, 1, 0, 1)),
        ((2, 0, 0, 0), (0, 0, 0, 0)), ((2, 0, 0, 1), (0, 0, 0, 1)),
    ]
    assert e.sum == 1 * 50 + 2 * 60 + 3 * 30 + 4 * 40 + 5 * 10 + 6 * 20
    assert e.padding_terms == 0
    assert e.formula == ("dx[0,3,0,0] = sum over i,j,o of filter[i, j, 0, o] * "
                         "out_backprop[0, (4-2*i)/2, -j, o]")


def test_grouped_conv2d_reads_its_groups_channels_nchw():
    """4 input channels, filter in_channels 2: groups of 2; output channel 3 of 4 is in group
    1 and reads input channels 2 and 3. NCHW indices are N, C, H, W."""
    x = np.arange(4 * 2 * 2, dtype=np.float32).reshape(1, 4, 2, 2)
    w = np.ones((1, 1, 2, 4), np.float32)
    attrs = conv_attrs("NCHW", (1, 1), (1, 1), "VALID", [])
    e = explain_element("Conv2D", attrs, {"input": x, "filter": w}, (0, 3, 1, 0))
    assert [(t[0], t[1]) for t in _terms(e)] == [((0, 2, 1, 0), (0, 0, 0, 3)),
                                                 ((0, 3, 1, 0), (0, 0, 1, 3))]
    assert e.sum == x[0, 2, 1, 0] + x[0, 3, 1, 0]
    assert e.formula == "output[0,3,1,0] = sum over i,j,q of input[0, q+2, i+1, j] * " \
                        "filter[i, j, q, 3]"
    assert kernels.conv2d(x, w, **attrs)[0, 3, 1, 0] == e.sum


def test_depthwise_forward_same_padding_by_hand():
    """3x3 input, 3x3 filter, SAME: the corner output reads 4 real taps, 5 read padding;
    multiplier 2: output channel 3 is input channel 1, filter multiplier 1."""
    x = np.arange(18, dtype=np.float64).reshape(1, 3, 3, 2)
    w = np.ones((3, 3, 2, 2))
    e = explain_element("DepthwiseConv2D", conv_attrs("NHWC", (1, 1), (1, 1), "SAME", []),
                        {"input": x, "filter": w}, (0, 0, 0, 3))
    assert [(t[0], t[1]) for t in _terms(e)] == [
        ((0, 0, 0, 1), (1, 1, 1, 1)), ((0, 0, 1, 1), (1, 2, 1, 1)),
        ((0, 1, 0, 1), (2, 1, 1, 1)), ((0, 1, 1, 1), (2, 2, 1, 1))]
    assert e.padding_terms == 5
    assert e.formula == ("output[0,0,0,3] = sum over i,j of input[0, i-1, j-1, 1] * "
                         "filter[i, j, 1, 1]")


def test_depthwise_backprop_input_sums_over_the_multiplier():
    w = np.arange(1, 5, dtype=np.float64).reshape(1, 1, 2, 2)  # w[0,0,k,m]
    dy = np.arange(1, 5, dtype=np.float64).reshape(1, 1, 1, 4)  # channels k*2+m
    e = explain_element("DepthwiseBackpropInput", conv_attrs("NHWC", (1, 1), (1, 1), "VALID", []),
                        {"input_sizes": [1, 1, 1, 2], "filter": w, "out_backprop": dy},
                        (0, 0, 0, 1))
    assert [(t[0], t[1]) for t in _terms(e)] == [((0, 0, 1, 0), (0, 0, 0, 2)),
                                                 ((0, 0, 1, 1), (0, 0, 0, 3))]
    assert e.sum == 3 * 3 + 4 * 4
    assert e.formula == ("dx[0,0,0,1] = sum over i,j,m of filter[i, j, 1, m] * "
                         "out_backprop[0, -i, -j, m+2]")


def test_padding_terms_carry_no_nan():
    """A NaN never multiplies padding: the kernel's value and the listed sum agree exactly."""
    x = np.array([[1.0, np.inf], [2.0, 3.0]]).reshape(1, 2, 2, 1)
    w = np.ones((3, 3, 1, 1))
    attrs = conv_attrs("NHWC", (1, 1), (1, 1), "SAME", [])
    e = explain_element("Conv2D", attrs, {"input": x, "filter": w}, (0, 1, 0, 0))
    assert e.sum == np.inf == kernels.conv2d(x, w, **attrs)[0, 1, 0, 0]
    assert e.terms == 4 and e.padding_terms == 5


def test_a_sum_beyond_float64_is_infinite_not_an_error():
    x = np.full((1, 1, 2, 1), 1e308)
    e = explain_element("Conv2D", conv_attrs("NHWC", (1, 1), (1, 1), "VALID", []),
                        {"input": x, "filter": np.full((1, 2, 1, 1), 1.5)}, (0, 0, 0, 0))
    assert e.sum == np.inf and e.products.tolist() == [1.5e308, 1.5e308]


def test_a_64_channel_element_has_thousands_of_terms():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 8, 8, 64)), rng.standard_normal((5, 5, 64, 3))
    attrs = conv_attrs("NHWC", (1, 1), (1, 1), "SAME", [])
    e = explain_element("Conv2D", attrs, {"input": x, "filter": w}, (0, 4, 4, 2))
    assert e.terms == 25 * 64 and e.padding_terms == 0
    assert e.sum == pytest.approx(kernels.conv2d(x, w, **attrs)[0, 4, 4, 2], rel=1e-12)


@pytest.mark.parametrize("index, message", [
    ((0, 0, 0), "has 3 entries, the output has 4 dimensions (shape [1, 2, 2, 1])"),
    ((0, -1, 0, 0), "entry 1 is -1, indices must be >= 0"),
    ((0, 0, 2, 0), "entry 2 is 2, out of range for size 2 (output shape [1, 2, 2, 1])"),
    ((0, 0, 0.5, 0), "must be integers"),
    ((0, True, 0, 0), "must be integers"),
])
def test_bad_index_is_a_clear_error(index, message):
    with pytest.raises(InvalidArgumentError, match=re.escape(message)) as err:
        check_index(index, (1, 2, 2, 1))
    assert err.value.argument == "index"


def test_non_conv_type_and_bad_geometry_are_errors():
    with pytest.raises(InvalidArgumentError, match="Tensor is not a conv block"):
        explain_element("Tensor", {}, {}, (0,))
    with pytest.raises(InvalidArgumentError, match="strides"):
        explain_element("Conv2D", {"strides": [1, 1, 1], "padding": "VALID"},
                        {"input": np.ones((1, 2, 2, 1)), "filter": np.ones((1, 1, 1, 1))},
                        (0, 0, 0, 0))
