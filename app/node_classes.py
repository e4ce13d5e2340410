"""NodeGraphQt node classes generated from the block specs: one generator, no per-block code.

A generated class is named after the spec's ``type_id`` (node type
``gradblocks.<type_id>``), draws a :class:`~app.node_previews.PreviewNodeItem`, has one
input port per PortSpec of ``spec.inputs`` (one connection each) and one output port per
PortSpec of ``spec.outputs``, and a colour per category.
"""

from __future__ import annotations

import hashlib

from NodeGraphQt import BaseNode

from app.node_previews import PreviewNodeItem

IDENTIFIER = "gradblocks"

#: Muted node colours by category keyword (first match wins); others get a stable hashed hue.
CATEGORY_COLORS = (
    ("tensor", (38, 84, 92)),
    ("source", (38, 84, 92)),
    ("gradient", (78, 52, 110)),
    ("backprop", (78, 52, 110)),
    ("forward", (40, 64, 116)),
    ("conv", (40, 64, 116)),
    ("layout", (84, 72, 40)),
    ("shape", (84, 72, 40)),
    ("check", (44, 92, 56)),
    ("compare", (44, 92, 56)),
    ("output", (70, 70, 76)),
)
ERROR_COLOR = (120, 36, 36)
ERROR_BORDER = (235, 80, 70)
NORMAL_BORDER = (74, 84, 94)

_CLASSES: dict[str, type[BaseNode]] = {}


def category_color(category: str) -> tuple[int, int, int]:
    low = category.lower()
    for key, color in CATEGORY_COLORS:
        if key in low:
            return color
    digest = hashlib.sha1(category.encode()).digest()
    return (40 + digest[0] % 50, 40 + digest[1] % 50, 50 + digest[2] % 60)


def node_type(type_id: str) -> str:
    """NodeGraphQt's node type string of a block type id."""
    return f"{IDENTIFIER}.{type_id}"


def node_class(spec) -> type[BaseNode]:
    """The (cached) NodeGraphQt class of a BlockSpec."""
    cls = _CLASSES.get(spec.type_id)
    if cls is not None and cls.SPEC is spec:
        return cls
    color = category_color(spec.category)
    inputs = tuple(p.name for p in spec.inputs)
    outputs = tuple(p.name for p in spec.outputs)

    def __init__(self):
        BaseNode.__init__(self, qgraphics_item=PreviewNodeItem)  # a node item with a preview
        for name in inputs:
            self.add_input(name, multi_input=False)
        for name in outputs:
            self.add_output(name, multi_output=True)
        self.set_color(*color)
        self.set_property("border_color", (*NORMAL_BORDER, 255))  # no set_border_color

    cls = type(spec.type_id, (BaseNode,), {
        "__identifier__": IDENTIFIER,
        "NODE_NAME": spec.title,
        "SPEC": spec,
        "BASE_COLOR": color,
        "__init__": __init__,
        "__doc__": spec.doc,
    })
    _CLASSES[spec.type_id] = cls
    return cls
