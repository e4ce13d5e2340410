"""The blocks of an imported 3-D conv whose pads are neither SAME nor VALID (tf.raw_ops.Conv3D
takes no EXPLICIT padding): the VALID ops on a zero-padded tensor, with Pad and Slice blocks
(:attr:`engine.io.models.model_import.TfConv.input_pads`).

A conv: ``padded_input = Pad(input)``, ``forward = Conv3D(padded_input, filter)``,
``grad_filter = Conv3DBackpropFilterV2(padded_input, filter_sizes, out_backprop)`` and
``grad_input = Slice(grad_padded_input)``, the input gradient of the padded input cut back to
the input (the padding's rows get gradient, which the input does not have).
A transposed conv (the input gradient of a conv on its output Y): ``full_output =
Conv3DBackpropInputV2(output_sizes, filter, input)`` on Y padded, ``forward =
Slice(full_output)`` = Y; its gradients are those of the conv on the padded out_backprop:
``grad_input = Conv3D(padded_out_backprop, filter)``, ``grad_filter =
Conv3DBackpropFilterV2(padded_out_backprop, filter_sizes, input)``. Each sums exactly the
terms of the layer's padded conv: the zeros add nothing.
"""

from __future__ import annotations

from engine.base.names import MAX_TITLE, escaped
from engine.graph.canvas import Canvas
from engine.graph.conv_blocks import conv_blocks, transposed_blocks, wire
from engine.io.models.model_import import ConvLayer, TfConv
from engine.io.models.pads_3d import pads_text
from engine.shapes.conv import layout_axes


def paddings(conv: TfConv) -> list[int]:
    """:attr:`TfConv.input_pads` as tf.raw_ops.Pad's paddings (before, after of every axis;
    all 0 without input_pads)."""
    out = [0] * (2 * len(conv.input_shape))
    for i, axis in enumerate(layout_axes(conv.attrs["data_format"])[1] if conv.input_pads
                             else ()):
        out[2 * axis:2 * axis + 2] = conv.input_pads[2 * i:2 * i + 2]
    return out


def padded(conv: TfConv, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` (in ``conv``'s layout) grown by :func:`paddings`."""
    p = paddings(conv)
    return tuple(n + p[2 * i] + p[2 * i + 1] for i, n in enumerate(shape))


def _begin(conv: TfConv) -> list[int]:
    return paddings(conv)[::2]


def padded_blocks(c: Canvas, layer: ConvLayer, conv: TfConv, output_shape: tuple[int, ...],
                  name: str) -> None:
    """Add the blocks (see the module docstring) to ``c``, which holds ``input``, ``filter``,
    ``out_backprop`` and the VALID op: ``forward``, a transposed conv's ``full_output``
    (:func:`op_id`)."""
    def title(text: str) -> str:
        return escaped(f"{name} {text}", MAX_TITLE)
    pads = pads_text(conv.input_pads)
    if layer.transposed:
        _blocks_transposed(c, layer, conv, output_shape, name, title, pads)
    else:
        _blocks_conv(c, layer, conv, name, title, pads)


def op_id(layer: ConvLayer, conv: TfConv) -> str:
    """The id of the block of ``conv``'s op: ``forward``, but ``full_output`` for a transposed
    conv with :attr:`TfConv.input_pads` (its Slice is ``forward``)."""
    return "full_output" if conv.input_pads and layer.transposed else "forward"


def _blocks_conv(c: Canvas, layer: ConvLayer, conv: TfConv, name: str, title,
                 pads: str) -> None:
    """``padded_input = Pad(input)`` feeding the conv's blocks; ``grad_input`` its Slice."""
    c.add_node("Pad", (330, 0), {"paddings": paddings(conv)}, id="padded_input",
               title=f"padded_input (pads {pads})")
    wire(c, (("input", "padded_input.input"),))
    conv_blocks(c, layer, conv, name, source="padded_input", grad_input="grad_padded_input",
                sizes_title="input_sizes (padded)")
    c.add_node("Slice", (900, 360), {"begin": _begin(conv), "size": list(conv.input_shape)},
               id="grad_input", title=title("grad_input"))
    wire(c, (("grad_padded_input", "grad_input.input"),))


def _blocks_transposed(c: Canvas, layer: ConvLayer, conv: TfConv,
                       output_shape: tuple[int, ...], name: str, title, pads: str) -> None:
    """The transposed conv's blocks on ``padded_out_backprop = Pad(out_backprop)``, its op
    ``full_output`` (on Y padded); ``forward`` the Slice of it back to Y."""
    c.add_node("Pad", (330, 420), {"paddings": paddings(conv)}, id="padded_out_backprop",
               title=f"padded_out_backprop (pads {pads})")
    wire(c, (("out_backprop", "padded_out_backprop.input"),))
    transposed_blocks(c, layer, conv, list(padded(conv, output_shape)), name,
                      forward="full_output", upstream="padded_out_backprop",
                      sizes_title="output_sizes (padded)")
    c.add_node("Slice", (900, 0), {"begin": _begin(conv), "size": list(output_shape)},
               id="forward", title=title("forward (transposed)"))
    wire(c, (("full_output", "forward.input"),))
