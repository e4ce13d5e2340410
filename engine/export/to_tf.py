"""The TensorFlow target of ``gradblocks export --to tensorflow``: helpers over ``tf.raw_ops``.

The script calls the same raw op the block mirrors (Conv2D, Conv2DBackpropFilter, ...,
DepthwiseConv2dNativeBackpropFilter, Conv3D, Conv3DBackpropFilterV2, Conv3DBackpropInputV2)
with the canvas's strides and dilations; one set of helpers serves every rank (the geometry's
lists have one entry per spatial dimension, :mod:`engine.export.conv`). TensorFlow's CPU
kernels refuse some calls a canvas may make (NCHW and NCDHW, EXPLICIT padding combined with
dilations, dilations in Conv3D and its backprops, grouped Conv3D), so the script runs every op
channels last (NHWC, NDHWC: transposes around it for a channels-first canvas), turns EXPLICIT
padding into ``tf.pad`` + VALID (a backprop-input result is cut back to the unpadded size),
and where a CPU kernel refuses dilations (DepthwiseConv2dNative, Conv2D's two backprops, all
three Conv3D ops) spreads the filter's taps out with zeros and runs it undilated (a filter
gradient is then read back at every dilation-th tap): equivalent formulations, each still
TensorFlow's own answer; a grouped Conv2D's backprops and a grouped Conv3D op run one group at
a time (the CPU kernels refuse grouped shapes: the channel slices of each group are a plain
conv). The depthwise backprops accept dilations and ignore them (a known defect): the script
passes them as they are, so a cross-check shows what TensorFlow really returns. SAME and VALID
are passed as they are (TensorFlow's SAME is the canvas's definition).

TensorFlow's CPU depthwise kernels (all three, every dtype) refuse unequal row and column strides
("Current implementation only supports equal length strides in the row and column dimensions",
TensorFlow 2.21). The script then runs the depthwise conv as the grouped Conv2D it is (one group
per input channel, the ``[kh, kw, C, M]`` filter read as ``[kh, kw, 1, C*M]``: the same sums),
whose CPU kernels take unequal strides; its backprops run one group at a time as above. Being
Conv2D, these honour dilations: there is no depthwise-backprop defect to mirror.
"""

from __future__ import annotations

NAME = "tensorflow"
MODULE = "tensorflow"

PRELUDE = '''
import tensorflow as tf

_DTYPES = {"float16": tf.float16, "bfloat16": tf.bfloat16, "float32": tf.float32,
           "float64": tf.float64}
#: (spatial dimensions, depthwise) -> the forward op and its two backprops.
_OPS = {(2, False): (tf.raw_ops.Conv2D, tf.raw_ops.Conv2DBackpropFilter,
                     tf.raw_ops.Conv2DBackpropInput),
        (2, True): (tf.raw_ops.DepthwiseConv2dNative,
                    tf.raw_ops.DepthwiseConv2dNativeBackpropFilter,
                    tf.raw_ops.DepthwiseConv2dNativeBackpropInput),
        (3, False): (tf.raw_ops.Conv3D, tf.raw_ops.Conv3DBackpropFilterV2,
                     tf.raw_ops.Conv3DBackpropInputV2)}
#: The channels-last layout of each number of spatial dimensions (TF's CPU kernels take no other).
_LAST = {2: "NHWC", 3: "NDHWC"}


def _tensor(a, dtype):
    """A source array (bfloat16 stored exactly as float32) as a tf tensor of dtype."""
    return tf.cast(tf.constant(a), _DTYPES[dtype])


def _fw(t):
    return tf.constant(t) if isinstance(t, np.ndarray) else t


def _np(t):
    a = np.asarray(t) if isinstance(t, (np.ndarray, np.generic)) else t.numpy()
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def _transpose(t, perm):
    if isinstance(t, np.ndarray):
        return np.ascontiguousarray(np.transpose(t, perm))
    return tf.transpose(t, perm)


def _fw_pad(t, pairs):
    return tf.pad(t, pairs)


def _fw_slice(t, cuts):
    return t[cuts]


def _cast(t, dtype):
    return tf.cast(_fw(t), _DTYPES[dtype])


def _rank(g):
    """The number of spatial dimensions."""
    return len(g["strides"])


def _channels_last(g):
    return g["data_format"] == _LAST[_rank(g)]


# TF's CPU kernels only take NHWC (NDHWC): a channels-first canvas is transposed around each op.
def _to_last(t, g):
    r = _rank(g)
    return t if _channels_last(g) else tf.transpose(t, [0, *range(2, r + 2), 1])


def _from_last(t, g):
    r = _rank(g)
    return t if _channels_last(g) else tf.transpose(t, [0, r + 1, *range(1, r + 1)])


def _last_shape(shape, g):
    return list(shape) if _channels_last(g) else [shape[0], *shape[2:], shape[1]]


def _attrs(g):
    """The op's attributes channels last. EXPLICIT padding becomes tf.pad + VALID (TF's CPU
    kernels refuse EXPLICIT with dilations; the padded VALID op is the same sum)."""
    padding = "VALID" if g["padding"] == "EXPLICIT" else g["padding"]
    return {"strides": [1, *g["strides"], 1], "padding": padding,
            "data_format": _LAST[_rank(g)], "dilations": [1, *g["dilations"], 1]}


def _pad(x, g):
    if g["padding"] != "EXPLICIT":
        return x
    return tf.pad(x, [[0, 0], *g["pads"], [0, 0]])


def _taps(g):
    """Every dilation-th tap of a spread filter: the taps of the dilated one."""
    return tuple(slice(None, None, d) for d in g["dilations"])


def _spread_size(sizes, g):
    """A filter shape with its spatial sizes spread by the dilations."""
    d = g["dilations"]
    return [(k - 1) * d[i] + 1 if i < len(d) else k for i, k in enumerate(sizes)]


def _dilated_filter(w, g):
    """w with (dilation - 1) zeros between its taps: an undilated filter with the same sum."""
    out = np.zeros(_spread_size(w.shape, g), w.dtype.as_numpy_dtype)
    out[_taps(g)] = w.numpy()
    return tf.constant(out)


def _unequal_strides(g):
    """Whether TF's CPU depthwise kernels refuse this depthwise op (row stride != column
    stride; they refuse it in every dtype)."""
    return g["depthwise"] and g["strides"][0] != g["strides"][1]


def _grouped(g):
    """A depthwise geometry as the grouped Conv2D it is: one group per input channel, the
    [kh, kw, C, M] filter read as [kh, kw, 1, C*M] (output channel k*M+m in both)."""
    kh, kw, c, m = g["filter_shape"]
    return {**g, "depthwise": False, "groups": c, "filter_shape": [kh, kw, 1, c * m]}


def _spread(g, forward):
    """Whether TF's CPU kernel refuses the dilations of this forward op (or of one of its
    backprops): DepthwiseConv2dNative, Conv2D's backprops and all three Conv3D ops do (Conv2D
    takes them; the depthwise backprops accept them, and ignore them: a known defect the
    script keeps)."""
    if all(d == 1 for d in g["dilations"]):
        return False
    if g["depthwise"]:
        return forward
    return not forward or _rank(g) == 3


def _per_group(g, forward):
    """Whether to run a grouped forward op (or backprop) one group at a time (TF's CPU kernels
    refuse grouped Conv2D backprops and grouped Conv3D ops; each group is a plain conv of its
    channels)."""
    return g["groups"] > 1 and (not forward or _rank(g) == 3)


def _group(g, k):
    """Group k as a plain conv: its geometry and its input, output channel slices."""
    n, *spatial, c = _last_shape(g["input_shape"], g)
    *taps, q, o = g["filter_shape"]
    per = o // g["groups"]
    shape = [n, *spatial, q] if _channels_last(g) else [n, q, *spatial]
    one = {**g, "groups": 1, "input_shape": shape, "filter_shape": [*taps, q, per]}
    return one, slice(k * q, (k + 1) * q), slice(k * per, (k + 1) * per)


def _channels(t, g, part):
    """Channels ``part`` of an activation tensor in g's layout."""
    return t[..., part] if _channels_last(g) else t[:, part]


def _channel_axis(g):
    return -1 if _channels_last(g) else 1


def _forward(x, w, g):
    if _unequal_strides(g):
        # TF's CPU DepthwiseConv2dNative refuses unequal strides: the same sums as a grouped
        # Conv2D, whose CPU kernel takes them.
        one = _grouped(g)
        return _forward(x, tf.reshape(_fw(w), one["filter_shape"]), one)
    if _per_group(g, True):
        # TF's CPU Conv3D refuses grouped convolutions: one group at a time.
        parts = []
        for k in range(g["groups"]):
            one, ins, outs = _group(g, k)
            parts.append(_forward(_channels(_fw(x), g, ins), _fw(w)[..., outs], one))
        return tf.concat(parts, axis=_channel_axis(g))
    op = _OPS[_rank(g), g["depthwise"]][0]
    attrs, w = _attrs(g), _fw(w)
    if _spread(g, True):
        # TF's CPU DepthwiseConv2dNative and Conv3D refuse dilations: the same sum with the
        # filter's taps spread out by zeros and no dilation.
        w, attrs["dilations"] = _dilated_filter(w, g), [1] * (_rank(g) + 2)
    y = op(input=_pad(_to_last(_fw(x), g), g), filter=w, **attrs)
    return _from_last(y, g)


def _backprop_filter(x, dy, g):
    if _unequal_strides(g):
        # TF's CPU DepthwiseConv2dNativeBackpropFilter refuses unequal strides: the grouped
        # Conv2D's filter gradient (one group at a time), read back as [kh, kw, C, M].
        return tf.reshape(_backprop_filter(x, dy, _grouped(g)), g["filter_shape"])
    if _per_group(g, False):
        # TF's CPU Conv2DBackpropFilter (Conv3DBackpropFilterV2) refuses grouped
        # convolutions: one group at a time.
        parts = []
        for k in range(g["groups"]):
            one, ins, outs = _group(g, k)
            parts.append(_backprop_filter(_channels(_fw(x), g, ins),
                                          _channels(_fw(dy), g, outs), one))
        return tf.concat(parts, axis=-1)
    op = _OPS[_rank(g), g["depthwise"]][1]
    attrs, sizes = _attrs(g), list(g["filter_shape"])
    if _spread(g, False):
        # TF's CPU Conv2DBackpropFilter (Conv3DBackpropFilterV2) refuses dilations: the
        # gradient of the filter with its taps spread out by zeros (no dilation), read back at
        # every dilation-th tap.
        sizes, attrs["dilations"] = _spread_size(sizes, g), [1] * (_rank(g) + 2)
    dw = op(input=_pad(_to_last(_fw(x), g), g), filter_sizes=tf.constant(sizes, tf.int32),
            out_backprop=_to_last(_fw(dy), g), **attrs)
    return dw[_taps(g)] if _spread(g, False) else dw


def _backprop_input(w, dy, g):
    if _unequal_strides(g):
        # TF's CPU DepthwiseConv2dNativeBackpropInput refuses unequal strides: the grouped
        # Conv2D's input gradient (one group at a time).
        one = _grouped(g)
        return _backprop_input(tf.reshape(_fw(w), one["filter_shape"]), dy, one)
    if _per_group(g, False):
        # TF's CPU Conv2DBackpropInput (Conv3DBackpropInputV2) refuses grouped convolutions:
        # one group at a time.
        parts = []
        for k in range(g["groups"]):
            one, _, outs = _group(g, k)
            parts.append(_backprop_input(_fw(w)[..., outs], _channels(_fw(dy), g, outs), one))
        return tf.concat(parts, axis=_channel_axis(g))
    op = _OPS[_rank(g), g["depthwise"]][2]
    n, *spatial, c = _last_shape(g["input_shape"], g)
    pads = g["pads"] if g["padding"] == "EXPLICIT" else [[0, 0]] * len(spatial)
    sizes = tf.constant([n, *(s + a + b for s, (a, b) in zip(spatial, pads)), c], tf.int32)
    attrs, w = _attrs(g), _fw(w)
    if _spread(g, False):
        # TF's CPU Conv2DBackpropInput (Conv3DBackpropInputV2) refuses dilations: the same
        # sums with the filter's taps spread out by zeros and no dilation.
        w, attrs["dilations"] = _dilated_filter(w, g), [1] * (_rank(g) + 2)
    dx = op(input_sizes=sizes, filter=w, out_backprop=_to_last(_fw(dy), g), **attrs)
    crop = tuple(slice(a, a + s) for s, (a, _) in zip(spatial, pads))
    return _from_last(dx[(slice(None), *crop, slice(None))], g)
'''


def known_defect(op: str, depthwise: bool, dilated: bool) -> str | None:
    """The TensorFlow CPU defect a conv computation of this kind shows, or None (the scripts
    pass dilations to both depthwise backprops, which accept and ignore them)."""
    if op in ("filter", "input") and depthwise and dilated:
        name = "Filter" if op == "filter" else "Input"
        return (f"TensorFlow's CPU DepthwiseConv2dNativeBackprop{name} ignores dilations "
                "(it computes the undilated gradient)")
    return None
