"""engine.kernels._compiled.winograd_simd and the tile loops built on it: each transform against its
matrix formula in float64, over channel counts that fill whole vectors, part of one, or none; the
tile loops against the same formulas on interior and border tiles; the points buffers' layout;
and the filter gradient's blocked sums against TensorFlow-level accuracy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

numba = pytest.importorskip("numba")

from engine import kernels
from engine.kernels._compiled import winograd, winograd_jit
from engine.kernels._compiled.winograd_simd import (
    grad_transform,
    input_transform,
    output_transform,
    phase_input_transform,
    phase_output_transform,
)

# F(2x2, 3x3) (Lavin and Gray), written out here independently of the module's constants
B_T = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))
A_T = ((1, 1, 1, 0), (0, 1, -1, -1))
A = tuple(zip(*A_T, strict=True))

# the stride-2 polyphase transforms: F(3, 2) (points 0, 1, -1, infinity) for the two-tap phase,
# then the one-tap phase's values d[1..3]; results in pixel order, the phases alternating
B3_T = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, -1, 0, 1))
PHASE_IN = (*B3_T, (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1))
PHASE_OUT = ((1, 1, 1, 0, 0, 0, 0), (0, 0, 0, 0, 1, 0, 0), (0, 1, -1, 0, 0, 0, 0),
             (0, 0, 0, 0, 0, 1, 0), (0, 1, 1, 1, 0, 0, 0), (0, 0, 0, 0, 0, 0, 1))

TRANSFORMS = {"input": (input_transform, B_T), "grad": (grad_transform, A),
              "output": (output_transform, A_T), "phase input": (phase_input_transform, PHASE_IN),
              "phase output": (phase_output_transform, PHASE_OUT)}


def _compiled_call(transform):
    """A compiled caller of the intrinsic ``transform`` (intrinsics run inside compiled code)."""
    @numba.njit
    def call(out, src, o0, s0, n, srow, scol, orow, ocol):
        transform(out, src, o0, s0, n, srow, scol, orow, ocol)

    return call


CALLS = {kind: _compiled_call(transform) for kind, (transform, _) in TRANSFORMS.items()}


@settings(max_examples=80, deadline=None)
@given(kind=st.sampled_from(sorted(TRANSFORMS)), channels=st.integers(1, 70),
       dtype=st.sampled_from(["float32", "float64"]), gap=st.integers(0, 5),
       seed=st.integers(0, 2**16))
def test_each_transform_is_its_matrix_formula(kind, channels, dtype, gap, seed):
    """``out[o0 + u*orow + v*ocol + k] = (L d L^T)[u, v]`` with ``d[i, j]`` read at
    ``s0 + i*srow + j*scol + k``; nothing else in ``out`` is written."""
    rng = np.random.default_rng(seed)
    m = np.array(TRANSFORMS[kind][1], np.float64)
    rows, size = m.shape
    scol, ocol = channels + gap, channels + 2 * gap
    srow, orow = size * scol + gap, rows * ocol + 3
    s0, o0 = gap + 1, 2 * gap
    src = rng.standard_normal(s0 + size * srow).astype(dtype)
    out = np.full(o0 + rows * orow, 7.0, dtype)
    CALLS[kind](out, src, o0, s0, channels, srow, scol, orow, ocol)
    d = np.stack([[src[s0 + i * srow + j * scol:][:channels] for j in range(size)]
                  for i in range(size)]).astype(np.float64)
    want = np.einsum("ui,ijk,vj->uvk", m, d, m)
    written = np.zeros(out.shape, bool)
    for u in range(rows):
        for v in range(rows):
            at = o0 + u * orow + v * ocol
            got = out[at:at + channels].astype(np.float64)
            # at most 9 terms of d, separably: 4 roundings each relative to the terms' sizes
            bound = np.einsum("ui,ijk,vj->uvk", abs(m), abs(d), abs(m))[u, v]
            assert np.all(np.abs(got - want[u, v]) <= 4 * np.finfo(dtype).eps * bound)
            written[at:at + channels] = True
    assert np.all(out[~written] == 7.0)


def _tiles_reference(src, size, row0, col0, th, tw, m):
    """float64 ``m d m^T`` of every tile (``d`` the ``size``x``size`` patch at
    ``(2a - row0, 2b - col0)``, zero outside ``src``): ``(16, tiles, C)``."""
    n, h, w, c = src.shape
    padded = np.zeros((n, h + 2 * size + 4, w + 2 * size + 4, c))
    padded[:, size + 2:size + 2 + h, size + 2:size + 2 + w] = src
    out = []
    for img in range(n):
        for a in range(th):
            for b in range(tw):
                r, q = 2 * a - row0 + size + 2, 2 * b - col0 + size + 2
                d = padded[img, r:r + size, q:q + size]
                out.append(np.einsum("ui,ijk,vj->uvk", m, d, m).reshape(16, c))
    return np.stack(out, axis=1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,row0,col0", [((2, 7, 9, 5), 1, 1), ((1, 6, 6, 16), 0, 0),
                                             ((3, 5, 4, 17), 2, 2), ((1, 4, 11, 33), 1, 0)])
def test_tile_loops_match_the_formulas_on_interior_and_border_tiles(dtype, shape, row0, col0):
    """patch_tiles (both transforms) over a sub-range of tiles (planes an odd number of lines
    apart), then output_tiles writing only the outputs inside the image."""
    rng = np.random.default_rng(sum(shape))
    src = rng.standard_normal(shape).astype(dtype)
    n, h, w, c = shape
    th, tw = -(-h // 2), -(-w // 2)
    t0, t1 = 1, n * th * tw - 1
    tol = 8 * np.finfo(dtype).eps * np.abs(src).max()
    for kind, size, origin in (("input", 4, (row0, col0)), ("grad", 2, (0, 0))):
        buf, plane = winograd.points_buffer(t1 - t0, c, np.dtype(dtype))
        winograd_jit.patch_tiles(src, size, *origin, th, tw, t0, t1, buf, plane)
        want = _tiles_reference(src.astype(np.float64), size, *origin, th, tw,
                                np.array(TRANSFORMS[kind][1], float))[:, t0:t1]
        got = winograd._points(buf, plane, t1 - t0, c)
        assert np.abs(got - want).max() <= 4 * tol, kind
    m = rng.standard_normal((16, t1 - t0, c)).astype(dtype)
    buf, plane = winograd.points_buffer(t1 - t0, c, np.dtype(dtype))
    winograd._points(buf, plane, t1 - t0, c)[...] = m
    dst = np.full(shape, 7.0, dtype)
    winograd_jit.output_tiles(buf, plane, th, tw, t0, t1, dst)
    at = np.array(A_T, float)
    full = np.full((n, 2 * th, 2 * tw, c), 7.0)
    for t in range(t0, t1):
        img, a, b = t // (th * tw), t // tw % th, t % tw
        full[img, 2 * a:2 * a + 2, 2 * b:2 * b + 2] = np.einsum(
            "ui,ijk,vj->uvk", at, m[:, t - t0].reshape(4, 4, c).astype(np.float64), at)
    assert np.allclose(dst, full[:, :h, :w], rtol=0, atol=4 * 8 * np.finfo(dtype).eps
                       * np.abs(m).max())


@pytest.mark.parametrize("tiles,channels,dtype", [(128, 64, "float32"), (7, 3, "float64"),
                                                  (1, 1, "float32"), (64, 16, "float32")])
def test_points_buffers_are_line_aligned_with_planes_an_odd_number_of_lines_apart(
        tiles, channels, dtype):
    buf, plane = winograd.points_buffer(tiles, channels, np.dtype(dtype))
    itemsize = np.dtype(dtype).itemsize
    assert buf.ctypes.data % winograd.LINE_BYTES == 0 and buf.size == 16 * plane
    lines, rest = divmod(plane * itemsize, winograd.LINE_BYTES)
    assert rest == 0 and lines % 2 == 1 and plane >= tiles * channels


def test_filter_gradient_blocked_sums_keep_tensorflow_level_accuracy(monkeypatch):
    """Six float32 cases of 32 input and 40 output channels (BLAS products): with one sum per
    chunk the error reached 1.0e-6 of the largest result; TensorFlow's is 2.2e-7 to 3.3e-7."""
    monkeypatch.setenv("GRADBLOCKS_KERNELS", "numba")  # the compiled path, though small
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME"}
    worst = 0.0
    for seed in range(3, 9):
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((3, 17, 14, 32)).astype(np.float32)
        dy = rng.standard_normal((3, 17, 14, 40)).astype(np.float32)
        got = kernels.conv2d_backprop_filter(x, (3, 3, 32, 40), dy, **attrs)
        assert winograd.used() == "winograd"
        exact = kernels.conv2d_backprop_filter(x.astype(np.float64), (3, 3, 32, 40),
                                               dy.astype(np.float64), **attrs)
        worst = max(worst, np.abs(got - exact).max() / np.abs(exact).max())
    assert worst <= 4e-7, worst
