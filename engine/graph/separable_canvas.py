"""The parts of an imported layer's canvas beyond one conv: the pointwise half of a separable conv,
the arrays an import writes, and the notes saying what the canvas computes.

A separable conv (Keras SeparableConv2D, :attr:`ConvLayer.pointwise`) is one canvas: the
depthwise conv under the usual ids (``input``, ``filter``, ``forward``, ``grad_filter``,
``grad_input``...) feeding the 1x1 pointwise conv, whose blocks carry the same ids with the
prefix ``pointwise_`` (``pointwise_filter``, ``pointwise_forward``, ``pointwise_grad_filter``,
``pointwise_grad_input`` and their size blocks). ``out_backprop`` is the gradient of the whole
layer's output (the pointwise conv's); the depthwise gradients take ``pointwise_grad_input`` as
their out_backprop, so ``grad_input`` and ``grad_filter`` are the gradients of the whole layer
(chain rule), ``pointwise_grad_filter`` that of the pointwise kernel. The layer's ``bias`` comes
after the pointwise conv.
"""

from __future__ import annotations

import numpy as np

from engine.base.names import MAX_TITLE, escaped
from engine.graph.canvas import Canvas
from engine.graph.conv_blocks import ops_of, wire
from engine.graph.padded_canvas import padded
from engine.io.models.model_import import ConvLayer, TfConv, translate
from engine.shapes.conv import conv2d_geometry, conv3d_geometry, layout_axes

#: The id prefix of the pointwise conv's blocks.
POINTWISE = "pointwise_"


def forward_output(layer: ConvLayer, input_shape: tuple[int, ...],
                   attrs: dict) -> tuple[int, ...]:
    """The output shape of ``layer``'s forward conv (Conv2D, DepthwiseConv2D or Conv3D with
    ``attrs``) on ``input_shape``; a transposed conv's is the conv whose input gradient it is."""
    if layer.rank == 3:
        return tuple(conv3d_geometry(input_shape, layer.weights.shape, **attrs).output_shape)
    return tuple(conv2d_geometry(input_shape, layer.weights.shape,
                                 depthwise=layer.depthwise and not layer.transposed,
                                 **attrs).output_shape)


def conv_output(layer: ConvLayer, conv: TfConv) -> tuple[int, ...]:
    """The output shape of ``layer``'s own conv (a separable conv's depthwise part), on its
    input padded by :attr:`TfConv.input_pads`."""
    return forward_output(layer, padded(conv, conv.input_shape), conv.attrs)


def pointwise_conv(layer: ConvLayer, conv: TfConv) -> tuple[TfConv, tuple[int, ...]]:
    """The pointwise conv of a separable ``layer`` whose depthwise conv is ``conv`` (on the
    depthwise output, in the same layout), and its output shape: the layer's."""
    assert layer.pointwise is not None
    mid = conv_output(layer, conv)
    fmt = conv.attrs["data_format"]
    hw = tuple(mid[axis] for axis in layout_axes(fmt)[1])
    pointwise = translate(layer.pointwise, hw, mid[0], fmt)
    return pointwise, conv_output(layer.pointwise, pointwise)


def layer_arrays(layer: ConvLayer) -> dict[str, np.ndarray]:
    """The arrays an import of ``layer`` writes, by block id (the input apart)."""
    arrays = {"filter": layer.weights}
    if layer.pointwise is not None:
        arrays[f"{POINTWISE}filter"] = layer.pointwise.weights
    bias = layer.final.bias
    if bias is not None:
        arrays["bias"] = bias.astype(layer.weights.dtype)
    return arrays


def pointwise_blocks(c: Canvas, layer: ConvLayer, conv: TfConv, paths: dict[str, str],
                     name: str) -> None:
    """The pointwise conv's blocks on the depthwise ``forward`` (see the module docstring);
    ``conv`` is the pointwise conv's op and attributes."""
    assert layer.pointwise is not None
    p = POINTWISE
    dtype = str(layer.pointwise.weights.dtype)
    shape = "x".join(map(str, layer.pointwise.weights.shape))

    def title(text: str) -> str:
        return escaped(text, MAX_TITLE)
    c.add_node("Tensor", (900, 160), {"fill": "file", "path": paths[f"{p}filter"],
                                      "dtype": dtype},
               id=f"{p}filter", title=title(f"{name} pointwise filter {shape}"))
    c.add_node("ShapeOf", (1200, 220), id=f"{p}filter_sizes", title="pointwise filter_sizes")
    c.add_node("ShapeOf", (1200, 420), id=f"{p}input_sizes", title="pointwise input_sizes")
    c.add_node("Conv2D", (1200, 0), conv.attrs, id=f"{p}forward",
               title=title(f"{name} pointwise (Conv2D 1x1)"))
    c.add_node("Conv2DBackpropFilter", (1500, 180), conv.attrs, id=f"{p}grad_filter",
               title=title(f"{name} pointwise grad_filter"))
    c.add_node("Conv2DBackpropInput", (1500, 360), conv.attrs, id=f"{p}grad_input",
               title=title(f"{name} pointwise grad_input"))
    wire(c, (("forward", f"{p}forward.input"), (f"{p}filter", f"{p}forward.filter"),
             (f"{p}filter", f"{p}filter_sizes.input"),
             ("forward", f"{p}input_sizes.input"), ("forward", f"{p}grad_filter.input"),
             (f"{p}filter_sizes", f"{p}grad_filter.filter_sizes"),
             ("out_backprop", f"{p}grad_filter.out_backprop"),
             (f"{p}input_sizes", f"{p}grad_input.input_sizes"),
             (f"{p}filter", f"{p}grad_input.filter"),
             ("out_backprop", f"{p}grad_input.out_backprop")))


def canvas_notes(layer: ConvLayer) -> list[str]:
    """What a canvas's notes say of the layer: how a transposed or separable conv maps onto
    TensorFlow's ops; a 1-D conv computed as a 2-D conv of height 1; an activation the model
    applies after the conv, which the canvas leaves out."""
    notes = []
    if layer.transposed:
        conv, grad_filter, grad_input = ops_of(layer)
        notes.append(f"A transposed conv is TensorFlow's {grad_input}: forward = the "
                     f"input gradient of a {conv} on an input shaped like the output, with "
                     f"input = its out_backprop. Its gradients: grad_input = {conv}(out_backprop, "
                     f"filter), grad_filter = {grad_filter}(out_backprop, filter_sizes, "
                     "input).")
    if layer.pointwise is not None:
        notes.append("A separable conv: the depthwise conv (forward) feeds the 1x1 pointwise "
                     "conv (pointwise_forward, the layer's output; the bias comes after it). "
                     "out_backprop is the gradient of the layer's output; the depthwise "
                     "gradients take pointwise_grad_input as their out_backprop, so grad_input "
                     "and grad_filter are the whole layer's gradients.")
    if layer.conv1d:
        k, s, d = layer.kernel[1], layer.strides[1], layer.dilations[1]
        causal = ""
        if layer.padding == "EXPLICIT":
            causal = (f"; causal padding = {layer.pads[2]} zeros on the left" if
                      layer.pads[3] == 0 and not layer.transposed else
                      f"; pads {layer.pads[2]} on the left, {layer.pads[3]} on the right")
        notes.append(f"A 1-D conv (kernel {k}, stride {s}, dilation {d}) computed as a 2-D "
                     f"conv of height 1: kernel 1x{k}, strides 1,{s}, dilations 1,{d}, the "
                     f"sequence as an input of height 1{causal}.")
    if layer.final.activation:
        notes.append(f"The model applies the activation {layer.final.activation[:60]!r} after "
                     "this conv (and its bias); the canvas computes the conv alone.")
    return notes
