"""The kernels against TensorFlow's golden cases: |out - exact| <= rtol * bound, same shape."""

import numpy as np
import pytest

from engine.base.dtypes import dtype_name
from engine.base.errors import InvalidArgumentError
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


#: The argument each invalid golden case gets wrong (the one its error must name).
INVALID_ARGUMENT = {
    "stride in the batch dimension": "strides",
    "stride in the depth dimension": "strides",
    "out_backprop height does not match the computed output size": "out_backprop",
    "out_backprop depth does not match filter out_channels": "out_backprop",
    "input depth not divisible by filter depth": "input",
    "filter taller than the input with VALID": "filter_sizes",
    "filter_sizes must have 4 elements": "filter_sizes",
    "input must be 4-D": "input",
    "strides must have 4 elements": "strides",
    "zero stride": "strides",
    "unknown padding": "padding",
    "explicit_paddings given with SAME": "explicit_paddings",
    "negative explicit padding": "explicit_paddings",
    "explicit padding in the batch dimension": "explicit_paddings",
    "dilation in the batch dimension": "dilations",
    "unknown data_format": "data_format",
    "out_backprop depth does not match filter": "out_backprop",
    "negative input_sizes": "input_sizes",
    "batch mismatch": "out_backprop",
    "out_backprop depth != in_channels * multiplier": "out_backprop",
    "filter in_channels != input channels": "filter_sizes",
    "out_backprop height mismatch for stride 2": "out_backprop",
}


@pytest.mark.parametrize("case", INVALID, ids=[c["why"] for c in INVALID])
def test_invalid_case_raises_clear_error(case):
    with pytest.raises(InvalidArgumentError) as info:
        call_invalid(case)
    assert len(str(info.value)) > 20
    assert info.value.argument == INVALID_ARGUMENT[case["why"]]
    assert str(info.value).startswith(info.value.argument)
