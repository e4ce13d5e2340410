"""TensorFlow's own Conv3D test geometries (tests/golden/conv3d_cases.json, written by
tests/golden/make_conv3d_cases.py from conv_ops_3d_test.py) against the 3-D kernels, in every
dtype and both layouts: the test file's literal expected values, TensorFlow's float64 results
and the slow reference of tests/conv3d_reference.py, each within the documented tolerance."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from engine import kernels
from engine.base.dtypes import DTYPES, RTOL
from engine.base.errors import InvalidArgumentError
from tests import conv3d_reference as ref

DOC = json.loads((Path(__file__).parent / "golden" / "conv3d_cases.json").read_text())
CASES = DOC["cases"]
FORMATS = ("NDHWC", "NCDHW")


def _ramp(shape, case) -> np.ndarray:
    size = int(np.prod(shape))
    start = 0 if case["ramp"] == "normalized from 0" else 1
    v = np.arange(start, start + size, dtype=np.float64)
    return (v if case["ramp"] == "integers" else v / size).reshape(shape)


def _out_backprop(shape) -> np.ndarray:
    k = np.arange(int(np.prod(shape)))
    return (((7 * k) % 11 - 5) / 8.0).reshape(shape)


def _ncdhw(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(a, -1, 1))


def _ndhwc(a: np.ndarray, fmt: str) -> np.ndarray:
    return a if fmt == "NDHWC" else np.moveaxis(a, 1, -1)


def _vec(spatial, fmt: str) -> list[int]:
    return [1, *spatial, 1] if fmt == "NDHWC" else [1, 1, *spatial]


def _half_unit(values) -> np.ndarray:
    """Half a unit in the last printed place of each literal (the test file's precision)."""
    return np.array([float(Decimal(1).scaleb(Decimal(repr(v)).as_tuple().exponent) / 2)
                     for v in values])


def _ids(case) -> str:
    return f"{case['test']}-{case['input']}-{case['filter']}-{case['padding']}"


def test_the_golden_file_has_every_geometry_of_tensorflows_test():
    """13 forward cases with literal values and one expanded-batch geometry, 3 dilated
    geometries (both gradients), 18 gradient geometries (both gradients each)."""
    assert len(CASES) == 35
    assert sum(c["literal"] is not None for c in CASES) == 13
    assert sum(c["kind"] == "all" for c in CASES) == 21


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_tensorflows_conv3d_cases(case, dtype, fmt):
    dt = DTYPES[dtype]
    x64, w64 = _ramp(case["input"], case), _ramp(case["filter"], case)
    g = ref.geo(case["input"], case["filter"], case["strides"], case["dilations"],
                case["padding"])
    x, w = x64.astype(dt), w64.astype(dt)
    attrs = {"strides": _vec(case["strides"], fmt), "padding": case["padding"],
             "data_format": fmt, "dilations": _vec(case["dilations"], fmt)}
    xin = x if fmt == "NDHWC" else _ncdhw(x)
    y = kernels.conv3d(xin, w, **attrs)
    assert y.dtype == dt
    y = _ndhwc(y, fmt)
    assert y.shape == g.output_shape
    want, bound = ref.forward(x, w, g)
    assert ref.within(y, want, bound, RTOL[dtype]) <= 0
    tf = np.array(case["tf"]).reshape(g.output_shape)
    if dtype == "float64":
        assert ref.within(y, tf, bound, RTOL["float64"]) <= 0
        if case["literal"] is not None:
            lit = np.array(case["literal"])
            assert ref.within(y.ravel(), lit, bound.ravel(), RTOL["float64"],
                              _half_unit(case["literal"])) <= 0
    if case["kind"] != "all":
        return
    dy = _out_backprop(g.output_shape).astype(dt)
    dyin = dy if fmt == "NDHWC" else _ncdhw(dy)
    fsizes = list(case["filter"])
    isizes = list(xin.shape)
    dw = kernels.conv3d_backprop_filter(xin, fsizes, dyin, **attrs)
    dx = _ndhwc(kernels.conv3d_backprop_input(isizes, w, dyin, **attrs), fmt)
    assert dw.dtype == dx.dtype == dt
    dw_want, dw_bound = ref.backprop_filter(x, dy, g)
    dx_want, dx_bound = ref.backprop_input(w, dy, g)
    assert ref.within(dw, dw_want, dw_bound, RTOL[dtype]) <= 0
    assert ref.within(dx, dx_want, dx_bound, RTOL[dtype]) <= 0
    if dtype == "float64":
        assert ref.within(dw, np.array(case["tf_filter"]).reshape(dw.shape),
                          dw_bound, RTOL["float64"]) <= 0
        assert ref.within(dx, np.array(case["tf_input"]).reshape(dx.shape),
                          dx_bound, RTOL["float64"]) <= 0


def test_the_empty_batch_gives_tensorflows_output_shape():
    case = DOC["empty"]
    x = np.zeros(case["input"], np.float32)
    w = np.ones(case["filter"], np.float32)
    y = kernels.conv3d(x, w, [1] * 5, case["padding"])
    assert list(y.shape) == case["output"] and y.dtype == np.float32
    assert kernels.last_path() == "empty"


@pytest.mark.parametrize("case", DOC["refused"], ids=lambda c: c["test"])
def test_the_calls_tensorflows_test_refuses_are_refused(case):
    x, w = np.ones(case["input"], np.float32), np.ones(case["filter"], np.float32)
    with pytest.raises(InvalidArgumentError) as err:
        kernels.conv3d(x, w, [1] * 5, case["padding"])
    assert err.value.argument == case["argument"]
