"""The compiled NCHW <-> NHWC layout copies (engine.kernels._compiled.transpose) and the conv
gradients that use them on NCHW operands, against NumPy's own transposes and the float64
NumPy path (tolerance: within ``RTOL[dtype]`` times the op on the magnitudes, as
tests/test_kernels_numba.py states it)."""

import numpy as np
import pytest

from engine import kernels
from engine.base.dtypes import RTOL
from engine.kernels import accel

pytest.importorskip("numba")
from engine.kernels._compiled import transpose

SHAPES = [(2, 16, 8, 8), (3, 5, 7, 9), (1, 9, 17, 3), (2, 24, 1, 1), (1, 8, 8, 8), (2, 0, 4, 4)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_layout_copies_move_every_value_exactly(dtype, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    view = x.transpose(0, 2, 3, 1)
    got = transpose.nchw_operand(view, np.dtype(dtype))
    if x.size == 0:
        assert got is None
        return
    assert got.flags.c_contiguous and got.dtype == dtype
    np.testing.assert_array_equal(got, view)
    back = np.full(shape, np.nan, dtype)
    transpose.to_nchw(got, back)
    np.testing.assert_array_equal(back, x)


def test_views_that_are_not_nchw_planes_get_no_copy():
    x = np.zeros((2, 8, 4, 4), np.float32)
    assert transpose.nchw_operand(x[:, ::2].transpose(0, 2, 3, 1), np.dtype(np.float32)) is None
    assert transpose.nchw_operand(x.transpose(0, 2, 3, 1), np.dtype(np.float64)) is None
    assert transpose.nchw_target(x[:1].transpose(0, 2, 3, 1)) is not None  # leading images
    assert transpose.nchw_target(x[:, :4].transpose(0, 2, 3, 1)) is None
    assert transpose.nchw_target(x[:, :, :2].transpose(0, 2, 3, 1)) is None


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("channels", [16, 20])
def test_nchw_conv_gradients_on_the_compiled_path_match_the_definition(monkeypatch, stride,
                                                                       channels):
    rng = np.random.default_rng(stride * channels)
    x = rng.standard_normal((3, channels, 13, 11)).astype(np.float32)
    w = rng.standard_normal((3, 3, channels, 24)).astype(np.float32)
    attrs = {"strides": [1, 1, stride, stride], "padding": "SAME", "data_format": "NCHW"}
    monkeypatch.setenv(accel.ENV, "numba")
    dy = rng.standard_normal(kernels.conv2d(x, w, **attrs).shape).astype(np.float32)
    dx = kernels.conv2d_backprop_input(x.shape, w, dy, **attrs)
    path_dx = kernels.last_path()
    dw = kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs)
    assert "numba" in path_dx or path_dx == "winograd"
    monkeypatch.setenv(accel.ENV, "numpy")
    f64 = [a.astype(np.float64) for a in (x, w, dy)]
    for ours, ref, bound in (
            (dx, kernels.conv2d_backprop_input(x.shape, f64[1], f64[2], **attrs),
             kernels.conv2d_backprop_input(x.shape, abs(f64[1]), abs(f64[2]), **attrs)),
            (dw, kernels.conv2d_backprop_filter(f64[0], w.shape, f64[2], **attrs),
             kernels.conv2d_backprop_filter(abs(f64[0]), w.shape, abs(f64[2]), **attrs))):
        assert ours.shape == ref.shape and ours.dtype == np.float32
        assert np.all(np.abs(ours - ref) <= RTOL["float32"] * bound + 1e-30)


@pytest.mark.parametrize("stride,input_path", [(1, "winograd"), (2, "winograd phases"),
                                               (2, "numba tiles")])
def test_nchw_results_of_compiled_calls_are_the_nhwc_results_moved_by_the_compiled_copy(
        monkeypatch, stride, input_path):
    """Forward and input gradient (Winograd at stride 1, the tiles and the polyphase Winograd
    at stride 2) on NCHW: the operands and the result go through the compiled layout copies
    (NumPy's strided copy ran on one core; the tiles' input gradient moves blocks of rows from
    a core's cache instead of a whole NHWC result), and the numbers are the NHWC call's, bit
    for bit."""
    from engine.kernels._compiled import winograd_phases

    if input_path == "numba tiles":
        monkeypatch.setattr(winograd_phases, "applies", lambda g: False)
    rng = np.random.default_rng(stride)
    x = rng.standard_normal((4, 16, 16, 16)).astype(np.float32)
    w = rng.standard_normal((3, 3, 16, 64)).astype(np.float32)
    monkeypatch.setenv(accel.ENV, "numba")
    moved = []
    original = transpose.to_nchw
    monkeypatch.setattr(transpose, "to_nchw", lambda s, d: moved.append(d.shape) or original(s, d))
    nchw = {"strides": [1, 1, stride, stride], "padding": "SAME", "data_format": "NCHW"}
    nhwc = {"strides": [1, stride, stride, 1], "padding": "SAME", "data_format": "NHWC"}
    to_nhwc, to_nchw = (0, 2, 3, 1), (0, 3, 1, 2)
    y = kernels.conv2d(x, w, **nchw)
    assert moved == [y.shape]
    assert kernels.last_path() == ("winograd" if stride == 1 else "numba tiles")
    y_nhwc = kernels.conv2d(np.ascontiguousarray(x.transpose(to_nhwc)), w, **nhwc)
    np.testing.assert_array_equal(y, y_nhwc.transpose(to_nchw))
    moved.clear()
    dx = kernels.conv2d_backprop_input(x.shape, w, y, **nchw)
    assert moved == ([] if input_path == "numba tiles" else [x.shape])
    assert kernels.last_path() == input_path
    dx_nhwc = kernels.conv2d_backprop_input(y_nhwc.shape[:1] + x.shape[2:] + x.shape[1:2], w,
                                            y_nhwc, **nhwc)
    np.testing.assert_array_equal(dx, dx_nhwc.transpose(to_nchw))


@pytest.mark.parametrize("tile", [8, 16, None])
@pytest.mark.parametrize("shape", [(2, 72, 9, 11), (1, 21, 30, 31), (1, 130, 8, 8)], ids=str)
def test_layout_copies_across_many_tiles_move_every_value_exactly(monkeypatch, tile, shape):
    """Images larger than one tile (the CPU's own tile size, and small ones that leave partial
    tiles and edges on both axes) are moved whole, both ways."""
    if tile is not None:
        monkeypatch.setattr(transpose, "transpose_tile", lambda: tile)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    view = x.transpose(0, 2, 3, 1)
    got = transpose.nchw_operand(view, np.dtype(np.float32))
    np.testing.assert_array_equal(got, view)
    back = np.full(shape, np.nan, np.float32)
    transpose.to_nchw(got, back)
    np.testing.assert_array_equal(back, x)


def test_the_tile_fits_half_the_l1_data_cache(monkeypatch):
    from engine.kernels import cpu

    for l1d, side in ((32 * 1024, 40), (48 * 1024, 48), (1024, 8)):
        monkeypatch.setattr(cpu, "host", lambda l1d=l1d: cpu.Host("test CPU", l1d, 2**20))
        assert transpose.transpose_tile() == side
        assert 2 * 4 * side * side <= max(l1d // 2, 2 * 4 * 64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 16, 8, 8), (3, 13, 5, 11), (1, 130, 2, 17), (2, 7, 3, 3)],
                         ids=str)
def test_nchw_fill_embeds_every_value_exactly_and_nothing_else(dtype, shape):
    """The input gradient's zero-embedded ``dy`` straight from NCHW (one transposing pass):
    every value at its NHWC place inside the larger ``(Hq, Wq)`` images, whatever the channel
    and column counts leave of the 8x8 blocks; the padding positions untouched (NaN here)."""
    n, c, h, w = shape
    x = np.random.default_rng(c).standard_normal(shape).astype(dtype)
    fill = transpose.nchw_fill(x.transpose(0, 2, 3, 1))
    assert fill is not None
    out = np.full((n, h + 2, w + 3, c), np.nan, dtype)
    fill(out, 0, n)
    np.testing.assert_array_equal(out[:, :h, :w], x.transpose(0, 2, 3, 1))
    assert np.isnan(out[:, h:]).all() and np.isnan(out[:, :, w:]).all()
    assert transpose.nchw_fill(np.zeros((1, 4, 4, 8), dtype)) is None  # NHWC data: no fill


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pixels, channels", [(16, 16), (13, 21), (8, 3), (1, 9)], ids=str)
def test_rows_to_planes_moves_every_value_exactly_and_nothing_else(dtype, pixels, channels):
    """NHWC pixels of a block into their NCHW planes (compiled: 8x8 blocks and the edges
    value by value): each value lands at ``plane`` steps per channel from ``d0``, and the
    rest of the destination is untouched (NaN here)."""
    import numba

    @numba.njit
    def move(src, dst, s0, d0, p, c, plane):
        transpose.rows_to_planes(src, dst, s0, d0, p, c, plane)

    src = np.random.default_rng(pixels).standard_normal(5 + pixels * channels).astype(dtype)
    plane, d0 = pixels + 11, 7
    for fn in (move, transpose.rows_to_planes):
        dst = np.full(d0 + channels * plane, np.nan, dtype)
        fn(src, dst, 5, d0, pixels, channels, plane)
        want = src[5:].reshape(pixels, channels).T
        got = dst[d0:].reshape(channels, plane)
        np.testing.assert_array_equal(got[:, :pixels], want)
        assert np.isnan(got[:, pixels:]).all() and np.isnan(dst[:d0]).all()


@pytest.mark.parametrize("block", [1, 3, None])
@pytest.mark.parametrize("shape, kernel, stride", [
    ((3, 24, 9, 11), (3, 3), 2),  # the phases cover every pixel: rows written over
    ((2, 21, 10, 7), (2, 2), 3),  # phases no tap writes: blocks zeroed, then summed into
    ((2, 32, 5, 5), (3, 3), 1),
], ids=str)
def test_the_input_gradient_into_nchw_blocks_is_the_nhwc_result_bit_for_bit(
        monkeypatch, block, shape, kernel, stride):
    """The tiles' NCHW input gradient, computed in blocks of rows (one row, three rows across
    image ends, the CPU's own size) that each core moves into the planes from its cache, and
    in batch chunks of one image: the NHWC call's numbers bit for bit, every element written."""
    from engine.kernels import compute
    from engine.kernels._compiled import conv_tiles_input

    if block is not None:
        monkeypatch.setattr(conv_tiles_input, "planes_block_rows", lambda row_bytes: block)
    monkeypatch.setattr(compute, "CHUNK_BYTES", 1)
    monkeypatch.setenv(accel.ENV, "numba")
    n, c, h, w = shape
    rng = np.random.default_rng(c)
    f = rng.standard_normal(kernel + (c, 24)).astype(np.float32)
    nchw = {"strides": [1, 1, stride, stride], "padding": "SAME", "data_format": "NCHW"}
    nhwc = {"strides": [1, stride, stride, 1], "padding": "SAME", "data_format": "NHWC"}
    dy = rng.standard_normal((n, 24, -(-h // stride), -(-w // stride))).astype(np.float32)
    dx = kernels.conv2d_backprop_input(shape, f, dy, **nchw)
    assert kernels.last_path() == "numba tiles"
    dx_nhwc = kernels.conv2d_backprop_input((n, h, w, c), f,
                                            np.ascontiguousarray(dy.transpose(0, 2, 3, 1)), **nhwc)
    np.testing.assert_array_equal(dx, dx_nhwc.transpose(0, 3, 1, 2))
    assert np.isfinite(dx).all()
