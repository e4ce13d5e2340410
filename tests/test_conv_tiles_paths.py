"""The compiled per-tap conv paths (engine.kernels._compiled.conv_tiles) on float32/float64, where
they run: against the float64 reference on random geometries with few and many channels (so the
grouped and per-tap in-place filter gradients, the phase-image fallback, the input gradient's
segments and the forward's shifted rows all run), the path each case records, the edges of the
grouped filter operand, and numba_simd.gemm_acc2 against NumPy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

numba = pytest.importorskip("numba")

from engine import kernels
from engine.base.dtypes import RTOL
from engine.kernels._compiled.numba_simd import gemm_acc2
from engine.shapes.conv import conv2d_geometry
from tests import reference
from tests.test_kernels_properties import _poisoned_empty, conv_attrs, valid_geometry


@pytest.fixture(autouse=True)
def compiled(monkeypatch):
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numba")


@st.composite
def cases(draw):
    """float32/float64 geometries: 1-3 or 17-20 channels per group (the few-channel grouped
    filter operand, and the per-tap paths), strides 1-3, dilations 1-2, every padding,
    NHWC (in place) or NCHW (the phase-image fallback), 1-2 groups."""
    fmt = draw(st.sampled_from(["NHWC", "NHWC", "NCHW"]))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    strides = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dilations = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    groups = draw(st.integers(1, 2))
    fin = draw(st.sampled_from([1, 2, 3, 17, 20]))
    fout = draw(st.sampled_from([1, 5, 16, 33]))
    padding = draw(st.sampled_from(["SAME", "VALID", "EXPLICIT"]))
    pads = [draw(st.integers(0, 3)) for _ in range(4)]
    attrs = conv_attrs(fmt, strides, dilations, padding, pads)
    c = groups * fin
    in_shape = (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)
    g = valid_geometry(in_shape, (kh, kw, fin, groups * fout), False, attrs)
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return g, attrs, dtype, draw(st.integers(0, 2**32 - 1))


def _close(out, exact, bound, dtype):
    assert out.shape == exact.shape and out.dtype == dtype
    err = np.abs(out.astype(np.float64) - exact)
    assert np.all(err <= RTOL[np.dtype(dtype).name] * bound + 1e-300), float(
        np.max(err - RTOL[np.dtype(dtype).name] * bound))


@settings(max_examples=120, deadline=None)
@given(cases())
def test_the_compiled_conv_family_matches_the_reference(case):
    """Also with every ``np.empty`` buffer starting as garbage: the results that skip their
    zeroing pass (the input gradient's) must write every element."""
    g, attrs, dtype, seed = case
    rng = np.random.default_rng(seed)
    x, w, dy = (rng.standard_normal(s).astype(dtype)
                for s in (g.input_shape, g.filter_shape, g.output_shape))
    ax, aw, ady = abs(x), abs(w), abs(dy)
    with _poisoned_empty():
        y = kernels.conv2d(x, w, **attrs)
        dw = kernels.conv2d_backprop_filter(x, g.filter_shape, dy, **attrs)
        dx = kernels.conv2d_backprop_input(g.input_shape, w, dy, **attrs)
    _close(y, reference.conv2d(x, w, g), reference.conv2d(ax, aw, g), dtype)
    _close(dw, reference.backprop_filter(x, dy, g), reference.backprop_filter(ax, ady, g), dtype)
    _close(dx, reference.backprop_input(w, dy, g), reference.backprop_input(aw, ady, g), dtype)


# (input NHWC, filter HWIO, strides, padding): the few-channel filter gradient with padding
# on either side (taps whose columns differ), a filter wider than the image, stride 2
# with 3 channels (the 7x7 benchmark's shape, small), and many channels at stride 2.
EDGE_CASES = [
    ((1, 5, 7, 3), (3, 3, 3, 2), (1, 1, 1, 1), "SAME"),
    ((2, 7, 7, 2), (3, 2, 2, 3), (1, 2, 1, 1), "SAME"),
    ((1, 6, 6, 1), (2, 2, 1, 1), (1, 1, 1, 1), "SAME"),
    ((1, 3, 2, 3), (2, 5, 3, 4), (1, 1, 1, 1), "SAME"),
    ((2, 23, 21, 3), (7, 7, 3, 8), (1, 2, 2, 1), "SAME"),
    ((2, 11, 12, 24), (3, 3, 24, 20), (1, 2, 2, 1), "SAME"),
    ((1, 9, 9, 18), (1, 1, 18, 40), (1, 1, 1, 1), "VALID"),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,fshape,strides,padding", EDGE_CASES)
def test_edge_geometries_on_the_in_place_paths(shape, fshape, strides, padding, dtype):
    """Each of these takes an in-place compiled path (``numba im2col`` on fewer than 16
    channels, else ``numba tiles``) and matches the reference elementwise."""
    rng = np.random.default_rng(1)
    attrs = {"strides": list(strides), "padding": padding}
    g = reference.geometry(shape, fshape, depthwise=False, **attrs)
    x, w = rng.standard_normal(shape).astype(dtype), rng.standard_normal(fshape).astype(dtype)
    dy = rng.standard_normal(g.output_shape).astype(dtype)
    dw = kernels.conv2d_backprop_filter(x, fshape, dy, **attrs)
    assert kernels.last_path() == ("numba im2col" if shape[3] < 16 else "numba tiles")
    _close(dw, reference.backprop_filter(x, dy, g),
           reference.backprop_filter(abs(x), abs(dy), g), dtype)
    dx = kernels.conv2d_backprop_input(shape, w, dy, **attrs)
    _close(dx, reference.backprop_input(w, dy, g),
           reference.backprop_input(abs(w), abs(dy), g), dtype)
    y = kernels.conv2d(x, w, **attrs)
    _close(y, reference.conv2d(x, w, g), reference.conv2d(abs(x), abs(w), g), dtype)


def test_many_channels_take_the_compiled_input_and_forward_paths():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 9, 8, 20)).astype(np.float32)
    w = rng.standard_normal((3, 3, 20, 17)).astype(np.float32)
    attrs = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    y = kernels.conv2d(x, w, **attrs)
    assert kernels.last_path() == "numba tiles"
    kernels.conv2d_backprop_input(x.shape, w, y, **attrs)
    assert kernels.last_path() == "numba tiles"


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("strides,shape", [((2, 2), (3, 11, 9, 20)), ((3, 2), (2, 13, 10, 18))])
def test_input_segments_of_every_phase_split_over_many_cores(monkeypatch, workers, strides,
                                                             shape):
    """All stride phases in one pass over the cores, each core taking its share of every
    phase (phases of different segment counts: odd image sizes), with one segment per call
    and the result's buffer poisoned: every element written, each once."""
    from engine.kernels import parallel
    from engine.kernels._compiled import conv_tiles

    monkeypatch.setattr(conv_tiles, "ROW_BLOCK", 1)
    monkeypatch.setattr(conv_tiles, "CALL_POSITIONS", 1)
    monkeypatch.setattr(parallel, "workers", lambda: workers)
    rng = np.random.default_rng(workers)
    attrs = {"strides": [1, *strides, 1], "padding": "SAME"}
    g = reference.geometry(shape, (3, 3, shape[3], 24), depthwise=False, **attrs)
    w = rng.standard_normal(g.filter_shape).astype(np.float32)
    dy = rng.standard_normal(g.output_shape).astype(np.float32)
    with _poisoned_empty():
        dx = kernels.conv2d_backprop_input(shape, w, dy, **attrs)
    assert kernels.last_path() == "numba tiles"
    _close(dx, reference.backprop_input(w, dy, g), reference.backprop_input(abs(w), abs(dy), g),
           np.float32)


@numba.njit
def _acc2(c, a, b, m, n, kd, ldc, ars, acs, brs, kd2, acs2, brs2):
    gemm_acc2(c, a, b, 0, 0, 0, m, n, kd, ldc, ars, acs, brs, kd2, acs2, brs2)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 14), n=st.integers(1, 70), kd=st.integers(0, 9), kd2=st.integers(0, 4),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_gemm_acc2_sums_over_a_two_level_window(m, n, kd, kd2, dtype, seed):
    """``C[i, j] += sum_{l2, l} A[i, (l2, l)] B[(l2, l), j]`` with A's rows and both levels
    strided (ragged tiles: rows not a multiple of 6, columns not of the vector width)."""
    rng = np.random.default_rng(seed)
    ars, acs, acs2 = 1, m + 2, (m + 2) * (kd + 1) + 3
    brs, ldc = n + 3, n + 1
    brs2 = brs * (kd + 2)
    a = rng.standard_normal(m + kd * acs + kd2 * acs2 + 8).astype(dtype)
    b = rng.standard_normal(kd * brs + kd2 * brs2 + n + 8).astype(dtype)
    c = rng.standard_normal(m * ldc).astype(dtype)
    idx_a = (np.arange(m)[:, None, None] * ars + np.arange(kd2)[None, :, None] * acs2
             + np.arange(kd)[None, None, :] * acs)
    idx_b = np.arange(kd2)[:, None, None] * brs2 + np.arange(kd)[None, :, None] * brs \
        + np.arange(n)[None, None, :]
    prod = np.einsum("ipl,plj->ij", a.astype(np.float64)[idx_a], b.astype(np.float64)[idx_b])
    want = c.astype(np.float64).reshape(m, ldc).copy()
    want[:, :n] += prod
    bound = np.abs(c.astype(np.float64)).reshape(m, ldc).copy()
    bound[:, :n] += np.einsum("ipl,plj->ij", np.abs(a.astype(np.float64))[idx_a],
                              np.abs(b.astype(np.float64))[idx_b])
    _acc2(c, a, b, m, n, kd, ldc, ars, acs, brs, kd2, acs2, brs2)
    eps = np.finfo(dtype).eps
    assert np.all(np.abs(c.reshape(m, ldc) - want) <= (kd * kd2 + 2) * eps * bound)


def test_read_only_operands_run_the_loops_warm_up_compiled():
    """numba types a read-only array apart: the loops always get read-only operands, so a
    caller's read-only (or writable) arrays never compile a second version at run time."""
    from engine.kernels._compiled import conv_tiles, conv_tiles_jit

    conv_tiles.warm((np.float32,))
    loops = (conv_tiles_jit.filter_direct, conv_tiles_jit.segment_products,
             conv_tiles_jit.shifted_products)
    before = [list(f.signatures) for f in loops]  # other tests may have compiled more
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 9, 9, 20)).astype(np.float32)
    w = rng.standard_normal((3, 3, 20, 24)).astype(np.float32)
    dy = rng.standard_normal((2, 5, 5, 24)).astype(np.float32)
    attrs = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    for writable in (True, False):
        for a in (x, w, dy):
            a.setflags(write=writable)
        kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs)
        kernels.conv2d_backprop_input(x.shape, w, dy, **attrs)
        kernels.conv2d(x, w, **attrs)
    assert [list(f.signatures) for f in loops] == before


@pytest.mark.parametrize("channels,filter_shape,strides", [
    (3, (7, 7, 3, 16), [1, 2, 2, 1]),  # few channels: im2col forward and filter, col2im
    (32, (3, 3, 32, 32), [1, 1, 1, 1]),  # Winograd
    (32, (3, 3, 32, 32), [1, 2, 2, 1]),  # the polyphase Winograd (input gradient)
])
def test_read_only_operands_of_the_other_compiled_loops_compile_nothing_new(
        channels, filter_shape, strides):
    """The same for the few-channel loops and Winograd's."""
    from engine.kernels import accel
    from engine.kernels._compiled import (
        conv3d_jit,
        conv_tiles_jit,
        winograd_jit,
        winograd_phases_jit,
    )

    accel.warm_up(("float32",))
    loops = (conv3d_jit.im2col_rows_3d, conv3d_jit.filter_rows_3d, conv_tiles_jit.col2im_rows,
             winograd_jit.patch_tiles,
             winograd_jit.output_tiles, winograd_jit.point_products,
             winograd_jit.point_products_t, winograd_phases_jit.input_chunks)
    before = [list(f.signatures) for f in loops]
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 24, 24, channels)).astype(np.float32)
    w = rng.standard_normal(filter_shape).astype(np.float32)
    attrs = {"strides": strides, "padding": "SAME"}
    dy = kernels.conv2d(x, w, **attrs)
    paths = set()
    for writable in (True, False):
        for a in (x, w, dy):
            a.setflags(write=writable)
        for run in (lambda: kernels.conv2d(x, w, **attrs),
                    lambda: kernels.conv2d_backprop_filter(x, w.shape, dy, **attrs),
                    lambda: kernels.conv2d_backprop_input(x.shape, w, dy, **attrs)):
            run()
            paths.add(kernels.last_path())
    assert paths >= ({"numba im2col", "numba col2im"} if channels == 3
                     else {"winograd"} if strides[1] == 1 else {"winograd phases"})
    assert [list(f.signatures) for f in loops] == before


@pytest.mark.parametrize("strides", [[1, 1, 1, 1], [1, 2, 2, 1]])
def test_read_only_operands_of_the_depthwise_loops_compile_nothing_new(strides):
    """And for the depthwise trio (both input-gradient loops: stride 1 is the forward's)."""
    from engine.kernels import accel
    from engine.kernels._compiled import numba_depthwise

    accel.warm_up(("float32",))
    before = [list(f.signatures) for f in numba_depthwise.KERNELS.values()]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 12, 12, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 8, 2)).astype(np.float32)
    attrs = {"strides": strides, "padding": "SAME"}
    dy = kernels.depthwise_conv2d_native(x, w, **attrs)
    for writable in (True, False):
        for a in (x, w, dy):
            a.setflags(write=writable)
        kernels.depthwise_conv2d_native(x, w, **attrs)
        kernels.depthwise_conv2d_native_backprop_filter(x, w.shape, dy, **attrs)
        kernels.depthwise_conv2d_native_backprop_input(x.shape, w, dy, **attrs)
        assert kernels.last_path() == "numba"
    assert [list(f.signatures) for f in numba_depthwise.KERNELS.values()] == before


def _signatures() -> dict[str, int]:
    """Compiled signatures of every loop of the compiled modules."""
    from numba.core.registry import CPUDispatcher

    from engine.kernels._compiled import conv_tiles_jit, numba_depthwise, winograd_jit

    return {f"{m.__name__}.{name}": len(f.signatures)
            for m in (conv_tiles_jit, numba_depthwise, winograd_jit)
            for name, f in vars(m).items() if isinstance(f, CPUDispatcher)}


def test_after_the_warm_up_no_kernel_call_compiles():
    """The warm-up compiles every loop a call can reach, in the signatures calls use, so the
    app never compiles in the middle of a run: conv and depthwise ops on few and many channels,
    strides 1 and 2, NHWC and NCHW, float32, float64 and float16, writable or read-only."""
    from engine.kernels import accel

    accel.warm_up()
    before = _signatures()
    rng = np.random.default_rng(8)
    for dtype in (np.float32, np.float64, np.float16):
        for fmt in ("NHWC", "NCHW"):
            for channels, stride in ((3, 1), (3, 2), (32, 1), (32, 2)):
                shape = (2, 20, 20, channels) if fmt == "NHWC" else (2, channels, 20, 20)
                s = [1, stride, stride, 1] if fmt == "NHWC" else [1, 1, stride, stride]
                attrs = {"strides": s, "padding": "SAME", "data_format": fmt}
                x = rng.standard_normal(shape).astype(dtype)
                for w, forward, grads in (
                        (rng.standard_normal((3, 3, channels, 32)).astype(dtype),
                         kernels.conv2d, (kernels.conv2d_backprop_filter,
                                          kernels.conv2d_backprop_input)),
                        (rng.standard_normal((3, 3, channels, 2)).astype(dtype),
                         kernels.depthwise_conv2d_native,
                         (kernels.depthwise_conv2d_native_backprop_filter,
                          kernels.depthwise_conv2d_native_backprop_input))):
                    dy = forward(x, w, **attrs)
                    for writable in (True, False):
                        for a in (x, w, dy):
                            a.setflags(write=writable)
                        forward(x, w, **attrs)
                        grads[0](x, w.shape, dy, **attrs)
                        grads[1](x.shape, w, dy, **attrs)
                    for a in (x, w, dy):
                        a.setflags(write=True)
    changed = {k: (before.get(k, 0), n) for k, n in _signatures().items()
               if n != before.get(k, 0)}
    assert changed == {}


def test_a_length_one_axis_with_any_stride_is_still_addressed():
    """A contiguous copy may give a length-1 axis any stride (here the channels of a
    one-channel NCHW input): the in-place path must still read it (it once returned zeros,
    caught by golden case c098)."""
    from numpy.lib.stride_tricks import as_strided

    from engine.kernels._compiled.conv_tiles import flat_nhwc

    a = np.arange(12, dtype=np.float32).reshape(2, 3, 2, 1)
    odd = as_strided(a, a.shape, (24, 8, 4, 24))  # channel stride 24: one channel
    flat, steps = flat_nhwc(odd)
    assert steps == (6, 2, 1)
    np.testing.assert_array_equal(flat, np.arange(12))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 1, 3, 2)).astype(np.float32)
    dy = rng.standard_normal((2, 4, 1, 1)).astype(np.float32)
    attrs = {"strides": [1, 1, 3, 3], "padding": "VALID", "data_format": "NCHW"}
    dw = kernels.conv2d_backprop_filter(x, (1, 1, 1, 4), dy, **attrs)
    want = np.einsum("n,no->o", x[:, 0, 0, 0].astype(np.float64), dy[:, :, 0, 0])
    np.testing.assert_allclose(dw.reshape(-1), want, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("strides,dilations,fshape", [
    ((2, 2), (1, 1), (3, 3, 20, 17)), ((1, 2), (2, 1), (2, 3, 24, 18)),
    ((3, 1), (1, 1), (1, 1, 16, 16))])
def test_the_filter_gradient_reads_an_nchw_input_of_many_channels_in_place(
        monkeypatch, dtype, strides, dilations, fshape):
    """No layout copy of ``x`` (only ``dy`` is copied to NHWC), and the same sums as the NHWC
    call on the same numbers, bit for bit; within RTOL of the float64 reference."""
    from engine.kernels._compiled import transpose

    copied = []
    original = transpose.nchw_operand
    monkeypatch.setattr(transpose, "nchw_operand",
                        lambda a, ct: copied.append(a.shape) or original(a, ct))
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, fshape[2], 13, 11)).astype(dtype)
    attrs = {"strides": [1, 1, *strides], "dilations": [1, 1, *dilations], "padding": "SAME",
             "data_format": "NCHW"}
    y = kernels.conv2d(x, rng.standard_normal(fshape).astype(dtype), **attrs)
    dy = rng.standard_normal(y.shape).astype(dtype)
    copied.clear()
    dw = kernels.conv2d_backprop_filter(x, fshape, dy, **attrs)
    assert kernels.last_path() == "numba tiles"
    assert copied == [(3, *dy.shape[2:], dy.shape[1])]  # dy's NHWC view, never x
    nhwc = {**attrs, "strides": [1, *strides, 1], "dilations": [1, *dilations, 1],
            "data_format": "NHWC"}
    to_nhwc = (0, 2, 3, 1)
    same = kernels.conv2d_backprop_filter(np.ascontiguousarray(x.transpose(to_nhwc)), fshape,
                                          np.ascontiguousarray(dy.transpose(to_nhwc)), **nhwc)
    np.testing.assert_array_equal(dw, same)
    g = conv2d_geometry(x.shape, fshape, attrs["strides"], "SAME", (), "NCHW",
                        attrs["dilations"])
    _close(dw, reference.backprop_filter(x, dy, g), reference.backprop_filter(abs(x), abs(dy), g),
           dtype)
