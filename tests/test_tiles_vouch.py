"""The compiled per-tap input gradient vouches for a finite result (it checks each row it
writes while in cache), so its two input scans are skipped; a NaN or Inf operand still gives
the NumPy path's NaN/Inf placement (the kernel finds a row not finite and does not vouch, so
engine.kernels.nonfinite scans and takes the exact path)."""

import numpy as np
import pytest

from engine import kernels
from engine.kernels import accel
from tests.test_kernels_nonfinite import SPECIALS
from tests.test_kernels_numba import _counting_scans

pytest.importorskip("numba")

INPUT = kernels.conv2d_backprop_input
CASES = {  # name: (input shape, filter shape, attrs): the segments, the NCHW buffer, direct
    "nhwc-s2": ((2, 11, 9, 24), (3, 3, 24, 20), {"strides": [1, 2, 2, 1], "padding": "SAME"}),
    "nchw-s2": ((2, 24, 11, 9), (3, 3, 24, 20),
                {"strides": [1, 1, 2, 2], "padding": "SAME", "data_format": "NCHW"}),
    "nhwc-1x1": ((2, 6, 5, 32), (1, 1, 32, 40), {"strides": [1, 1, 1, 1], "padding": "VALID"}),
}


def _dy(shape, w, attrs, rng):
    y = kernels.conv2d(np.zeros(shape, np.float32), w, **attrs)
    return rng.standard_normal(y.shape).astype(np.float32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_finite_tiles_input_gradient_skips_the_input_scans(monkeypatch, name):
    shape, wshape, attrs = CASES[name]
    rng = np.random.default_rng(4)
    w = rng.standard_normal(wshape).astype(np.float32)
    dy = _dy(shape, w, attrs, rng)
    monkeypatch.setenv(accel.ENV, "numpy")
    reference = INPUT(shape, w, dy, **attrs)
    scanned = _counting_scans(monkeypatch)
    monkeypatch.setenv(accel.ENV, "numba")
    out = INPUT(shape, w, dy, **attrs)
    assert kernels.last_path() == "numba tiles" and scanned == []
    scale = float(np.abs(reference).max())
    assert np.max(np.abs(out - reference)) <= 1e-5 * scale


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("where", ["dy", "w"])
def test_nan_and_inf_operands_are_scanned_and_placed_as_numpy_places_them(monkeypatch, name,
                                                                          where):
    shape, wshape, attrs = CASES[name]
    rng = np.random.default_rng(5)
    w = rng.standard_normal(wshape).astype(np.float32)
    dy = _dy(shape, w, attrs, rng)
    flat = (dy if where == "dy" else w).reshape(-1)
    for v in SPECIALS:
        flat[rng.integers(flat.size)] = v
    with np.errstate(invalid="ignore", over="ignore"):
        monkeypatch.setenv(accel.ENV, "numpy")
        reference = INPUT(shape, w, dy, **attrs)
        scanned = _counting_scans(monkeypatch)
        monkeypatch.setenv(accel.ENV, "numba")
        out = INPUT(shape, w, dy, **attrs)
    assert scanned  # not vouched for: the inputs were scanned
    for test in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(test(out), test(reference))
    assert not np.isfinite(reference).all()
