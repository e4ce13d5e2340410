"""The facts the command line and the app's dialog show before a sweep starts, in a module that
imports nothing but the op table (so ``gradblocks --help`` and ``check`` do not load the reference kernels): the
conventions, the op names of each, and the sweep's defaults and limits."""

from __future__ import annotations

from engine.shapes.ops import CONV_OPS

CONVENTIONS = ("tf", "torch")
#: The tf.raw_ops ops a sweep checks: every op of the op table (their kernels:
#: :data:`engine.verify.conventions.TF_OPS`).
TF_OP_NAMES = tuple(op.name for op in CONV_OPS if op.rank == 2)
#: torch op -> (its canonical tf.raw_ops op, the arrays it takes, the result's role).
TORCH_OPS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "conv2d": ("Conv2D", ("input", "weight"), "output"),
    "conv2d_weight": ("Conv2DBackpropFilter", ("input", "grad_output"), "filter"),
    "conv2d_input": ("Conv2DBackpropInput", ("weight", "grad_output"), "input"),
    "conv_transpose2d": ("Conv2DBackpropInput", ("input", "weight"), "input"),
}
OPS = {"tf": TF_OP_NAMES, "torch": tuple(TORCH_OPS)}

#: Cases a sweep tries when not told (the catalogue included).
DEFAULT_CASES = 500
#: Largest --cases and --jobs accepted.
MAX_CASES = 10_000_000
MAX_JOBS = 64
#: Seconds one case may take.
DEFAULT_TIMEOUT = 10.0
