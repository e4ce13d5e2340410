"""What a block added in the app starts with, beyond its spec's defaults: a block type with a
``seed`` attribute gets the smallest seed no block of its type on the canvas uses, so two new
random Tensor blocks (an input and an out_backprop) do not start identical."""

from __future__ import annotations

from typing import Any

from blocks.registry import get_spec
from engine.graph.canvas import Canvas

SEED = "seed"


def new_block_attrs(canvas: Canvas, type_id: str,
                    attrs: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """``attrs`` with the block's own seed added (unless ``attrs`` sets one)."""
    spec = get_spec(type_id)
    if not any(a.name == SEED for a in spec.attrs) or (attrs and SEED in attrs):
        return attrs
    default = spec.attr(SEED).default
    used = {node.attrs.get(SEED, default) for node in canvas.nodes.values()
            if node.type == type_id}
    seed = default
    while seed in used:
        seed += 1
    return {**(attrs or {}), SEED: seed} if seed != default else attrs
