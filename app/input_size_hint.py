"""The attribute panel's line under a backprop-input block: every input size its out_backprop
shape allows (for stride > 1 several do, each with a different gradient). When an IntVector
feeds ``input_sizes``, each size is a link that sets that IntVector's height or width."""

from __future__ import annotations

import html
from dataclasses import dataclass

from blocks.registry import get_spec
from engine.base.errors import InvalidArgumentError
from engine.shapes.input_sizes import choices_text, spatial_choices

#: The input ports a block needs for the hint (Conv2DBackpropInput, DepthwiseBackpropInput).
PORTS = ("input_sizes", "filter", "out_backprop")
#: At most this many sizes per dimension are links (a longer run is shown elided, as text).
MAX_LINKS = 8
#: Link colour, readable on the dark theme.
LINK = "#bfe3f7"


@dataclass(frozen=True)
class SizeHint:
    """The sizes out_backprop allows, the IntVector feeding input_sizes (None: another block
    or nothing) and the index of H and W in its values."""

    out_backprop: list[int]
    rows: range
    cols: range
    source: str | None = None
    values: tuple[int, ...] = ()
    axes: tuple[int, int] = (1, 2)

    def text(self) -> str:
        """``consistent with out_backprop [1, 4, 4, 8]: H in {7, 8}, W in {7, 8}``."""
        if not self.rows or not self.cols:
            return (f"no input size gives out_backprop {self.out_backprop} with this filter "
                    "and these attributes")
        return (f"consistent with out_backprop {self.out_backprop}: "
                f"H in {choices_text(self.rows)}, W in {choices_text(self.cols)}")

    def current(self, dim: str) -> int | None:
        axis = self.axes[0 if dim == "H" else 1]
        return self.values[axis] if axis < len(self.values) else None

    def html(self) -> str:
        """:meth:`text` with each size a link ``H:7`` / ``W:8`` (the current one in bold)."""
        if self.source is None or not self.rows or not self.cols or \
                max(len(self.rows), len(self.cols)) > MAX_LINKS:
            return html.escape(self.text())

        def links(dim: str, sizes: range) -> str:
            now = self.current(dim)
            shown = {n: f"<b>{n}</b>" if n == now else str(n) for n in sizes}
            return "{" + ", ".join(f"<a href='{dim}:{n}' style='color: {LINK}'>{shown[n]}</a>"
                                   for n in sizes) + "}"

        return (f"consistent with out_backprop {self.out_backprop}: H in "
                f"{links('H', self.rows)}, W in {links('W', self.cols)}")

    def with_size(self, dim: str, size: int) -> list[int]:
        """The IntVector's values with the H or W entry set to ``size``."""
        values = list(self.values)
        values[self.axes[0 if dim == "H" else 1]] = size
        return values


def input_size_hint(canvas, plan, node_id: str) -> SizeHint | None:
    """The hint for a block, or None when it has no input_sizes port or its filter and
    out_backprop shapes are not known (or an attribute is bad: its own error says so)."""
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
        return None
    hint = SizeHint(shapes["out_backprop"], rows, cols)
    src = wired.get("input_sizes")
    feeder = canvas.nodes.get(src[0]) if src is not None else None
    if feeder is not None and feeder.type == "IntVector":
        values = tuple(feeder.attrs.get("values", get_spec("IntVector").defaults()["values"]))
        if len(values) == 2:  # the spatial sizes only
            axes = (0, 1)
        elif len(values) == 4:
            axes = (2, 3) if attrs.get("data_format") == "NCHW" else (1, 2)
        else:
            return hint
        hint = SizeHint(hint.out_backprop, rows, cols, feeder.id, values, axes)
    return hint
