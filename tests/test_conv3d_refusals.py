"""Every invalid call of the Conv3D family is one InvalidArgumentError naming the argument;
TensorFlow's raw ops refuse each of them too (where installed). The calls TensorFlow 2.21's CPU
refuses though the math defines them (dilations, NCDHW, groups) are computed, as documented in
:mod:`engine.kernels.conv3d`."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from engine import kernels
from engine.base.errors import InvalidArgumentError
from tests import conv3d_reference as ref
from tests import tf_eigen

X = (1, 5, 6, 7, 4)
W = (2, 2, 2, 4, 3)
DY = (1, 4, 5, 6, 3)  # VALID, stride 1
ONE = [1, 1, 1, 1, 1]


def _a(shape, dtype=np.float32) -> np.ndarray:
    return np.ones(shape, dtype)


def _fwd(**kw):
    args = {"input": _a(X), "filter": _a(W), "strides": ONE, "padding": "VALID"} | kw
    return "Conv3D", args


def _bf(**kw):
    args = {"input": _a(X), "filter_sizes": list(W), "out_backprop": _a(DY), "strides": ONE,
            "padding": "VALID"} | kw
    return "Conv3DBackpropFilterV2", args


def _bi(**kw):
    args = {"input_sizes": list(X), "filter": _a(W), "out_backprop": _a(DY), "strides": ONE,
            "padding": "VALID"} | kw
    return "Conv3DBackpropInputV2", args


# (what, call, the argument the message names, words it contains)
REFUSALS = [
    ("batch stride", _fwd(strides=[2, 1, 1, 1, 1]), "strides", "batch and depth"),
    ("channel stride", _fwd(strides=[1, 1, 1, 1, 2]), "strides", "batch and depth"),
    ("zero stride", _fwd(strides=[1, 0, 1, 1, 1]), "strides", "> 0"),
    ("negative stride", _fwd(strides=[1, 1, -1, 1, 1]), "strides", "> 0"),
    ("strides of 4", _fwd(strides=[1, 1, 1, 1]), "strides", "5 elements"),
    ("batch dilation", _fwd(dilations=[2, 1, 1, 1, 1]), "dilations", "batch and depth"),
    ("zero dilation", _fwd(dilations=[1, 1, 0, 1, 1]), "dilations", "> 0"),
    ("4-D input", _fwd(input=_a(X[1:])), "input", "5-D"),
    ("6-D input", _fwd(input=_a((1, *X))), "input", "5-D"),
    ("4-D filter", _fwd(filter=_a(W[1:])), "filter", "5-D"),
    ("channel mismatch", _fwd(filter=_a((2, 2, 2, 3, 3))), "input", "multiple"),
    ("groups not dividing out_channels", _fwd(filter=_a((2, 2, 2, 2, 3))), "filter",
     "divisible"),
    ("zero-sized filter", _fwd(filter=_a((1, 1, 0, 4, 3))), "filter", "> 0"),
    ("zero out_channels", _fwd(filter=_a((1, 1, 1, 4, 0))), "filter", "> 0"),
    ("EXPLICIT padding", _fwd(padding="EXPLICIT"), "padding", "SAME, VALID"),
    ("a 2-D data_format", _fwd(data_format="NHWC"), "data_format", "NDHWC"),
    ("negative output size", _fwd(filter=_a((8, 2, 2, 4, 3))), "filter", "negative"),
    ("dtype mismatch", _fwd(filter=_a(W, np.float64)), "filter", "dtype"),
    ("integer input", _fwd(input=np.ones(X, np.int32)), "input", "dtype"),
    ("filter: out_backprop spatial size", _bf(out_backprop=_a((1, 3, 5, 6, 3))),
     "out_backprop", "planes"),
    ("filter: out_backprop depth", _bf(out_backprop=_a((1, 4, 5, 6, 2))), "out_backprop",
     "depth"),
    ("filter: out_backprop batch", _bf(out_backprop=_a((2, 4, 5, 6, 3))), "out_backprop",
     "batch"),
    ("filter: filter_sizes of 4", _bf(filter_sizes=[2, 2, 4, 3]), "filter_sizes", "5 elements"),
    ("filter: filter_sizes channels", _bf(filter_sizes=[2, 2, 2, 3, 3]), "input", "multiple"),
    ("filter: 4-D out_backprop", _bf(out_backprop=_a(DY[1:])), "out_backprop", "5-D"),
    ("input: input_sizes of 3", _bi(input_sizes=[5, 6, 7]), "input_sizes", "5 elements"),
    ("input: negative input_sizes", _bi(input_sizes=[1, 5, -6, 7, 4]), "input_sizes", ">= 0"),
    ("input: out_backprop spatial size", _bi(out_backprop=_a((1, 4, 5, 5, 3))),
     "out_backprop", "width"),
    ("input: input_sizes channels", _bi(input_sizes=[1, 5, 6, 7, 3]), "input_sizes",
     "multiple"),
    ("input: dtype mismatch", _bi(out_backprop=_a(DY, np.float16)), "out_backprop", "dtype"),
]
KERNELS = {"Conv3D": kernels.conv3d, "Conv3DBackpropFilterV2": kernels.conv3d_backprop_filter,
           "Conv3DBackpropInputV2": kernels.conv3d_backprop_input}


@pytest.mark.parametrize("what,call,argument,words", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_each_invalid_call_names_its_argument(what, call, argument, words):
    op, args = call
    with pytest.raises(InvalidArgumentError) as err:
        KERNELS[op](**args)
    assert err.value.argument == argument
    assert argument in str(err.value) and words in str(err.value)


@functools.cache
def _tensorflow(cases: str) -> list:
    """What TensorFlow's Eigen CPU kernels do with each call of ``cases`` (tests.tf_eigen)."""
    return tf_eigen.raw_ops([c[1] for c in {"refusals": REFUSALS, "beyond": BEYOND_TF_CPU}[cases]])


@pytest.mark.parametrize("k", range(len(REFUSALS)), ids=[r[0] for r in REFUSALS])
def test_tensorflow_refuses_each_of_them_too(k):
    assert _tensorflow("refusals")[k][0] == "refused", REFUSALS[k][0]


# Computed here, refused by TensorFlow 2.21's CPU ("only supports dilated rates of 1", "only
# supports the NHWC tensor format", "Number of channels in filter must match").
BEYOND_TF_CPU = [
    ("dilations with strides", _fwd(strides=[1, 2, 1, 1, 1], dilations=[1, 2, 1, 2, 1])),
    ("NCDHW", _fwd(input=_a((1, 4, 5, 6, 7)), data_format="NCDHW",
                   strides=[1, 1, 1, 2, 1])),
    ("groups", _fwd(filter=_a((2, 2, 2, 2, 6)))),
    ("filter: dilations", _bf(out_backprop=_a((1, 3, 5, 6, 3)), dilations=[1, 2, 1, 1, 1])),
    ("input: dilations", _bi(out_backprop=_a((1, 3, 5, 6, 3)), dilations=[1, 2, 1, 1, 1])),
]


@pytest.mark.parametrize("what,call", BEYOND_TF_CPU, ids=[c[0] for c in BEYOND_TF_CPU])
def test_what_tensorflows_cpu_refuses_but_the_math_defines_is_computed(what, call):
    op, args = call
    rng = np.random.default_rng(5)
    args = {k: (rng.standard_normal(v.shape) if isinstance(v, np.ndarray) else v)
            for k, v in args.items()}
    fmt = args.get("data_format", "NDHWC")
    last = (lambda a: np.moveaxis(a, 1, -1)) if fmt == "NCDHW" else (lambda a: a)
    sp = (lambda v: v[2:]) if fmt == "NCDHW" else (lambda v: v[1:4])
    x = last(args["input"]) if "input" in args else None
    w = args.get("filter")
    xs = x.shape if x is not None else tuple(args["input_sizes"])
    ws = w.shape if w is not None else tuple(args["filter_sizes"])
    g = ref.geo(xs, ws, sp(args["strides"]), sp(args.get("dilations", ONE)), args["padding"])
    got = KERNELS[op](**args)
    if op == "Conv3D":
        want, bound = ref.forward(x, w, g)
        got = last(got)
    elif op == "Conv3DBackpropFilterV2":
        want, bound = ref.backprop_filter(x, args["out_backprop"], g)
    else:
        want, bound = ref.backprop_input(w, args["out_backprop"], g)
    assert ref.within(got, want, bound, 1e-12) <= 0
    k = [c[0] for c in BEYOND_TF_CPU].index(what)
    assert _tensorflow("beyond")[k] == ("refused", "InvalidArgumentError")
