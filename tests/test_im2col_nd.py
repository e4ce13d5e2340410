"""The Conv3D few-channel path (engine/kernels/im2col_nd.py: one product per output row over
the whole kd*kh*kw*C patch) against the float64 definition (tests/conv3d_reference.py), with
``GRADBLOCKS_KERNELS=numba`` so every non-empty call of one group of few channels takes it.
Nothing here depends on timing, the CPU or BLAS: the bound is the reference's sum of |terms|
times the dtype's RTOL."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from engine import kernels
from engine.base.dtypes import DTYPES, RTOL
from engine.kernels import im2col_nd
from engine.shapes.conv import conv3d_geometry
from tests import conv3d_reference as ref
from tests.test_conv3d_planes import _attrs, nonfinite_cases
from tests.test_conv3d_sweep import _case, _reference, _run, _values

conv3d = importlib.import_module("engine.kernels.conv3d")
OPS = ("forward", "filter")


@pytest.fixture
def compiled(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numba")


def _path(xs, ws, empty: bool) -> str:
    return conv3d.EMPTY if empty else conv3d.IM2COL if xs[-1] == ws[3] else conv3d.PLANES


@pytest.mark.parametrize("op", OPS)
def test_random_cases_agree_with_the_float64_definition(compiled, op):
    """Random small cases (strides, dilations, SAME/VALID, NDHWC/NCDHW), every dtype; the
    ungrouped ones recorded as the im2col path."""
    rng = np.random.default_rng({"forward": 71, "filter": 72}[op])
    failures, taken = [], 0
    for i in range(150):
        xs, ws, strides, dil, padding, fmt, g = _case(rng)
        x, w, dy = _values(rng, xs), _values(rng, ws), _values(rng, g.output_shape)
        want, bound = _reference(op, x, w, dy, g)
        path = _path(xs, ws, min(xs[0], *g.out) == 0)
        taken += path == conv3d.IM2COL
        for name, dt in DTYPES.items():
            got = _run(op, x.astype(dt), w.astype(dt), dy.astype(dt), xs, ws,
                       _attrs(strides, dil, padding, fmt), fmt)
            assert kernels.last_path() == path
            if got.dtype != dt or ref.within(got, want, bound, RTOL[name]) > 0:
                failures.append((i, name, xs, ws, strides, dil, padding, fmt))
    assert not failures, failures[:5]
    assert taken >= 50


#: Cases with columns inside and outside the image on both sides, the depth taps partly
#: outside the volume, dilated columns (every column gathered), strides in every dimension.
WIDE = [
    ((1, 5, 9, 23, 3), (3, 7, 7, 3, 20), (1, 2, 2), (1, 1, 1), "SAME"),
    ((2, 4, 8, 17, 2), (2, 3, 5, 2, 17), (2, 1, 3), (1, 2, 1), "SAME"),
    ((1, 6, 7, 19, 1), (3, 2, 3, 1, 5), (1, 1, 1), (2, 1, 3), "VALID"),
    ((1, 3, 6, 30, 15), (1, 3, 3, 15, 8), (1, 1, 2), (1, 1, 1), "SAME"),
]


@pytest.mark.parametrize("shape", WIDE)
@pytest.mark.parametrize("op", OPS)
def test_wide_rows_agree_with_the_float64_definition(compiled, op, shape):
    xs, ws, strides, dil, padding = shape
    rng = np.random.default_rng(7)
    g = ref.geo(xs, ws, strides, dil, padding)
    x, w, dy = _values(rng, xs), _values(rng, ws), _values(rng, g.output_shape)
    want, bound = _reference(op, x, w, dy, g)
    for name in ("float32", "float64"):
        dt = DTYPES[name]
        got = _run(op, x.astype(dt), w.astype(dt), dy.astype(dt), xs, ws,
                   _attrs(strides, dil, padding, "NDHWC"), "NDHWC")
        assert kernels.last_path() == conv3d.IM2COL
        assert ref.within(got, want, bound, RTOL[name]) <= 0, name


@pytest.mark.parametrize("op", OPS)
def test_nan_and_inf_next_to_padding_follow_the_contract(compiled, op):
    """Non-finite values on every border (and Inf filter taps): NaN/Inf exactly where a real
    term is, padding contributing nothing (tests/test_conv3d_planes.py's cases)."""
    nonfinite_cases(op, {"forward": 81, "filter": 82}[op], ("float32", "float64", "bfloat16"),
                    (conv3d.IM2COL, conv3d.PLANES, conv3d.EMPTY))


def test_filter_blocks_follow_the_cpu_caches(monkeypatch):
    """Rows per in-place product: their out_backprop rows fit 2/3 of L1 (at least one); the
    gathered block: its patches and out_backprop rows fit half of L2 (at least one row's)."""
    from engine.kernels import cpu

    g = conv3d_geometry((1, 32, 112, 112, 3), (3, 7, 7, 3, 64), [1, 1, 2, 2, 1], "SAME")
    for l1, l2 in ((48 << 10, 2 << 20), (32 << 10, 512 << 10), (1 << 10, 1 << 10)):
        monkeypatch.setattr(cpu, "host", lambda l1=l1, l2=l2: cpu.Host("test", l1, l2))
        assert im2col_nd.filter_block(g, 4) == (
            max(1, l1 * 2 // 3 // (56 * 64 * 4)), max(56, l2 // 2 // ((441 + 64) * 4)))


def test_forward_blocks_follow_the_l1_cache(monkeypatch):
    """The filter rows per forward product: the fewest products whose part of the filter fits
    4/5 of L1, split evenly."""
    from engine.kernels import cpu

    g = conv3d_geometry((1, 32, 112, 112, 3), (3, 7, 7, 3, 64), [1, 1, 2, 2, 1], "SAME")
    row = 7 * 3 * 64 * 4  # one filter row of one depth tap, float32
    for l1, want in ((48 << 10, 7), (32 << 10, 4), (16 << 10, 2), (1 << 10, 1)):
        monkeypatch.setattr(cpu, "host", lambda l1=l1: cpu.Host("test", l1, 1 << 20))
        assert im2col_nd.forward_block(g, 4) == (im2col_nd.FORWARD_ROWS, want), l1
        assert want == 7 or want * row <= l1 * 4 // 5 or want == 1


def test_a_cancelled_run_stops_between_calls(compiled, monkeypatch):
    """The checkpoint before each call of CALL_ROWS rows raises in the kernel's threads."""
    from engine.base import cancel

    monkeypatch.setattr(im2col_nd, "CALL_ROWS", 1)
    x = np.ones((1, 4, 6, 6, 2), np.float32)
    w = np.ones((2, 3, 3, 2, 4), np.float32)
    calls = []

    def stop() -> None:
        calls.append(1)
        if len(calls) > 2:
            raise cancel.Cancelled("cancelled")

    monkeypatch.setattr(im2col_nd, "checkpoint", stop)
    with pytest.raises(cancel.Cancelled):
        kernels.conv3d(x, w, [1, 1, 1, 1, 1], "SAME")
    assert 2 < len(calls) < 4 * 6
