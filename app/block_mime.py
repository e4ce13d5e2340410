"""The drag payload of blocks (the ``nodegraphqt/nodes`` MIME type): written by the palette's
drag, read by the canvas's drop."""

from __future__ import annotations

import re

from app.node_classes import node_type
from blocks.registry import REGISTRY

NODE_MIME = "nodegraphqt/nodes"
_URN_NODES = re.compile(r"node:([\w.:]+)")


def block_mime_text(type_ids: list[str]) -> bytes:
    """Payload of the ``nodegraphqt/nodes`` drag MIME type for the given block types."""
    return ("ngqt::" + ";".join(f"node:{node_type(t)}" for t in type_ids)).encode()


def parse_block_mime(payload: bytes) -> list[str]:
    """Block type ids in a ``nodegraphqt/nodes`` payload (unknown types are dropped)."""
    out = []
    for full in _URN_NODES.findall(payload.decode(errors="replace")):
        type_id = full.split(".", 1)[1] if full.startswith("gradblocks.") else full
        if type_id in REGISTRY:
            out.append(type_id)
    return out
