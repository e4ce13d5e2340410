"""The attribute panel's line under a backprop-input block: every input size its out_backprop
shape allows (for stride > 1 several do, each with a different gradient)."""

from __future__ import annotations

from blocks.registry import get_spec
from engine.errors import InvalidArgumentError
from engine.input_sizes import choices_text, spatial_choices

#: The input ports a block needs for the hint (Conv2DBackpropInput, DepthwiseBackpropInput).
PORTS = ("input_sizes", "filter", "out_backprop")


def input_size_hint(canvas, plan, node_id: str) -> str | None:
    """``consistent with out_backprop [1, 4, 4, 8]: H in {7, 8}, W in {7, 8}``, or None when
    the block has no input_sizes port or its filter and out_backprop shapes are not known."""
    node = canvas.nodes.get(node_id)
    if node is None or plan is None:
        return None
    spec = get_spec(node.type)
    if not set(PORTS) <= {p.name for p in spec.inputs}:
        return None
    wired = canvas.inputs_of(node_id)
    shapes = {}
    for port in ("filter", "out_backprop"):
        src = wired.get(port)
        tensor = plan.specs.get(tuple(src)) if src is not None else None
        if tensor is None or len(tensor.shape) != 4:
            return None
        shapes[port] = list(tensor.shape)
    attrs = {**spec.defaults(), **node.attrs}
    try:
        rows, cols = spatial_choices(shapes["out_backprop"], shapes["filter"], attrs)
    except (InvalidArgumentError, ValueError, TypeError, IndexError):
        return None  # a bad attribute: its own error line says what is wrong
    if not rows or not cols:
        return (f"no input size gives out_backprop {shapes['out_backprop']} with this filter "
                "and these attributes")
    return (f"consistent with out_backprop {shapes['out_backprop']}: "
            f"H in {choices_text(rows)}, W in {choices_text(cols)}")
