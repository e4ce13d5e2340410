"""The output shapes of Keras layers, computed from their configs alone (no Keras): one small
pure function per layer type, as Keras's ``compute_output_shape`` defines it.

A shape is a tuple with the batch first; ``None`` is a size the model leaves open (the batch,
usually). :func:`output_shape` raises :class:`ShapeStop` (its message says why, without the
layer's name) for a layer type it does not know or a config it cannot read; the walk
(:mod:`engine.io.models.keras_graph`) names the layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import overload

Shape = tuple[int | None, ...]


def _known(sizes: Sequence[int | None]) -> list[int] | None:
    """``sizes`` when all are known, else None."""
    known = [n for n in sizes if n is not None]
    return known if len(known) == len(sizes) else None


class ShapeStop(Exception):
    """Why a layer's output shape cannot be computed from its config."""


def _pair(value: object, what: str, default: object = None) -> tuple[int, int]:
    value = default if value is None else value
    if type(value) is int and value >= 0:
        return value, value
    if isinstance(value, list | tuple) and len(value) == 2 and all(
            type(v) is int and v >= 0 for v in value):
        return value[0], value[1]
    raise ShapeStop(f"{what} is {value!r}, expected an integer or a list of 2")


def _spatial(config: dict, rank: int) -> tuple[int, int, int]:
    """(row axis, column axis, channel axis) of a rank-4 tensor in the layer's data_format."""
    if rank != 4:
        raise ShapeStop(f"its input has rank {rank}, expected 4 (a 2-D image batch)")
    if config.get("data_format") == "channels_first":
        return 2, 3, 1
    return 1, 2, 3


@overload
def conv_length(size: int, k: int, s: int, d: int, padding: str) -> int: ...
@overload
def conv_length(size: int | None, k: int, s: int, d: int, padding: str) -> int | None: ...
def conv_length(size: int | None, k: int, s: int, d: int, padding: str) -> int | None:
    """A conv's output length: same = ceil(size / s); valid = floor((size - (k-1)d - 1) / s) + 1."""
    if size is None:
        return None
    if padding == "same":
        return -(-size // s)
    return max(0, (size - (k - 1) * d - 1) // s + 1)


@overload
def transpose_length(size: int, k: int, s: int, d: int, padding: str,
                     output_padding: int | None) -> int: ...
@overload
def transpose_length(size: int | None, k: int, s: int, d: int, padding: str,
                     output_padding: int | None) -> int | None: ...
def transpose_length(size: int | None, k: int, s: int, d: int, padding: str,
                     output_padding: int | None) -> int | None:
    """A Keras transposed conv's output length (keras backend_utils
    ``_get_output_shape_given_tf_padding``), k_eff = (k-1)d + 1: valid = (size-1)s + k_eff +
    output_padding (default max(k_eff, s) - k_eff); same = size * s without output_padding,
    else (size-1)s + k_eff % 2 + output_padding."""
    if size is None:
        return None
    k_eff = (k - 1) * d + 1
    if padding == "valid":
        extra = max(k_eff, s) - k_eff if output_padding is None else output_padding
        return (size - 1) * s + k_eff + extra
    if output_padding is None:
        return size * s
    return (size - 1) * s + k_eff % 2 + output_padding


def _padding(config: dict) -> str:
    padding = config.get("padding", "valid")
    if not isinstance(padding, str) or padding.lower() not in ("same", "valid"):
        raise ShapeStop(f"padding is {padding!r}, expected 'same' or 'valid'")
    return padding.lower()


def _triple(value: object, what: str, default: object = None) -> tuple[int, int, int]:
    value = default if value is None else value
    if type(value) is int and value >= 0:
        return value, value, value
    if isinstance(value, list | tuple) and len(value) == 3 and all(
            type(v) is int and v >= 0 for v in value):
        return value[0], value[1], value[2]
    raise ShapeStop(f"{what} is {value!r}, expected an integer or a list of 3")


def _axes(config: dict, rank: int, dims: int) -> tuple[tuple[int, ...], int]:
    """(spatial axes, channel axis) of a tensor of ``dims`` spatial dimensions."""
    if dims == 2:
        r, c, ch = _spatial(config, rank)
        return (r, c), ch
    if rank != 5:
        raise ShapeStop(f"its input has rank {rank}, expected 5 (a 3-D volume batch)")
    if config.get("data_format") == "channels_first":
        return (2, 3, 4), 1
    return (1, 2, 3), 4


def _conv(config: dict, shapes: list[Shape], channels: Callable[[int], int],
          transposed: bool = False, dims: int = 2) -> Shape:
    (x,) = shapes
    spatial, ch = _axes(config, len(x), dims)
    tup = _pair if dims == 2 else _triple
    k = tup(config.get("kernel_size"), "kernel_size")
    s = tup(config.get("strides"), "strides", 1)
    d = tup(config.get("dilation_rate"), "dilation_rate", 1)
    padding = _padding(config)
    out = list(x)
    if transposed:
        op = config.get("output_padding")
        op = (None,) * dims if op is None else tup(op, "output_padding")
        for i, axis in enumerate(spatial):
            out[axis] = transpose_length(x[axis], k[i], s[i], d[i], padding, op[i])
    else:
        for i, axis in enumerate(spatial):
            out[axis] = conv_length(x[axis], k[i], s[i], d[i], padding)
    in_channels = x[ch]
    if in_channels is None:
        raise ShapeStop("its input's channel count is unknown")
    out[ch] = channels(in_channels)
    return tuple(out)


def _filters(config: dict) -> int:
    filters = config.get("filters")
    if type(filters) is not int or filters < 1:
        raise ShapeStop(f"filters is {filters!r}, expected a positive integer")
    return filters


def conv2d(config: dict, shapes: list[Shape]) -> Shape:
    return _conv(config, shapes, lambda _: _filters(config))


def depthwise_conv2d(config: dict, shapes: list[Shape]) -> Shape:
    m = _pair(config.get("depth_multiplier"), "depth_multiplier", 1)[0]
    return _conv(config, shapes, lambda c: c * m)


def conv2d_transpose(config: dict, shapes: list[Shape]) -> Shape:
    return _conv(config, shapes, lambda _: _filters(config), transposed=True)


def conv3d(config: dict, shapes: list[Shape]) -> Shape:
    return _conv(config, shapes, lambda _: _filters(config), dims=3)


def conv3d_transpose(config: dict, shapes: list[Shape]) -> Shape:
    return _conv(config, shapes, lambda _: _filters(config), transposed=True, dims=3)


def _one(value: object, what: str) -> int:
    value = value[0] if isinstance(value, list | tuple) and len(value) == 1 else value
    if type(value) is not int or value < 1:
        raise ShapeStop(f"{what} is {value!r}, expected a positive integer or a list of 1")
    return value


def _conv1d(config: dict, shapes: list[Shape], channels: Callable[[int], int],
            transposed: bool = False) -> Shape:
    """A 1-D conv on [N, W, C] (or [N, C, W]); causal padding gives ceil(W / s), as same;
    ``transposed``: a Conv1DTranspose (:func:`transpose_length`)."""
    (x,) = shapes
    if len(x) != 3:
        raise ShapeStop(f"its input has rank {len(x)}, expected 3 (a 1-D sequence batch)")
    w, ch = (2, 1) if config.get("data_format") == "channels_first" else (1, 2)
    padding = config.get("padding", "valid")
    padding = "same" if isinstance(padding, str) and padding.lower() == "causal" and not \
        transposed else _padding(config)
    k = _one(config.get("kernel_size"), "kernel_size")
    s, d = (_one(config.get(key, 1), key) for key in ("strides", "dilation_rate"))
    out = list(x)
    if transposed:
        op = config.get("output_padding")
        op = None if op is None else _pair(op[0] if isinstance(op, list | tuple) and len(
            op) == 1 else op, "output_padding")[0]
        out[w] = transpose_length(x[w], k, s, d, padding, op)
    else:
        out[w] = conv_length(x[w], k, s, d, padding)
    in_channels = x[ch]
    if in_channels is None:
        raise ShapeStop("its input's channel count is unknown")
    out[ch] = channels(in_channels)
    return tuple(out)


def conv1d(config: dict, shapes: list[Shape]) -> Shape:
    return _conv1d(config, shapes, lambda _: _filters(config))


def conv1d_transpose(config: dict, shapes: list[Shape]) -> Shape:
    return _conv1d(config, shapes, lambda _: _filters(config), transposed=True)


def depthwise_conv1d(config: dict, shapes: list[Shape]) -> Shape:
    m = _pair(config.get("depth_multiplier"), "depth_multiplier", 1)[0]
    return _conv1d(config, shapes, lambda c: c * m)


def pooling2d(config: dict, shapes: list[Shape]) -> Shape:
    """Max/average pooling: strides default to pool_size."""
    pool = _pair(config.get("pool_size"), "pool_size", 2)
    strides = config.get("strides")
    conv = {**config, "kernel_size": pool, "strides": pool if strides is None else strides,
            "dilation_rate": 1}
    return _conv(conv, shapes, lambda c: c)


def pooling3d(config: dict, shapes: list[Shape]) -> Shape:
    """Max/average 3-D pooling: strides default to pool_size."""
    pool = _triple(config.get("pool_size"), "pool_size", 2)
    strides = config.get("strides")
    conv = {**config, "kernel_size": pool, "strides": pool if strides is None else strides,
            "dilation_rate": 1}
    return _conv(conv, shapes, lambda c: c, dims=3)


def global_pooling2d(config: dict, shapes: list[Shape]) -> Shape:
    (x,) = shapes
    r, c, ch = _spatial(config, len(x))
    if config.get("keepdims", False) is True:
        return tuple(1 if i in (r, c) else n for i, n in enumerate(x))
    return (x[0], x[ch])


def _two_sided(value: object, what: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """ZeroPadding2D / Cropping2D amounts: n, (rows, cols), or ((top, bottom), (left, right))."""
    if isinstance(value, list | tuple) and len(value) == 2 and all(
            isinstance(v, list | tuple) for v in value):
        return _pair(value[0], what), _pair(value[1], what)
    rows, cols = _pair(value, what, 1)
    return (rows, rows), (cols, cols)


def _resize(config: dict, shapes: list[Shape], key: str, sign: int) -> Shape:
    (x,) = shapes
    r, c, _ = _spatial(config, len(x))
    amounts = _two_sided(config.get(key), key)
    out = list(x)
    for axis, (before, after) in zip((r, c), amounts, strict=True):
        size = x[axis]
        if size is not None:
            size += sign * (before + after)
            if sign < 0 and size < 1:  # Keras refuses a cropping not smaller than the size
                raise ShapeStop(f"{key} {amounts} leaves no rows or columns of an input of "
                                f"{list(x)} (Keras needs it smaller than the size)")
            out[axis] = size
    return tuple(out)


def zero_padding2d(config: dict, shapes: list[Shape]) -> Shape:
    return _resize(config, shapes, "padding", 1)


def cropping2d(config: dict, shapes: list[Shape]) -> Shape:
    return _resize(config, shapes, "cropping", -1)


def up_sampling2d(config: dict, shapes: list[Shape]) -> Shape:
    (x,) = shapes
    r, c, _ = _spatial(config, len(x))
    size = _pair(config.get("size"), "size", 2)
    out = list(x)
    for axis, k in zip((r, c), size, strict=True):
        n = x[axis]
        out[axis] = None if n is None else n * k
    return tuple(out)


def same_shape(config: dict, shapes: list[Shape]) -> Shape:
    """Element-wise layers (normalizations, activations, dropout, rescaling...)."""
    return shapes[0]


def broadcast(config: dict, shapes: list[Shape]) -> Shape:
    """Add, Multiply, ...: NumPy broadcasting, aligned from the right (None stays None
    unless the other side is known and not 1)."""
    rank = max(len(s) for s in shapes)
    out: list[int | None] = []
    for i in range(rank):
        sizes = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        known = {n for n in sizes if n is not None and n != 1}
        if len(known) > 1:
            raise ShapeStop(f"its inputs {[list(s) for s in shapes]} do not broadcast")
        out.append(known.pop() if known else (None if None in sizes else 1))
    return tuple(out)


def concatenate(config: dict, shapes: list[Shape]) -> Shape:
    rank = len(shapes[0])
    axis = config.get("axis", -1)
    if type(axis) is not int or not -rank <= axis < rank or any(len(s) != rank for s in shapes):
        raise ShapeStop(f"axis {axis!r} does not fit its inputs {[list(s) for s in shapes]}")
    axis %= rank
    out = list(shapes[0])
    sizes = _known([s[axis] for s in shapes])
    out[axis] = None if sizes is None else sum(sizes)
    return tuple(out)


def reshape(config: dict, shapes: list[Shape]) -> Shape:
    (x,) = shapes
    target = config.get("target_shape")
    if not isinstance(target, list | tuple) or not all(
            type(n) is int and (n >= 1 or n == -1) for n in target) or list(target).count(-1) > 1:
        raise ShapeStop(f"target_shape is {target!r}, expected sizes (one may be -1)")
    if -1 in target:
        rest = _known(x[1:])
        if rest is None:
            return (x[0], *(None if n == -1 else n for n in target))
        known = math.prod(n for n in target if n != -1)
        total = math.prod(rest)
        if known == 0 or total % known:
            raise ShapeStop(f"target_shape {list(target)} does not fit an input of {list(x)}")
        target = [total // known if n == -1 else n for n in target]
    return (x[0], *target)


def flatten(config: dict, shapes: list[Shape]) -> Shape:
    (x,) = shapes
    rest = _known(x[1:])
    return (x[0], None if rest is None else math.prod(rest))


def dense(config: dict, shapes: list[Shape]) -> Shape:
    (x,) = shapes
    units = config.get("units")
    if type(units) is not int or units < 1:
        raise ShapeStop(f"units is {units!r}, expected a positive integer")
    return (*x[:-1], units)


def permute(config: dict, shapes: list[Shape]) -> Shape:
    (x,) = shapes
    dims = config.get("dims")
    if not isinstance(dims, list | tuple) or sorted(dims) != list(range(1, len(x))):
        raise ShapeStop(f"dims is {dims!r}, expected a permutation of 1..{len(x) - 1}")
    return (x[0], *(x[d] for d in dims))


SAME_SHAPE = ("BatchNormalization", "LayerNormalization", "GroupNormalization",
              "UnitNormalization", "Activation", "ReLU", "LeakyReLU", "PReLU", "ELU", "Softmax",
              "ThresholdedReLU", "Dropout", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
              "GaussianDropout", "AlphaDropout", "ActivityRegularization", "Rescaling",
              "Normalization", "Identity", "Masking")
MERGES = ("Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum")
#: Layer class -> its shape function (arguments: the layer's config, its input shapes).
SHAPE_RULES: dict[str, Callable[[dict, list[Shape]], Shape]] = {
    **dict.fromkeys(SAME_SHAPE, same_shape), **dict.fromkeys(MERGES, broadcast),
    "Conv2D": conv2d, "SeparableConv2D": conv2d, "DepthwiseConv2D": depthwise_conv2d,
    "Conv2DTranspose": conv2d_transpose, "Conv1D": conv1d, "DepthwiseConv1D": depthwise_conv1d,
    "SeparableConv1D": conv1d, "Conv1DTranspose": conv1d_transpose,
    "Conv3D": conv3d, "Conv3DTranspose": conv3d_transpose,
    "MaxPooling2D": pooling2d, "AveragePooling2D": pooling2d,
    "MaxPool2D": pooling2d, "AvgPool2D": pooling2d, "MaxPooling3D": pooling3d,
    "AveragePooling3D": pooling3d, "MaxPool3D": pooling3d, "AvgPool3D": pooling3d,
    "GlobalAveragePooling2D": global_pooling2d, "GlobalMaxPooling2D": global_pooling2d,
    "GlobalAvgPool2D": global_pooling2d, "GlobalMaxPool2D": global_pooling2d,
    "ZeroPadding2D": zero_padding2d, "Cropping2D": cropping2d, "UpSampling2D": up_sampling2d,
    "Concatenate": concatenate, "Reshape": reshape, "Flatten": flatten, "Dense": dense,
    "Permute": permute,
}
#: Layers taking several inputs (the others take exactly one).
MULTI_INPUT = (*MERGES, "Concatenate")


def output_shape(kind: str, config: dict, shapes: list[Shape]) -> Shape:
    """The output shape of a ``kind`` layer with ``config`` on inputs of ``shapes``."""
    rule = SHAPE_RULES.get(kind)
    if rule is None:
        raise ShapeStop(f"its type {kind[:80]!r} is not one whose output shape the import "
                        "computes")
    if not shapes or (len(shapes) != 1 and kind not in MULTI_INPUT):
        raise ShapeStop(f"it takes {len(shapes)} inputs, expected "
                        f"{'at least 1' if kind in MULTI_INPUT else 1}")
    try:
        return rule(config, shapes)
    except (TypeError, ValueError, IndexError) as err:  # a config of the wrong shape
        raise ShapeStop(f"its config cannot be read ({type(err).__name__}: {err})") from None
