"""engine.verify.diagnose names known mistakes of conv implementations (issue 22 point 5).

Each mistake is made on purpose in :func:`loop_op`, plain NumPy loops written here from the
definition of the six ops (not from engine.verify.mistakes): ``mistake`` changes the one place
where such an implementation goes wrong. The implementation computes in float64 and returns
float32 values (a float32 implementation's output), diagnosed at the float32 tolerance.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.verify import mistakes as mk
from engine.verify.diagnose import agrees, diagnose, diagnose_shape

DEPTHWISE = {"DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter",
             "DepthwiseConv2dNativeBackpropInput"}
KIND = {"Conv2D": "output", "DepthwiseConv2dNative": "output",
        "Conv2DBackpropFilter": "filter", "DepthwiseConv2dNativeBackpropFilter": "filter",
        "Conv2DBackpropInput": "input", "DepthwiseConv2dNativeBackpropInput": "input"}


def _window(size, taps, stride, dil, padding, before, after):
    """TensorFlow's output size and padding before, from the definition."""
    eff = (taps - 1) * dil + 1
    if padding == "SAME":
        out = math.ceil(size / stride)
        total = max(0, (out - 1) * stride + eff - size)
        return out, total // 2, total - total // 2
    if padding == "VALID":
        before = after = 0
    return (size + before + after - eff) // stride + 1, before, after


def _nhwc(a, fmt):
    return a if fmt == "NHWC" else a.transpose(0, 2, 3, 1)


def _back(a, fmt):
    return a if fmt == "NHWC" else a.transpose(0, 3, 1, 2)


def _read(a, fmt, mistake):
    """An activation as the implementation reads it (NHWC loops)."""
    if mistake != "layout_swapped":
        return _nhwc(a, fmt)
    if fmt == "NHWC":  # NHWC memory read as NCHW
        n, h, w, c = a.shape
        return a.reshape(n, c, h, w).transpose(0, 2, 3, 1)
    n, c, h, w = a.shape  # NCHW memory read as NHWC
    return a.reshape(n, h, w, c)


def _write(y, fmt, mistake):
    if mistake != "layout_swapped":
        return _back(y, fmt)
    if fmt == "NHWC":  # written as NCHW memory
        return y.transpose(0, 3, 1, 2).reshape(y.shape)
    n, h, w, c = y.shape
    return y.reshape(n, c, h, w)


def loop_op(op, args, mistake=None):
    """The op from its definition, in loops, making ``mistake`` (None: correct)."""
    kind, depthwise = KIND[op], op in DEPTHWISE
    fmt = args.get("data_format", "NHWC")
    ax = (1, 2) if fmt == "NHWC" else (2, 3)
    sr, sc = (args["strides"][a] for a in ax)
    dr, dc = (args.get("dilations", [1, 1, 1, 1])[a] for a in ax)
    ep = args.get("explicit_paddings", [0] * 8)
    (pt, pb), (pl, pr) = ((ep[2 * a], ep[2 * a + 1]) for a in ax)
    if kind == "input":
        w = np.asarray(args["filter"], float)
        dy = _read(np.asarray(args["out_backprop"], float), fmt, mistake)
        sizes = list(args["input_sizes"])
        n_, h_, w_, c_ = sizes if fmt == "NHWC" else [sizes[i] for i in (0, 2, 3, 1)]
        x = None
    else:
        x = _read(np.asarray(args["input"], float), fmt, mistake)
        n_, h_, w_, c_ = x.shape
        w = np.asarray(args["filter"], float) if kind == "output" else None
        dy = _read(np.asarray(args["out_backprop"], float), fmt, mistake) \
            if kind == "filter" else None
    kh, kw, q_, o_ = w.shape if w is not None else args["filter_sizes"]
    rows, top, bottom = _window(h_, kh, sr, dr, args["padding"], pt, pb)
    cols, left, right = _window(w_, kw, sc, dc, args["padding"], pl, pr)
    # the rows and columns no window reaches at the end (conv_transpose2d's output_padding)
    rem = ((h_ + top + bottom - (kh - 1) * dr - 1) % sr, (w_ + left + right - (kw - 1) * dc - 1)
           % sc)
    if mistake == "stride_dilation_swapped":
        sr, dr, sc, dc = dr, sr, dc, sc
    if mistake == "same_pad_extra_before":
        top, left = (_window(h_, kh, sr, dr, "SAME", 0, 0)[2], _window(w_, kw, sc, dc, "SAME", 0,
                                                                      0)[2])
    if mistake == "padding_ignored":
        top = left = 0
    if mistake == "strides_swapped":  # the output size right, the reads with the other stride
        sr, sc = sc, sr
        if args["padding"] == "SAME":
            top, left = _window(h_, kh, sr, dr, "SAME", 0, 0)[1], _window(w_, kw, sc, dc, "SAME",
                                                                          0, 0)[1]
    if mistake == "dilation_ignored":
        dr = dc = 1
    if mistake == "dilation_ignored_undilated_same":  # TF 2.21's CPU depthwise backprops
        dr = dc = 1
        top, left = _window(h_, kh, sr, 1, "SAME", 0, 0)[1], _window(w_, kw, sc, 1, "SAME", 0, 0)[1]
    if mistake and mistake.startswith("padding_offset_by_one"):
        step = {"padding_offset_by_one": (1, 0), "padding_offset_by_one/left-": (0, -1),
                "padding_offset_by_one/both": (1, 1), "padding_offset_by_one/mixed": (-1, 1)}
        top, left = top + step[mistake][0], left + step[mistake][1]
    if mistake == "explicit_pads_swapped":
        top, left = pb, pr
    if mistake == "explicit_pads_swapped/hw":
        top, left = pl, pt
    out_depth = c_ * o_ if depthwise else o_
    per_group = o_ // (c_ // q_) if not depthwise else 1
    loop_rows = rows - 1 if mistake == "output_size_off_by_one" else rows
    flat_w = w.reshape(-1) if w is not None else None

    def filt(i, j, q, o):  # the filter element the implementation reads
        if mistake == "filter_not_flipped" or (mistake == "convolution_not_correlation"
                                               and kind == "output"):
            i, j = kh - 1 - i, kw - 1 - j
        if mistake == "filter_in_out_swapped":
            return flat_w[((i * kw + j) * o_ + o) * q_ + q]
        return w[i, j, q, o]

    out = {"output": np.zeros((n_, rows, cols, out_depth)), "filter": np.zeros((kh, kw, q_, o_)),
           "input": np.zeros((n_, h_, w_, c_))}[kind]
    images = range(n_)
    if mistake == "batch_not_accumulated":  # the accumulator reset per image: the last counts
        images = range(n_ - 1, n_)
    for n in images:
        for r in range(loop_rows):
            for c in range(cols):
                for oc in range(out_depth):
                    if depthwise:
                        k, m = divmod(oc, o_)
                        chans = [(k, k, m)]  # (input channel, filter in index, filter out index)
                        if mistake == "multiplier_order":
                            oc_used = m * c_ + k
                        else:
                            oc_used = oc
                    else:
                        group = 0 if mistake == "groups_ignored" else oc // per_group
                        chans = [(group * q_ + q, q, oc) for q in range(q_)]
                        oc_used = oc
                    for i in range(kh):
                        for j in range(kw):
                            h, v = r * sr + i * dr - top, c * sc + j * dc - left
                            if not (0 <= h < h_ and 0 <= v < w_):
                                continue
                            for ch, fq, fo in chans:
                                if kind == "output":
                                    out[n, r, c, oc_used] += x[n, h, v, ch] * filt(i, j, fq, fo)
                                elif kind == "input":
                                    out[n, h, v, ch] += filt(i, j, fq, fo) * dy[n, r, c, oc_used]
                                else:
                                    out[i, j, fq, fo] += x[n, h, v, ch] * dy[n, r, c, oc_used]
    if kind == "filter":
        if mistake == "batch_averaged":
            out /= n_
        if mistake == "positions_averaged":
            out /= n_ * rows * cols
        if mistake == "convolution_not_correlation":
            out = out[::-1, ::-1]
        if mistake == "filter_in_out_swapped":
            out = out.transpose(0, 1, 3, 2).reshape(out.shape)
    else:
        if mistake == "output_padding_zeroed":
            out[:, h_ - rem[0]:] = 0
            out[:, :, w_ - rem[1]:] = 0
        out = _write(out, fmt, mistake)
    return out.astype(np.float32).astype(np.float64)


def case(op, n=1, h=5, w=5, c=2, k=(2, 2), o=2, groups=1, strides=(1, 1), dilations=(1, 1),
         padding="VALID", pads=(0, 0, 0, 0), fmt="NHWC", seed=0):
    """tf_args of ``op`` on integer-valued random arrays (o: out channels or multiplier)."""
    rng = np.random.default_rng(seed)
    vec = (lambda a, b: [1, a, b, 1] if fmt == "NHWC" else [1, 1, a, b])
    attrs = {"strides": vec(*strides), "padding": padding, "data_format": fmt,
             "dilations": vec(*dilations)}
    if padding == "EXPLICIT":
        t, b, left, right = pads
        attrs["explicit_paddings"] = ([0, 0, t, b, left, right, 0, 0] if fmt == "NHWC"
                                      else [0, 0, 0, 0, t, b, left, right])
    q = c if op in DEPTHWISE else c // groups
    x_shape = (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)
    x = rng.integers(-4, 5, x_shape).astype(float)
    filt = rng.integers(-4, 5, (*k, q, o)).astype(float)
    kern = mk.TF_OPS["DepthwiseConv2dNative" if op in DEPTHWISE else "Conv2D"][0]
    dy = rng.integers(-4, 5, kern(x, filt, **attrs).shape).astype(float)
    kind = KIND[op]
    if kind == "output":
        return {"input": x, "filter": filt, **attrs}
    if kind == "filter":
        return {"input": x, "filter_sizes": list(filt.shape), "out_backprop": dy, **attrs}
    return {"input_sizes": list(x_shape), "filter": filt, "out_backprop": dy, **attrs}


def reference(op, args):
    return np.asarray(mk.TF_OPS[op][0](**args), np.float64)


C2D, C2F, C2I = "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput"
DW, DWF, DWI = DEPTHWISE_OPS = ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter",
                                "DepthwiseConv2dNativeBackpropInput")

#: mistake (as loop_op makes it) -> the cases it is checked on.
CASES = {
    "stride_dilation_swapped": [
        (C2D, {"h": 7, "w": 7, "strides": (2, 1), "dilations": (1, 2)}),
        (C2I, {"h": 7, "w": 6, "k": (3, 3), "strides": (2, 2), "fmt": "NCHW"}),
        (DWF, {"h": 6, "w": 7, "c": 2, "o": 2, "strides": (1, 2), "dilations": (2, 1), "n": 2}),
    ],
    "same_pad_extra_before": [
        (C2D, {"h": 6, "w": 5, "padding": "SAME", "fmt": "NCHW"}),
        (C2F, {"h": 5, "w": 6, "k": (4, 2), "padding": "SAME", "n": 2}),
        (DWI, {"h": 5, "w": 5, "k": (2, 2), "o": 2, "strides": (2, 2), "padding": "SAME"}),
    ],
    "filter_not_flipped": [
        (C2I, {"h": 6, "w": 6, "k": (3, 3), "strides": (2, 2), "padding": "SAME"}),
        (DWI, {"h": 5, "w": 6, "k": (2, 3), "o": 2, "fmt": "NCHW"}),
    ],
    "convolution_not_correlation": [
        (C2D, {"k": (3, 3), "o": 3, "fmt": "NCHW"}),
        (DWF, {"k": (2, 3), "o": 2, "n": 2}),
    ],
    "filter_in_out_swapped": [
        (C2D, {"c": 2, "o": 3}),
        (C2F, {"c": 4, "o": 4, "groups": 2, "fmt": "NCHW"}),
        (DW, {"c": 2, "o": 3}),
        (C2I, {"c": 2, "o": 2, "strides": (2, 1)}),
    ],
    "output_size_off_by_one": [
        (C2I, {"h": 6, "w": 6, "k": (3, 3), "strides": (2, 2)}),
        (C2F, {"h": 6, "w": 5, "fmt": "NCHW", "n": 2}),
        (DW, {"h": 4, "w": 4, "o": 2}),
    ],
    "dilation_ignored": [
        (C2D, {"h": 6, "w": 6, "dilations": (2, 2), "fmt": "NCHW"}),
        (DWI, {"h": 6, "w": 5, "dilations": (2, 1), "o": 2, "padding": "SAME"}),
    ],
    "padding_ignored": [
        (C2D, {"k": (3, 3), "padding": "SAME"}),
        (C2F, {"padding": "EXPLICIT", "pads": (1, 2, 0, 1), "fmt": "NCHW", "n": 2}),
    ],
    "batch_averaged": [
        (C2F, {"n": 2}),
        (DWF, {"n": 3, "o": 2, "fmt": "NCHW"}),
    ],
    "groups_ignored": [
        (C2D, {"c": 4, "o": 4, "groups": 2}),
        (C2I, {"c": 4, "o": 2, "groups": 2, "fmt": "NCHW"}),
        (C2F, {"c": 3, "o": 3, "groups": 3, "n": 2}),
    ],
    "multiplier_order": [
        (DW, {"c": 2, "o": 3}),
        (DWI, {"c": 3, "o": 2, "fmt": "NCHW"}),
        (DWF, {"c": 2, "o": 2, "n": 2}),
    ],
    "layout_swapped": [
        (C2D, {"h": 4, "w": 5, "c": 3, "o": 2}),
        (C2I, {"h": 5, "w": 4, "c": 2, "o": 3, "fmt": "NCHW"}),
        (DWF, {"h": 4, "w": 4, "c": 2, "o": 2, "n": 2}),
    ],
    "explicit_pads_swapped": [
        (C2D, {"padding": "EXPLICIT", "pads": (2, 1, 1, 2)}),
        (DWI, {"padding": "EXPLICIT", "pads": (0, 1, 2, 1), "o": 2, "fmt": "NCHW"}),
    ],
    "explicit_pads_swapped/hw": [
        (C2I, {"padding": "EXPLICIT", "pads": (0, 1, 2, 1), "fmt": "NCHW"}),
    ],
    "dilation_ignored_undilated_same": [
        (DWF, {"h": 7, "w": 6, "k": (3, 3), "dilations": (2, 2), "padding": "SAME", "n": 2}),
        (DWI, {"h": 9, "w": 9, "k": (3, 3), "dilations": (2, 2), "strides": (2, 2),
               "padding": "SAME", "fmt": "NCHW"}),
        (C2D, {"h": 6, "w": 7, "k": (3, 2), "dilations": (2, 3), "padding": "SAME"}),
    ],
    "batch_not_accumulated": [
        (C2F, {"n": 3, "h": 4, "w": 4, "fmt": "NCHW"}),
        (DWF, {"n": 2, "h": 5, "w": 4, "o": 2, "strides": (2, 1)}),
    ],
    "positions_averaged": [
        (C2F, {"n": 2, "h": 4, "w": 4}),
        (DWF, {"n": 1, "h": 5, "w": 4, "o": 2, "fmt": "NCHW"}),
    ],
    "output_padding_zeroed": [
        (C2I, {"h": 6, "w": 6, "k": (3, 3), "strides": (2, 2), "padding": "EXPLICIT",
               "pads": (1, 1, 1, 1)}),
        (DWI, {"h": 7, "w": 5, "k": (2, 2), "strides": (3, 2), "padding": "EXPLICIT",
               "pads": (0, 2, 1, 1), "o": 2}),
    ],
    "strides_swapped": [
        (C2D, {"h": 7, "w": 7, "k": (3, 2), "strides": (2, 1)}),
        (C2F, {"h": 6, "w": 7, "strides": (2, 3), "padding": "SAME", "n": 2}),
    ],
    "padding_offset_by_one": [  # top one too many
        (C2D, {"h": 5, "w": 5, "k": (3, 3)}),  # VALID: reads row -1
        (C2F, {"h": 6, "w": 5, "k": (3, 3), "padding": "SAME", "n": 2}),  # SAME, even total
        (DWI, {"h": 6, "w": 6, "k": (2, 3), "padding": "EXPLICIT", "pads": (2, 1, 1, 1), "o": 2}),
    ],
}

PARAMS = [pytest.param(m, op, kw, id=f"{m}-{op}-{n}")
          for m, cases in CASES.items() for n, (op, kw) in enumerate(cases)]


def matching(op, args, got):
    """Every mistake id whose variant agrees with ``got`` (float32 tolerance)."""
    call = mk.canonical(op, args)
    magnitudes = {k: np.abs(v) for k, v in call.operands.items()}
    return {cand.id for cand, out in mk.computed(call, mk.reference(call))
            if agrees(got, out, np.abs(cand.compute(magnitudes)), 2e-5)}


def test_mistakes_are_documented():
    assert set(CASES) - {"explicit_pads_swapped/hw"} == set(mk.MISTAKES)
    assert set(mk.APPLIES_TO) <= set(mk.MISTAKES)


@pytest.mark.parametrize(("mistake", "op", "kw"), PARAMS)
def test_each_mistake_is_named(mistake, op, kw):
    args = case(op, **kw)
    ref = reference(op, args)
    assert np.array_equal(loop_op(op, args), ref)  # the loops are right without the mistake
    got = loop_op(op, args, mistake)
    assert got.shape == ref.shape and not np.allclose(got, ref)  # the mistake shows
    d = diagnose(op, args, got, ref, "float32")
    want = mistake.split("/")[0]
    assert d.id == want, d.text
    assert d.text.startswith(f"Matches {want}: {mk.MISTAKES[want]} (")
    # no other mistake is confused with it on this case
    assert matching(op, args, got) == {want}


@pytest.mark.parametrize("op", [C2D, C2F, C2I, *DEPTHWISE_OPS])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_correct_outputs_have_no_mistake(op, fmt):
    kw = {"c": 4, "o": 2, "groups": 2} if op.startswith("Conv2D") else {"c": 2, "o": 3}
    args = case(op, n=2, h=6, w=5, k=(3, 2), strides=(2, 1), dilations=(1, 2), padding="SAME",
                fmt=fmt, **kw)
    ref = reference(op, args)
    d = diagnose(op, args, loop_op(op, args), ref, "float32")
    assert d.id is None
    assert d.text == ("The output agrees with the reference within the float32 tolerance "
                      "(rtol 2e-05 of each element's sum of |products|).")


def test_variants_follow_the_contract():
    args = case(C2D, c=4, o=4, groups=2, h=6, w=6, k=(3, 3), strides=(2, 1), dilations=(1, 2),
                padding="EXPLICIT", pads=(1, 0, 2, 1), fmt="NCHW")
    ref = reference(C2D, args)
    seen = []
    for mid, out in mk.variants(C2D, args):
        assert mid in mk.MISTAKES and out.shape == ref.shape and out.dtype == np.float64
        assert not np.array_equal(out, ref)
        seen.append(mid)
    order = list(mk.MISTAKES)
    assert seen == sorted(seen, key=order.index)  # documentation order
    assert "batch_averaged" not in seen and "multiplier_order" not in seen  # not Conv2D
    assert {"stride_dilation_swapped", "groups_ignored", "explicit_pads_swapped"} <= set(seen)


def test_pattern_border_only_one_channel():
    args = case(C2D, h=5, w=5, k=(1, 1), c=1, o=2)
    ref = reference(C2D, args)
    got = ref.copy()
    got[0, 0, :, 1] += 100
    text = diagnose(C2D, args, got, ref, "float32").text
    assert text.startswith("No known mistake matches. 5 of 50 elements are wrong (border only, "
                           "one channel): rows 0; columns 0-4; channels 1; images 0. Worst "
                           "element output[0,0,")


def test_pattern_interior_one_image_nchw():
    args = case(C2D, n=2, h=6, w=6, k=(1, 1), c=1, o=1, fmt="NCHW")
    ref = reference(C2D, args)
    got = ref.copy()
    got[1, 0, 2:4, 1:3] = np.nan
    text = diagnose(C2D, args, got, ref, "float32").text
    assert ("4 of 72 elements are wrong (interior only, one image): rows 2-3; columns 1-2; "
            "channels 0; images 1.") in text


def test_missing_terms_are_named():
    x = np.arange(1.0, 17.0).reshape(1, 4, 4, 1)
    w = np.array([[1.0, 2.0], [3.0, 4.0]]).reshape(2, 2, 1, 1)
    args = {"input": x, "filter": w, "strides": [1, 1, 1, 1], "padding": "VALID",
            "data_format": "NHWC", "dilations": [1, 1, 1, 1]}
    ref = reference(C2D, args)
    got = ref.copy()
    got[0, 1, 1, 0] -= x[0, 2, 1, 0] * 3 + x[0, 2, 2, 0] * 4  # the taps of filter row 1
    d = diagnose(C2D, args, got, ref, "float64")
    assert d.id is None
    assert d.text == (
        "No known mistake matches. 1 of 9 elements are wrong (interior only): "
        "rows 1; columns 1; channels 0; images 0. Worst element output[0,1,1,0]: the "
        "implementation gives 20, the reference 94 = sum over i,j,q of input[0, i+1, j+1, q] * "
        "filter[i, j, q, 0] (i < 2, j < 2, q < 1; 4 terms); the implementation's value equals "
        "the sum of 2 of its 4 terms; missing the 2 that read input row 2 and filter row 1.")


def test_one_filter_tap_and_ratio():
    args = case(C2F, n=2, k=(3, 2), c=2, o=2)
    ref = reference(C2F, args)
    got = ref.copy()
    got[2, 0] *= 3
    text = diagnose(C2F, args, got, ref, "float32").text
    assert "4 of 24 elements are wrong (one filter tap): taps (i, j) (2, 0); input channels " \
           "0-1; output channels 0-1." in text
    assert "is 3 times the exact sum." in text


def test_zero_value_and_all_wrong():
    args = case(DW, h=4, w=4, c=2, o=2)
    ref = reference(DW, args)
    text = diagnose(DW, args, np.zeros_like(ref) + 1e3, ref, "float32").text
    assert "36 of 36 elements are wrong (all): rows 0-2; columns 0-2; channels 0-3; images 0." \
        in text


def test_shape_mistakes():
    args = case(C2D, h=6, w=6, k=(3, 3), strides=(2, 2), padding="SAME")
    assert reference(C2D, args).shape == (1, 3, 3, 2)
    d = diagnose_shape(C2D, args, (1, 2, 2, 2))  # VALID's shape
    assert d.id == "padding_ignored"
    assert d.text.endswith("the output has shape [1, 2, 2, 2] where TensorFlow's is "
                           "[1, 3, 3, 2].")
    assert diagnose_shape(C2D, args, (1, 3, 4, 2)).id == "output_size_off_by_one"
    assert diagnose_shape(C2D, args, (1, 2, 3, 3)).id == "layout_swapped"
    assert diagnose_shape(C2D, args, (5, 5, 5, 5)).id is None
    args = case(C2I, h=6, w=7, k=(3, 3), strides=(2, 2))  # remainders 1 and 0
    d = diagnose(C2I, args, np.zeros((1, 5, 7, 2)), reference(C2I, args), "float32")
    assert d.id == "output_size_off_by_one" and "losing the remainder" in d.text


def test_tie_padding_ignored_wins_over_explicit_pads_swapped():
    """With no padding after, swapping before and after is ignoring the padding: the two are
    the same output, padding_ignored (first in MISTAKES) wins and the text names both."""
    args = case(C2D, padding="EXPLICIT", pads=(2, 0, 1, 0))
    ref = reference(C2D, args)
    got = loop_op(C2D, args, "explicit_pads_swapped")
    assert np.array_equal(got, loop_op(C2D, args, "padding_ignored"))
    d = diagnose(C2D, args, got, ref, "float32")
    assert d.id == "padding_ignored"
    assert d.text.endswith("; indistinguishable here from explicit_pads_swapped (before and "
                           "after swapped: top/left padding (0, 0) instead of (2, 1)).")


def test_guide_lists_every_id():
    from pathlib import Path
    guide = Path(__file__).resolve().parents[1] / "assets" / "guide"
    pages = [p for p in (guide / "verify.md", guide / "verify_diagnosis.md") if p.exists()]
    text = "".join(p.read_text(encoding="utf-8") for p in pages)
    assert "## Diagnosis ids" in text
    for mid in mk.MISTAKES:
        assert f"| `{mid}` |" in text, mid
