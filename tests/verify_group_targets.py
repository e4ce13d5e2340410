"""Targets for the failure-group and reproduction tests (tests/test_verify_groups.py,
tests/test_verify_repro.py): implementations with several distinct mistakes, garbage outputs,
and an echo of the arguments a reproduction builds."""

from __future__ import annotations

import numpy as np

from tests import verify_zoo as zoo

_groups_ignored = zoo.tf_loops("Conv2D", "groups_ignored")
_padding_ignored = zoo.tf_loops("Conv2D", "padding_ignored")


def several_bugs(**kw):
    """tf Conv2D refusing NCHW (its message names the shape), one output row too many with a
    dilation > 1, the groups ignored, and the padding ignored."""
    x = kw["input"]
    if kw["data_format"] == "NCHW":
        raise ValueError(f"cannot handle an input of shape {list(x.shape)} in NCHW")
    if max(kw["dilations"]) > 1:
        return zoo.wrong_shape(**kw)
    if x.shape[3] != kw["filter"].shape[2]:
        return _groups_ignored(**kw)
    return _padding_ignored(**kw)


def reads_unwritten(**kw):
    """tf Conv2D whose first element, when the batch is > 1, is never written: what the memory
    held (a huge value that changes from call to call)."""
    y = np.array(zoo.loops_conv2d(**kw))
    if y.shape[0] > 1 and y.size:
        y.flat[0] = np.random.default_rng().uniform(1e23, 1e24)
    return y


def huge_first(**kw):
    """tf Conv2D whose first element is 1e24 when the batch is > 1 (the same every call)."""
    y = np.array(zoo.loops_conv2d(**kw))
    if y.shape[0] > 1 and y.size:
        y.flat[0] = 1e24
    return y


def garbage_shape(**kw):
    """tf Conv2D one row too long, the extra row random garbage (different every call)."""
    y = zoo.wrong_shape(**kw)
    y = np.array(y)
    axis = 1 if kw["data_format"] == "NHWC" else 2
    index = [slice(None)] * 4
    index[axis] = -1
    y[tuple(index)] = np.random.default_rng().standard_normal(y[tuple(index)].shape)
    return y


def echo(**kw):
    """Every array argument (sorted by name) flattened, each followed by its
    ``flags.writeable`` and ``flags.c_contiguous``: what a reproduction gives the target."""
    out = []
    for k in sorted(kw):
        v = kw[k]
        if isinstance(v, np.ndarray):
            out += [np.asarray(v, np.float64).ravel(), [float(v.flags.writeable),
                                                         float(v.flags.c_contiguous)]]
    return np.concatenate(out)
