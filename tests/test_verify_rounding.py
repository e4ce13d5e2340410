"""A verify verdict allows the output its own rounding: a low-precision implementation that
returns the correctly rounded reference passes, even where the reference is subnormal in its
dtype (there half a unit in the last place exceeds RTOL x the element's bound)."""

import ml_dtypes
import numpy as np
import pytest

from engine.verify.verdicts import judge


@pytest.mark.parametrize("dtype, kind", [("float16", np.float16),
                                         ("bfloat16", ml_dtypes.bfloat16)])
def test_the_correctly_rounded_reference_passes_even_when_subnormal(dtype, kind):
    tiny = float(ml_dtypes.finfo(kind).smallest_normal)
    ref = np.array([-0.061 * tiny, 0.37 * tiny, 0.2963140493, 1.0 + 1e-9, -3.5])
    bound = np.abs(ref)  # one term each: the tightest bound there is
    got = ref.astype(kind).astype(np.float64)  # what a perfect implementation returns
    assert not np.array_equal(got, ref)
    v = judge("ok", got, None, ref, bound, dtype)
    assert v.verdict == "pass", v


@pytest.mark.parametrize("dtype, kind", [("float16", np.float16),
                                         ("bfloat16", ml_dtypes.bfloat16)])
def test_one_unit_in_the_last_place_off_at_a_subnormal_still_fails(dtype, kind):
    info = ml_dtypes.finfo(kind)
    sub = float(info.smallest_subnormal)
    ref = np.array([37 * sub, 1.0])
    bound = np.abs(ref)
    got = np.array([39 * sub, 1.0])  # two units off: more than its rounding
    assert judge("ok", got, None, ref, bound, dtype).verdict == "wrong_values"


def test_float32_and_float64_keep_the_bound_rule():
    ref, bound = np.array([1.0]), np.array([1.0])
    assert judge("ok", ref + 1e-5, None, ref, bound, "float32").verdict == "pass"
    assert judge("ok", ref + 1e-4, None, ref, bound, "float32").verdict == "wrong_values"
    assert judge("ok", ref + 1e-11, None, ref, bound, "float64").verdict == "wrong_values"
