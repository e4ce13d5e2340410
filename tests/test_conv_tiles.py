"""The compiled per-tap conv products (engine.kernels._compiled.conv_tiles,
engine.kernels._compiled.conv_tiles_jit: the ``numba tiles`` path of Conv2D, Conv2DBackpropFilter
and Conv2DBackpropInput) against the NumPy path.

- random geometries on both paths (``GRADBLOCKS_KERNELS=numba`` / ``numpy``; every dtype,
  layout, padding, stride, dilation, 1-2 groups), with the tiles' blocks, call sizes and core
  split forced tiny in some examples, and the routing asserted; fixed geometries that must take
  each tiles route (the forward; the filter gradient read in place or from the phase images;
  the input gradient into the whole result, into NHWC segments or through phase buffers);
- each loop of engine.kernels._compiled.conv_tiles_jit against a float64 NumPy evaluation of its
  docstring formula;
- TensorFlow's golden cases on both paths, NaN/Inf positions, cancellation between compiled
  calls, extra memory as the batch grows, the NumPy path while the warm-up compiles, and the
  warm-up compiling every loop.

Tolerance (as tests/test_kernels_numba.py): both paths are within ``RTOL[dtype] * bound`` of the
exact sum (``bound`` = the op on ``|a|, |b|``), so they differ by at most twice that plus the
output dtype's smallest subnormal.
"""

import os
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

from engine import kernels
from engine.base import cancel
from engine.base.dtypes import DTYPES, RTOL
from engine.kernels import accel, compute, dispatch, im2col_nd, parallel
from engine.kernels._compiled import (
    conv3d_jit,
    conv_tiles,
    conv_tiles_input,
    conv_tiles_jit,
    winograd_phases,
)
from engine.kernels._compiled.numba_simd import lanes, tile_columns
from engine.kernels.layout import PhaseLayout, Tap
from engine.kernels.memory import conv_workspace
from engine.shapes.conv import conv2d_geometry
from tests.golden_cases import ARRAYS, VALID, call_valid
from tests.test_kernels_numba import warming_up
from tests.test_kernels_properties import conv_attrs, conv_cases

ROOT = Path(__file__).resolve().parents[1]
FORWARD = kernels.conv2d
FILTER = kernels.conv2d_backprop_filter
INPUT = kernels.conv2d_backprop_input
KINDS = ("forward", "filter", "input")
TILES = "numba tiles"
#: Paths that take precedence over the tiles (or run no kernel at all).
OTHERS = ("numpy tap-spans", "winograd", "empty")


@pytest.fixture(autouse=True)
def _tiles_not_winograd_phases(monkeypatch):
    """These are tests of the per-tap tiles: the stride-2 input gradients the polyphase
    Winograd would take run on the tiles here (that path is tests/test_winograd_phases.py's)."""
    monkeypatch.setattr(winograd_phases, "applies", lambda g: False)


def _op(kind, x, w, dy, wshape=None, xshape=None):
    """``(op, args)`` of one kind on the operands (shapes default to the arrays')."""
    wshape = w.shape if wshape is None else wshape
    xshape = x.shape if xshape is None else xshape
    return {"forward": (FORWARD, (x, w)), "filter": (FILTER, (x, wshape, dy)),
            "input": (INPUT, (xshape, w, dy))}[kind]


def _abs_args(kind, x, w, dy, g):
    ax, aw, ady = (None if a is None else abs(a).astype(np.float64) for a in (x, w, dy))
    return _op(kind, ax, aw, ady, g.filter_shape, g.input_shape)[1]


def _run(mp, path, op, args, attrs):
    """``op(*args, **attrs)`` with ``GRADBLOCKS_KERNELS=path``: the result and the path taken."""
    mp.setenv(accel.ENV, path)
    out = op(*args, **attrs)
    return out, kernels.last_path()


def _close(compiled, numpy_out, bound, dtype):
    assert compiled.shape == numpy_out.shape and compiled.dtype == numpy_out.dtype
    tiny = float(ml_dtypes.finfo(DTYPES[dtype]).smallest_subnormal)
    err = np.abs(compiled.astype(np.float64) - numpy_out.astype(np.float64))
    assert np.all(err <= 2 * RTOL[dtype] * bound + tiny), float(err.max(initial=0))


def _operands(g, dtype, seed):
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    return tuple(rng.uniform(-1, 1, s).astype(dt)
                 for s in (g.input_shape, g.filter_shape, g.output_shape))


def wide_conv_cases():
    """conv_cases with channel counts around the tiles' widths: up to 40 input channels per
    group (16 and more take the tiles for the forward and input gradient too) and up to 70
    output channels per group (more than one register tile of columns, and remainders)."""
    return conv_cases(max_in=40, max_out=70, sizes=(1, 6), batch=(1, 2))


@st.composite
def tile_settings(draw):
    """None (the defaults), or tiny blocks, calls and ranges: every block, call and core
    boundary of the tiles (and of the few-channel im2col path) falls inside the small random
    cases; NCHW inputs read in place from 16 channels (the default), every channel count or
    none."""
    if draw(st.booleans()):
        return None
    return {"FILTER_BLOCK": draw(st.integers(1, 5)), "ROW_BLOCK": draw(st.integers(1, 7)),
            "CALL_POSITIONS": draw(st.integers(1, 9)),
            "FEW_CHANNELS": draw(st.sampled_from([16, 1, 10**6])),
            "im2col_nd.CALL_ROWS": draw(st.integers(1, 5)),
            "im2col_nd.FORWARD_ROWS": draw(st.integers(1, 4))}


def _nonempty(case) -> bool:
    """Some output position has terms (empty inputs padded to outputs stay in)."""
    g = case[0]
    return g.batch * g.out_rows * g.out_cols > 0


@settings(max_examples=100, deadline=None)
@given(case=st.one_of(conv_cases(), wide_conv_cases()).filter(_nonempty), per_tap=st.booleans(),
       tiny=tile_settings())
def test_tiles_match_the_numpy_path(case, per_tap, tiny):
    """Conv2D and both gradients: the tiles (whenever the routing rules say so) agree with the
    NumPy path. ``per_tap`` sends few channels to the per-tap products too (as
    tests/test_kernels_properties.py does), so the forward and input tiles run on small cases."""
    g, attrs, dtype, seed = case
    x, w, dy = _operands(g, dtype, seed)
    mp = pytest.MonkeyPatch()
    try:
        if per_tap:
            mp.setattr(compute, "IM2COL_MAX_CHANNELS", 1)
        if tiny is not None:
            for name, value in tiny.items():
                module, _, attr = name.rpartition(".")
                mp.setattr(im2col_nd if module else conv_tiles, attr, value)
            mp.setattr(parallel, "MIN_POSITIONS_PER_RANGE", 1)
            mp.setattr(parallel, "MIN_COPY_BYTES", 1)
        few = g.filter_in_depth < compute.IM2COL_MAX_CHANNELS
        for kind in KINDS:
            op, args = _op(kind, x, w, dy, g.filter_shape, g.input_shape)
            numpy_out, numpy_path = _run(mp, "numpy", op, args, attrs)
            compiled, path = _run(mp, "numba", op, args, attrs)
            assert not numpy_path.startswith("numba")
            event(f"{kind}: {path}")  # --hypothesis-show-statistics: how often each path ran
            if path not in OTHERS:  # the routing: tiles unless few channels keep im2col/col2im
                assert path == (TILES if not few else
                                "numba col2im" if kind == "input" and _col2im_compiled(g, dtype)
                                else "numba im2col" if kind != "input"  # any dtype, copied
                                else "numpy col2im")
            mp.setenv(accel.ENV, "numpy")
            _close(compiled, numpy_out, op(*_abs_args(kind, x, w, dy, g), **attrs), dtype)
    finally:
        mp.undo()


def _col2im_compiled(g, dtype: str) -> bool:
    """Few channels' input gradient runs compiled when the result is written in place: in
    the compute dtype, with each group's channels adjacent (NHWC, one channel per group, or
    NCHW images of one pixel) and not empty."""
    return dtype in ("float32", "float64") and g.in_rows * g.in_cols > 0 and (
        g.data_format == "NHWC" or g.filter_in_depth == 1 or g.in_rows * g.in_cols == 1)


def _spy(monkeypatch) -> set[str]:
    """Record which entry points of engine.kernels._compiled.conv_tiles and conv_tiles_input
    compute (the in-place filter
    gradient only when it takes the call: it declines operands it cannot read in place; the input
    gradient's phase products as ``backprop_input(into)`` when they go straight into the
    result) and which loops of engine.kernels._compiled.conv_tiles_jit run."""
    seen: set[str] = set()

    def wrap(module, name):
        real = getattr(module, name)

        def spy(*args):
            out = real(*args)
            if name != "backprop_filter_direct" or out is not None:
                into = name == "backprop_input" and args[3] is not None
                seen.add(name + "(into)" * into)
            return out

        monkeypatch.setattr(module, name, spy)

    for name in ("conv2d", "backprop_filter_direct"):
        wrap(conv_tiles, name)
    for name in ("backprop_input", "backprop_input_into", "backprop_input_planes",
                 "backprop_input_col2im"):
        wrap(conv_tiles_input, name)
    for name in ("filter_direct", "shifted_products", "segment_products", "planes_blocks",
                 "col2im_rows"):
        wrap(conv_tiles_jit, name)
    for name in ("im2col_rows_3d", "filter_rows_3d"):
        wrap(conv3d_jit, name)
    return seen


#: The entry point and loops of each tiles route.
FORWARD_ROWS = {"conv2d", "shifted_products"}
FILTER_IN_PLACE = {"backprop_filter_direct", "filter_direct"}
INPUT_WHOLE = {"backprop_input(into)", "shifted_products"}  # stride 1, no padding
INPUT_SEGMENTS = {"backprop_input_into", "segment_products"}  # NHWC in the compute dtype
INPUT_PLANES = {"backprop_input_planes", "planes_blocks"}  # NCHW: blocks moved from cache
INPUT_PHASES = {"backprop_input", "shifted_products"}  # half types: merged afterwards
INPUT_COL2IM = {"backprop_input_col2im", "col2im_rows"}  # few channels, written in place
#: few channels: every tap in one product, x read in place (engine/kernels/im2col_nd.py)
FORWARD_IM2COL = {"im2col_rows_3d"}
FILTER_IM2COL = {"filter_rows_3d"}
#: The path each compiled route records.
ROUTE_PATHS = {id(INPUT_COL2IM): "numba col2im", id(FORWARD_IM2COL): "numba im2col",
               id(FILTER_IM2COL): "numba im2col"}
S2 = {"strides": [1, 2, 2, 1], "padding": "SAME"}
#: (id, input shape, filter shape, attrs, dtype, the route of each kind: None where few
#: channels keep the NumPy col2im strategy: a result not written in place).
FIXED = [
    ("stride2", (2, 9, 11, 24), (3, 3, 24, 40), S2, "float32",
     (FORWARD_ROWS, FILTER_IN_PLACE, INPUT_SEGMENTS)),
    ("stride2-dilated", (2, 10, 12, 24), (2, 2, 24, 40), S2 | {"dilations": [1, 2, 2, 1]},
     "float32", (FORWARD_ROWS, FILTER_IN_PLACE, INPUT_SEGMENTS)),  # taps in 1 phase of 4
    ("dilated", (1, 10, 9, 20), (3, 3, 20, 33),
     {"strides": [1, 1, 1, 1], "padding": "VALID", "dilations": [1, 2, 2, 1]}, "float32",
     (FORWARD_ROWS, FILTER_IN_PLACE, INPUT_WHOLE)),
    ("1x1-float64", (2, 5, 6, 32), (1, 1, 32, 70), {"strides": [1, 1, 1, 1], "padding": "VALID"},
     "float64", (FORWARD_ROWS, FILTER_IN_PLACE, INPUT_WHOLE)),
    ("grouped", (2, 7, 8, 36), (3, 2, 18, 26), {"strides": [1, 1, 2, 1], "padding": "SAME"},
     "float32", (FORWARD_ROWS, FILTER_IN_PLACE, INPUT_SEGMENTS)),
    ("nchw-explicit", (2, 20, 8, 7), (2, 3, 20, 18),
     {"strides": [1, 1, 2, 1], "padding": "EXPLICIT", "data_format": "NCHW",
      "explicit_paddings": [0, 0, 0, 0, 1, 2, 0, 1]}, "float64",
     (FORWARD_ROWS, FILTER_IN_PLACE, INPUT_PLANES)),
    ("float16", (2, 8, 8, 17), (3, 3, 17, 9), S2, "float16",
     (FORWARD_ROWS, FILTER_IN_PLACE, INPUT_PHASES)),  # computes in float32
    ("few-7x7-s2", (2, 23, 21, 3), (7, 7, 3, 16), S2, "float32",
     (FORWARD_IM2COL, FILTER_IM2COL, INPUT_COL2IM)),
    ("few-7x7-s2-nchw", (2, 3, 23, 21), (7, 7, 3, 16),
     {"strides": [1, 1, 2, 2], "padding": "SAME", "data_format": "NCHW"}, "float32",
     (FORWARD_IM2COL, FILTER_IM2COL, None)),  # copied to NHWC
    ("few-dilated-float64", (2, 12, 11, 5), (3, 3, 5, 7),
     {"strides": [1, 1, 1, 1], "padding": "SAME", "dilations": [1, 2, 2, 1]}, "float64",
     (FORWARD_IM2COL, FILTER_IM2COL, INPUT_COL2IM)),  # dilated columns: every column gathered
]


@pytest.mark.parametrize("case", FIXED, ids=[c[0] for c in FIXED])
def test_fixed_geometries_take_the_tiles_and_match_numpy(monkeypatch, case):
    name, xshape, wshape, attrs, dtype, routes = case
    g = conv2d_geometry(xshape, wshape, **attrs)
    x, w, dy = _operands(g, dtype, 5)
    seen = _spy(monkeypatch)
    for kind, route in zip(KINDS, routes, strict=True):
        op, args = _op(kind, x, w, dy)
        numpy_out, _ = _run(monkeypatch, "numpy", op, args, attrs)
        assert seen == set()
        compiled, path = _run(monkeypatch, "numba", op, args, attrs)
        if route is None:
            assert path == {"forward": "numpy im2col", "input": "numpy col2im"}[kind]
            assert seen == set()
        else:
            assert path == ROUTE_PATHS.get(id(route), TILES), (kind, path)
            assert seen == route, (kind, seen)
        seen.clear()
        monkeypatch.setenv(accel.ENV, "numpy")
        _close(compiled, numpy_out, op(*_abs_args(kind, x, w, dy, g), **attrs), dtype)
    if routes[2] in (INPUT_SEGMENTS, INPUT_PLANES):  # segments written over, or added to a zeroed result
        assert conv_tiles_input.covers_input(PhaseLayout.of(g)) == (name != "stride2-dilated")


# --- the jit loops against their docstring formulas ------------------------------------------

FLOATS = st.sampled_from(["float32", "float64"])


def _eps_bound(got, want, bound, terms, dtype):
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= (terms + 2) * np.finfo(dtype).eps * bound + 1e-300), float(err.max())


def _panels(bs: np.ndarray, nr: int) -> np.ndarray:
    """``B_t[l, j]`` at ``((t*P + j // nr)*k + l)*nr + j % nr`` (the docstring's layout)."""
    taps, k, n = bs.shape
    count = -(-n // nr)
    out = np.zeros(taps * count * k * nr, bs.dtype)
    t, lv, j = np.meshgrid(np.arange(taps), np.arange(k), np.arange(n), indexing="ij")
    out[((t * count + j // nr) * k + lv) * nr + j % nr] = bs
    return out


def _shifted_case(data, dtype, taps, k, n, a_rows):
    """Random taps (shifts reaching past both ends of ``[0, a_rows)``), operands and panels."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    shifts = np.array([data.draw(st.integers(-a_rows - 3, a_rows + 3)) for _ in range(taps)],
                      np.int64)
    lda = data.draw(st.integers(k, k + 3))
    a_bases = np.array([data.draw(st.integers(0, 50)) for _ in range(taps)], np.int64)
    a = rng.standard_normal(int(a_bases.max()) + a_rows * lda + k + 3).astype(dtype)
    bs = rng.standard_normal((taps, k, n)).astype(dtype)
    nr = data.draw(st.sampled_from([tile_columns(np.dtype(dtype).itemsize),
                                    lanes(np.dtype(dtype).itemsize), 5]))
    return rng, shifts, lda, a_bases, a, bs, nr


def _shifted_sum(a, bs, shifts, a_bases, a_rows, lda, q):
    """``sum_t A[q + shift_t] @ B_t`` (taps whose source row is in ``[0, a_rows)``) and the
    same on absolute values, float64, for the destination rows ``q``."""
    n = bs.shape[2]
    want, bound = np.zeros((len(q), n)), np.zeros((len(q), n))
    a64 = a.astype(np.float64)
    for t, s in enumerate(shifts):
        src = q + s
        ok = (src >= 0) & (src < a_rows)
        idx = a_bases[t] + src[ok][:, None] * lda + np.arange(bs.shape[1])[None, :]
        want[ok] += a64[idx] @ bs[t]
        bound[ok] += abs(a64[idx]) @ abs(bs[t].astype(np.float64))
    return want, bound


@settings(max_examples=100, deadline=None)
@given(dtype=FLOATS, taps=st.integers(1, 5), k=st.integers(1, 20), n=st.integers(1, 70),
       a_rows=st.integers(1, 30), q_lo=st.integers(0, 8), count=st.integers(0, 30),
       mb=st.integers(1, 40), overwrite=st.booleans(), data=st.data())
def test_shifted_products_is_its_formula(dtype, taps, k, n, a_rows, q_lo, count, mb, overwrite,
                                         data):
    """``c[c_base + q*ldc + j] (+)= sum_t A[q + shift_t] @ B_t`` for ``q_lo <= q < q_hi``:
    shifts that clip at both ends, row blocks smaller than the range, the first tap covering
    a block or not (overwrite: the rows start as NaN, never read), nothing else written."""
    rng, shifts, lda, a_bases, a, bs, nr = _shifted_case(data, dtype, taps, k, n, a_rows)
    q_hi = q_lo + count
    ldc = n + data.draw(st.integers(0, 4))
    c_base = data.draw(st.integers(0, 6))
    c = rng.standard_normal(c_base + (q_hi + 2) * ldc).astype(dtype)
    before = c.copy()
    rows = c[c_base:].reshape(-1, ldc)  # a view: row q of C
    q = np.arange(q_lo, q_hi)
    want, bound = _shifted_sum(a, bs, shifts, a_bases, a_rows, lda, q)
    if overwrite:
        rows[q_lo:q_hi, :n] = np.nan
    else:
        want += rows[q_lo:q_hi, :n]
        bound += abs(rows[q_lo:q_hi, :n].astype(np.float64))
    bp = _panels(bs, nr)
    if nr == tile_columns(np.dtype(dtype).itemsize):  # the engine's packing, both ways round
        taps_ = [Tap(0, t, 0, 0, 0) for t in range(taps)]
        np.testing.assert_array_equal(conv_tiles.tap_panels(bs[None], taps_, False), bp)
        flipped = np.ascontiguousarray(bs.transpose(0, 2, 1)[None])
        np.testing.assert_array_equal(conv_tiles.tap_panels(flipped, taps_, True), bp)
    conv_tiles_jit.shifted_products(c, a, bp, c_base, q_lo, q_hi, shifts, a_bases, a_rows, lda,
                                    ldc, k, n, nr, mb, overwrite)
    _eps_bound(rows[q_lo:q_hi, :n], want, bound, taps * k, dtype)
    untouched = np.ones(c.shape, bool)
    untouched[c_base:].reshape(-1, ldc)[q_lo:q_hi, :n] = False
    np.testing.assert_array_equal(c[untouched], before[untouched])


@settings(max_examples=100, deadline=None)
@given(dtype=FLOATS, taps=st.integers(1, 4), k=st.integers(1, 20), n=st.integers(1, 70),
       a_rows=st.integers(1, 30), length=st.integers(1, 9), segments=st.integers(1, 8),
       interleave=st.integers(1, 3), overwrite=st.booleans(), data=st.data())
def test_segment_products_is_its_formula(dtype, taps, k, n, a_rows, length, segments,
                                         interleave, overwrite, data):
    """``c[c_bases[s] + r*ldc + j] (+)= sum_t A[q_starts[s] + r + shift_t] @ B_t``: segments
    whose rows interleave (a column step of ``interleave`` segment widths, as the phases of
    the input gradient's NHWC result), clipped shifts, a sub-range of segments; with
    ``overwrite`` their elements start as NaN (never read)."""
    rng, shifts, lda, a_bases, a, bs, nr = _shifted_case(data, dtype, taps, k, n, a_rows)
    ldc = interleave * n + data.draw(st.integers(0, 3))
    slots = np.array(data.draw(st.permutations(range(segments))), np.int64)
    c_bases = (slots // interleave) * length * ldc + (slots % interleave) * n + 2
    q_starts = np.array([data.draw(st.integers(-length - 2, a_rows + 2))
                         for _ in range(segments)], np.int64)
    s_lo = data.draw(st.integers(0, segments - 1))
    s_hi = data.draw(st.integers(s_lo, segments))
    c = rng.standard_normal(int(c_bases.max()) + length * ldc + 3).astype(dtype)
    touched = np.zeros(c.shape, bool)
    for s in range(s_lo, s_hi):
        touched[c_bases[s] + np.arange(length)[:, None] * ldc + np.arange(n)[None, :]] = True
    if overwrite:
        c[touched] = np.nan
    before = c.copy()
    want = np.where(touched & overwrite, 0, c.astype(np.float64))
    bound = abs(want)
    for s in range(s_lo, s_hi):
        w_s, b_s = _shifted_sum(a, bs, shifts, a_bases, a_rows, lda,
                                q_starts[s] + np.arange(length))
        idx = c_bases[s] + np.arange(length)[:, None] * ldc + np.arange(n)[None, :]
        want[idx] += w_s
        bound[idx] += b_s
    conv_tiles_jit.segment_products(c, a, _panels(bs, nr), c_bases, q_starts, length, ldc, s_lo,
                                    s_hi, shifts, a_bases, a_rows, lda, k, n, nr, overwrite)
    _eps_bound(c[touched], want[touched], bound[touched], taps * k, dtype)
    np.testing.assert_array_equal(c[~touched], before[~touched])


def _strided(rng, dtype, shape, pad_cols, pad_channels):
    """A random NHWC array ``shape`` inside a flat buffer: each pixel ``pad_channels`` and each
    row ``pad_cols`` pixels wider, the gaps NaN (a read of them shows). The flat buffer and
    its element strides (image, row, column)."""
    n, h, w, c = shape
    full = np.full((n, h, w + pad_cols, c + pad_channels), np.nan, dtype)
    full[:, :, :w, :c] = rng.uniform(-1, 1, shape)
    sw = c + pad_channels
    return full.reshape(-1), (h * (w + pad_cols) * sw, (w + pad_cols) * sw, sw)


@settings(max_examples=100, deadline=None)
@given(dtype=FLOATS, n=st.integers(1, 3), in_rows=st.integers(1, 9),
       in_cols=st.integers(1, 9), out_rows=st.integers(1, 7), out_cols=st.integers(1, 7),
       ci=st.integers(1, 20), co=st.integers(1, 70), sr=st.integers(1, 3), sc=st.integers(1, 3),
       data=st.data())
def test_the_in_place_filter_loop_is_its_formula(dtype, n, in_rows, in_cols, out_rows,
                                                 out_cols, ci, co, sr, sc, data):
    """``filter_direct``: ``out[t*ci*co + i*co + j] += sum_{r, c} x[n, r*sr + row_offs[t],
    c*sc + col_offs[t], i] * dy[n, r, c, j]``, any offsets per tap, summed over the pixels
    inside ``x`` of the work items ``[items_lo, items_hi)`` (image, block of output rows):
    offsets past both sides, strided operands (their gaps NaN, never read), rows per block not
    dividing the rows."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    adjacent = data.draw(st.booleans())  # pixels adjacent, or channels padded
    xf, xs = _strided(rng, dtype, (n, in_rows, in_cols, ci), data.draw(st.integers(0, 2)),
                      0 if adjacent else data.draw(st.integers(1, 3)))
    x_channel = 1
    if data.draw(st.booleans()):  # channels a plane apart (NCHW)
        planes = rng.uniform(-1, 1, (n, ci, in_rows, in_cols)).astype(dtype)
        xf, xs, x_channel = planes.reshape(-1), (ci * in_rows * in_cols, in_cols, 1), in_rows * in_cols
    df, ds = _strided(rng, dtype, (n, out_rows, out_cols, co), data.draw(st.integers(0, 2)),
                      data.draw(st.integers(0, 3)))
    count = data.draw(st.integers(1, 6))  # offsets mostly inside x, clipped on one side
    row_offs, col_offs = (np.array([data.draw(st.integers(-3, size)) for _ in range(count)],
                                   np.int64) for size in (in_rows, in_cols))
    taps = list(zip(range(count), row_offs, col_offs, strict=True))
    rows_per_block = data.draw(st.integers(1, out_rows + 1))
    blocks = -(-out_rows // rows_per_block)
    items_lo = data.draw(st.integers(0, n * blocks - 1))
    items_hi = data.draw(st.integers(items_lo, n * blocks))
    out = rng.standard_normal(len(taps) * ci * co).astype(dtype)
    want = out.astype(np.float64).reshape(len(taps), ci, co)
    bound = abs(want)
    x64, d64 = (f.astype(np.float64) for f in (xf, df))
    terms = 0
    for item in range(items_lo, items_hi):
        img, b = divmod(item, blocks)
        for t, ro, cofs in taps:
            for r in range(b * rows_per_block, min(out_rows, (b + 1) * rows_per_block)):
                cv = np.array([c for c in range(out_cols) if 0 <= c * sc + cofs < in_cols])
                if not 0 <= r * sr + ro < in_rows or not len(cv):
                    continue
                xa = x64[img * xs[0] + (r * sr + ro) * xs[1] + (cv * sc + cofs)[:, None] * xs[2]
                         + np.arange(ci) * x_channel]
                da = d64[img * ds[0] + r * ds[1] + cv[:, None] * ds[2] + np.arange(co)]
                want[t] += xa.T @ da
                bound[t] += abs(xa).T @ abs(da)
                terms = max(terms, len(cv))
    common = (out, xf, df, items_lo, items_hi, blocks, rows_per_block, np.array(xs, np.int64),
              np.array(ds, np.int64), sr, sc, in_rows, in_cols, out_rows, out_cols, row_offs,
              col_offs)
    conv_tiles_jit.filter_direct(*common, ci, co, x_channel)
    _eps_bound(out.reshape(want.shape), want, bound, n * out_rows * out_cols, dtype)


# --- TensorFlow's golden cases ---------------------------------------------------------------

CONV_GOLDEN = [c for c in VALID if c["op"].startswith("Conv2D")]


def _per_tap(monkeypatch, path: str) -> str:
    """``numba-per-tap``: the compiled path with few channels sent to the per-tap products (so
    the golden Conv2D and input-gradient cases, all on few channels, run on the tiles too)."""
    if path == "numba-per-tap":
        monkeypatch.setattr(compute, "IM2COL_MAX_CHANNELS", 1)
        return "numba"
    return path


@pytest.mark.parametrize("path", ["numpy", "numba", "numba-per-tap"])
@pytest.mark.parametrize("case", CONV_GOLDEN, ids=[c["id"] for c in CONV_GOLDEN])
def test_conv_golden_cases_on_both_paths(monkeypatch, case, path):
    monkeypatch.setenv(accel.ENV, _per_tap(monkeypatch, path))
    out = call_valid(case)
    ran = kernels.last_path()
    assert ran.startswith("numpy") or ran in (TILES, "numba col2im", "numba im2col", "empty",
                                              "winograd")
    if path == "numpy":
        assert not ran.startswith("numba")
    exact, bound = ARRAYS[case["id"] + ".exact"], ARRAYS[case["id"] + ".bound"]
    assert out.shape == exact.shape
    err = np.abs(out.astype(np.float64) - exact)
    assert np.all(err <= case["rtol"] * bound + 1e-30)


def test_golden_conv_cases_exist_and_run_on_the_tiles(monkeypatch):
    """Every golden filter gradient that runs a kernel takes the tiles (few channels: the
    im2col path); with the per-tap products forced, every case does."""
    assert len(CONV_GOLDEN) >= 60
    for path in ("numba", "numba-per-tap"):
        monkeypatch.setenv(accel.ENV, _per_tap(monkeypatch, path))
        paths: dict[str, set[str]] = {}
        for case in CONV_GOLDEN:
            call_valid(case)
            paths.setdefault(case["op"], set()).add(kernels.last_path())
        assert paths["Conv2DBackpropFilter"] - set(OTHERS) == (
            {"numba im2col"} if path == "numba" else {TILES})
        if path == "numba-per-tap":
            assert TILES in paths["Conv2D"] and TILES in paths["Conv2DBackpropInput"]


# --- NaN and Inf ------------------------------------------------------------------------------

@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("kind", ["filter", "input"])
def test_nan_and_inf_land_where_the_numpy_path_puts_them(monkeypatch, kind, stride, layout,
                                                         padding):
    """NaN, +Inf and -Inf in both operands (one in a corner, next to the padding): the same
    NaN/±Inf masks on both paths, and the finite elements close. NHWC reads the filter
    gradient's operands in place and writes the input gradient's rows straight into the
    result (stride 1 VALID: the whole result; else segments); NCHW goes through the phase
    images."""
    attrs = conv_attrs(layout, (stride, stride), (1, 1), padding, [])
    xshape = (2, 11, 10, 20) if layout == "NHWC" else (2, 20, 11, 10)
    g = conv2d_geometry(xshape, (3, 2, 20, 24), **attrs)  # 3x2: never Winograd
    for seed in range(3):
        rng = np.random.default_rng(seed)
        x, w, dy = _operands(g, "float32", seed)
        a, b = (x, dy) if kind == "filter" else (w, dy)
        for arr in (a, b):
            flat = arr.reshape(-1)
            for value in (np.nan, np.inf, -np.inf):
                flat[rng.integers(flat.size)] = value
        a.reshape(-1)[0] = np.nan  # a corner, next to the padding
        op, args = _op(kind, x, w, dy)
        with np.errstate(invalid="ignore"):
            numpy_out, _ = _run(monkeypatch, "numpy", op, args, attrs)
            compiled, path = _run(monkeypatch, "numba", op, args, attrs)
        assert path == TILES
        for test in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(test(compiled), test(numpy_out))
        assert np.isnan(compiled).any() and not np.isnan(compiled).all()
        fin = np.isfinite(numpy_out)
        np.testing.assert_allclose(compiled[fin], numpy_out[fin], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels", [4, 20])  # the im2col path, the tiles
def test_a_nan_no_term_reads_stays_out_of_the_tiles_result(monkeypatch, channels):
    """Stride 2 VALID with a 2x2 filter never reads the last input row and column: a NaN there
    leaves the filter gradient finite on both paths; an Inf that one tap reads reaches that
    tap's channel only."""
    attrs = {"strides": [1, 2, 2, 1], "padding": "VALID"}
    g = conv2d_geometry((1, 9, 9, channels), (2, 2, channels, 8), **attrs)
    x, _, dy = _operands(g, "float32", 1)
    x[0, 8, 3, 1] = x[0, 3, 8, 2] = np.nan
    for layout in ("NHWC", "NCHW"):  # read in place, and from the phase images
        to = (lambda a: a) if layout == "NHWC" else (lambda a: a.transpose(0, 3, 1, 2))
        xv, dyv = to(x), to(dy)
        nattrs = attrs if layout == "NHWC" else {"strides": [1, 1, 2, 2], "padding": "VALID",
                                                 "data_format": "NCHW"}
        out, path = _run(monkeypatch, "numba", FILTER, (xv.copy(), g.filter_shape, dyv.copy()),
                         nattrs)
        assert path == (TILES if channels >= 16 else "numba im2col"), layout
        assert np.isfinite(out).all(), layout
        xi = x.copy()
        xi[0, 3, 7, 1] = np.inf  # input row 3 = 2*1 + 1, column 7 = 2*3 + 1: tap (1, 1) only
        out, _ = _run(monkeypatch, "numba", FILTER, (to(xi).copy(), g.filter_shape, dyv.copy()),
                      nattrs)
        assert np.isinf(out[1, 1, 1]).all()
        finite = np.ones(out.shape, bool)
        finite[1, 1, 1] = False
        np.testing.assert_array_equal(np.isfinite(out), finite)


# --- cancellation, memory, warm-up ------------------------------------------------------------

#: (id, kind, stride, layout): the filter gradient read in place (NHWC) or from the phase
#: images (NCHW); the input gradient into NHWC segments (stride 2), into the whole
#: C-contiguous result (stride 1, no padding) or into NCHW blocks of rows.
CANCEL_CASES = [("filter-in-place", "filter", 2, "NHWC"), ("filter-phases", "filter", 2, "NCHW"),
                ("input-segments", "input", 2, "NHWC"), ("input-direct", "input", 1, "NHWC"),
                ("input-phases", "input", 2, "NCHW")]


@pytest.mark.parametrize("case", CANCEL_CASES, ids=[c[0] for c in CANCEL_CASES])
def test_a_cancelled_run_stops_between_compiled_calls(monkeypatch, case):
    """With small calls, a cancel set by another thread stops the tiles at the next call."""
    _, kind, stride, layout = case
    monkeypatch.setenv(accel.ENV, "numba")
    monkeypatch.setattr(conv_tiles, "CALL_POSITIONS", 16)
    monkeypatch.setattr(conv_tiles, "FILTER_BLOCK", 16)  # in place: one output row per item
    attrs = conv_attrs(layout, (stride, stride), (1, 1), "SAME" if stride == 2 else "VALID", [])
    shape = (2, 40, 40, 16) if layout == "NHWC" else (2, 16, 40, 40)
    g = conv2d_geometry(shape, (3, 2, 16, 16), **attrs)
    x, w, dy = _operands(g, "float32", 2)
    op, args = _op(kind, x, w, dy)
    real = conv_tiles.checkpoint
    calls = []
    monkeypatch.setattr(conv_tiles, "checkpoint", lambda: (calls.append(1), real()))
    op(*args, **attrs)
    assert kernels.last_path() == TILES
    total = len(calls)
    assert total >= 20  # many compiled calls

    cancelled, reached = threading.Event(), threading.Event()
    calls.clear()

    def counting():
        calls.append(1)
        if len(calls) >= 3:  # every core's checkpoint from the third on waits for the cancel:
            reached.set()    # without that, the other core's calls ran on until the canceller
            assert cancelled.wait(10)  # thread got to run (8 and 11 calls, CI under load)
        real()

    # the canceller is slow on purpose (a loaded machine's thread wake-up): no core may run on
    canceller = threading.Thread(target=lambda: (reached.wait(10), time.sleep(0.05),
                                                 cancelled.set()))
    canceller.start()
    monkeypatch.setattr(conv_tiles, "checkpoint", counting)
    try:
        with cancel.scope(cancelled), pytest.raises(cancel.Cancelled):
            op(*args, **attrs)
    finally:
        reached.set()
        canceller.join()
    assert kernels.last_path() == TILES
    assert 3 <= len(calls) <= 3 + parallel.workers() < total  # at most one more per core


def _peak(fn) -> tuple[int, object]:
    """tracemalloc's peak of ``fn()`` above what was allocated before (NumPy reports its
    buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return peak, out


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("kind", ["filter", "input"])
def test_tiles_extra_memory_is_bounded_as_the_batch_grows_and_within_the_estimate(
        monkeypatch, kind, layout):
    """NHWC: the filter gradient read in place, the input gradient into segments of the result
    (batch chunks of E); NCHW: phase images and buffers per batch chunk."""
    monkeypatch.setenv(accel.ENV, "numba")
    monkeypatch.setattr(compute, "CHUNK_BYTES", 2**18)  # a few images per chunk
    attrs = conv_attrs(layout, (2, 2), (1, 1), "SAME", [])
    extras = []
    for batch in (4, 32):
        shape = (batch, 32, 32, 32)  # 32 channels whichever the layout
        g = conv2d_geometry(shape, (3, 3, 32, 32), **attrs)
        x, w, dy = _operands(g, "float32", batch)
        op, args = _op(kind, x, w, dy)
        op(*args, **attrs)  # compiled (or loaded from the cache) before measuring
        peak, out = _peak(lambda: op(*args, **attrs))  # noqa: B023 - called at once
        assert kernels.last_path() == TILES
        extra = peak - out.nbytes
        assert extra <= conv_workspace(g, kind, "float32", True)
        extras.append(extra)
    assert extras[1] <= extras[0] + 2**16, extras  # 8x the batch, the same workspace
    assert extras[1] <= 4 * 2**18 + 2**20


def test_auto_takes_the_tiles_whatever_is_still_loading(monkeypatch):
    """The path is a function of the call: a filter gradient over the size rule takes the
    tiles in every compute dtype while the app's background load has only float64 done
    (half types compute in float32)."""
    with warming_up(monkeypatch, {"float64"}):
        attrs = {"strides": [1, 2, 2, 1], "padding": "SAME"}
        g = conv2d_geometry((12, 33, 33, 20), (3, 3, 20, 24), **attrs)
        assert dispatch.numpy_seconds(g) >= accel.COMPILED_FROM_SECONDS
        x, _, dy = _operands(g, "float64", 3)
        expected = {}
        for dt in (np.float32, np.float64, np.float16):
            out = FILTER(x.astype(dt), g.filter_shape, dy.astype(dt), **attrs)
            expected[dt] = kernels.last_path()
            np.testing.assert_allclose(out, FILTER(x, g.filter_shape, dy, **attrs),
                                       rtol=1e-2, atol=1e-1)
        assert expected == {np.float32: TILES, np.float64: TILES, np.float16: TILES}


def test_the_background_warm_up_compiles_every_tiles_loop():
    """accel.warm_up runs every loop of engine.kernels._compiled.conv_tiles_jit (and of the
    few-channel Conv3D's conv3d_jit), so they are
    compiled (or loaded from the cache) before a dtype is marked ready: in a fresh process, warm_up
    alone leaves no loop without a float32 signature (a loop it misses would compile in the first
    call)."""
    code = (
        "import numba\n"
        "from engine.kernels import accel\n"
        "from engine.kernels._compiled import conv3d_jit, conv_tiles_jit\n"
        "accel.warm_up(('float32',))\n"
        "assert accel._ready == {'float32'}\n"
        "loops = {m.__name__ + '.' + n: f for m in (conv_tiles_jit, conv3d_jit)\n"
        "         for n, f in vars(m).items()\n"
        "         if isinstance(f, numba.core.dispatcher.Dispatcher) and not n.startswith('_')\n"
        "         and f.py_func.__module__ == m.__name__}\n"
        "assert len(loops) >= 7, sorted(loops)\n"
        "cold = [n for n, f in loops.items()\n"
        "        if not any(s[0].dtype.name == 'float32' for s in f.signatures)]\n"
        "assert not cold, f'not compiled by warm_up: {cold}'\n")
    env = dict(os.environ, GRADBLOCKS_KERNELS="auto")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
