"""The facts the command line and the app's dialog show before a sweep starts, in a module that
imports nothing but the op table (so ``gradblocks --help`` and ``check`` do not load the reference kernels): the
conventions, the op names of each, and the sweep's defaults and limits."""

from __future__ import annotations

from engine.shapes.ops import CONV_OPS

CONVENTIONS = ("tf", "torch")
#: The tf.raw_ops ops a sweep checks: every op of the op table, 2-D and 3-D (their kernels:
#: :data:`engine.verify.conventions.TF_OPS`).
TF_OP_NAMES = tuple(op.name for op in CONV_OPS)
#: Each kind's torch op (``{r}``: the op's number of spatial dimensions) and the arrays it
#: takes; an input gradient has a second torch op, the transposed conv of the output it takes.
_TORCH_KINDS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "forward": (("conv{r}d", ("input", "weight")),),
    "filter": (("conv{r}d_weight", ("input", "grad_output")),),
    "input": (("conv{r}d_input", ("weight", "grad_output")),
              ("conv_transpose{r}d", ("input", "weight"))),
}
#: torch op -> (its canonical tf.raw_ops op, the arrays it takes, the result's role): the op
#: table's rows that are not depthwise (torch has no depthwise op of its own), in its order.
TORCH_OPS: dict[str, tuple[str, tuple[str, ...], str]] = {
    name.format(r=op.rank): (op.name, arrays, op.result)
    for op in CONV_OPS if not op.depthwise for name, arrays in _TORCH_KINDS[op.kind]}
OPS = {"tf": TF_OP_NAMES, "torch": tuple(TORCH_OPS)}

#: Cases a sweep tries when not told (the catalogue included).
DEFAULT_CASES = 500
#: Largest --cases and --jobs accepted.
MAX_CASES = 10_000_000
MAX_JOBS = 64
#: Seconds one case may take.
DEFAULT_TIMEOUT = 10.0
