"""The N-d NumPy core and the 3-D ops against independent oracles: the 2-D kernels on random
2-D cases (the core computes the Conv2D family as the case of two spatial dims), blocks split
finely, JAX's ``lax.conv_general_dilated`` (and ``jax.vjp``) and TensorFlow's raw ops where
installed. Every verdict is ``|got - want| <= RTOL[dtype] * sum |products|``."""

from __future__ import annotations

import numpy as np
import pytest

from engine import kernels
from engine.base.dtypes import RTOL
from engine.kernels import conv_nd
from engine.shapes.conv import conv2d_geometry, conv3d_geometry
from tests import conv3d_reference as ref
from tests import tf_eigen


def _geometry2(rng: np.random.Generator):
    while True:
        taps = tuple(int(k) for k in rng.integers(1, 4, 2))
        dil = tuple(int(d) for d in rng.choice([1, 2], 2))
        spatial = tuple(int(n) for n in rng.integers(3, 9, 2))
        strides = tuple(int(s) for s in rng.integers(1, 4, 2))
        padding = str(rng.choice(["SAME", "VALID"]))
        groups, q, og = (int(v) for v in rng.integers(1, 3, 3))
        xs, ws = (int(rng.integers(1, 3)), *spatial, groups * q), (*taps, q, groups * og)
        if all(n >= (k - 1) * d + 1 for n, k, d in zip(spatial, taps, dil)):
            return xs, ws, [1, *strides, 1], [1, *dil, 1], padding


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_nd_core_computes_the_2d_family_as_the_2d_kernels_do(dtype):
    """300 random 2-D NHWC cases: the core on ``g.nd`` vs conv2d and its two gradients, both
    within RTOL of the float64 reference's sum of |products|."""
    rng = np.random.default_rng(7)
    ct = np.dtype(dtype)
    for _ in range(300):
        xs, ws, strides, dil, padding = _geometry2(rng)
        g = conv2d_geometry(xs, ws, strides, padding, (), "NHWC", dil).nd
        rg = ref.geo(xs, ws, strides[1:3], dil[1:3], padding)
        x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
        dy = rng.standard_normal(g.output_shape).astype(dtype)
        pairs = [
            (conv_nd.conv(g, x, w, ct), kernels.conv2d(x, w, strides, padding, dilations=dil),
             ref.forward(x, w, rg)),
            (conv_nd.backprop_filter(g, x, dy, ct),
             kernels.conv2d_backprop_filter(x, ws, dy, strides, padding, dilations=dil),
             ref.backprop_filter(x, dy, rg)),
            (conv_nd.backprop_input(g, dy, w, ct),
             kernels.conv2d_backprop_input(xs, w, dy, strides, padding, dilations=dil),
             ref.backprop_input(w, dy, rg)),
        ]
        for nd, two, (want, bound) in pairs:
            tol = RTOL[ct.name]
            assert ref.within(nd, want, bound, tol) <= 0 and ref.within(two, want, bound, tol) <= 0
            assert ref.within(nd, two.astype(np.float64), bound, 2 * tol) <= 0


@pytest.mark.parametrize("block_bytes", [1, 700, 5000])
def test_results_do_not_depend_on_how_the_output_is_split_into_blocks(monkeypatch,
                                                                      block_bytes):
    """One output row per block (1 byte), a few rows, whole images: same values."""
    monkeypatch.setattr(conv_nd, "BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(block_bytes)
    for xs, ws, st, pad in [((3, 6, 5, 4, 4), (3, 2, 2, 2, 6), (1, 2, 1), "SAME"),
                            ((2, 7, 4, 5, 2), (2, 3, 1, 2, 3), (3, 1, 2), "VALID")]:
        g = ref.geo(xs, ws, st, (1, 1, 1), pad)
        x, w = rng.standard_normal(xs), rng.standard_normal(ws)
        dy = rng.standard_normal(g.output_shape)
        attrs = {"strides": [1, *st, 1], "padding": pad}
        for got, (want, bound) in [
                (kernels.conv3d(x, w, **attrs), ref.forward(x, w, g)),
                (kernels.conv3d_backprop_filter(x, ws, dy, **attrs),
                 ref.backprop_filter(x, dy, g)),
                (kernels.conv3d_backprop_input(xs, w, dy, **attrs),
                 ref.backprop_input(w, dy, g))]:
            assert ref.within(got, want, bound, RTOL["float64"]) <= 0


def _oracle_cases(rng: np.random.Generator, n: int, *, plain: bool):
    """Random NDHWC cases; ``plain``: no groups or dilations (what TF's CPU runs)."""
    out = []
    while len(out) < n:
        taps = tuple(int(k) for k in rng.integers(1, 4, 3))
        dil = (1, 1, 1) if plain else tuple(int(d) for d in rng.choice([1, 2], 3))
        spatial = tuple(int(v) for v in rng.integers(3, 8, 3))
        strides = tuple(int(s) for s in rng.integers(1, 3, 3))
        padding = str(rng.choice(["SAME", "VALID"]))
        groups = 1 if plain else int(rng.integers(1, 3))
        q, og = (int(v) for v in rng.integers(1, 4, 2))
        xs, ws = (int(rng.integers(1, 3)), *spatial, groups * q), (*taps, q, groups * og)
        if all(n >= (k - 1) * d + 1 for n, k, d in zip(spatial, taps, dil)):
            out.append((xs, ws, strides, dil, padding, groups))
    return out


def test_jax_conv_general_dilated_and_its_vjp_agree():
    """JAX (float32, its own CPU kernels) vs the float64 ops, within float32's RTOL of JAX's
    own sum of |products|: 30 cases (each shape compiles) with groups and dilations."""
    jax = pytest.importorskip("jax")
    from jax import lax

    rng = np.random.default_rng(11)
    for xs, ws, st, dil, padding, groups in _oracle_cases(rng, 30, plain=False):
        g = conv3d_geometry(xs, ws, [1, *st, 1], padding, "NDHWC", [1, *dil, 1])
        x, w = rng.standard_normal(xs), rng.standard_normal(ws)
        dy = rng.standard_normal(g.output_shape)

        def f(a, b, g=g, st=st, dil=dil, groups=groups):
            return lax.conv_general_dilated(
                a, b, st, list(g.pads), rhs_dilation=dil,
                dimension_numbers=("NDHWC", "DHWIO", "NDHWC"), feature_group_count=groups,
                precision=lax.Precision.HIGHEST)

        def grads(a, b, e, f=f):
            y, vjp = jax.vjp(f, a.astype(np.float32), b.astype(np.float32))
            dx, dw = vjp(e.astype(np.float32))
            return np.asarray(y), np.asarray(dw), np.asarray(dx)

        y, dw, dx = grads(x, w, dy)
        by, bdw, bdx = grads(abs(x), abs(w), abs(dy))
        attrs = {"strides": [1, *st, 1], "padding": padding, "dilations": [1, *dil, 1]}
        tol = RTOL["float32"]
        assert ref.within(kernels.conv3d(x, w, **attrs), y, by, tol) <= 0
        assert ref.within(kernels.conv3d_backprop_filter(x, ws, dy, **attrs), dw, bdw, tol) <= 0
        assert ref.within(kernels.conv3d_backprop_input(xs, w, dy, **attrs), dx, bdx, tol) <= 0


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_tensorflows_raw_ops_agree(dtype):
    """tf.raw_ops.Conv3D, Conv3DBackpropFilterV2 and Conv3DBackpropInputV2 on TF's Eigen CPU
    kernels (tests.tf_eigen; NDHWC, no groups or dilations: what they run) vs the ops, 80
    cases, within RTOL[dtype] of the reference's sum of |products|."""
    rng = np.random.default_rng(13)
    cases, calls = [], []
    for xs, ws, st, dil, padding, _ in _oracle_cases(rng, 80, plain=True):
        g = ref.geo(xs, ws, st, dil, padding)
        x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
        dy = rng.standard_normal(g.output_shape).astype(dtype)
        attrs = {"strides": [1, *st, 1], "padding": padding}
        cases.append((g, x, w, dy, attrs))
        calls += [("Conv3D", {"input": x, "filter": w, **attrs}),
                  ("Conv3DBackpropFilterV2", {"input": x, "filter_sizes": list(ws),
                                              "out_backprop": dy, **attrs}),
                  ("Conv3DBackpropInputV2", {"input_sizes": list(xs), "filter": w,
                                             "out_backprop": dy, **attrs})]
    results = tf_eigen.raw_ops(calls)
    tol = 2 * RTOL[dtype]  # two results, each within RTOL of the exact one
    for k, (g, x, w, dy, attrs) in enumerate(cases):
        (s1, y), (s2, dw), (s3, dx) = results[3 * k:3 * k + 3]
        assert (s1, s2, s3) == ("ok", "ok", "ok"), k
        assert ref.within(kernels.conv3d(x, w, **attrs), y, ref.forward(x, w, g)[1], tol) <= 0
        assert ref.within(kernels.conv3d_backprop_filter(x, w.shape, dy, **attrs), dw,
                          ref.backprop_filter(x, dy, g)[1], tol) <= 0
        assert ref.within(kernels.conv3d_backprop_input(x.shape, w, dy, **attrs), dx,
                          ref.backprop_input(w, dy, g)[1], tol) <= 0
