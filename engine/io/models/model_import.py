"""A conv layer read from a model file, and its exact translation to TensorFlow's conv attributes.

The readers (:mod:`engine.io.models.onnx_reader`, :mod:`engine.io.models.keras_reader`,
:mod:`engine.io.models.weights_reader`) return :class:`ConvLayer` objects whose weights are already
in TensorFlow's filter layout (HWIO, ``in`` = in_channels / groups; depthwise: H, W, in_channels,
multiplier; a 3-D conv's DHWIO, grouped or not). :func:`translate` turns one layer plus an input
size into the ``strides``, ``padding``, ``explicit_paddings``, ``data_format`` and ``dilations``
of a TensorFlow Conv2D / DepthwiseConv2dNative / Conv3D that computes exactly the layer's
convolution (bias excluded: TensorFlow's conv op has none). A 3-D conv takes SAME or VALID only
(tf.raw_ops.Conv3D has no EXPLICIT padding): its pads become the one that computes the same
(:mod:`engine.io.models.pads_3d`), else VALID on the input zero-padded by the pads
(:attr:`TfConv.input_pads`: the canvas's Pad and Slice blocks).

Anything that cannot be translated raises :class:`ModelImportError`, a one-line message naming
the layer. Names come from files: messages quote them with ``repr`` and tables show them through
:func:`engine.base.names.escaped`, so no control character reaches a terminal.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from types import ModuleType

import numpy as np

from engine.base.errors import InvalidArgumentError
from engine.base.names import escaped
from engine.io.models.pads_3d import (
    AXES,
    conv_count,
    equivalent_padding,
    same_pads,
)
from engine.shapes.conv import channels_last, layout_axes

#: How the layer pads: TensorFlow's SAME / VALID, ONNX's SAME_LOWER, or explicit pads.
PADDINGS = ("SAME", "VALID", "SAME_LOWER", "EXPLICIT")


class ModelImportError(InvalidArgumentError):
    """A model file, layer or option that cannot be imported (a one-line message)."""


def need_module(name: str, what: str) -> ModuleType:
    """Import ``name`` (onnx, h5py, safetensors: dependencies of the project, so missing only
    from a broken install) or say which package to install."""
    package = name.split(".")[0]
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ModelImportError(
            f"reading {what} needs the '{package}' package: pip install {package}"
        ) from None


@dataclass(frozen=True)
class ConvLayer:
    """One 2-D or 3-D conv layer of a model, in layout-free terms plus TF-layout weights: a
    tuple of 2 or 3 numbers per spatial axis (rank = len(kernel); depth, rows, cols)."""

    name: str
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    padding: str  # one of PADDINGS
    #: (before, after) per axis: top, bottom, left, right for a 2-D conv (EXPLICIT only)
    pads: tuple[int, ...]
    groups: int
    in_channels: int
    out_channels: int
    data_format: str  # the model's own layout: NHWC or NCHW (channels last or first, any rank)
    weights: np.ndarray  # TF layout (see the module docstring)
    bias: np.ndarray | None = None
    input_hw: tuple[int, ...] | None = None  # the model's input size for this layer, if known
    batch: int | None = None
    input_unknown: str | None = None  # why the model's input size is unknown (for the message)
    activation: str | None = None  # an activation the model applies after the conv (not here)
    #: A transposed conv (TF's Conv2DBackpropInput): the fields describe the forward conv whose
    #: input gradient it is (pads, strides, dilations of that conv; in_channels are the
    #: transposed conv's input X, out_channels its output Y), weights [kh, kw, out / groups,
    #: in]; output_padding rows/cols are added after, as ONNX and Keras define them.
    transposed: bool = False
    output_padding: tuple[int, ...] = (0, 0)
    #: A transposed conv whose output size is fixed (ONNX ConvTranspose ``output_shape``): its
    #: rows and cols whatever the input size; the pads follow from the input size
    #: (:func:`at_input_size`), the odd one before, or after when ``padding`` is SAME.
    output_hw: tuple[int, ...] | None = None
    #: A separable conv (Keras SeparableConv2D): this layer is its depthwise conv, followed by
    #: ``pointwise``, a 1x1 conv (stride 1, VALID) holding the layer's bias and activation.
    pointwise: ConvLayer | None = None
    #: A 1-D conv (Keras Conv1D / DepthwiseConv1D) as a 2-D conv of height 1: kernel (1, k),
    #: strides (1, s), dilations (1, d), input [N, 1, W, C] (NHWC) or [N, C, 1, W] (NCHW).
    conv1d: bool = False

    @property
    def final(self) -> ConvLayer:
        """The conv whose output is the layer's: the pointwise conv of a separable conv."""
        return self.pointwise or self

    @property
    def rank(self) -> int:
        """Spatial dimensions: 2, or 3 (TensorFlow's Conv3D family)."""
        return len(self.kernel)

    @property
    def depthwise(self) -> bool:
        """group == in_channels (> 1) of a 2-D conv: TensorFlow's DepthwiseConv2dNative (a 3-D
        one is a grouped Conv3D: TensorFlow has no depthwise 3-D op)."""
        return self.rank == 2 and self.groups > 1 and self.groups == self.in_channels

    @property
    def op(self) -> str:
        if self.transposed:
            return "transposed"
        if self.pointwise is not None:
            return "separable"
        if self.depthwise:
            return "depthwise"
        if self.groups > 1:
            return "grouped"
        return "Conv2D" if self.rank == 2 else "Conv3D"

    def padding_text(self) -> str:
        if self.output_hw is not None:
            return "output_shape " + ",".join(map(str, self.output_hw))
        if self.padding == "EXPLICIT":
            return "pads " + ",".join(map(str, self.pads))
        return self.padding


def list_rows(layers: list[ConvLayer]) -> list[list[str]]:
    """The ``--list`` table (header first); names escaped (:func:`engine.base.names.escaped`)."""
    rows = [["name", "op", "kernel", "strides", "dilations", "padding", "groups", "in", "out"]]
    for la in layers:
        rows.append([escaped(la.name), la.op, "x".join(map(str, la.kernel)),
                     ",".join(map(str, la.strides)), ",".join(map(str, la.dilations)),
                     la.padding_text(), str(la.groups), str(la.in_channels),
                     str(la.final.out_channels)])
    return rows


def check_layer(layer: ConvLayer) -> None:
    """Raise naming the layer when its numbers are inconsistent (a corrupt file) or leave
    nothing to compute (no input or output channels)."""
    w = layer.weights
    for what, count in (("output", layer.out_channels), ("input", layer.in_channels)):
        if count < 1:
            raise ModelImportError(f"layer {layer.name!r}: {count} {what} channels (weights of "
                                   f"shape {list(w.shape)}): nothing to compute")
    if layer.groups < 1 or layer.in_channels % layer.groups or layer.out_channels % layer.groups:
        raise ModelImportError(f"layer {layer.name!r}: groups {layer.groups} does not divide "
                               f"in_channels {layer.in_channels} and out_channels "
                               f"{layer.out_channels}")
    if layer.transposed:
        want = (*layer.kernel, layer.out_channels // layer.groups, layer.in_channels)
    elif layer.depthwise:
        want = (*layer.kernel, layer.in_channels, layer.out_channels // layer.in_channels)
    else:
        want = (*layer.kernel, layer.in_channels // layer.groups, layer.out_channels)
    if w.shape != want:
        raise ModelImportError(f"layer {layer.name!r}: weights have shape {list(w.shape)}, "
                               f"expected {list(want)}")
    if layer.pointwise is not None:
        check_layer(layer.pointwise)
        if layer.pointwise.in_channels != layer.out_channels:
            raise ModelImportError(f"layer {layer.name!r}: the pointwise conv takes "
                                   f"{layer.pointwise.in_channels} channels, the depthwise conv "
                                   f"gives {layer.out_channels}")
    if layer.bias is not None and layer.bias.shape != (layer.out_channels,):
        raise ModelImportError(f"layer {layer.name!r}: bias has shape {list(layer.bias.shape)}, "
                               f"expected [{layer.out_channels}]")
    for what, pair in (("strides", layer.strides), ("dilations", layer.dilations),
                       ("kernel", layer.kernel)):
        if min(pair) < 1:
            raise ModelImportError(f"layer {layer.name!r}: {what} {list(pair)} must be >= 1")


@dataclass(frozen=True)
class TfConv:
    """The TensorFlow op and attributes computing a layer's convolution."""

    op: str  # Conv2D, DepthwiseConv2D, Conv2DBackpropInput, Conv3D... (the block types)
    attrs: dict
    input_shape: tuple[int, ...]
    #: (before, after) zeros per spatial axis around the conv side's tensor of a 3-D conv whose
    #: pads are neither SAME nor VALID (the op is then VALID): a conv's input, or a transposed
    #: conv's output Y (the op's whole output, cut back to Y by a Slice); () for none.
    input_pads: tuple[int, ...] = ()


def conv_format(layout: str, rank: int) -> str:
    """The data_format of a ``rank``-D conv in ``layout`` (channels last, NHWC / NDHWC, or
    first)."""
    last = channels_last(layout)
    if rank == 3:
        return "NDHWC" if last else "NCDHW"
    return "NHWC" if last else "NCHW"


def _pairs(pads: tuple[int, ...]) -> list[tuple[int, int]]:
    return [(pads[i], pads[i + 1]) for i in range(0, len(pads), 2)]


def translate(layer: ConvLayer, input_hw: tuple[int, ...], batch: int = 1,
              layout: str | None = None) -> TfConv:
    """The TF op and attributes for ``layer`` on an input of ``input_hw`` (its spatial sizes).

    ``layout`` channels last (NHWC) or first (NCHW; default: the model's own). SAME_LOWER
    becomes SAME when the padding is even, else EXPLICIT with the odd pad before, as ONNX
    defines it; a 3-D conv's EXPLICIT pads become SAME or VALID (:mod:`.pads_3d`), else VALID
    with :attr:`TfConv.input_pads`.
    """
    fmt = conv_format(layout or layer.data_format, layer.rank)
    layer = at_input_size(layer, input_hw)
    padding, pads = layer.padding, layer.pads
    if padding == "SAME_LOWER":
        same = [same_pads(n, k, s, d) for n, k, s, d in zip(
            input_hw, layer.kernel, layer.strides, layer.dilations, strict=True)]
        padding, pads = ("SAME", pads) if all(b == a for b, a in same) else (
            "EXPLICIT", tuple(p for b, a in same for p in (a, b)))
    input_pads: tuple[int, ...] = ()
    if layer.rank == 3 and padding == "EXPLICIT":
        padding, input_pads = _same_or_valid(layer, input_hw, pads)
    spatial = layout_axes(fmt)[1]
    size = layer.rank + 2

    def vec(values: tuple[int, ...]) -> list[int]:
        out = [1] * size
        for axis, v in zip(spatial, values, strict=True):
            out[axis] = v
        return out

    attrs = {"strides": vec(layer.strides), "dilations": vec(layer.dilations),
             "padding": padding, "data_format": fmt}
    if padding == "EXPLICIT":
        explicit = [0] * 8
        for axis, (before, after) in zip(spatial, _pairs(pads), strict=True):
            explicit[2 * axis:2 * axis + 2] = [before, after]
        attrs["explicit_paddings"] = explicit
    sizes = tuple(input_hw)
    shape = ((batch, *sizes, layer.in_channels) if channels_last(fmt)
             else (batch, layer.in_channels, *sizes))
    if layer.rank == 3:
        op = "Conv3DBackpropInputV2" if layer.transposed else "Conv3D"
    else:
        op = "Conv2DBackpropInput" if layer.transposed else (
            "DepthwiseConv2D" if layer.depthwise else "Conv2D")
    return TfConv(op, attrs, shape, input_pads)


def _same_or_valid(layer: ConvLayer, input_hw: tuple[int, ...],
                   pads: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    """SAME or VALID for a 3-D ``layer`` (at its input size) whose pads are ``pads``
    (:mod:`.pads_3d`), with no :attr:`TfConv.input_pads`; else VALID and the pads around the
    conv side: a conv's input takes ``pads``; a transposed conv's output Y takes the pads
    before and ``after - output_padding`` (at least 0) after, so the VALID op's whole output
    holds Y from the pad before on."""
    k, s, d = layer.kernel, layer.strides, layer.dilations
    if layer.transposed:  # the conv whose input gradient it is: on the output Y, giving X
        sizes, counts = transposed_output_hw(layer, input_hw), tuple(input_hw)
    else:
        sizes = tuple(input_hw)
        counts = tuple(conv_count(n, kn, sn, dn, b, a) for n, kn, sn, dn, (b, a) in zip(
            sizes, k, s, d, _pairs(pads), strict=True))
    padding = equivalent_padding(sizes, counts, k, s, d, pads)
    if padding is not None:
        return padding, ()
    if not layer.transposed:
        return "VALID", tuple(pads)
    return "VALID", tuple(p for (b, a), e in zip(_pairs(pads), layer.output_padding, strict=True)
                          for p in (b, max(a - e, 0)))


def transposed_output_hw(layer: ConvLayer, input_hw: tuple[int, ...]) -> tuple[int, ...]:
    """A transposed conv's output sizes: (in - 1) * stride + (k - 1) * dilation + 1
    - pad_before - pad_after + output_padding, per axis (ONNX ConvTranspose, Keras
    Conv2DTranspose / Conv3DTranspose)."""
    layer = at_input_size(layer, input_hw)
    pads = _pairs(layer.pads) if layer.padding == "EXPLICIT" else [(0, 0)] * layer.rank
    return tuple(
        (size - 1) * s + (k - 1) * d + 1 - p0 - p1 + extra
        for size, s, k, d, (p0, p1), extra in zip(
            input_hw, layer.strides, layer.kernel, layer.dilations, pads,
            layer.output_padding, strict=True))


def transposed_pads(name: str, axis: str, k: int, s: int, d: int, size: int, before: int,
                    out: int, op: str = "Conv2DBackpropInput") -> tuple[int, int, int]:
    """(pad before, pad after, output_padding) of a transposed conv's forward conv that maps
    ``size`` input rows to ``out`` output rows with ``before`` rows cropped before: the rows
    after come from the pad after (when the kernel reaches past ``out``) or are output_padding
    rows (zeros beyond the last row the kernel reaches), which must be fewer than the stride
    for ``op`` (Conv2DBackpropInput, Conv3DBackpropInputV2) to express them."""
    after = s * (size - 1) + (k - 1) * d + 1 - before - out
    if before < 0:
        raise ModelImportError(f"layer {name!r}: the output starts {-before} {axis} before the "
                               "first the kernel reaches (a negative pad), which "
                               f"{op} cannot express")
    if -after >= s:
        raise ModelImportError(f"layer {name!r}: the output has {-after} {axis} after the last "
                               f"the kernel reaches, more than stride {s} - 1, which "
                               f"{op} cannot express")
    return before, max(after, 0), max(-after, 0)


def backprop_input_op(rank: int) -> str:
    """TensorFlow's input-gradient op of a ``rank``-D conv (a transposed conv's op)."""
    return "Conv2DBackpropInput" if rank == 2 else "Conv3DBackpropInputV2"


def at_input_size(layer: ConvLayer, input_hw: tuple[int, ...]) -> ConvLayer:
    """``layer`` with explicit pads and output_padding for an input of ``input_hw`` when its
    output size is fixed (:attr:`ConvLayer.output_hw`, ONNX ConvTranspose ``output_shape``:
    total = stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - out, split with the
    odd pad before, or after for SAME; a negative total pads nothing, as ONNX Runtime reads it:
    the rows past the kernel's reach are zeros); else ``layer`` itself."""
    if layer.output_hw is None:
        return layer
    pads: list[int] = []
    extra = []
    for axis, size, out, k, s, d, op in zip(
            AXES[layer.rank], input_hw, layer.output_hw, layer.kernel, layer.strides,
            layer.dilations, layer.output_padding, strict=True):
        total = max(s * (size - 1) + op + (k - 1) * d + 1 - out, 0)
        before = total // 2 if layer.padding == "SAME" else total - total // 2
        b, a, e = transposed_pads(layer.name, axis, k, s, d, size, before, out,
                                  backprop_input_op(layer.rank))
        pads += [b, a]
        extra.append(e)
    return replace(layer, padding="EXPLICIT" if any(pads) else "VALID",
                   pads=tuple(pads), output_padding=tuple(extra), output_hw=None)


@dataclass
class ModelLayers:
    """What a reader found: importable conv layers, conv layers that cannot be imported (name
    -> one-line reason) and the other layers (name -> why they are not conv layers)."""

    layers: list[ConvLayer]
    refused: dict[str, str]
    others: dict[str, str]

    def find(self, name: str, source: str) -> ConvLayer:
        """The layer called ``name`` (compared as given: a name with control characters is
        found by its raw text), or a one-line error naming it."""
        matches = [layer for layer in self.layers if layer.name == name]
        if len(matches) > 1:
            raise ModelImportError(f"{source}: {len(matches)} conv layers are named {name!r}; "
                                   "rename them in the model so that each name is unique")
        if matches:
            return matches[0]
        if name in self.refused:
            raise ModelImportError(self.refused[name])
        if name in self.others:
            raise ModelImportError(self.others[name])
        names = ", ".join(escaped(la.name, 40) for la in self.layers[:20]) or "none"
        raise ModelImportError(f"{source}: no layer named {name!r} (conv layers: {names})")


def from_oihw(weights: np.ndarray, groups: int) -> np.ndarray:
    """ONNX / PyTorch weights [out, in / groups, H, W] in TensorFlow's layout: HWIO, or for a
    depthwise layer (groups == in_channels) H, W, in_channels, multiplier (output channel
    ``q * multiplier + k`` of input channel ``q``, as both frameworks order them); 3-D weights
    [out, in / groups, D, H, W] as DHWIO, grouped or not."""
    if weights.ndim == 5:
        return np.ascontiguousarray(weights.transpose(2, 3, 4, 1, 0))
    out, per_group, kh, kw = weights.shape
    if groups > 1 and per_group == 1 and out % groups == 0:
        return np.ascontiguousarray(
            weights.reshape(groups, out // groups, kh, kw).transpose(2, 3, 0, 1))
    return np.ascontiguousarray(weights.transpose(2, 3, 1, 0))


def is_float(dtype: np.dtype) -> bool:
    """A real floating-point type: NumPy's, or one of ml_dtypes' (bfloat16, float8_*, ...)."""
    if dtype.kind == "f":
        return True
    if dtype.kind != "V":  # complex, integers, bool, strings, objects, dates
        return False
    import ml_dtypes  # loaded already when dtype is one of its types: no import time

    try:
        ml_dtypes.finfo(dtype)
    except ValueError:
        return False
    return True


def float_weights(name: str, what: str, array: np.ndarray) -> np.ndarray:
    """``array`` as float16/32/64 (other float types, e.g. bfloat16 and float8, become float32:
    exactly); anything else is an error naming the layer."""
    if array.dtype in (np.float16, np.float32, np.float64):
        return array
    if is_float(array.dtype):
        return array.astype(np.float32)
    raise ModelImportError(f"layer {name!r}: {what} dtype {array.dtype} is not a float type")
