"""The conv ops as one table, next to their shape rules: every description of them is derived
from these rows (the blocks, :mod:`blocks.conv`; the exporters, :mod:`engine.export.conv`;
explain, :mod:`engine.explain.terms`; verify, :mod:`engine.verify.conventions` and
:mod:`engine.verify.defaults`), so an op is one row plus its kernel in :mod:`engine.kernels`.

A row names the ``tf.raw_ops`` op, the block type that mirrors it, its kind (``forward``, the
``filter`` gradient or the ``input`` gradient), whether it is depthwise, its kernel's name and
its number of spatial dimensions (2 for the Conv2D family, 3 for Conv3D's);
what follows from the kind (its tensor arguments, its two array operands, the tensor its
result has the shape of) is written once, in the tables below. This module imports nothing,
so the command line can list the ops without loading a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("forward", "filter", "input")
#: Each kind's tensor arguments, in ``tf.raw_ops`` order (sizes as int vectors).
PORTS: dict[str, tuple[str, ...]] = {
    "forward": ("input", "filter"),
    "filter": ("input", "filter_sizes", "out_backprop"),
    "input": ("input_sizes", "filter", "out_backprop"),
}
#: Each kind's two array operands (the factors of every term), in argument order.
OPERANDS: dict[str, tuple[str, str]] = {
    "forward": ("input", "filter"),
    "filter": ("input", "out_backprop"),
    "input": ("filter", "out_backprop"),
}
#: The tensor of the forward conv each kind's result has the shape of.
RESULTS = {"forward": "output", "filter": "filter", "input": "input"}
#: The size arguments (int vectors giving a gradient's result shape).
SIZE_PORTS = ("filter_sizes", "input_sizes")


@dataclass(frozen=True)
class ConvOp:
    """One conv op: ``name`` (``tf.raw_ops``), ``block_type`` (its block), ``kind``,
    ``depthwise``, ``kernel`` (the :mod:`engine.kernels` function), ``title`` and ``doc`` (the
    block's), ``cudnn`` (TF's op takes ``use_cudnn_on_gpu``), ``rank`` (spatial dimensions:
    its tensors have ``rank + 2`` axes)."""

    name: str
    block_type: str
    kind: str
    depthwise: bool
    kernel: str
    title: str
    doc: str
    cudnn: bool
    rank: int = 2

    @property
    def ports(self) -> tuple[str, ...]:
        return PORTS[self.kind]

    @property
    def operands(self) -> tuple[str, str]:
        return OPERANDS[self.kind]

    @property
    def result(self) -> str:
        return RESULTS[self.kind]

    @property
    def category(self) -> str:
        """The palette category of its block."""
        return "Convolution" if self.kind == "forward" else "Gradients"


CONV_OPS: tuple[ConvOp, ...] = (
    ConvOp("Conv2D", "Conv2D", "forward", False, "conv2d", "Conv2D",
           "tf.raw_ops.Conv2D: out[n,r,c,o] = sum over i, j, q of input_pad[n, r*sr + i*dr, "
           "c*sc + j*dc, q] * filter[i,j,q,o]; grouped when input depth is a multiple of the "
           "filter's in_channels.", cudnn=True),
    ConvOp("Conv2DBackpropFilter", "Conv2DBackpropFilter", "filter", False,
           "conv2d_backprop_filter", "Conv2D backprop filter",
           "tf.raw_ops.Conv2DBackpropFilter: the gradient of Conv2D w.r.t. its filter, "
           "dw[i,j,q,o] = sum over n, r, c of input_pad[n, r*sr + i*dr, c*sc + j*dc, q] * "
           "out_backprop[n, r, c, o]. Output shape: filter_sizes.", cudnn=True),
    ConvOp("Conv2DBackpropInput", "Conv2DBackpropInput", "input", False,
           "conv2d_backprop_input", "Conv2D backprop input",
           "tf.raw_ops.Conv2DBackpropInput: the gradient of Conv2D w.r.t. its input (a "
           "transposed convolution of out_backprop with the filter). Output shape: "
           "input_sizes.", cudnn=True),
    ConvOp("DepthwiseConv2dNative", "DepthwiseConv2D", "forward", True,
           "depthwise_conv2d_native", "Depthwise Conv2D",
           "tf.raw_ops.DepthwiseConv2dNative: each input channel k convolved with its own "
           "filter[:, :, k, :], giving in_channels * channel_multiplier output channels.",
           cudnn=False),
    ConvOp("DepthwiseConv2dNativeBackpropFilter", "DepthwiseBackpropFilter", "filter", True,
           "depthwise_conv2d_native_backprop_filter", "Depthwise backprop filter",
           "tf.raw_ops.DepthwiseConv2dNativeBackpropFilter: the gradient of a depthwise "
           "convolution w.r.t. its filter, dw[i,j,k,m] = sum over n, r, c of "
           "input_pad[n, r*sr + i*dr, c*sc + j*dc, k] * out_backprop[n, r, c, k*M + m]. "
           "Dilations are honoured (TensorFlow's CPU kernel ignores them).", cudnn=False),
    ConvOp("DepthwiseConv2dNativeBackpropInput", "DepthwiseBackpropInput", "input", True,
           "depthwise_conv2d_native_backprop_input", "Depthwise backprop input",
           "tf.raw_ops.DepthwiseConv2dNativeBackpropInput: the gradient of a depthwise "
           "convolution w.r.t. its input. Output shape: input_sizes.", cudnn=False),
    ConvOp("Conv3D", "Conv3D", "forward", False, "conv3d", "Conv3D",
           "tf.raw_ops.Conv3D: out[n,p,r,c,o] = sum over a, i, j, q of input_pad[n, p*sp + "
           "a*dp, r*sr + i*dr, c*sc + j*dc, q] * filter[a,i,j,q,o]; grouped when input depth "
           "is a multiple of the filter's in_channels. Dilations, NCDHW and groups follow the "
           "math (TensorFlow's CPU kernel refuses them).", cudnn=False, rank=3),
    ConvOp("Conv3DBackpropFilterV2", "Conv3DBackpropFilterV2", "filter", False,
           "conv3d_backprop_filter", "Conv3D backprop filter",
           "tf.raw_ops.Conv3DBackpropFilterV2: the gradient of Conv3D w.r.t. its filter, "
           "dw[a,i,j,q,o] = sum over n, p, r, c of input_pad[n, p*sp + a*dp, r*sr + i*dr, "
           "c*sc + j*dc, q] * out_backprop[n, p, r, c, o]. Output shape: filter_sizes.",
           cudnn=False, rank=3),
    ConvOp("Conv3DBackpropInputV2", "Conv3DBackpropInputV2", "input", False,
           "conv3d_backprop_input", "Conv3D backprop input",
           "tf.raw_ops.Conv3DBackpropInputV2: the gradient of Conv3D w.r.t. its input (a "
           "transposed 3-D convolution of out_backprop with the filter). Output shape: "
           "input_sizes.", cudnn=False, rank=3),
)


def op_named(name: str) -> ConvOp:
    """The row of the ``tf.raw_ops`` op ``name`` (KeyError when there is none)."""
    for op in CONV_OPS:
        if op.name == name:
            return op
    raise KeyError(name)
