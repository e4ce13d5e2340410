"""The JAX target of ``gradblocks export --to jax``: helpers over
``jax.lax.conv_general_dilated`` with its gradients from ``jax.vjp``.

``conv_general_dilated`` takes the canvas's layout directly (dimension numbers ``NHWC`` or
``NCHW`` with ``HWIO`` filters; ``NDHWC`` or ``NCDHW`` with ``DHWIO`` for the Conv3D ops) and
explicit ``(low, high)`` pads per spatial dimension, so TensorFlow's SAME is passed as its
explicit amounts (JAX's own "SAME" is the same rule, but explicit leaves no doubt). A depthwise
filter ``[kh, kw, C, M]`` becomes ``[kh, kw, 1, C * M]`` with ``feature_group_count = C``.
float64 needs ``jax_enable_x64``, which the script sets.
"""

from __future__ import annotations

NAME = "jax"
MODULE = "jax"

PRELUDE = '''
import jax

jax.config.update("jax_enable_x64", True)  # float64 canvases stay float64
import jax.numpy as jnp  # noqa: E402

_DTYPES = {"float16": jnp.float16, "bfloat16": jnp.bfloat16, "float32": jnp.float32,
           "float64": jnp.float64}


def _tensor(a, dtype):
    """A source array (bfloat16 stored exactly as float32) as a JAX array of dtype."""
    return jnp.asarray(a).astype(_DTYPES[dtype])


def _fw(t):
    return jnp.asarray(t)


def _np(t):
    a = np.asarray(t)
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def _transpose(t, perm):
    if isinstance(t, np.ndarray):
        return np.ascontiguousarray(np.transpose(t, perm))
    return jnp.transpose(t, perm)


def _fw_pad(t, pairs):
    return jnp.pad(t, pairs)


def _fw_slice(t, cuts):
    return t[cuts]


def _cast(t, dtype):
    return _fw(t).astype(_DTYPES[dtype])


#: The filter layout of each number of spatial dimensions (the canvas's, TensorFlow's).
_FILTERS = {2: "HWIO", 3: "DHWIO"}


def _conv(x, w, g):
    if g["depthwise"]:
        *taps, c, m = w.shape
        w, groups = w.reshape(*taps, 1, c * m), c
    else:
        groups = g["groups"]
    layout, filters = g["data_format"], _FILTERS[len(g["strides"])]
    return jax.lax.conv_general_dilated(
        x, w, window_strides=tuple(g["strides"]), padding=[tuple(p) for p in g["pads"]],
        rhs_dilation=tuple(g["dilations"]), dimension_numbers=(layout, filters, layout),
        feature_group_count=groups, precision=jax.lax.Precision.HIGHEST)


def _forward(x, w, g):
    return _conv(_fw(x), _fw(w), g)


def _backprop_filter(x, dy, g):
    x = _fw(x)
    w0 = jnp.zeros(g["filter_shape"], x.dtype)
    _, vjp = jax.vjp(lambda w: _conv(x, w, g), w0)
    return vjp(_fw(dy))[0]


def _backprop_input(w, dy, g):
    w = _fw(w)
    x0 = jnp.zeros(g["input_shape"], w.dtype)
    _, vjp = jax.vjp(lambda x: _conv(x, w, g), x0)
    return vjp(_fw(dy))[0]
'''


def known_defect(op: str, depthwise: bool, dilated: bool) -> str | None:
    """No known JAX defect in these ops."""
    return None
