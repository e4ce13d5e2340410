"""The TensorFlow target of ``gradblocks export --to tensorflow``: helpers over ``tf.raw_ops``.

The script calls the same raw op the block mirrors (Conv2D, Conv2DBackpropFilter, ...,
DepthwiseConv2dNativeBackpropFilter) with the canvas's strides and dilations. TensorFlow's CPU
kernels refuse some calls a canvas may make (NCHW, EXPLICIT padding combined with dilations),
so the script runs every op in NHWC (transposes around it for an NCHW canvas), turns
EXPLICIT padding into ``tf.pad`` + VALID (a backprop-input result is cut back to the unpadded
size), and where a CPU kernel refuses dilations (DepthwiseConv2dNative, Conv2D's two
backprops) spreads the filter's taps out with zeros and runs it undilated (a filter gradient
is then read back at every dilation-th tap): equivalent formulations, each still TensorFlow's
own answer; a grouped Conv2D's backprops run one group at a time (the CPU kernels refuse
grouped shapes). The depthwise backprops accept dilations and ignore them (a known defect): the
script passes them as they are, so a cross-check shows what TensorFlow really returns. SAME and
VALID are passed as they are (TensorFlow's SAME is the canvas's definition).

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
_OPS = {False: (tf.raw_ops.Conv2D, tf.raw_ops.Conv2DBackpropFilter,
                tf.raw_ops.Conv2DBackpropInput),
        True: (tf.raw_ops.DepthwiseConv2dNative, tf.raw_ops.DepthwiseConv2dNativeBackpropFilter,
               tf.raw_ops.DepthwiseConv2dNativeBackpropInput)}


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


def _cast(t, dtype):
    return tf.cast(_fw(t), _DTYPES[dtype])


# TF's CPU kernels only take NHWC: an NCHW canvas is transposed around each op.
def _to_nhwc(t, g):
    return t if g["data_format"] == "NHWC" else tf.transpose(t, [0, 2, 3, 1])


def _from_nhwc(t, g):
    return t if g["data_format"] == "NHWC" else tf.transpose(t, [0, 3, 1, 2])


def _nhwc_shape(shape, g):
    n, a, b, c = shape
    return [n, a, b, c] if g["data_format"] == "NHWC" else [n, b, c, a]


def _attrs(g):
    """The op's attributes in NHWC. EXPLICIT padding becomes tf.pad + VALID (TF's CPU kernels
    refuse EXPLICIT with dilations; the padded VALID op is the same sum)."""
    sr, sc = g["strides"]
    dr, dc = g["dilations"]
    padding = "VALID" if g["padding"] == "EXPLICIT" else g["padding"]
    return {"strides": [1, sr, sc, 1], "padding": padding, "data_format": "NHWC",
            "dilations": [1, dr, dc, 1]}


def _pad(x, g):
    if g["padding"] != "EXPLICIT":
        return x
    (t, b), (left, right) = g["pads"]
    return tf.pad(x, [[0, 0], [t, b], [left, right], [0, 0]])


def _dilated_filter(w, g):
    """w with (dilation - 1) zeros between its taps: an undilated filter with the same sum."""
    dr, dc = g["dilations"]
    kh, kw, c, m = w.shape
    out = np.zeros(((kh - 1) * dr + 1, (kw - 1) * dc + 1, c, m), w.dtype.as_numpy_dtype)
    out[::dr, ::dc] = w.numpy()
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


def _forward(x, w, g):
    if _unequal_strides(g):
        # TF's CPU DepthwiseConv2dNative refuses unequal strides: the same sums as a grouped
        # Conv2D, whose CPU kernel takes them.
        one = _grouped(g)
        return _forward(x, tf.reshape(_fw(w), one["filter_shape"]), one)
    op = _OPS[g["depthwise"]][0]
    attrs, w = _attrs(g), _fw(w)
    if g["depthwise"] and g["dilations"] != [1, 1]:
        # TF's CPU DepthwiseConv2dNative refuses dilations: the same sum with the filter's
        # taps spread out by zeros and no dilation.
        w, attrs["dilations"] = _dilated_filter(w, g), [1, 1, 1, 1]
    y = op(input=_pad(_to_nhwc(_fw(x), g), g), filter=w, **attrs)
    return _from_nhwc(y, g)


def _spread(g):
    """Whether TF's CPU kernel refuses this op's dilations (Conv2D's backprops do; the
    depthwise backprops accept them, and ignore them: a known defect the script keeps)."""
    return not g["depthwise"] and g["dilations"] != [1, 1]


def _per_group(g):
    """Whether to run a grouped Conv2D's backprop one group at a time (TF's CPU backprop
    kernels refuse grouped shapes; each group is a plain conv of its channels)."""
    return g["groups"] > 1


def _group(g, k):
    """Group k as a plain conv: its geometry and its input, output channel slices (NHWC)."""
    n, h, v, c = _nhwc_shape(g["input_shape"], g)
    kh, kw, q, o = g["filter_shape"]
    per = o // g["groups"]
    shape = [n, h, v, q] if g["data_format"] == "NHWC" else [n, q, h, v]
    one = {**g, "groups": 1, "input_shape": shape, "filter_shape": [kh, kw, q, per]}
    return one, slice(k * q, (k + 1) * q), slice(k * per, (k + 1) * per)


def _channels(t, g, part):
    """Channels ``part`` of an activation tensor in g's layout."""
    return t[..., part] if g["data_format"] == "NHWC" else t[:, part]


def _backprop_filter(x, dy, g):
    if _unequal_strides(g):
        # TF's CPU DepthwiseConv2dNativeBackpropFilter refuses unequal strides: the grouped
        # Conv2D's filter gradient (one group at a time), read back as [kh, kw, C, M].
        return tf.reshape(_backprop_filter(x, dy, _grouped(g)), g["filter_shape"])
    if _per_group(g):
        # TF's CPU Conv2DBackpropFilter refuses grouped convolutions: one group at a time.
        parts = []
        for k in range(g["groups"]):
            one, ins, outs = _group(g, k)
            parts.append(_backprop_filter(_channels(_fw(x), g, ins),
                                          _channels(_fw(dy), g, outs), one))
        return tf.concat(parts, axis=3)
    op = _OPS[g["depthwise"]][1]
    attrs, sizes = _attrs(g), list(g["filter_shape"])
    dr, dc = g["dilations"]
    if _spread(g):
        # TF's CPU Conv2DBackpropFilter refuses dilations: the gradient of the filter with
        # its taps spread out by zeros (no dilation), read back at every dilation-th tap.
        sizes[0], sizes[1] = (sizes[0] - 1) * dr + 1, (sizes[1] - 1) * dc + 1
        attrs["dilations"] = [1, 1, 1, 1]
    dw = op(input=_pad(_to_nhwc(_fw(x), g), g), filter_sizes=tf.constant(sizes, tf.int32),
            out_backprop=_to_nhwc(_fw(dy), g), **attrs)
    return dw[::dr, ::dc] if _spread(g) else dw


def _backprop_input(w, dy, g):
    if _unequal_strides(g):
        # TF's CPU DepthwiseConv2dNativeBackpropInput refuses unequal strides: the grouped
        # Conv2D's input gradient (one group at a time).
        one = _grouped(g)
        return _backprop_input(tf.reshape(_fw(w), one["filter_shape"]), dy, one)
    if _per_group(g):
        # TF's CPU Conv2DBackpropInput refuses grouped convolutions: one group at a time.
        parts = []
        for k in range(g["groups"]):
            one, _, outs = _group(g, k)
            parts.append(_backprop_input(_fw(w)[..., outs], _channels(_fw(dy), g, outs), one))
        return tf.concat(parts, axis=3 if g["data_format"] == "NHWC" else 1)
    op = _OPS[g["depthwise"]][2]
    n, h, v, c = _nhwc_shape(g["input_shape"], g)
    (t, b), (left, right) = g["pads"] if g["padding"] == "EXPLICIT" else ((0, 0), (0, 0))
    sizes = tf.constant([n, h + t + b, v + left + right, c], tf.int32)
    attrs, w = _attrs(g), _fw(w)
    if _spread(g):
        # TF's CPU Conv2DBackpropInput refuses dilations: the same sums with the filter's taps
        # spread out by zeros and no dilation.
        w, attrs["dilations"] = _dilated_filter(w, g), [1, 1, 1, 1]
    dx = op(input_sizes=sizes, filter=w, out_backprop=_to_nhwc(_fw(dy), g), **attrs)
    return _from_nhwc(dx[:, t:t + h, left:left + v, :], g)
'''


def known_defect(op: str, depthwise: bool, dilated: bool) -> str | None:
    """The TensorFlow CPU defect a conv computation of this kind shows, or None (the scripts
    pass dilations to both depthwise backprops, which accept and ignore them)."""
    if op in ("filter", "input") and depthwise and dilated:
        name = "Filter" if op == "filter" else "Input"
        return (f"TensorFlow's CPU DepthwiseConv2dNativeBackprop{name} ignores dilations "
                "(it computes the undilated gradient)")
    return None
