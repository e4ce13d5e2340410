"""The PyTorch target of ``gradblocks export --to pytorch``: helpers over
``torch.nn.functional.conv2d`` (``conv3d`` for the Conv3D ops) with its gradients from autograd.

PyTorch computes channels first (NCHW, NCDHW) with OIHW (OIDHW) weights: a channels-last
canvas is permuted around each op, HWIO (DHWIO) filters become OIHW (OIDHW), a depthwise filter
``[kh, kw, C, M]`` becomes ``C * M`` single-channel filters with ``groups = C`` (output channel
``c * M + m``, TensorFlow's order). PyTorch's ``padding="same"`` pads differently from
TensorFlow's SAME (and refuses strides), so every padding is applied as TensorFlow's explicit
amounts with ``F.pad`` (one pair per spatial dimension, the last dimension's first). The filter
and input gradients are ``torch.autograd.grad`` of that same forward call. One set of helpers
serves every rank (the geometry's lists have one entry per spatial dimension,
:mod:`engine.export.conv`).
"""

from __future__ import annotations

NAME = "pytorch"
MODULE = "torch"

PRELUDE = '''
import torch
import torch.nn.functional as F

_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
           "float64": torch.float64}


def _tensor(a, dtype):
    """A source array (bfloat16 stored exactly as float32) as a torch tensor of dtype."""
    return torch.from_numpy(np.ascontiguousarray(a)).to(_DTYPES[dtype])


def _fw(t):
    return torch.from_numpy(np.ascontiguousarray(t)) if isinstance(t, np.ndarray) else t


def _np(t):
    if isinstance(t, (np.ndarray, np.generic)):
        return np.asarray(t)
    t = t.detach()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def _transpose(t, perm):
    if isinstance(t, np.ndarray):
        return np.ascontiguousarray(np.transpose(t, perm))
    return t.permute(*perm).contiguous()


def _fw_pad(t, pairs):
    return F.pad(t, [p for pair in reversed(pairs) for p in pair])


def _fw_slice(t, cuts):
    return t[cuts].contiguous()


def _cast(t, dtype):
    return _fw(t).to(_DTYPES[dtype])


def _rank(g):
    """The number of spatial dimensions."""
    return len(g["strides"])


def _channels_last(g):
    return g["data_format"].endswith("C")


def _to_first(t, g):
    r = _rank(g)
    return t.permute(0, r + 1, *range(1, r + 1)) if _channels_last(g) else t


def _from_first(t, g):
    r = _rank(g)
    return t.permute(0, *range(2, r + 2), 1).contiguous() if _channels_last(g) else t


def _first_shape(shape, g):
    return [shape[0], shape[-1], *shape[1:-1]] if _channels_last(g) else list(shape)


_CONV = {2: F.conv2d, 3: F.conv3d}


def _conv(x, w, g):
    """TF's conv of channels-first x and HWIO / DHWIO (or depthwise [kh, kw, C, M]) w, in
    PyTorch terms."""
    r = _rank(g)
    x = F.pad(x, tuple(p for pair in reversed(g["pads"]) for p in pair))
    if g["depthwise"]:
        *taps, c, m = w.shape
        w, groups = w.reshape(*taps, 1, c * m), c
    else:
        groups = g["groups"]
    weight = w.permute(r + 1, r, *range(r))
    return _CONV[r](x, weight, stride=tuple(g["strides"]), dilation=tuple(g["dilations"]),
                    groups=groups)


def _forward(x, w, g):
    return _from_first(_conv(_to_first(_fw(x), g), _fw(w), g), g)


def _backprop_filter(x, dy, g):
    x = _to_first(_fw(x), g)
    w0 = torch.zeros(g["filter_shape"], dtype=x.dtype, requires_grad=True)
    (dw,) = torch.autograd.grad(_conv(x, w0, g), w0, _to_first(_fw(dy), g))
    return dw


def _backprop_input(w, dy, g):
    w = _fw(w)
    x0 = torch.zeros(_first_shape(g["input_shape"], g), dtype=w.dtype, requires_grad=True)
    (dx,) = torch.autograd.grad(_conv(x0, w, g), x0, _to_first(_fw(dy), g))
    return _from_first(dx, g)
'''


def known_defect(op: str, depthwise: bool, dilated: bool) -> str | None:
    """No known PyTorch defect in these ops."""
    return None
