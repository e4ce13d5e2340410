"""The PyTorch target of ``gradblocks export --to pytorch``: helpers over
``torch.nn.functional.conv2d`` with its gradients from autograd.

PyTorch computes in NCHW with OIHW weights: an NHWC canvas is permuted around each op, HWIO
filters become OIHW, a depthwise filter ``[kh, kw, C, M]`` becomes ``C * M`` single-channel
filters with ``groups = C`` (output channel ``c * M + m``, TensorFlow's order). PyTorch's
``padding="same"`` pads differently from TensorFlow's SAME (and refuses strides), so every
padding is applied as TensorFlow's explicit amounts with ``F.pad``. The filter and input
gradients are ``torch.autograd.grad`` of that same forward call.
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


def _cast(t, dtype):
    return _fw(t).to(_DTYPES[dtype])


def _to_nchw(t, g):
    return t.permute(0, 3, 1, 2) if g["data_format"] == "NHWC" else t


def _from_nchw(t, g):
    return t.permute(0, 2, 3, 1).contiguous() if g["data_format"] == "NHWC" else t


def _nchw_shape(shape, g):
    n, a, b, c = shape
    return [n, c, a, b] if g["data_format"] == "NHWC" else [n, a, b, c]


def _conv(x, w, g):
    """TF's conv of NCHW x and HWIO (or depthwise [kh, kw, C, M]) w, in PyTorch terms."""
    (t, b), (left, right) = g["pads"]
    x = F.pad(x, (left, right, t, b))
    if g["depthwise"]:
        kh, kw, c, m = w.shape
        weight, groups = w.reshape(kh, kw, 1, c * m).permute(3, 2, 0, 1), c
    else:
        weight, groups = w.permute(3, 2, 0, 1), g["groups"]
    return F.conv2d(x, weight, stride=tuple(g["strides"]), dilation=tuple(g["dilations"]),
                    groups=groups)


def _forward(x, w, g):
    return _from_nchw(_conv(_to_nchw(_fw(x), g), _fw(w), g), g)


def _backprop_filter(x, dy, g):
    x = _to_nchw(_fw(x), g)
    w0 = torch.zeros(g["filter_shape"], dtype=x.dtype, requires_grad=True)
    (dw,) = torch.autograd.grad(_conv(x, w0, g), w0, _to_nchw(_fw(dy), g))
    return dw


def _backprop_input(w, dy, g):
    w = _fw(w)
    x0 = torch.zeros(_nchw_shape(g["input_shape"], g), dtype=w.dtype, requires_grad=True)
    (dx,) = torch.autograd.grad(_conv(x0, w, g), x0, _to_nchw(_fw(dy), g))
    return _from_nchw(dx, g)
'''


def known_defect(op: str, depthwise: bool, dilated: bool) -> str | None:
    """No known PyTorch defect in these ops."""
    return None
