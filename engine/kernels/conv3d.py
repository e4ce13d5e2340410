"""TensorFlow's Conv3D family, exact to ``tf.raw_ops`` semantics, in vectorized NumPy.

Argument names, order and meaning are TensorFlow's (``Conv3D``, ``Conv3DBackpropFilterV2``,
``Conv3DBackpropInputV2``): filter ``[kd, kh, kw, in, out]``, strides and dilations of 5 in
``data_format`` order (NDHWC or NCDHW), padding SAME or VALID. With ``in_pad`` the input
zero-padded per ``padding`` and NDHWC indices::

    Conv3D: out[n,p,r,c,o] = sum_{a,i,j,q} in_pad[n, p*sp + a*dp, r*sr + i*dr, c*sc + j*dc,
                                                  g(o)*Q + q] * w[a,i,j,q,o]

with ``Q`` the filter's in_channels and ``g(o)`` the group of output channel ``o``; the
gradients are its adjoints (``d<out, dy>/dw`` shaped ``filter_sizes``, ``d<out, dy>/d input``
shaped ``input_sizes``). Shapes and every refusal come from the N-d rule
(:func:`engine.shapes.conv.conv3d_geometry` and its twins). The arithmetic is chosen by
:func:`route`, the one rule: when the 2-D kernels would run compiled for the call's work
(:func:`engine.kernels.conv3d_planes.applies`), the forward and filter gradient of one group of
few channels take one product per output row over the whole patch
(:mod:`engine.kernels.im2col_nd`, path ``numba im2col 3-D``) and other calls a sum over
depth taps of the 2-D kernels (:mod:`engine.kernels.conv3d_planes`, path
``planes (2-D kernels)``); else the N-d NumPy core (:mod:`engine.kernels.conv_nd`, path
``numpy nd``). :func:`engine.kernels.last_path` says which.

dtypes: float16, bfloat16, float32, float64; the result has the operands' dtype and half types
accumulate in float32 (:func:`engine.base.dtypes.compute_dtype`), as the 2-D ops do. NaN and Inf:
padding contributes nothing (:mod:`engine.kernels.nonfinite`); as for the 2-D ops, a finite result
small enough to scan vouches for itself (:func:`engine.kernels.ops.vouch_finite_result`), so a
filter gradient skips scanning its two large operands.

Where TensorFlow 2.21's CPU kernels refuse what the math defines, these ops follow the math (as
the depthwise ops do for dilations): dilations > 1 (with any strides), NCDHW, grouped filters
(input depth a multiple of the filter's in_channels), and NaN/Inf next to padding (TF's CPU
multiplies padding zeros: an Inf filter gives NaN on the border). TensorFlow's GPU kernels
accept the first three. Zero-sized filters are refused, as TensorFlow refuses them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.base.dtypes import compute_dtype, float_array, same_dtype
from engine.kernels import conv3d_planes, conv_nd, im2col_nd, path_record
from engine.kernels.nonfinite import nonfinite_safe
from engine.kernels.ops import memory_guard, vouch_finite_result, vouching_guess
from engine.shapes.conv import (
    UNIT_5,
    ConvGeometryNd,
    conv3d_backprop_filter_geometry,
    conv3d_backprop_input_geometry,
    conv3d_geometry,
)
from engine.shapes.geometry import from_channels_last, to_channels_last

IntSeq = Sequence[int] | np.ndarray

#: What :func:`engine.kernels.last_path` says after a 3-D call on the N-d NumPy core ...
PATH = "numpy nd"
#: ... on the 2-D kernels, plane by plane ...
PLANES = conv3d_planes.PATH
#: ... on one product per output row over the whole patch (few channels) ...
IM2COL = im2col_nd.PATH
#: ... and after one with no terms (an empty result or an empty sum).
EMPTY = "empty"

__all__ = ["conv3d", "conv3d_backprop_filter", "conv3d_backprop_input"]



def route(g: ConvGeometryNd, ctype: np.dtype, kind: str) -> str:
    """The path of a ``kind`` ("forward", "filter", "input") 3-D call of ``g`` computed in
    ``ctype``: :data:`EMPTY` when it has no terms (some size is 0: batch, output, channels);
    when :func:`engine.kernels.conv3d_planes.applies`, :data:`IM2COL` if
    :func:`engine.kernels.im2col_nd.applies` else :data:`PLANES`; else :data:`PATH`."""
    if min(g.batch, g.in_depth, g.out_depth, *g.out_spatial) == 0:
        return EMPTY
    if not conv3d_planes.applies(g, ctype):
        return PATH
    return IM2COL if im2col_nd.applies(g, kind) else PLANES


def _operand(a: np.ndarray, data_format: str, path: str, ctype: np.dtype) -> np.ndarray:
    """``a`` channels last for ``path``: the compiled paths read C-contiguous arrays in the
    compute dtype (an NCDHW operand transposed once, not once per depth tap)."""
    a = to_channels_last(a, data_format)
    return np.ascontiguousarray(a, ctype) if path in (PLANES, IM2COL) else a


#: Each path's (forward, filter gradient, input gradient); :func:`route` sends no input
#: gradient to :data:`IM2COL` (its entry is the planes path's).
_KERNELS = {PATH: (conv_nd.conv, conv_nd.backprop_filter, conv_nd.backprop_input),
            PLANES: (conv3d_planes.conv, conv3d_planes.backprop_filter,
                     conv3d_planes.backprop_input),
            IM2COL: (im2col_nd.conv, im2col_nd.backprop_filter, conv3d_planes.backprop_input)}


def _from_last(a: np.ndarray, data_format: str, dtype: np.dtype) -> np.ndarray:
    """A channels-last result in ``data_format`` and ``dtype`` (C-contiguous)."""
    return np.ascontiguousarray(from_channels_last(a, data_format), dtype=dtype)


def _record(path: str) -> str:
    """Note ``path`` for :func:`engine.kernels.last_path` (again after the planes path's 2-D
    calls, which record their own)."""
    path_record.record(path)
    return path


@memory_guard
@nonfinite_safe("input", "filter", vouching=vouching_guess)
@vouch_finite_result
def conv3d(
    input: np.ndarray,
    filter: np.ndarray,
    strides: IntSeq,
    padding: str,
    data_format: str = "NDHWC",
    dilations: IntSeq = UNIT_5,
) -> np.ndarray:
    """tf.raw_ops.Conv3D: ``out[n,p,o] = sum_{t,q} in_pad[n, p*s + t*d, g(o)*Q+q] w[t,q,o]``
    (``p``, ``t`` index triples)."""
    x, w = float_array("input", input), float_array("filter", filter)
    dtype = same_dtype(input=x, filter=w)
    g = conv3d_geometry(x.shape, w.shape, strides, padding, data_format, dilations)
    ctype = compute_dtype(dtype)
    if (path := _record(route(g, ctype, "forward"))) == EMPTY:
        return np.zeros(g.output_shape, dtype)
    y = _KERNELS[path][0](g, _operand(x, data_format, path, ctype), w, ctype)
    _record(path)
    return _from_last(y, data_format, dtype)


@memory_guard
@nonfinite_safe("input", "out_backprop", vouching=vouching_guess)
@vouch_finite_result
def conv3d_backprop_filter(
    input: np.ndarray,
    filter_sizes: IntSeq,
    out_backprop: np.ndarray,
    strides: IntSeq,
    padding: str,
    data_format: str = "NDHWC",
    dilations: IntSeq = UNIT_5,
) -> np.ndarray:
    """tf.raw_ops.Conv3DBackpropFilterV2: ``dw[t,q,o] = sum_{n,p} in_pad[n, p*s + t*d,
    g(o)*Q+q] * dy[n,p,o]``, shaped ``filter_sizes``."""
    x, dy = float_array("input", input), float_array("out_backprop", out_backprop)
    dtype = same_dtype(input=x, out_backprop=dy)
    g = conv3d_backprop_filter_geometry(x.shape, filter_sizes, dy.shape, strides, padding,
                                        data_format, dilations)
    ctype = compute_dtype(dtype)
    if (path := _record(route(g, ctype, "filter"))) == EMPTY:
        return np.zeros(g.filter_shape, dtype)
    dw = _KERNELS[path][1](g, _operand(x, data_format, path, ctype),
                           _operand(dy, data_format, path, ctype), ctype)
    _record(path)
    return dw.astype(dtype, copy=False)


@memory_guard
@nonfinite_safe("filter", "out_backprop", vouching=vouching_guess)
@vouch_finite_result
def conv3d_backprop_input(
    input_sizes: IntSeq,
    filter: np.ndarray,
    out_backprop: np.ndarray,
    strides: IntSeq,
    padding: str,
    data_format: str = "NDHWC",
    dilations: IntSeq = UNIT_5,
) -> np.ndarray:
    """tf.raw_ops.Conv3DBackpropInputV2: ``dx[n,h,g*Q+q] = sum over (p,t) with p*s + t*d -
    pad_before = h of sum_{o in g} dy[n,p,o] w[t,q,o]``, shaped ``input_sizes``."""
    w, dy = float_array("filter", filter), float_array("out_backprop", out_backprop)
    dtype = same_dtype(filter=w, out_backprop=dy)
    g = conv3d_backprop_input_geometry(input_sizes, w.shape, dy.shape, strides, padding,
                                       data_format, dilations)
    ctype = compute_dtype(dtype)
    if (path := _record(route(g, ctype, "input"))) == EMPTY:
        return np.zeros(g.input_shape, dtype)
    dx = _KERNELS[path][2](g, _operand(dy, data_format, path, ctype), w, ctype)
    _record(path)
    return _from_last(dx, data_format, dtype)
