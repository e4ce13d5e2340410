"""The gradient blocks of an imported layer's conv, whichever blocks feed it: a conv's two
backprop blocks (Conv2D, DepthwiseConv2D or Conv3D) or a transposed conv's (its forward op being
the input gradient of a conv), with their size blocks and wires.

:mod:`engine.graph.layer_canvas` feeds them the blocks ``input`` and ``out_backprop`` (or, for a
separable conv's depthwise half, ``pointwise_grad_input``); :mod:`engine.graph.padded_canvas`,
the outputs of its Pad blocks, and adds its Slice blocks around them.
"""

from __future__ import annotations

from engine.base.names import MAX_TITLE, escaped
from engine.graph.canvas import Canvas
from engine.io.models.model_import import ConvLayer, TfConv


def wire(c: Canvas, wires: tuple[tuple[str, str], ...]) -> None:
    """Connect each ``(source block, "block.port")``: the source's ``output`` to that port."""
    for src, dst in wires:
        node, port = dst.split(".")
        c.connect((src, "output"), (node, port))


def ops_of(layer: ConvLayer) -> tuple[str, str, str]:
    """The block types of ``layer``'s conv and its filter and input gradients."""
    if layer.rank == 3:
        return "Conv3D", "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2"
    if layer.depthwise and not layer.transposed:
        return "DepthwiseConv2D", "DepthwiseBackpropFilter", "DepthwiseBackpropInput"
    return "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput"


def _title(text: str) -> str:
    return escaped(text, MAX_TITLE)


def conv_blocks(c: Canvas, layer: ConvLayer, conv: TfConv, name: str, *,
                source: str = "input", upstream: str = "out_backprop",
                grad_input: str = "grad_input", sizes_title: str = "input_sizes") -> None:
    """Add the backprop blocks ``grad_filter`` and ``grad_input`` (that id) of the conv in the
    block ``forward`` (already in ``c``, as are ``filter``, ``source`` and ``upstream``) and
    their ShapeOf blocks ``filter_sizes`` and ``input_sizes`` (titled ``sizes_title``), and wire
    them: the conv's input is the block ``source``, the gradient of its output ``upstream``;
    ``name`` (escaped) starts the backprop blocks' titles."""
    _, grad_filter, grad_input_op = ops_of(layer)
    c.add_node("ShapeOf", (330, 220), id="filter_sizes", title="filter_sizes")
    c.add_node("ShapeOf", (330, 420), id="input_sizes", title=sizes_title)
    c.add_node(grad_filter, (600, 180), conv.attrs, id="grad_filter",
               title=_title(f"{name} grad_filter"))
    c.add_node(grad_input_op, (600, 360), conv.attrs, id=grad_input,
               title=_title(f"{name} {grad_input}"))
    wire(c, ((source, "forward.input"), ("filter", "forward.filter"),
             ("filter", "filter_sizes.input"), (source, "input_sizes.input"),
             (source, "grad_filter.input"), ("filter_sizes", "grad_filter.filter_sizes"),
             (upstream, "grad_filter.out_backprop"),
             ("input_sizes", f"{grad_input}.input_sizes"), ("filter", f"{grad_input}.filter"),
             (upstream, f"{grad_input}.out_backprop")))


def transposed_blocks(c: Canvas, layer: ConvLayer, conv: TfConv, output_sizes: list[int],
                      name: str, *, forward: str = "forward", upstream: str = "out_backprop",
                      sizes_title: str = "output_sizes") -> None:
    """The blocks of a transposed conv whose op (an input gradient) is the block ``forward``
    (already in ``c``, as are ``input``, ``filter`` and ``upstream``): ``forward =
    Conv2DBackpropInput(output_sizes, filter, input)``, and its adjoints ``grad_input =
    Conv2D(upstream, filter)``, ``grad_filter = Conv2DBackpropFilter(upstream, filter_sizes,
    input)`` (Conv3D's ops for a 3-D one); ``output_sizes`` is an IntVector of those values
    titled ``sizes_title``, ``name`` (escaped) starts the gradients' titles."""
    forward_op, grad_filter, _ = ops_of(layer)
    c.add_node("IntVector", (330, 0), {"values": output_sizes}, id="output_sizes",
               title=sizes_title)
    c.add_node("ShapeOf", (330, 220), id="filter_sizes", title="filter_sizes")
    c.add_node(forward_op, (600, 360), conv.attrs, id="grad_input",
               title=_title(f"{name} grad_input"))
    c.add_node(grad_filter, (600, 180), conv.attrs, id="grad_filter",
               title=_title(f"{name} grad_filter"))
    wire(c, (("output_sizes", f"{forward}.input_sizes"), ("filter", f"{forward}.filter"),
             ("input", f"{forward}.out_backprop"), ("filter", "filter_sizes.input"),
             (upstream, "grad_input.input"), ("filter", "grad_input.filter"),
             (upstream, "grad_filter.input"),
             ("filter_sizes", "grad_filter.filter_sizes"),
             ("input", "grad_filter.out_backprop")))
