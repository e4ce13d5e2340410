"""engine.kernels._compiled.depthwise_filter: the depthwise filter gradient's loops with and
without the tap-grid bands (whichever the running CPU uses, both are run here) against the
float64 definition ``dw[i, j, k] = sum_{n,r,c} x[n, r*sr + i*dr - pt, c*sc + j*dc - pl, k] *
dy[n, r, c, k]``, over strides, dilations, paddings, filter sizes, channel counts that leave
vector remainders, band sizes and row ranges that cut bands; and the rule that keeps small
problems on one core."""

import threading

import numpy as np
import pytest

pytest.importorskip("numba")

from engine.kernels import cpu, parallel
from engine.kernels._compiled import depthwise_filter, numba_depthwise


def _definition(x, dy, k, sr, dr, pt, pl):
    """The sum in float64, and the same sum of absolute values (the rounding bound's scale)."""
    n, h, w, c = x.shape
    _, oh, ow, _ = dy.shape
    pad = np.zeros((n, h + pt + k * dr + oh * sr, w + pl + k * dr + ow * sr, c))
    pad[:, pt:pt + h, pl:pl + w] = x
    out, bound = np.zeros((k, k, c)), np.zeros((k, k, c))
    for i in range(k):
        for j in range(k):
            win = pad[:, i * dr: i * dr + oh * sr: sr, j * dr: j * dr + ow * sr: sr]
            out[i, j] = np.einsum("nrck,nrck->k", win, dy)
            bound[i, j] = np.einsum("nrck,nrck->k", np.abs(win), np.abs(dy))
    return out, bound


GEOMETRIES = [  # (batch, size, channels, k, stride, dilation, pad)
    (2, 9, 16, 3, 1, 1, 1),
    (1, 12, 37, 3, 1, 1, 1),
    (2, 11, 5, 3, 1, 2, 0),
    (1, 14, 33, 5, 1, 1, 2),
    (1, 13, 20, 5, 1, 2, 3),
    (2, 10, 18, 3, 2, 1, 1),
    (1, 15, 20, 5, 2, 1, 2),  # bands at stride 2: 5x5, and 3x3 dilated
    (2, 13, 16, 3, 2, 2, 1),
    (1, 7, 64, 3, 1, 1, 0),
    (1, 4, 3, 5, 1, 1, 2),  # no row reads inside with every filter row
    (3, 8, 1, 3, 1, 1, 1),
]


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("band", [0, 1, 3, 64])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_loops_match_the_definition_with_and_without_bands(geometry, band, dtype):
    nb, size, c, k, s, d, p = geometry
    rng = np.random.default_rng(nb * 1000 + size * 10 + c)
    oh = (size + 2 * p - (k - 1) * d - 1) // s + 1
    x = rng.standard_normal((nb, size, size, c)).astype(dtype)
    dy = rng.standard_normal((nb, oh, oh, c)).astype(dtype)
    want, bound = _definition(x.astype(np.float64), dy.astype(np.float64), k, s, d, p, p)
    total = np.zeros((k, k, c), dtype)
    rows = nb * oh
    for lo, hi in ((0, rows // 3), (rows // 3, rows - 1), (rows - 1, rows)):  # ranges cut bands
        acc = np.empty((k, k, c), dtype)
        depthwise_filter.filter_grad(x, dy, acc, s, s, d, d, p, p, lo, hi, band)
        total += acc
    eps = np.finfo(dtype).eps
    assert np.all(np.abs(total - want) <= (rows * oh + 4) * eps * bound + 1e-300)


def test_bands_are_used_for_3x3_and_5x5_filters_where_the_registers_allow(
        monkeypatch):
    from engine.shapes.conv import backprop_filter_geometry

    def geometry(k, s):
        return backprop_filter_geometry((2, 56, 56, 128), (k, k, 128, 1), (2, 56 // s, 56 // s, 128),
                                        [1, s, s, 1], "SAME", depthwise=True)

    f32 = np.dtype(np.float32)
    monkeypatch.setattr(depthwise_filter, "GRID", True)
    rows = depthwise_filter.band(geometry(3, 1), f32)
    assert 1 <= rows <= depthwise_filter.MAX_BAND
    assert rows * (56 + 56) * 128 * 4 <= max(cpu.host().l2 // 2, (56 + 56) * 128 * 4)
    assert depthwise_filter.band(geometry(5, 1), f32) == rows
    strided = depthwise_filter.band(geometry(3, 2), f32)  # rows of 2*56 input, 28 dy columns
    assert 1 <= strided <= depthwise_filter.MAX_BAND
    assert strided * (2 * 56 + 28) * 128 * 4 <= max(cpu.host().l2 // 2, (2 * 56 + 28) * 128 * 4)
    assert depthwise_filter.band(geometry(2, 1), f32) == 0
    monkeypatch.setattr(depthwise_filter, "GRID", False)
    assert depthwise_filter.band(geometry(3, 1), f32) == 0


def _threads_used(count, row_products, operand_bytes):
    seen = []

    def call(lo, hi):
        seen.append((threading.current_thread().name, lo, hi))
        return hi - lo

    assert sum(numba_depthwise._rows(count, row_products, call, operand_bytes)) == count
    return seen


@pytest.mark.skipif(parallel.workers() < 2, reason="one core: every problem runs on it")
def test_small_problems_stay_on_the_calling_core_and_large_ones_split():
    l2 = cpu.host().l2
    small = _threads_used(100, 1000, l2)  # 100k products, operands in one L2
    assert small == [(threading.current_thread().name, 0, 100)]
    assert len(_threads_used(100, numba_depthwise.ONE_CORE_PRODUCTS, l2)) >= 2  # many products
    assert len(_threads_used(100, parallel.MIN_PRODUCTS_PER_RANGE, l2 + 1)) >= 2  # large operands
