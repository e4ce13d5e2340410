"""Which ports can be wired together, from the ports' declared kinds (``PortSpec.kind``).

An output of kind ``k`` fits an input of kind ``k`` or ``any``; an ``any`` output (a pass-through,
whose kind is its input's) fits every input. When the compiler has inferred the output's
:class:`TensorSpec`, :func:`tensor_kind` gives its actual kind, which is used instead. The app
refuses a wire that does not fit as it is dropped on the port; :func:`refusal` says why.
"""

from __future__ import annotations

from blocks.spec import BlockSpec, PortSpec, TensorSpec
from engine.base.dtypes import DTYPES

#: The kinds a port may declare.
PORT_KINDS = ("any", "float", "int_vector", "bool")
#: Kind of an inferred tensor that is none of the specific kinds (fits only ``any`` inputs).
OTHER = "other"


def tensor_kind(ts: TensorSpec) -> str:
    """The kind of an inferred tensor: float (a supported float dtype), int_vector (1-D
    integers), bool, else :data:`OTHER`."""
    if ts.dtype in DTYPES:
        return "float"
    if ts.dtype.startswith(("int", "uint")) and len(ts.shape) == 1:
        return "int_vector"
    if ts.dtype == "bool":
        return "bool"
    return OTHER


def fits(out_kind: str, in_kind: str) -> bool:
    """Whether an output of ``out_kind`` may feed an input of ``in_kind``."""
    return in_kind == "any" or out_kind == "any" or out_kind == in_kind


def fitting_inputs(spec: BlockSpec, out_kind: str) -> list[PortSpec]:
    """The inputs of ``spec`` an output of ``out_kind`` may feed, in port order."""
    return [p for p in spec.inputs if fits(out_kind, p.kind)]


def fitting_outputs(spec: BlockSpec, in_kind: str) -> list[PortSpec]:
    """The outputs of ``spec`` that may feed an input of ``in_kind``, in port order."""
    return [p for p in spec.outputs if fits(p.kind, in_kind)]


#: What a port of each kind carries, as messages say it.
KIND_NAMES = {"any": "any tensor", "float": "a float tensor",
              "int_vector": "an integer shape vector (IntVector, ShapeOf)",
              "bool": "a boolean", OTHER: "a tensor of no port kind (not float, not a 1-D "
                                          "integer vector, not boolean)"}


def refusal(out_name: str, out_kind: str, in_name: str, in_kind: str) -> str | None:
    """Why an output ``out_name`` of ``out_kind`` may not feed input ``in_name`` of
    ``in_kind`` (one line), or None when it fits (:func:`fits`)."""
    if fits(out_kind, in_kind):
        return None
    return (f"{out_name} is {KIND_NAMES.get(out_kind, out_kind)}; {in_name} takes "
            f"{KIND_NAMES.get(in_kind, in_kind)}")
