"""All block types by type id. A new block type is one spec added to one of the SPECS tuples."""

from __future__ import annotations

from blocks import adjointcheck, checks, conv, gradcheck, pad_slice, tensors
from blocks.spec import BlockSpec
from engine.base.errors import InvalidArgumentError

REGISTRY: dict[str, BlockSpec] = {
    spec.type_id: spec for module in (conv, tensors, pad_slice, checks, gradcheck, adjointcheck) for spec in module.SPECS
}

CATEGORY_ORDER = ("Gradients", "Convolution", "Tensors", "Checks")


class UnknownBlockError(InvalidArgumentError, KeyError):
    """A type id no spec has."""

    def __str__(self) -> str:
        return self.args[0]


def get_spec(type_id: str) -> BlockSpec:
    """The spec of ``type_id``; an :class:`UnknownBlockError` lists the known ones."""
    try:
        return REGISTRY[type_id]
    except (KeyError, TypeError):
        raise UnknownBlockError(
            f"unknown block type {type_id!r} (known: {', '.join(sorted(REGISTRY))})"
        ) from None


def categories() -> dict[str, list[BlockSpec]]:
    """Specs grouped by category, in palette order."""
    out: dict[str, list[BlockSpec]] = {c: [] for c in CATEGORY_ORDER}
    for spec in REGISTRY.values():
        out.setdefault(spec.category, []).append(spec)
    return {c: specs for c, specs in out.items() if specs}
