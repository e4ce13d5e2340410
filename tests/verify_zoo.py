"""A zoo of conv implementations for ``gradblocks verify``: correct ones (a wrapper of
engine.kernels and independent tap loops written here, in both conventions) and deliberately
wrong ones: each public bug of issue 22, one per diagnosis id, and targets that crash, hang,
return the wrong shape, NaN, or differ between calls.

The tap loops: for each filter tap (i, j), the input rows it reads are
``r*s + i*d - pad_before`` for output rows r; forward, filter and input gradients are then one
einsum per tap (NHWC, HWIO). Bugs are flags of these loops.
"""

from __future__ import annotations

import ctypes
import time

import numpy as np

from engine import kernels

try:  # imported as tests.verify_zoo, or from the tests folder as verify_zoo
    from tests import verify_conv3d_targets as t3
except ImportError:
    import verify_conv3d_targets as t3  # type: ignore[no-redef]

# -- the geometry, as an implementation computes it --------------------------------------------


def _dims(kw: dict, x_shape_nhwc, k_hw, bug: str = "", out_hw=None):
    """Per spatial dim: (size, k, s, d, before, out) from TF's keyword arguments."""
    fmt = kw.get("data_format", "NHWC")
    rc = (1, 2) if fmt == "NHWC" else (2, 3)
    strides = [kw["strides"][a] for a in rc]
    dil = [kw["dilations"][a] for a in rc]
    if bug == "stride_dilation_swapped":
        strides, dil = dil, strides
    out = []
    for ax in range(2):
        n, k, s, d = x_shape_nhwc[1 + ax], k_hw[ax], strides[ax], dil[ax]
        eff = (k - 1) * d + 1
        if bug == "dilation_ignored_undilated_same":  # TF 2.21's CPU depthwise backprops
            eff = k
        if kw["padding"] == "SAME":
            o = -(-n // s)
            total = max(0, (o - 1) * s + eff - n)
            before = total // 2 if bug != "same_pad_extra_before" else total - total // 2
            if bug == "tf11092":  # the offset of a negative total padding not clamped
                before = ((o - 1) * s + eff - n) // 2
        elif kw["padding"] == "VALID":
            before, after = 0, 0
            o = (n - eff + s) // s if n - eff + s >= 0 else 0
        else:
            p = kw["explicit_paddings"]
            a = 2 * (rc[ax])
            before, after = p[a], p[a + 1]
            if bug == "explicit_pads_swapped":
                before, after = after, before
            o = max(0, (n + before + after - eff + s) // s) if n + before + after - eff + s >= 0 \
                else 0
        if bug == "padding_ignored":
            before = 0
        if bug == "padding_offset_by_one" and ax == 0:  # the top padding one too many
            before += 1
        if out_hw is not None:  # a gradient loops over the out_backprop it is given
            o = out_hw[ax]
        if bug in ("dilation_ignored", "dilation_ignored_undilated_same"):
            d = 1  # dilation_ignored: the padding right, the taps read 1 apart
        out.append((n, k, s, d, before, o))
    return out


def _nhwc(a, fmt):
    return a if fmt == "NHWC" else a.transpose(0, 2, 3, 1)


def _back(a, fmt):
    return a if fmt == "NHWC" else a.transpose(0, 3, 1, 2)


def _window(n, k, s, d, before, o, i):
    """(output rows, input rows) of tap i that fall inside the input."""
    rows = np.arange(o) * s + i * d - before
    ok = (rows >= 0) & (rows < n)
    return np.nonzero(ok)[0], rows[ok]


def _taps(dims, kh, kw_):
    (hn, hk, hs, hd, hb, ho), (wn, wk, ws, wd, wb, wo) = dims
    for i in range(kh):
        for j in range(kw_):
            yield (i, j, _window(hn, hk, hs, hd, hb, ho, i), _window(wn, wk, ws, wd, wb, wo, j))


def _grouped(w, depth, depthwise):
    """The filter as (kh, kw, groups, q, o_per_group) or depthwise (kh, kw, C, 1, M)."""
    kh, kw_, q, o = w.shape
    if depthwise:
        return w.reshape(kh, kw_, q, 1, o)
    g = depth // q
    return w.reshape(kh, kw_, q, g, o // g).transpose(0, 1, 3, 2, 4)


def _ungroup(wg, depthwise):
    kh, kw_, g, q, o = wg.shape
    if depthwise:
        return wg.reshape(kh, kw_, g, o)
    return wg.transpose(0, 1, 3, 2, 4).reshape(kh, kw_, q, g * o)


def _split(a, groups, per):
    return a.reshape(*a.shape[:3], groups, per)


def forward(x, w, kw, depthwise=False, bug=""):
    fmt = kw.get("data_format", "NHWC")
    x = _nhwc(np.asarray(x, np.float64), fmt)
    w = np.asarray(w, np.float64)
    if fmt == "NCHW" and bug == "layout_swapped":
        x = np.asarray(kw["input"], np.float64).reshape(x.shape)
    kh, kw_ = w.shape[:2]
    dims = _dims(kw, x.shape, (kh, kw_), bug)
    ho, wo = dims[0][5], dims[1][5]
    wg = _grouped(w, x.shape[3], depthwise)
    groups, qg, og = wg.shape[2], wg.shape[3], wg.shape[4]
    y = np.zeros((x.shape[0], ho, wo, groups, og))
    xs = _split(x, groups, qg)
    if bug == "groups_ignored":
        xs = np.repeat(xs[:, :, :, :1], groups, axis=3)
    for i, j, (ro, ri), (co, ci) in _taps(dims, kh, kw_):
        y[:, ro[:, None], co[None, :]] += np.einsum(
            "nhwgq,gqo->nhwgo", xs[:, ri[:, None], ci[None, :]], wg[i, j])
    y = y.reshape(*y.shape[:3], groups * og)
    if bug == "multiplier_order" and depthwise:
        y = y.reshape(*y.shape[:3], og, groups).transpose(0, 1, 2, 4, 3).reshape(y.shape)
    if bug == "output_size_off_by_one" and ho > 1:
        y[:, -1] = 0
    if fmt == "NCHW" and bug == "layout_swapped":
        return y.reshape(_back(y, fmt).shape)
    return _back(y, fmt)


def backprop_filter(x, filter_sizes, dy, kw, depthwise=False, bug=""):
    fmt = kw.get("data_format", "NHWC")
    x = _nhwc(np.asarray(x, np.float64), fmt)
    dy = _nhwc(np.asarray(dy, np.float64), fmt)
    kh, kw_, q, o = (int(v) for v in filter_sizes)
    dims = _dims(kw, x.shape, (kh, kw_), bug, dy.shape[1:3])
    groups = x.shape[3] if depthwise else x.shape[3] // q
    qg, og = (1, o) if depthwise else (q, o // groups)
    xs, dys = _split(x, groups, qg), _split(dy, groups, og)
    if bug == "groups_ignored":
        xs = np.repeat(xs[:, :, :, :1], groups, axis=3)
    if bug == "multiplier_order" and depthwise:
        dys = dy.reshape(*dy.shape[:3], og, groups).transpose(0, 1, 2, 4, 3)
    wg = np.zeros((kh, kw_, groups, qg, og))
    for i, j, (ro, ri), (co, ci) in _taps(dims, kh, kw_):
        wg[i, j] = np.einsum("nhwgq,nhwgo->gqo", xs[:, ri[:, None], ci[None, :]],
                             dys[:, ro[:, None], co[None, :]])
    dw = _ungroup(wg, depthwise)
    if bug == "batch_averaged" and x.shape[0]:
        dw = dw / x.shape[0]
    if bug == "torch_mlir655":  # every output position's gradient summed before the product
        dw = dw * max(1, dy.shape[1] * dy.shape[2])
    if bug == "batch_not_accumulated":  # dmarcosg/DSAC #6: the sum reset for every image
        for i, j, (ro, ri), (co, ci) in _taps(dims, kh, kw_):
            wg[i, j] = np.einsum("nhwgq,nhwgo->gqo", xs[-1:, ri[:, None], ci[None, :]],
                                 dys[-1:, ro[:, None], co[None, :]])
        dw = _ungroup(wg, depthwise)
    if bug == "positions_averaged" and dy.size:  # sebgao/cTensor #3: a mean, not a sum
        dw = dw / (dy.shape[0] * dy.shape[1] * dy.shape[2])
    return dw


def backprop_input(input_sizes, w, dy, kw, depthwise=False, bug=""):
    fmt = kw.get("data_format", "NHWC")
    dy = _nhwc(np.asarray(dy, np.float64), fmt)
    w = np.asarray(w, np.float64)
    sizes = [int(v) for v in input_sizes]
    n, h, wd, c = sizes if fmt == "NHWC" else (sizes[0], sizes[2], sizes[3], sizes[1])
    kh, kw_, q, o = w.shape
    if bug == "filter_not_flipped":
        w = w[::-1, ::-1]
    if bug == "filter_in_out_swapped":
        w = w.reshape(kh, kw_, o, q).transpose(0, 1, 3, 2)
    dims = _dims(kw, (n, h, wd, c), (kh, kw_), bug, dy.shape[1:3])
    wg = _grouped(w, c, depthwise)
    groups, qg, og = wg.shape[2], wg.shape[3], wg.shape[4]
    dys = _split(dy, groups, og)
    if bug == "multiplier_order" and depthwise:
        dys = dy.reshape(*dy.shape[:3], og, groups).transpose(0, 1, 2, 4, 3)
    dx = np.zeros((n, h, wd, groups, qg))
    if bug == "composable_kernel105" and kh == kw_ == 1 and max(dims[0][2], dims[1][2]) > 1:
        ho, wo = dy.shape[1:3]  # the 1x1 fast path scatters to the first rows, not every s-th
        dx[:, :ho, :wo] = np.einsum("nhwgo,gqo->nhwgq", dys, wg[0, 0])[:, :h, :wd]
        return _back(dx.reshape(n, h, wd, c), fmt)
    written = np.zeros((h, wd), bool)
    for i, j, (ro, ri), (co, ci) in _taps(dims, kh, kw_):
        np.add.at(dx, (slice(None), ri[:, None], ci[None, :]),
                  np.einsum("nhwgo,gqo->nhwgq", dys[:, ro[:, None], co[None, :]], wg[i, j]))
        written[ri[:, None], ci[None, :]] = True
    if bug == "output_padding_zeroed":  # the rows output_padding adds to a transposed conv: 0
        for axis, (size, k, s, d, before, o) in zip((1, 2), dims, strict=True):
            # the rows past the last window: (size + pads - eff) mod stride
            rem = (size + _pad_total(kw, axis, size, k, s, d) - (k - 1) * d - 1) % s
            if rem:
                dx[(slice(None),) * axis + (slice(size - rem, None),)] = 0
    if bug == "uninitialised_strided":  # np.empty's memory where no tap writes: garbage
        dx[:, ~written] = GARBAGE
    return _back(dx.reshape(n, h, wd, c), fmt)


def _pad_total(kw, axis, size, k, s, d):
    """TF's total padding of a spatial axis (1 rows, 2 columns of NHWC)."""
    if kw["padding"] == "VALID":
        return 0
    if kw["padding"] == "SAME":
        return max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
    a = 2 * (axis if kw.get("data_format", "NHWC") == "NHWC" else axis + 1)
    return kw["explicit_paddings"][a] + kw["explicit_paddings"][a + 1]


#: What uninitialised memory held in the buggy targets (a float32 bit pattern read as a value).
GARBAGE = 1.0e24


# -- correct implementations -------------------------------------------------------------------


def tf_kernels(op):
    fn = {"Conv2D": kernels.conv2d, "Conv2DBackpropFilter": kernels.conv2d_backprop_filter,
          "Conv2DBackpropInput": kernels.conv2d_backprop_input,
          "DepthwiseConv2dNative": kernels.depthwise_conv2d_native,
          "DepthwiseConv2dNativeBackpropFilter": kernels.depthwise_conv2d_native_backprop_filter,
          "DepthwiseConv2dNativeBackpropInput": kernels.depthwise_conv2d_native_backprop_input,
          }[op]
    return fn


def tf_loops(op, bug=""):
    """The tap-loop implementation of a tf.raw_ops op (with ``bug``)."""
    depthwise = op.startswith("Depthwise")

    def run(**kw):
        dtype = (kw.get("input") if "input" in kw and not isinstance(kw["input"], list)
                 else kw["filter"]).dtype
        if op.endswith("Native") or op == "Conv2D":
            y = forward(kw["input"], kw["filter"], kw, depthwise, bug)
        elif op.endswith("Filter"):
            y = backprop_filter(kw["input"], kw["filter_sizes"], kw["out_backprop"], kw,
                                depthwise, bug)
        else:
            y = backprop_input(kw["input_sizes"], kw["filter"], kw["out_backprop"], kw,
                               depthwise, bug)
        return y.astype(dtype)
    return run


# module-level targets (a worker process imports them by name)
def kernels_conv2d(**kw):
    return kernels.conv2d(**kw)


def kernels_conv2d_backprop_filter(**kw):
    return kernels.conv2d_backprop_filter(**kw)


def kernels_conv2d_backprop_input(**kw):
    return kernels.conv2d_backprop_input(**kw)


def kernels_depthwise(**kw):
    return kernels.depthwise_conv2d_native(**kw)


def kernels_depthwise_backprop_filter(**kw):
    return kernels.depthwise_conv2d_native_backprop_filter(**kw)


def kernels_depthwise_backprop_input(**kw):
    return kernels.depthwise_conv2d_native_backprop_input(**kw)


TF_OPS = ("Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "DepthwiseConv2dNative",
          "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput")
loops_conv2d = tf_loops("Conv2D")
loops_conv2d_backprop_filter = tf_loops("Conv2DBackpropFilter")
loops_conv2d_backprop_input = tf_loops("Conv2DBackpropInput")
loops_depthwise = tf_loops("DepthwiseConv2dNative")
loops_depthwise_backprop_filter = tf_loops("DepthwiseConv2dNativeBackpropFilter")
loops_depthwise_backprop_input = tf_loops("DepthwiseConv2dNativeBackpropInput")
CORRECT_TF = {
    "Conv2D": ("kernels_conv2d", "loops_conv2d"),
    "Conv2DBackpropFilter": ("kernels_conv2d_backprop_filter", "loops_conv2d_backprop_filter"),
    "Conv2DBackpropInput": ("kernels_conv2d_backprop_input", "loops_conv2d_backprop_input"),
    "DepthwiseConv2dNative": ("kernels_depthwise", "loops_depthwise"),
    "DepthwiseConv2dNativeBackpropFilter": ("kernels_depthwise_backprop_filter",
                                            "loops_depthwise_backprop_filter"),
    "DepthwiseConv2dNativeBackpropInput": ("kernels_depthwise_backprop_input",
                                           "loops_depthwise_backprop_input"),
}


# -- torch convention ----------------------------------------------------------------------------


def _torch_kw(stride, padding, dilation):
    kw = {"strides": [1, *stride, 1], "dilations": [1, *dilation, 1], "data_format": "NHWC"}
    if isinstance(padding, str):  # torch's 'valid', and 'same' (stride 1): TF's VALID, SAME
        return kw | {"padding": padding.upper()}
    ph, pw = padding
    return kw | {"padding": "EXPLICIT", "explicit_paddings": [0, 0, ph, ph, pw, pw, 0, 0]}


def _t(a):
    return np.asarray(a).transpose(0, 2, 3, 1)


def _hwio(w):
    return np.asarray(w).transpose(2, 3, 1, 0)


def torch_conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, bug="",
                 use_kernels=False):
    kw = _torch_kw(stride, padding, dilation)
    if use_kernels:
        y = kernels.conv2d(_t(input), _hwio(weight), **kw)
    else:
        y = forward(_t(input), _hwio(weight), kw, bug=bug)
    return y.transpose(0, 3, 1, 2).astype(input.dtype)


def torch_conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1,
                        groups=1, bug="", use_kernels=False):
    kw = _torch_kw(stride, padding, dilation)
    o, q, kh, kw_ = weight_size
    if use_kernels:
        dw = kernels.conv2d_backprop_filter(_t(input), [kh, kw_, q, o], _t(grad_output), **kw)
    else:
        dw = backprop_filter(_t(input), [kh, kw_, q, o], _t(grad_output), kw, bug=bug)
    return dw.transpose(3, 2, 0, 1).astype(input.dtype)


def torch_conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1,
                       groups=1, bug="", use_kernels=False):
    kw = _torch_kw(stride, padding, dilation)
    n, c, h, w = input_size
    if use_kernels:
        dx = kernels.conv2d_backprop_input([n, h, w, c], _hwio(weight), _t(grad_output), **kw)
    else:
        dx = backprop_input([n, h, w, c], _hwio(weight), _t(grad_output), kw, bug=bug)
    return dx.transpose(0, 3, 1, 2).astype(weight.dtype)


def torch_conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                           groups=1, dilation=1, bug="", use_kernels=False):
    n, _, h, w = input.shape
    _, cout_g, kh, kw_ = weight.shape
    if bug == "candle2337":  # stride and dilation swapped in the transposed conv
        stride, dilation = dilation, stride
    size = [(s - 1) * st - 2 * p + d * (k - 1) + op + 1 for s, st, p, d, k, op in zip(
        (h, w), stride, padding, dilation, (kh, kw_), output_padding)]
    return torch_conv2d_input((n, cout_g * groups, *size), weight, input, stride, padding,
                              dilation, groups, bug, use_kernels)


def torch_kernels_conv2d(**kw):
    return torch_conv2d(**kw, use_kernels=True)


def torch_kernels_conv2d_weight(**kw):
    return torch_conv2d_weight(**kw, use_kernels=True)


def torch_kernels_conv2d_input(**kw):
    return torch_conv2d_input(**kw, use_kernels=True)


def torch_kernels_conv_transpose2d(**kw):
    return torch_conv_transpose2d(**kw, use_kernels=True)


CORRECT_TORCH = {
    "conv2d": ("torch_kernels_conv2d", "torch_conv2d"),
    "conv2d_weight": ("torch_kernels_conv2d_weight", "torch_conv2d_weight"),
    "conv2d_input": ("torch_kernels_conv2d_input", "torch_conv2d_input"),
    "conv_transpose2d": ("torch_kernels_conv_transpose2d", "torch_conv_transpose2d"),
}


# -- the 3-D ops: engine.kernels wrapped, and the tap loops of verify_conv3d_targets ----------

def kernels_conv3d(**kw):
    return kernels.conv3d(**kw)


def kernels_conv3d_backprop_filter(**kw):
    return kernels.conv3d_backprop_filter(**kw)


def kernels_conv3d_backprop_input(**kw):
    return kernels.conv3d_backprop_input(**kw)


_KERNELS_3D = {"forward": kernels.conv3d, "filter": kernels.conv3d_backprop_filter,
               "input": kernels.conv3d_backprop_input}
loops_conv3d = t3.Conv3D
loops_conv3d_backprop_filter = t3.Conv3DBackpropFilterV2
loops_conv3d_backprop_input = t3.Conv3DBackpropInputV2
torch_conv3d, torch_conv3d_weight = t3.conv3d, t3.conv3d_weight
torch_conv3d_input, torch_conv_transpose3d = t3.conv3d_input, t3.conv_transpose3d


def torch_kernels_conv3d(**kw):
    return t3.conv3d(**kw, ops=_KERNELS_3D)


def torch_kernels_conv3d_weight(**kw):
    return t3.conv3d_weight(**kw, ops=_KERNELS_3D)


def torch_kernels_conv3d_input(**kw):
    return t3.conv3d_input(**kw, ops=_KERNELS_3D)


def torch_kernels_conv_transpose3d(**kw):
    return t3.conv_transpose3d(**kw, ops=_KERNELS_3D)


CORRECT_TF |= {
    "Conv3D": ("kernels_conv3d", "loops_conv3d"),
    "Conv3DBackpropFilterV2": ("kernels_conv3d_backprop_filter", "loops_conv3d_backprop_filter"),
    "Conv3DBackpropInputV2": ("kernels_conv3d_backprop_input", "loops_conv3d_backprop_input"),
}
CORRECT_TORCH |= {
    "conv3d": ("torch_kernels_conv3d", "torch_conv3d"),
    "conv3d_weight": ("torch_kernels_conv3d_weight", "torch_conv3d_weight"),
    "conv3d_input": ("torch_kernels_conv3d_input", "torch_conv3d_input"),
    "conv_transpose3d": ("torch_kernels_conv_transpose3d", "torch_conv_transpose3d"),
}


# -- the public bugs -----------------------------------------------------------------------------


def backpack30(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """f-dangel/backpack #30: the input gradient's size from the transposed conv alone, right
    only when (in + 2p - d(k-1) - 1) is a multiple of the stride."""
    dx = torch_conv2d_input(input_size, weight, grad_output, stride, padding, dilation, groups)
    _, _, kh, kw_ = weight.shape
    ho, wo = grad_output.shape[2:]
    h = (ho - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + 1
    w = (wo - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw_ - 1) + 1
    return dx[:, :, :h, :w]


def candle2337(**kw):
    """huggingface/candle PR 2337: stride and dilation swapped in the transposed conv."""
    return torch_conv_transpose2d(**kw, bug="candle2337")


def composable_kernel105(**kw):
    """ROCm/composable_kernel #105: backward-data of a 1x1 filter at stride 2."""
    return tf_loops("Conv2DBackpropInput", "composable_kernel105")(**kw)


def needle(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """CMU 10-714 needle: the input gradient by a full conv of the dilated output gradient,
    cropped assuming it fits exactly: with a remainder the rows shift to the front."""
    dx = backpack30(input_size, weight, grad_output, stride, padding, dilation, groups)
    _, _, h, w = input_size
    out = np.zeros(input_size, dx.dtype)
    out[:, :, h - dx.shape[2]:, w - dx.shape[3]:] = dx
    return out


def tf11092(**kw):
    """tensorflow #11092: the backward ignored the offset of negative SAME padding."""
    return tf_loops("Conv2DBackpropInput", "tf11092")(**kw)


def mlpack2986(**kw):
    """mlpack #2986: the backward at stride 2 failed with a shape mismatch."""
    s = kw["strides"][1:3] if kw.get("data_format", "NHWC") == "NHWC" else kw["strides"][2:]
    if 2 in s:
        dy = kw["out_backprop"]
        up = np.kron(dy, np.ones((1, 2, 2, 1), dy.dtype))  # (Ho*s) rows, not (Ho-1)*s + 1
        buf = np.zeros(kw["input_sizes"], dy.dtype)
        buf += up  # "operands could not be broadcast together"
    return tf_loops("Conv2DBackpropInput")(**kw)


def torch_mlir655(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """llvm/torch-mlir #655: the weight gradient orders of magnitude off."""
    return torch_conv2d_weight(input, weight_size, grad_output, stride, padding, dilation,
                               groups, bug="torch_mlir655")


PUBLIC_BUGS = {  # name -> (target, op, convention)
    "backpack30": ("backpack30", "conv2d_input", "torch"),
    "candle2337": ("candle2337", "conv_transpose2d", "torch"),
    "composable_kernel105": ("composable_kernel105", "Conv2DBackpropInput", "tf"),
    "needle": ("needle", "conv2d_input", "torch"),
    "tf11092": ("tf11092", "Conv2DBackpropInput", "tf"),
    "mlpack2986": ("mlpack2986", "Conv2DBackpropInput", "tf"),
    "torch_mlir655": ("torch_mlir655", "conv2d_weight", "torch"),
}

# -- one per diagnosis id ------------------------------------------------------------------------

stride_dilation_swapped = tf_loops("Conv2DBackpropInput", "stride_dilation_swapped")
same_pad_extra_before = tf_loops("Conv2D", "same_pad_extra_before")
filter_not_flipped = tf_loops("Conv2DBackpropInput", "filter_not_flipped")
filter_in_out_swapped = tf_loops("Conv2DBackpropInput", "filter_in_out_swapped")
output_size_off_by_one = tf_loops("Conv2D", "output_size_off_by_one")
dilation_ignored = tf_loops("Conv2DBackpropFilter", "dilation_ignored")
padding_ignored = tf_loops("Conv2D", "padding_ignored")
batch_averaged = tf_loops("Conv2DBackpropFilter", "batch_averaged")
groups_ignored = tf_loops("Conv2D", "groups_ignored")
multiplier_order = tf_loops("DepthwiseConv2dNative", "multiplier_order")
layout_swapped = tf_loops("Conv2D", "layout_swapped")
explicit_pads_swapped = tf_loops("Conv2DBackpropFilter", "explicit_pads_swapped")

DIAGNOSIS_BUGS = {  # id -> (target, op)
    "stride_dilation_swapped": "Conv2DBackpropInput",
    "same_pad_extra_before": "Conv2D",
    "filter_not_flipped": "Conv2DBackpropInput",
    "filter_in_out_swapped": "Conv2DBackpropInput",
    "output_size_off_by_one": "Conv2D",
    "dilation_ignored": "Conv2DBackpropFilter",
    "padding_ignored": "Conv2D",
    "batch_averaged": "Conv2DBackpropFilter",
    "groups_ignored": "Conv2D",
    "multiplier_order": "DepthwiseConv2dNative",
    "layout_swapped": "Conv2D",
    "explicit_pads_swapped": "Conv2DBackpropFilter",
    "padding_offset_by_one": "Conv2D",
    "positions_averaged": "Conv2DBackpropFilter",
    "batch_not_accumulated": "DepthwiseConv2dNativeBackpropFilter",
    "empty_output_shape": "Conv2D",
}

# -- the mistakes of issue 30 ------------------------------------------------------------------

padding_offset_by_one = tf_loops("Conv2D", "padding_offset_by_one")
positions_averaged = tf_loops("Conv2DBackpropFilter", "positions_averaged")
batch_not_accumulated = tf_loops("DepthwiseConv2dNativeBackpropFilter", "batch_not_accumulated")
output_padding_zeroed = tf_loops("Conv2DBackpropInput", "output_padding_zeroed")
uninitialised_strided = tf_loops("Conv2DBackpropInput", "uninitialised_strided")


def _dilated(kw):
    return max(_strides({**kw, "strides": kw["dilations"]})) > 1


def _tf_depthwise_cpu(op):
    """TensorFlow 2.21's CPU depthwise backprop ``op`` as it behaves with a dilation: SAME
    computed with the dilation taken as 1 and the undilated filter's padding; VALID and
    EXPLICIT refused, the out_backprop size checked against the undilated filter's."""
    loops, wrong = tf_loops(op), tf_loops(op, "dilation_ignored_undilated_same")

    def run(**kw):
        if not _dilated(kw):
            return loops(**kw)
        if kw["padding"] == "SAME":
            return wrong(**kw)
        fmt = kw.get("data_format", "NHWC")
        rows_axis = 1 if fmt == "NHWC" else 2
        sizes = kw["input_sizes"] if "input_sizes" in kw else np.shape(kw["input"])
        k = (kw["filter_sizes"] if "filter_sizes" in kw else np.shape(kw["filter"]))[0]
        pads = _pad_total(kw, 1, sizes[rows_axis], k, 1, 1)
        computed = (sizes[rows_axis] + pads - k) // kw["strides"][rows_axis] + 1
        raise ValueError(f"{op}: Number of rows of out_backprop doesn't match computed: actual "
                         f"= {np.shape(kw['out_backprop'])[rows_axis]}, computed = {computed}")
    return run


tf_depthwise_cpu_backprop_filter = _tf_depthwise_cpu("DepthwiseConv2dNativeBackpropFilter")
tf_depthwise_cpu_backprop_input = _tf_depthwise_cpu("DepthwiseConv2dNativeBackpropInput")


def empty_output_shape(**kw):
    """An empty output returned as uninitialised memory of one row and column (Conv2D)."""
    y = loops_conv2d(**kw)
    if y.size:
        return y
    return np.full(tuple(max(1, v) for v in y.shape), GARBAGE, y.dtype)


# -- misbehaving targets (tf Conv2D) ---------------------------------------------------------------
# Each wraps the tap loops (NumPy only): a worker replaced after a crash or a hang starts calling
# at once, where engine.kernels' first call would load numba's compiled code (~1-2 s) each time.


def _strides(kw):
    return kw["strides"][1:3] if kw.get("data_format", "NHWC") == "NHWC" else kw["strides"][2:]


def segfaults(**kw):
    """Dies of SIGSEGV when a dilation is > 1."""
    if max(_strides({**kw, "strides": kw["dilations"]})) > 1:
        ctypes.string_at(0)
    return loops_conv2d(**kw)


def hangs(**kw):
    """Never returns when a stride is 3."""
    if 3 in _strides(kw):
        while True:
            time.sleep(0.05)
    return loops_conv2d(**kw)


def wrong_shape(**kw):
    """One output row too many, always."""
    y = loops_conv2d(**kw)
    axis = 1 if kw.get("data_format", "NHWC") == "NHWC" else 2
    return np.concatenate([y, np.take(y, [0], axis=axis)], axis=axis) if y.shape[axis] else \
        np.zeros(tuple(s + (i == axis) for i, s in enumerate(y.shape)), y.dtype)


def returns_nan(**kw):
    """NaN in the first element when the batch is > 1."""
    y = np.array(loops_conv2d(**kw))
    if y.shape[0] > 1 and y.size:
        y.flat[0] = np.nan
    return y


def nondeterministic(**kw):
    """One element one ulp off, at random: within tolerance, but not the same twice."""
    y = np.array(loops_conv2d(**kw))
    if y.size:
        k = np.random.default_rng().integers(y.size)
        if y.flat[k] != 0:
            y.flat[k] = np.nextafter(y.flat[k], np.inf)
    return y


def no_dilation_support(**kw):
    """Raises NotImplementedError for dilations > 1 (unsupported, not failed)."""
    if max(_strides({**kw, "strides": kw["dilations"]})) > 1:
        raise NotImplementedError("dilations")
    return loops_conv2d(**kw)
