"""3-D conv implementations for ``gradblocks verify`` (tests/test_verify_conv3d.py): tap loops
written here from the definition (not from engine.kernels or engine.verify), correct in both
conventions, and the same loops with one planted bug each.

Per spatial dimension, output position ``p`` and tap ``t`` read input position
``p*s + t*d - before`` (zero outside). The loops read a zero-padded "virtual" input covering
every position read and, per tap, take one strided slice of it: forward, filter gradient and
input gradient are then one einsum per tap (channels last, filter DHWIO, grouped).

Bugs: ``same_pad_depth`` (SAME's odd extra padding put before in depth only),
``flip_depth`` (the forward filter reversed in depth only), ``dilation_depth_ignored`` (the
depth dilation read as 1, the output size right) and ``strides_dh_swapped`` (the depth and
height strides exchanged when read).
"""

from __future__ import annotations

import itertools

import numpy as np


def _window(n, k, s, d, padding, bug="", axis=0):
    """(out, before) of one dimension, TensorFlow's SAME or VALID."""
    eff = (k - 1) * d + 1
    if padding == "VALID":
        return max(0, (n - eff) // s + 1) if n >= eff else 0, 0
    out = -(-n // s)
    total = max(0, (out - 1) * s + eff - n)
    before = total - total // 2 if bug == "same_pad_depth" and axis == 0 else total // 2
    return out, before


def _geometry(kw, spatial, kernel, bug=""):
    """Per dimension (size, k, stride, dilation, out, before) from TF's keyword arguments."""
    fmt = kw.get("data_format", "NDHWC")
    axes = range(1, 4) if fmt == "NDHWC" else range(2, 5)
    strides = [kw["strides"][a] for a in axes]
    dils = [kw.get("dilations", [1] * 5)[a] for a in axes]
    if bug == "strides_dh_swapped":
        strides[0], strides[1] = strides[1], strides[0]
    dims = []
    for i, (n, k, s, d) in enumerate(zip(spatial, kernel, strides, dils)):
        out, before = _window(n, k, s, d, kw["padding"], bug, i)
        if bug == "dilation_depth_ignored" and i == 0:
            d = 1  # the reads undilated, the output size as TensorFlow's
        dims.append((n, k, s, d, out, before))
    return dims


def _virtual(dims):
    """(virtual lengths, slices of the real input inside the virtual one)."""
    lengths = [(o - 1) * s + (k - 1) * d + 1 if o else 0 for n, k, s, d, o, b in dims]
    virt, real = [slice(None)], [slice(None)]
    for (n, k, s, d, o, b), length in zip(dims, lengths):
        v0 = max(0, b)
        v1 = max(v0, min(length, n + b))
        virt.append(slice(v0, v1))
        real.append(slice(v0 - b, v1 - b))
    return lengths, tuple(virt), tuple(real)


def _taps(dims):
    for t in itertools.product(*(range(k) for n, k, s, d, o, b in dims)):
        yield t, (slice(None), *(slice(ti * d, ti * d + (o - 1) * s + 1, s)
                                 for ti, (n, k, s, d, o, b) in zip(t, dims)))


def _cl(a, fmt):
    return np.asarray(a, np.float64) if fmt == "NDHWC" else \
        np.moveaxis(np.asarray(a, np.float64), 1, -1)


def _back(a, fmt):
    return a if fmt == "NDHWC" else np.moveaxis(a, -1, 1)


def forward(input, filter, bug="", **kw):
    fmt = kw.get("data_format", "NDHWC")
    x, w = _cl(input, fmt), np.asarray(filter, np.float64)
    if bug == "flip_depth":
        w = w[::-1]
    *kernel, q, o = w.shape
    groups = x.shape[-1] // q
    dims = _geometry(kw, x.shape[1:4], kernel, bug)
    lengths, virt, real = _virtual(dims)
    xv = np.zeros((x.shape[0], *lengths, x.shape[-1]))
    xv[virt] = x[real]
    y = np.zeros((x.shape[0], *(d[4] for d in dims), groups, o // groups))
    wg = w.reshape(*kernel, q, groups, o // groups)
    for t, sl in _taps(dims):
        xs = xv[sl].reshape(*y.shape[:4], groups, q)
        y += np.einsum("...gq,qgo->...go", xs, wg[t])
    return _back(y.reshape(*y.shape[:4], o), fmt).astype(np.asarray(input).dtype)


def backprop_filter(input, filter_sizes, out_backprop, bug="", **kw):
    fmt = kw.get("data_format", "NDHWC")
    x, dy = _cl(input, fmt), _cl(out_backprop, fmt)
    *kernel, q, o = filter_sizes
    groups = x.shape[-1] // q
    dims = _geometry(kw, x.shape[1:4], kernel, bug)
    lengths, virt, real = _virtual(dims)
    xv = np.zeros((x.shape[0], *lengths, x.shape[-1]))
    xv[virt] = x[real]
    dw = np.zeros((*kernel, q, groups, o // groups))
    dyg = dy.reshape(*dy.shape[:4], groups, o // groups)
    for t, sl in _taps(dims):
        xs = xv[sl].reshape(*dy.shape[:4], groups, q)
        dw[t] = np.einsum("ndhwgq,ndhwgo->qgo", xs, dyg)
    return dw.reshape(filter_sizes).astype(np.asarray(input).dtype)


def backprop_input(input_sizes, filter, out_backprop, bug="", **kw):
    fmt = kw.get("data_format", "NDHWC")
    w, dy = np.asarray(filter, np.float64), _cl(out_backprop, fmt)
    sizes = list(input_sizes) if fmt == "NDHWC" else [input_sizes[i] for i in (0, 2, 3, 4, 1)]
    *kernel, q, o = w.shape
    groups = sizes[-1] // q
    dims = _geometry(kw, sizes[1:4], kernel, bug)
    lengths, virt, real = _virtual(dims)
    dxv = np.zeros((sizes[0], *lengths, groups, q))
    wg = w.reshape(*kernel, q, groups, o // groups)
    dyg = dy.reshape(*dy.shape[:4], groups, o // groups)
    for t, sl in _taps(dims):
        dxv[sl] += np.einsum("...go,qgo->...gq", dyg, wg[t])
    dx = np.zeros(sizes)
    dx[real] = dxv.reshape(*dxv.shape[:4], sizes[-1])[virt]
    return _back(dx, fmt).astype(np.asarray(filter).dtype)


# -- the tf convention ----------------------------------------------------------------------

def Conv3D(**kw):
    return forward(**kw)


def Conv3DBackpropFilterV2(**kw):
    return backprop_filter(**kw)


def Conv3DBackpropInputV2(**kw):
    return backprop_input(**kw)


def conv3d_same_pad_depth(**kw):
    return forward(bug="same_pad_depth", **kw)


def conv3d_flip_depth(**kw):
    return forward(bug="flip_depth", **kw)


def conv3d_dilation_depth_ignored(**kw):
    return forward(bug="dilation_depth_ignored", **kw)


def conv3d_strides_dh_swapped(**kw):
    return forward(bug="strides_dh_swapped", **kw)


def backprop_input_same_pad_depth(**kw):
    return backprop_input(bug="same_pad_depth", **kw)


# -- the torch convention: NCDHW, OIDHW, int paddings ---------------------------------------

def _tf_kw(stride, padding, dilation):
    """TF's keywords of a symmetric torch padding: VALID on an input padded by hand."""
    return {"strides": [1, *stride, 1], "padding": "VALID", "dilations": [1, *dilation, 1],
            "data_format": "NDHWC"}


def _padded(x, padding):
    return np.pad(x, [(0, 0), *((p, p) for p in padding), (0, 0)])


def _ndhwc(a):
    return np.moveaxis(np.asarray(a, np.float64), 1, -1)


def _dhwio(w):
    return np.asarray(w, np.float64).transpose(2, 3, 4, 1, 0)


#: The TF-convention functions the torch wrappers call: these loops, or (``KERNELS``) any
#: others of the same keywords, e.g. engine.kernels'.
LOOPS = {"forward": forward, "filter": backprop_filter, "input": backprop_input}


def conv3d(input, weight, bias=None, stride=(1, 1, 1), padding=(0, 0, 0),
           dilation=(1, 1, 1), groups=1, ops=LOOPS):
    y = ops["forward"](_padded(_ndhwc(input), padding), _dhwio(weight),
                       **_tf_kw(stride, padding, dilation))
    return np.moveaxis(y, -1, 1).astype(input.dtype)


def conv3d_weight(input, weight_size, grad_output, stride=(1, 1, 1), padding=(0, 0, 0),
                  dilation=(1, 1, 1), groups=1, ops=LOOPS):
    o, q, *k = weight_size
    dw = ops["filter"](_padded(_ndhwc(input), padding), [*k, q, o], _ndhwc(grad_output),
                         **_tf_kw(stride, padding, dilation))
    return dw.transpose(4, 3, 0, 1, 2).astype(input.dtype)


def conv3d_input(input_size, weight, grad_output, stride=(1, 1, 1), padding=(0, 0, 0),
                 dilation=(1, 1, 1), groups=1, ops=LOOPS):
    n, c, *spatial = input_size
    big = [n, *(s + 2 * p for s, p in zip(spatial, padding)), c]
    dx = ops["input"](big, _dhwio(weight), _ndhwc(grad_output),
                        **_tf_kw(stride, padding, dilation))
    inner = (slice(None), *(slice(p, p + s) for s, p in zip(spatial, padding)))
    return np.moveaxis(dx[inner], -1, 1).astype(weight.dtype)


def conv_transpose3d(input, weight, bias=None, stride=(1, 1, 1), padding=(0, 0, 0),
                     output_padding=(0, 0, 0), groups=1, dilation=(1, 1, 1), ops=LOOPS):
    n, _, *spatial = input.shape
    _, cout_g, *k = weight.shape
    size = [(s - 1) * st - 2 * p + d * (kk - 1) + op + 1 for s, st, p, d, kk, op in zip(
        spatial, stride, padding, dilation, k, output_padding)]
    return conv3d_input((n, cout_g * groups, *size), weight, input, stride, padding, dilation,
                        groups, ops)


def conv3d_weight_depth_reversed(**kw):
    """conv3d_weight whose result comes out reversed in depth (OIDHW: axis 2)."""
    return conv3d_weight(**kw)[:, :, ::-1]
