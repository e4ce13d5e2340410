"""Extreme geometry, zero sizes and hostile arguments: the kernels stay exact, their cost
follows the real work (measured as peak memory with tracemalloc, never as time), and every bad
call is an InvalidArgumentError naming its argument."""

import tracemalloc
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from engine import kernels
from engine.base.errors import InvalidArgumentError
from engine.kernels import accel, sparse
from engine.shapes.conv import conv2d_geometry
from tests import reference
from tests.test_kernels_nonfinite import _check_family_nonfinite
from tests.test_kernels_properties import (
    CONV,
    DEPTHWISE,
    _check_family,
    conv_attrs,
    conv_cases,
    valid_geometry,
)

MiB = 2**20


@pytest.fixture(scope="module", autouse=True)
def compiled_kernels_loaded():
    """Import numba and compile (or load) the compiled kernels before any peak is measured:
    numba's import and JIT allocate tens of MB of Python objects once per process, which are no
    kernel's workspace."""
    if accel.compiled() is not None:
        accel.warm_up()


@contextmanager
def forced_sparse():
    """Every call takes the tap-span path of engine.kernels.sparse."""
    saved = sparse.select
    sparse.select = sparse.spans
    try:
        yield
    finally:
        sparse.select = saved


def peak_bytes(call) -> tuple[object, int]:
    """``call()``'s result and the peak memory it allocated (NumPy buffers included)."""
    tracemalloc.start()
    try:
        out = call()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- the tap-span path is exact for every geometry --------------------------------------------

@given(conv_cases())
def test_conv2d_family_on_the_tap_span_path_matches_reference(case):
    with forced_sparse():
        _check_family(*CONV, case)


@given(conv_cases(depthwise=True))
def test_depthwise_family_on_the_tap_span_path_matches_reference(case):
    with forced_sparse():
        _check_family(*DEPTHWISE, case)


@given(conv_cases(), st.integers(1, 3))
def test_tap_span_path_keeps_the_nan_inf_contract(case, specials):
    with forced_sparse():
        _check_family_nonfinite(*CONV, case, specials)
        # the depthwise family on the same geometry needs its own case: reuse the conv one's
        # layout only when it is depthwise-shaped
    g = case[0]
    if g.groups == 1 and g.filter_in_depth == g.in_depth:
        dcase = conv_cases_depthwise_like(case)
        if dcase is not None:
            with forced_sparse():
                _check_family_nonfinite(*DEPTHWISE, dcase, specials)


def conv_cases_depthwise_like(case):
    """The depthwise case with the same input, strides, dilations and padding, or None."""
    g, attrs, dtype, seed = case
    try:
        dg = conv2d_geometry(g.input_shape, (g.filter_rows, g.filter_cols, g.in_depth, 1),
                             depthwise=True, **attrs)
    except InvalidArgumentError:
        return None
    return dg, attrs, dtype, seed


@st.composite
def extreme_cases(draw, depthwise=False):
    """Small tensors with huge strides, dilations and paddings (within int32), whose output
    stays small enough for the loop reference."""
    big = st.sampled_from([1, 2, 3, 7, 500, 20000, 2**30, 2**31 - 1])
    fmt = draw(st.sampled_from(["NHWC", "NCHW"]))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    c = draw(st.integers(1, 2))
    fout = draw(st.integers(1, 2))
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
    pads = [draw(st.sampled_from([0, 1, 5, 1000, 2**31 - 1])) for _ in range(4)]
    attrs = conv_attrs(fmt, (draw(big), draw(big)), (draw(big), draw(big)), padding, pads)
    in_shape = (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)
    g = valid_geometry(in_shape, (kh, kw, c, fout), depthwise, attrs)
    assume(g.out_rows * g.out_cols <= 64 and max(g.out_rows, g.out_cols) <= 64)
    dtype = draw(st.sampled_from(["float32", "float64"]))
    return g, attrs, dtype, draw(st.integers(0, 2**32 - 1))


@given(extreme_cases())
def test_conv2d_family_with_huge_strides_dilations_and_paddings(case):
    _, bytes_ = peak_bytes(lambda: _check_family(*CONV, case))
    assert bytes_ < 4 * MiB


@given(extreme_cases(depthwise=True))
def test_depthwise_family_with_huge_strides_dilations_and_paddings(case):
    _, bytes_ = peak_bytes(lambda: _check_family(*DEPTHWISE, case))
    assert bytes_ < 4 * MiB


# --- the cases ------------------------------------------------------------------------

def test_a_stride_of_20000_on_a_1x1_input_costs_nothing():
    """Was a Python loop over stride^2 after a 1.6 GB allocation."""
    x, dy = np.full((1, 1, 1, 1), 3.0, np.float32), np.full((1, 1, 1, 1), 2.0, np.float32)
    s = [1, 20000, 20000, 1]
    dw, peak = peak_bytes(lambda: kernels.conv2d_backprop_filter(x, [1, 1, 1, 1], dy, s, "VALID"))
    assert dw.tolist() == [[[[6.0]]]] and peak < MiB
    dx, peak = peak_bytes(lambda: kernels.conv2d_backprop_input([1, 1, 1, 1], x, dy, s, "SAME"))
    assert dx.tolist() == [[[[6.0]]]] and peak < MiB


def test_explicit_padding_1000_with_stride_500_on_a_2x2_input():
    """Was a 6 GiB allocation: output rows 0, 500, ... read padded rows 0, 500, 1000, ...; only
    row 1000 = input row 0 is real."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 2, 2, 2)), rng.standard_normal((2, 2, 2, 3))
    attrs = {"strides": [1, 500, 500, 1], "padding": "EXPLICIT",
             "explicit_paddings": [0, 0, 1000, 1000, 1000, 1000, 0, 0]}
    y, peak = peak_bytes(lambda: kernels.conv2d(x, w, **attrs))
    g = conv2d_geometry(x.shape, w.shape, **attrs)
    assert y.shape == (1, 5, 5, 3) and peak < MiB
    np.testing.assert_allclose(y, reference.conv2d(x, w, g), rtol=1e-12, atol=1e-12)
    assert np.count_nonzero(y.any(axis=3)) == 1  # only output (2, 2) meets the input


def test_a_3000x3000_filter_on_a_1x1_input_touches_one_tap():
    """Was 57 s and 2.4 GiB (a Python object per tap): SAME pads 1499 before, so only tap
    (1499, 1499) reads the one input element; memory is the 36 MB result and little more."""
    x, dy = np.full((1, 1, 1, 1), 3.0, np.float32), np.full((1, 1, 1, 1), 2.0, np.float32)
    dw, peak = peak_bytes(lambda: kernels.conv2d_backprop_filter(
        x, [3000, 3000, 1, 1], dy, [1, 1, 1, 1], "SAME"))
    assert dw.shape == (3000, 3000, 1, 1) and dw[1499, 1499, 0, 0] == 6.0
    assert np.count_nonzero(dw) == 1 and peak < dw.nbytes + 4 * MiB


def test_dilation_2_to_the_30_with_same_padding_is_the_centre_tap():
    """A valid TensorFlow call (it returns this): 3x3 filter dilated 2^30 on a 4x4 input; only
    the centre tap meets data, so y = x @ w[1, 1]."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 4, 4, 3)), rng.standard_normal((3, 3, 3, 2))
    d = [1, 2**30, 2**30, 1]
    y, peak = peak_bytes(lambda: kernels.conv2d(x, w, [1, 1, 1, 1], "SAME", dilations=d))
    np.testing.assert_allclose(y, x @ w[1, 1], rtol=1e-12)
    assert peak < MiB
    dx = kernels.conv2d_backprop_input(x.shape, w, y, [1, 1, 1, 1], "SAME", dilations=d)
    np.testing.assert_allclose(dx, y @ w[1, 1].T, rtol=1e-12)
    dw = kernels.depthwise_conv2d_native_backprop_filter(
        x, [3, 3, 3, 1], x, [1, 1, 1, 1], "SAME", dilations=d)
    assert np.count_nonzero(dw[[0, 0, 2, 2], [0, 2, 0, 2]]) == 0
    np.testing.assert_allclose(dw[1, 1, :, 0], (x * x).sum(axis=(0, 1, 2)), rtol=1e-12)


# --- zero sizes (TensorFlow's testConv2DEmptyBackpropFilter and friends) ----------------------

def test_zero_out_channels_in_filter_sizes_gives_an_empty_filter_gradient():
    dw = kernels.conv2d_backprop_filter(np.ones((1, 2, 3, 1), np.float32), [2, 2, 1, 0],
                                        np.ones((1, 1, 2, 0), np.float32), [1, 1, 1, 1], "VALID")
    assert dw.shape == (2, 2, 1, 0) and dw.dtype == np.float32


def test_zero_depth_multiplier_gives_an_empty_depthwise_filter_gradient():
    dw = kernels.depthwise_conv2d_native_backprop_filter(
        np.ones((1, 3, 3, 2)), [2, 2, 2, 0], np.ones((1, 3, 3, 0)), [1, 1, 1, 1], "SAME")
    assert dw.shape == (2, 2, 2, 0)


@pytest.mark.parametrize("op, sizes, filt, dy", [
    (kernels.conv2d_backprop_input, [1, 2, 3, 1], (2, 2, 1, 0), (1, 1, 2, 0)),
    (kernels.depthwise_conv2d_native_backprop_input, [1, 3, 3, 2], (2, 2, 2, 0), (1, 2, 2, 0)),
])
def test_zero_out_channels_give_a_zero_input_gradient(op, sizes, filt, dy):
    dx = op(sizes, np.ones(filt), np.ones(dy), [1, 1, 1, 1], "VALID")
    assert dx.shape == tuple(sizes) and not dx.any()


@pytest.mark.parametrize("sizes", [[0, 2, 1, 1], [2, 0, 1, 1], [2, 2, 0, 1]])
def test_other_zero_filter_dimensions_stay_errors(sizes):
    with pytest.raises(InvalidArgumentError) as err:
        kernels.conv2d_backprop_filter(np.ones((1, 2, 3, 1)), sizes, np.ones((1, 1, 2, 1)),
                                       [1, 1, 1, 1], "VALID")
    assert err.value.argument == "filter_sizes"


# --- TensorFlow's int32 attribute range -------------------------------------------------------

@pytest.mark.parametrize("name, value", [
    ("strides", [1, 2**63 - 1, 1, 1]),
    ("strides", [1, 1, 2**31, 1]),
    ("strides", [1, 1, 2**64, 1]),
    ("dilations", [1, 2**31, 1, 1]),
    ("explicit_paddings", [0, 0, 2**31, 0, 0, 0, 0, 0]),
    ("filter_sizes", [2**31, 1, 1, 1]),
])
def test_values_beyond_int32_are_errors_naming_the_argument(name, value):
    args = {"strides": [1, 1, 1, 1], "padding": "SAME", "filter_sizes": [1, 1, 1, 1]}
    if name == "explicit_paddings":
        args["padding"] = "EXPLICIT"
    args[name] = value
    x = np.ones((1, 2, 2, 1))
    with pytest.raises(InvalidArgumentError) as err:
        kernels.conv2d_backprop_filter(x, out_backprop=x, **args)
    assert err.value.argument == name and "int32" in str(err.value)


# --- every bad Python argument is an InvalidArgumentError -------------------------------------

JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=4),
    st.binary(max_size=4), st.just(np.int64(2)), st.just(np.float32(1.5)), st.just(np.bool_(True)),
    st.just(np.array("SAME")), st.just(np.array(["SAME", "VALID"])), st.just(np.ones(4)),
    st.just(np.ones((2, 2), np.int32)), st.just(np.array([1, 1, 1, 1], np.uint64)),
    st.just(np.array([True, True, True, True])), st.just([[1], [1, 2]]),
    st.just([1, True, 1, 1]), st.just([1.0, 1, 1, 1]), st.just([1, "1", 1, 1]),
    st.just({"a": 1}), st.just(np.ones((1, 2, 2, 1), np.int32)),
    st.just(np.ones((1, 2, 2, 1), np.complex64)), st.just(np.ones((2, 2))),
    st.just(object()), st.lists(st.integers(-3, 3), max_size=9),
)

BASE = {
    kernels.conv2d: {"input": np.ones((1, 3, 3, 2), np.float32),
                         "filter": np.ones((2, 2, 2, 2), np.float32)},
    kernels.conv2d_backprop_filter: {"input": np.ones((1, 3, 3, 2), np.float32),
                                         "filter_sizes": [2, 2, 2, 2],
                                         "out_backprop": np.ones((1, 3, 3, 2), np.float32)},
    kernels.conv2d_backprop_input: {"input_sizes": [1, 3, 3, 2],
                                        "filter": np.ones((2, 2, 2, 2), np.float32),
                                        "out_backprop": np.ones((1, 3, 3, 2), np.float32)},
    kernels.depthwise_conv2d_native: {"input": np.ones((1, 3, 3, 2), np.float32),
                                          "filter": np.ones((2, 2, 2, 1), np.float32)},
    kernels.depthwise_conv2d_native_backprop_filter: {
        "input": np.ones((1, 3, 3, 2), np.float32), "filter_sizes": [2, 2, 2, 1],
        "out_backprop": np.ones((1, 3, 3, 2), np.float32)},
    kernels.depthwise_conv2d_native_backprop_input: {
        "input_sizes": [1, 3, 3, 2], "filter": np.ones((2, 2, 2, 1), np.float32),
        "out_backprop": np.ones((1, 3, 3, 2), np.float32)},
}
ATTRS = {"strides": [1, 1, 1, 1], "padding": "SAME", "explicit_paddings": [], "data_format": "NHWC",
             "dilations": [1, 1, 1, 1]}


@given(st.sampled_from(sorted(BASE, key=lambda f: f.__name__)), st.data())
def test_any_bad_argument_is_an_invalid_argument_error(op, data):
    args = {**BASE[op], **ATTRS}
    name = data.draw(st.sampled_from(sorted(args)))
    args[name] = data.draw(JUNK)
    try:
        out = op(**args)
    except InvalidArgumentError as err:
        assert err.argument is None or err.argument in args
        return
    assert isinstance(out, np.ndarray)


@pytest.mark.parametrize("sizes, words", [
    ([1, 2**31 - 1, 2**31 - 1, 1], "larger than this machine can address"),
    ([1, 2**20, 2**20, 1], "not enough memory"),  # 4 TiB of float32
])
def test_a_result_too_large_for_the_machine_is_an_invalid_argument_error(sizes, words):
    one = np.ones((1, 1, 1, 1), np.float32)
    with pytest.raises(InvalidArgumentError, match=words):
        kernels.conv2d_backprop_input(sizes, one, one, [1, 2**31 - 1, 2**31 - 1, 1], "VALID")


@given(st.integers(1, 9), st.integers(1, 6), st.integers(1, 4), st.integers(1, 5),
       st.integers(0, 12), st.integers(1, 9))
def test_the_quick_every_tap_test_never_claims_a_tap_that_meets_only_padding(
        size, taps, dilation, stride, pad, out):
    spans = sparse.Spans.of(size, taps, dilation, stride, pad, out)
    if sparse._every_tap_meets_data(size, taps, dilation, stride, pad, out):
        assert len(spans) == taps
