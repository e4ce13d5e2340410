"""The kernels against TensorFlow's golden cases: |out - exact| <= rtol * bound, same shape."""

import numpy as np
import pytest

from engine.dtypes import dtype_name
from engine.errors import InvalidArgumentError
from tests.golden_cases import ARRAYS, INVALID, VALID, call_invalid, call_valid


def test_golden_set_is_complete():
    assert len(VALID) == 120 and len(INVALID) == 22


@pytest.mark.parametrize("case", VALID, ids=[c["id"] for c in VALID])
def test_valid_case_matches_exact(case):
    out = call_valid(case)
    exact, bound = ARRAYS[case["id"] + ".exact"], ARRAYS[case["id"] + ".bound"]
    assert out.shape == exact.shape
    assert dtype_name(out.dtype) == case["dtype"]
    err = np.abs(out.astype(np.float64) - exact)
    assert np.all(err <= case["rtol"] * bound + 1e-30), float(np.max(err - case["rtol"] * bound))


@pytest.mark.parametrize("case", INVALID, ids=[c["why"] for c in INVALID])
def test_invalid_case_raises_clear_error(case):
    with pytest.raises(InvalidArgumentError) as info:
        call_invalid(case)
    assert len(str(info.value)) > 20
