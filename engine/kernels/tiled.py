"""The per-tap conv ops on the compiled tiles of :mod:`engine.kernels._compiled.conv_tiles`: the
batch chunks, phase images and result buffers around them, the twin of
:mod:`engine.kernels.compute` (same chunks, same layout, so the same sums in either layout).

Only :mod:`engine.kernels.dispatch` calls these, once it has chosen the compiled path for a call
(the compiled code ready, float32 or float64 compute); the chunk size is
:data:`engine.kernels.compute.CHUNK_BYTES`, passed to the compiled loops per chunk.

- forward and filter gradient on few channels (:func:`engine.kernels.compute.few_channels`):
  :mod:`engine.kernels.im2col_nd` (one product over the whole patch, ``x`` read in place);
- forward: else the shifted products of each chunk's phase images;
- filter gradient: else read in place from ``x`` (NHWC, or NCHW) and NHWC ``dy`` (a copy for
  NCHW ``dy`` or half types);
- input gradient: col2im on few channels (when :func:`col2im_in_place`), else the products
  straight into the result (its rows as phase segments, or the result itself at stride 1;
  an NCHW result in blocks of rows moved into its planes from a core's cache), or into phase
  images merged back.
"""

from __future__ import annotations

import numpy as np

from engine.kernels import compute, im2col_nd
from engine.kernels._compiled import conv_tiles, conv_tiles_input
from engine.kernels.buffers import contiguous
from engine.kernels.layout import PhaseLayout


def col2im_in_place(out: np.ndarray, ctype: np.dtype, channels: int) -> bool:
    """True when the input gradient of ``channels`` input channels per group into ``out`` can
    run as :func:`~engine.kernels._compiled.conv_tiles_input.backprop_input_col2im`: few channels and
    ``out`` NHWC in the compute dtype with its channels adjacent."""
    return (compute.few_channels(channels) and out.dtype == ctype and out.size > 0
            and conv_tiles.flat_nhwc(out) is not None)


def conv2d(lay: PhaseLayout, x: np.ndarray, w: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """Forward conv ``(N, OH, OW, O)`` in ``ctype`` (one group)."""
    g = lay.g
    n, ci, co = x.shape[0], x.shape[3], w.shape[3]
    wc = np.ascontiguousarray(w, ctype)
    if compute.few_channels(ci):  # one product over the whole patch per few output rows
        return im2col_nd.conv2d(g, x, wc, ctype)
    y = np.empty((n, g.out_rows, g.out_cols, co), ctype)
    for sl in compute.chunks(n, compute.per_image_bytes(lay, ci, co, ctype.itemsize)):
        acc = conv_tiles.conv2d(lay, compute.flat_phases(lay, x[sl], ctype), wc)
        y[sl] = acc.reshape(-1, lay.hq, lay.wq, co)[:, : g.out_rows, : g.out_cols]
    return y


def conv2d_backprop_filter(lay: PhaseLayout, x: np.ndarray, dy: np.ndarray,
                           ctype: np.dtype) -> np.ndarray:
    """Filter gradient ``(KH, KW, C, O)`` in ``ctype`` (one group), read in place."""
    g = lay.g
    n, ci, co = x.shape[0], x.shape[3], dy.shape[3]
    if compute.few_channels(ci):  # the same product, every tap at once
        return im2col_nd.conv2d_backprop_filter(g, x, dy, ctype)
    dw = np.zeros((g.filter_rows, g.filter_cols, ci, co), ctype)
    per = (g.in_rows * g.in_cols * ci + g.out_rows * g.out_cols * co) * ctype.itemsize
    for sl in compute.chunks(n, per):  # the same chunks, so the same sums, in either layout
        dw += conv_tiles.backprop_filter_direct(g, conv_tiles.filter_input_operand(x[sl], ctype),
                                                conv_tiles.nhwc_operand(dy[sl], ctype))
    return dw


def conv2d_backprop_input(lay: PhaseLayout, dy: np.ndarray, w: np.ndarray, ctype: np.dtype,
                          out: np.ndarray, cleared: bool = True) -> bool:
    """Input gradient written into NHWC ``out`` (one group), zeroed unless ``cleared`` is
    False: then it is zeroed here, except where every element is written without being read
    (col2im, the products straight into a C-contiguous ``out`` in the compute dtype, or the
    phase segments when they cover every pixel), which saves a pass over the result. Returns
    True when the per-tap products found every row they wrote finite (so ``out`` is; col2im
    does not check: False)."""
    g = lay.g
    n, ci, co = dy.shape[0], w.shape[2], w.shape[3]
    if compute.few_channels(ci):  # col2im (col2im_in_place holds): writes every element
        wc = np.ascontiguousarray(w, ctype)
        for sl in compute.chunks(n, g.out_rows * g.out_cols * co * ctype.itemsize):
            flat = conv_tiles.flat_nhwc(out[sl])
            assert flat is not None  # col2im_in_place(out), which the dispatch checked
            conv_tiles_input.backprop_input_col2im(g, contiguous(dy[sl], ctype), wc, out[sl], flat)
        return False
    wc = np.ascontiguousarray(w, ctype)
    if out.dtype == ctype and (planes := conv_tiles.transposes().nchw_target(out)) is not None:
        return _input_into_planes(lay, dy, wc, ctype, planes)
    direct = lay.identity and out.dtype == ctype and out.flags.c_contiguous
    segments = not direct and out.dtype == ctype and conv_tiles.flat_nhwc(out) is not None
    overwrite = segments and conv_tiles_input.covers_input(lay)
    if not cleared and not (overwrite or direct):
        out[...] = 0
    sr, sc = g.stride_rows, g.stride_cols
    finite = True
    for sl in compute.chunks(n, compute.per_image_bytes(lay, ci, co, ctype.itemsize)):
        nb = sl.stop - sl.start
        e = _embedded(lay, dy[sl], ctype)
        if segments and (flat := conv_tiles.flat_nhwc(out[sl])):
            finite &= conv_tiles_input.backprop_input_into(lay, e, wc, out[sl], flat, overwrite)
            continue
        into = out[sl].reshape(1, 1, -1, ci) if direct else None
        d, ok = conv_tiles_input.backprop_input(lay, e, wc, into)
        finite &= ok
        if not direct:
            lay.merge_input(d.reshape(sr, sc, nb, lay.hq, lay.wq, ci), out[sl])
    return finite


def _embedded(lay: PhaseLayout, dy: np.ndarray, ctype: np.dtype) -> np.ndarray:
    """A batch chunk's ``dy`` zero-embedded and flat, ``(T, O)`` in ``ctype``: the operand rows
    of the input gradient's per-tap products."""
    fill = conv_tiles.transposes().nchw_fill(dy) if dy.dtype == ctype else None
    if fill is not None:  # NCHW: one transposing pass
        e = lay.embed_output_flat(dy, ctype, 0, fill)
    else:
        e = lay.embed_output(conv_tiles.nhwc_operand(dy, ctype), ctype).reshape(-1, dy.shape[3])
    return e[: e.shape[0] - lay.max_offset]


def _input_into_planes(lay: PhaseLayout, dy: np.ndarray, wc: np.ndarray, ctype: np.dtype,
                       planes: np.ndarray) -> bool:
    """The input gradient of one group into the C-contiguous NCHW ``planes`` (every element
    written): per batch chunk by the phase segments into NHWC blocks of rows that each core
    transposes into place while they are in its cache
    (:func:`~engine.kernels._compiled.conv_tiles_input.backprop_input_planes`), which costs
    less than merging phase images into the NCHW view or transposing a whole NHWC result.
    True when every row written is finite."""
    n, ci, co = dy.shape[0], wc.shape[2], wc.shape[3]
    overwrite = conv_tiles_input.covers_input(lay)
    finite = True
    for sl in compute.chunks(n, compute.per_image_bytes(lay, ci, co, ctype.itemsize)):
        e = _embedded(lay, dy[sl], ctype)
        finite &= conv_tiles_input.backprop_input_planes(lay, e, wc, planes[sl], overwrite)
    return finite
