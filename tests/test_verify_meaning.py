"""Issue 30 item 10: tests that pin what verify's words mean. Every case a catalogue class draws
has the class's property; the rounding allowance is exactly half a unit in the last place
(passes at it, fails one step over); the shrinker reaches exactly the minimum of a target that
fails only above a known size, with strides and dilations shrunk to 1 wherever the failure
survives it."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import api
from engine.base.dtypes import RTOL
from engine.verify import cases as case_gen
from engine.verify.conventions import Geometry, shapes, shapes_nd
from engine.verify.defaults import OPS
from engine.verify.shrink import shrink
from engine.verify.support import parse_support, remainders
from engine.verify.values import Case, call
from engine.verify.verdicts import half_ulp, judge
from engine.verify.worker import prepared

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _odd_totals(g: Geometry) -> tuple[bool, ...]:
    return tuple((b + a) % 2 == 1 for b, a in shapes_nd(g).pads)


def _odd_same(g: Geometry) -> bool:
    return any(_odd_totals(g))


def _distinct(v: tuple[int, ...]) -> bool:
    return len(set(v)) > 1


#: class -> the property every case it draws has (written from the class's name, not its draw).
PROPERTY = {
    "output_remainder": lambda g: max(g.strides) > 1 and any(remainders(g, shapes(g))),
    "one_by_one_stride": lambda g: set(g.kernel) == {1} and min(g.strides) >= 2,
    "filter_wider_than_stride": lambda g: g.kernel[0] > g.strides[0] > 1,
    "dilation_with_stride": lambda g: min(g.strides) >= 2 and min(g.dilations) >= 2,
    "same_odd_padding": lambda g: g.padding == "SAME" and _odd_same(g),
    "asymmetric_explicit": lambda g: g.padding == "EXPLICIT" and (
        g.pads[0] != g.pads[1] or g.pads[2] != g.pads[3]),
    "filter_larger_than_input": lambda g: any(k > n for k, n in zip(g.kernel, g.sizes)),
    "empty_output": lambda g: 0 in shapes(g).output_shape and g.batch > 0,
    "zero_batch": lambda g: g.batch == 0,
    "zero_channels": lambda g: g.out_channels == 0,
    "non_square": lambda g: all(_distinct(v) for v in (g.sizes, g.kernel, g.strides,
                                                          g.dilations)),
    "batch_gt_1": lambda g: g.batch >= 2,
    "groups": lambda g: g.groups == 2 and g.channels % 2 == 0 and not g.depthwise,
    "depth_multiplier": lambda g: g.depthwise and g.out_channels >= 2,
    "layout_nhwc": lambda g: g.data_format == "NHWC",
    "layout_nchw": lambda g: g.data_format == "NCHW" and g.channels > 1,
    "noncontiguous": lambda g: True,  # the arrays' memory: checked below
    "readonly": lambda g: True,
    # the 3-D classes
    "depth_remainder_only": lambda g: (g.strides[1:] == (1, 1) and g.strides[0] > 1
                                       and remainders(g, shapes(g))[0] != 0),
    "stride_in_depth_only": lambda g: g.strides[1:] == (1, 1) and g.strides[0] > 1,
    "dilation_in_depth_only": lambda g: (g.dilations[1:] == (1, 1) and g.dilations[0] > 1
                                         and g.kernel[0] > 1),
    "same_odd_depth_only": lambda g: g.padding == "SAME" and _odd_totals(g) == (True, False,
                                                                                False),
    "non_cubic_filter": lambda g: len(set(g.kernel)) == 3,
    "empty_depth": lambda g: (g.padding == "VALID" and shapes_nd(g).out_spatial[0] == 0
                              and 0 not in shapes_nd(g).out_spatial[1:]),
}
OP_PAIRS = [(conv, op) for conv in ("tf", "torch") for op in OPS[conv]]


def test_every_class_has_a_property():
    assert set(PROPERTY) == set(case_gen.CATALOGUE)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(OP_PAIRS), st.integers(0, 2**32))
def test_every_catalogue_case_has_its_class_property(pair, seed):
    convention, op = pair
    rng = np.random.default_rng(seed)
    support = parse_support(None)
    for name in case_gen.edge_classes(op, convention):
        case = case_gen.catalogue_case(name, op, convention, "float32", rng, support)
        if case is None:
            continue
        assert case.edge == name
        assert PROPERTY[name](case.geometry), (name, case.geometry)
        arrays = [v for v in prepared(call(case).kwargs, case.memory).values()
                  if isinstance(v, np.ndarray)]
        assert arrays
        if name == "noncontiguous":  # every other element of a larger buffer
            assert all(a.base is not None and a.strides[-1] == 2 * a.itemsize
                       for a in arrays if a.size)
        elif name == "readonly":
            assert not any(a.flags.writeable for a in arrays)
        else:
            assert case.memory == "contiguous"
            assert all(a.flags.c_contiguous and a.flags.writeable for a in arrays)


_WRITER = '''
import numpy as np
from engine import kernels


def conv2d(input, filter, **kw):
    out = kernels.conv2d(np.asarray(input), np.asarray(filter), **kw)
    input[...] = 0  # writes into its argument
    return out
'''


def test_a_target_writing_into_a_readonly_argument_is_caught(tmp_path):
    (tmp_path / "writer_mod.py").write_text(_WRITER)
    report = api.verify("writer_mod:conv2d", op="Conv2D", convention="tf", cases=20,
                        path=str(tmp_path))
    readonly = report.classes["readonly"]
    assert readonly["tried"] == 1 and readonly["passed"] == 0
    failed = [f for f in report.failures if f.case.edge == "readonly"]
    assert failed and failed[0].verdict.verdict == "raised"
    assert "read-only" in failed[0].verdict.message
    # every other class passes: the arrays of those cases are fresh and writable
    assert all(r["passed"] == r["tried"] for name, r in report.classes.items()
               if name != "readonly")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_the_rounding_allowance_is_exactly_half_an_ulp(dtype):
    """(float64's half unit is below what the float64 reference itself resolves.)"""
    kind = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}[dtype]
    sub = float(ml_dtypes.finfo(kind).smallest_subnormal)
    ref = np.array([37.25 * sub, 1.0])
    bound = np.array([1e-6 * sub, 1.0])  # RTOL x bound far below the subnormal step
    allowance = half_ulp(ref, dtype)
    assert allowance[0] == sub / 2
    at = ref + np.array([allowance[0], 0.0])
    over = ref + np.array([allowance[0] * (1 + 2.0**-30), 0.0])  # exact in float64
    assert judge("ok", at, None, ref, bound, dtype).verdict == "pass"
    assert judge("ok", over, None, ref, bound, dtype).verdict == "wrong_values"
    # one unit in the last place away from the correctly rounded value fails
    rounded = np.array([37 * sub, 1.0])
    assert judge("ok", rounded, None, ref, bound, dtype).verdict == "pass"
    assert judge("ok", rounded + [sub, 0.0], None, ref, bound, dtype).verdict == "wrong_values"


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_the_tolerance_is_rtol_of_each_elements_own_bound(dtype):
    ref, bound = np.zeros(2), np.array([1.0, 4.0])
    tol = RTOL[dtype]
    assert judge("ok", np.array([0, 4 * tol]), None, ref, bound, dtype).verdict == "pass"
    assert judge("ok", np.array([0, 4 * tol * 1.01]), None, ref, bound,
                 dtype).verdict == "wrong_values"
    # below the largest bound's allowance, but over its own element's
    assert judge("ok", np.array([1.5 * tol, 0]), None, ref, bound,
                 dtype).verdict == "wrong_values"


def _case(**changes) -> Case:
    g = Geometry(batch=2, height=9, width=8, channels=3, kernel=(3, 2), out_channels=3,
                 strides=(3, 2), dilations=(2, 3), padding="EXPLICIT", pads=(2, 1, 0, 2),
                 data_format="NCHW")
    return Case("Conv2D", "tf", g.with_(**changes), "float32", "random", 7, "noncontiguous")


def test_the_shrinker_reaches_exactly_the_minimum():
    """Fails only with height >= 5 and width >= 4: every other size, stride, dilation, pad,
    layout and memory goes to its smallest."""
    def fails(c: Case) -> bool:
        return c.geometry.height >= 5 and c.geometry.width >= 4
    minimal, _calls = shrink(_case(), fails, parse_support(None))
    g = minimal.geometry
    assert (g.batch, g.height, g.width, g.channels, g.out_channels) == (1, 5, 4, 1, 1)
    assert g.kernel == (1, 1) and g.strides == (1, 1) and g.dilations == (1, 1)
    assert g.padding == "VALID" and g.data_format == "NHWC" and minimal.memory == "contiguous"


def test_strides_and_dilations_stay_only_where_the_failure_needs_them():
    def fails(c: Case) -> bool:
        return c.geometry.strides[0] >= 2 and c.geometry.dilations[1] >= 3
    minimal, _calls = shrink(_case(), fails, parse_support(None))
    g = minimal.geometry
    assert g.strides == (2, 1) and g.dilations == (1, 3)
    assert g.batch == 1 and g.channels == 1 and g.out_channels == 1


def test_under_equal_strides_the_shrinker_still_reaches_stride_1():
    """Each one-side step leaves ``equal_strides``; both sides at once stay in it."""
    def fails(c: Case) -> bool:
        return c.geometry.height >= 3
    support = parse_support("equal_strides")
    start = _case(strides=(3, 3), dilations=(2, 2), kernel=(3, 3))
    minimal, _calls = shrink(start, fails, support)
    g = minimal.geometry
    assert g.strides == (1, 1) and g.dilations == (1, 1) and g.kernel == (1, 1)
    assert g.height == 3 and support.allows(g, shapes(g))


def test_nan_or_inf_where_the_reference_is_finite_is_nonfinite():
    ref, bound = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0])
    v = judge("ok", np.array([np.nan, 2.0, np.inf]), None, ref, bound, "float32")
    assert v.verdict == "nonfinite" and v.message.startswith("2 non-finite element(s)")
    assert "first at [0]" in v.message


def test_each_size_goes_straight_to_its_least_value():
    """A failure that depends on nothing: every candidate fails, and each field takes its least
    value in one call (to 1 or 0 first, before halving): batch, height, width, channels, out
    channels, 2 kernel sides, 2 strides, 2 dilations, the 3 nonzero pads, EXPLICIT -> VALID,
    NCHW -> NHWC, noncontiguous -> contiguous: 17 calls."""
    minimal, calls = shrink(_case(), lambda c: True, parse_support(None))
    g = minimal.geometry
    assert (g.batch, g.height, g.width, g.channels, g.out_channels) == (1, 1, 1, 1, 1)
    assert calls == 17


def test_a_size_given_as_a_shape_shrinks_and_with_it_the_strides():
    """Conv2DBackpropInput's input is a size (input_sizes), no array: its height and width
    still go to 1, and then the strides and dilations they made harmless go to 1 (issue 34:
    a failure shrank to input 2x3 with strides [1, 2, 3, 1] and dilations [1, 1, 3, 1])."""
    g = Geometry(batch=1, height=2, width=3, channels=1, kernel=(1, 2), out_channels=1,
                 strides=(2, 3), dilations=(1, 3), padding="SAME")
    start = Case("Conv2DBackpropInput", "tf", g)
    minimal, _calls = shrink(start, lambda c: True, parse_support(None))
    g = minimal.geometry
    assert (g.height, g.width) == (1, 1)
    assert g.strides == (1, 1) and g.dilations == (1, 1) and g.kernel == (1, 1)
