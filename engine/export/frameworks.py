"""A compiled plan as a script for TensorFlow, PyTorch or JAX (``gradblocks export --to``).

The script never imports GradBlocks. Each block becomes one line calling a helper: the conv
blocks call ``_forward`` / ``_backprop_filter`` / ``_backprop_input`` with the geometry dict of
:mod:`engine.export.conv`, which each target's module (:mod:`engine.export.to_tf`,
:mod:`engine.export.to_torch`, :mod:`engine.export.to_jax`) implements with the framework's public
ops in its ``PRELUDE``; the check blocks (Compare, GradCheck, AdjointCheck) call helpers of
:data:`~engine.export.script_common.COMMON` that use those ops and then the blocks' own code,
copied into the script (:data:`~engine.export.script_common.CHECK_CODE`: the tolerance tables
made from :mod:`engine.base.dtypes` and the source of the functions the blocks' runs call), so
a script's verdicts cannot drift from the blocks'.

Source values: every Tensor block's values (random fills, literal values, .npy files, images)
are computed by GradBlocks at export time and written to a companion ``.npz`` beside the script
under generated keys ``s0, s1, ...``: bit-exact for every fill, whatever NumPy version runs the
script (bfloat16 stored exactly as float32 and cast back). The companion is named by its content
(:func:`companion_name`: ``<script stem>.sources.<hash12>.npz``, the hash of the keys, dtypes,
shapes and bytes: the same canvas gives the same name) and the script loads it by that name,
written in its ``SOURCES_FILE`` line, from the folder of its real path (symbolic links
followed): an old script never loads new values (the CLI writes both as one set,
:func:`engine.base.atomic.write_file_set`). IntVector and ShapeOf values are known before running
and are literals.

User text (ids, titles, Output names, the canvas file name) reaches the script only through
:func:`engine.base.literal.literal`, as in :mod:`engine.export.to_numpy`; the helpers are fixed
text. ``python SCRIPT.py OUT.npz`` writes the results under the keys of
:mod:`engine.graph.result_names`, with a copy of :func:`engine.io.npz.write_npz` (any key, never
pickled).
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import numpy as np

from engine.base.literal import literal
from engine.export import script_common, to_jax, to_tf, to_torch
from engine.export.conv import CONV_OPS, check_step_geometry, conv_step_geometry, dilated
from engine.export.to_numpy import block_entry, result_entries, step_variables
from engine.graph.compiler import Plan
from engine.io.npz import npz_safe

#: Target name -> its module (``NAME``, ``MODULE``, ``PRELUDE``, ``known_defect``).
TARGETS = {m.NAME: m for m in (to_tf, to_torch, to_jax)}

_MAIN = '''
if __name__ == "__main__":
    sys.stdout.reconfigure(errors="backslashreplace")
    arrays = {name: _np(value) for name, value in results.items()}
    if len(sys.argv) > 1:  # written at exactly that path; bfloat16 stored as float32
        _write_npz(sys.argv[1], arrays)
    for name, value in arrays.items():
        print(SHOWN_NAME, list(np.shape(value)), value.dtype)
'''.replace("SHOWN_NAME", script_common.SHOWN_NAME)


class ExportRefused(ValueError):
    """A block the target has no translation for: the message names the block."""


@dataclass
class FrameworkExport:
    """A script's text, the source values it loads and the name of their companion .npz (a
    file name, beside the script)."""

    script: str
    sources: dict[str, np.ndarray] = field(default_factory=dict)
    companion: str = ""


#: The line of a script naming its companion (the first line starting so), and how much of an
#: existing script is read to find it (the line comes before the canvas's blocks).
SOURCES_LINE = "SOURCES_FILE = "
HEAD_BYTES = 256 * 1024
#: Hex digits of the content hash in a companion's name.
DIGEST_CHARS = 12


def sources_digest(sources: Mapping[str, np.ndarray]) -> str:
    """The content hash in a companion's name: SHA-256 of each key, dtype, shape and bytes."""
    h = hashlib.sha256()
    for key, value in sources.items():
        value = np.ascontiguousarray(value)
        head = f"{key!r} {value.dtype.str} {list(value.shape)} {value.nbytes}\n"
        h.update(head.encode("utf-8", "surrogatepass"))
        h.update(value.tobytes())
    return h.hexdigest()[:DIGEST_CHARS]


def companion_name(script_name: str, digest: str) -> str:
    """``<script stem>.sources.<digest>.npz``: the companion of the script ``script_name``."""
    return f"{os.path.splitext(script_name)[0]}.sources.{digest}.npz"


def _head(script_path: str | os.PathLike) -> bytes | None:
    """The first :data:`HEAD_BYTES` of a regular file (never waiting on a FIFO), or None."""
    try:
        fd = os.open(script_path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            return f.read(HEAD_BYTES) if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else None
    except OSError:
        return None


def named_companion(script_path: str | os.PathLike) -> str | None:
    """The companion file name an existing script names in its ``SOURCES_FILE`` line, or None
    (no such file, not a regular file, no such line, not a plain file name)."""
    head = _head(script_path)
    found = re.search(rb"^" + re.escape(SOURCES_LINE.encode()) + rb"(.*)$", head or b"",
                      re.MULTILINE)
    if not found:
        return None
    try:
        name = ast.literal_eval(found.group(1).decode("utf-8", "surrogateescape"))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(name, str) or not name or os.sep in name or name in (".", ".."):
        return None
    return name


def sources_path(script_path: str | os.PathLike) -> Path:
    """Where the script at ``script_path`` loads its source values from: the companion named in
    it, beside its real path (the rule the script itself uses); FileNotFoundError when it names
    none."""
    name = named_companion(script_path)
    if name is None:
        raise FileNotFoundError(f"{script_path}: no {SOURCES_LINE.strip()} line naming a "
                                "companion file")
    return Path(os.path.realpath(script_path)).parent / name


def owned_companions(script_path: Path) -> list[str]:
    """The companions an existing script at ``script_path`` names that this exporter wrote for a
    script of that name (``<stem>.sources.<hash12>.npz``, or ``<stem>.sources.npz`` of scripts
    from before content-addressed names): what a new export there may remove."""
    stem = re.escape(os.path.splitext(Path(script_path).name)[0])
    name = named_companion(script_path)
    if name and re.fullmatch(stem + rf"\.sources\.[0-9a-f]{{{DIGEST_CHARS}}}\.npz", name):
        return [name]
    legacy = b'+ ".sources.npz"' in (_head(script_path) or b"")
    return [f"{os.path.splitext(Path(script_path).name)[0]}.sources.npz"] if legacy else []


@dataclass
class _Context:
    plan: Plan
    var: dict[tuple[str, str], str]
    sources: dict[str, np.ndarray]

    def dtype(self, step, port: str) -> str:
        return self.plan.specs[step.inputs[port]].dtype


Emitter = Callable[[_Context, object, dict[str, str], dict[str, str]], list[str]]


def _tensor(ctx: _Context, step, inputs: dict, outputs: dict) -> list[str]:
    key = f"s{len(ctx.sources)}"
    value = step.spec.run(step.attrs, {})["output"]
    ctx.sources[key] = npz_safe(value)
    return [(f"{outputs['output']} = _tensor(_sources[{literal(key)}], "
            f"{literal(step.attrs['dtype'])})")]


def _known_vector(ctx: _Context, step, inputs: dict, outputs: dict) -> list[str]:
    value = ctx.plan.specs[(step.node_id, "output")].value
    return [(f"{outputs['output']} = np.asarray({literal(np.asarray(value).tolist())}, "
            "np.int32)")]


def _transpose(ctx: _Context, step, inputs: dict, outputs: dict) -> list[str]:
    return [(f"{outputs['output']} = _transpose({inputs['input']}, "
            f"{literal(step.attrs['perm'])})")]


def _pad(ctx: _Context, step, inputs: dict, outputs: dict) -> list[str]:
    return [f"{outputs['output']} = _zero_pad({inputs['input']}, {literal(step.attrs['paddings'])})"]


def _slice(ctx: _Context, step, inputs: dict, outputs: dict) -> list[str]:
    return [(f"{outputs['output']} = _slice_of({inputs['input']}, {literal(step.attrs['begin'])}, "
            f"{literal(step.attrs['size'])})")]


def _output(ctx: _Context, step, inputs: dict, outputs: dict) -> list[str]:
    return [f"{outputs['output']} = {inputs['input']}"]


def _conv(ctx: _Context, step, inputs: dict, outputs: dict) -> list[str]:
    g = conv_step_geometry(step, ctx.plan.specs)
    helper, ports = {"forward": ("_forward", ("input", "filter")),
                     "filter": ("_backprop_filter", ("input", "out_backprop")),
                     "input": ("_backprop_input", ("filter", "out_backprop"))}[g["op"]]
    args = ", ".join([*(inputs[p] for p in ports), literal(g)])
    return [f"{outputs['output']} = {helper}({args})"]


def _unpack(outputs: dict) -> list[str]:
    return [f"{var} = _checked[{literal(port)}]" for port, var in outputs.items()]


def _compare(ctx: _Context, step, inputs: dict, outputs: dict) -> list[str]:
    return [(f"_checked = _compare({inputs['a']}, {inputs['b']}, "
            f"{literal(ctx.dtype(step, 'a'))}, {literal(ctx.dtype(step, 'b'))})"),
            *_unpack(outputs)]


def _grad_check(ctx: _Context, step, inputs: dict, outputs: dict) -> list[str]:
    g = check_step_geometry(step, ctx.plan.specs)
    a = step.attrs
    args = ", ".join([*(inputs[p] for p in ("input", "filter", "out_backprop", "gradient")),
                      literal(a["wrt"]), literal(g), literal(a["samples"]),
                      literal(a["seed"]), literal(ctx.dtype(step, "gradient"))])
    return [f"_checked = _grad_check({args})", *_unpack(outputs)]


def _adjoint_check(ctx: _Context, step, inputs: dict, outputs: dict) -> list[str]:
    g = check_step_geometry(step, ctx.plan.specs)
    args = ", ".join([*(inputs[p] for p in ("input", "filter", "out_backprop")), literal(g),
                      literal(ctx.dtype(step, "input"))])
    return [f"_checked = _adjoint_check({args})", *_unpack(outputs)]


#: Block type -> its translation (the conv blocks by their raw op, see :func:`_emitter`).
EMITTERS: dict[str, Emitter] = {
    "Tensor": _tensor, "IntVector": _known_vector, "ShapeOf": _known_vector,
    "Transpose": _transpose, "Pad": _pad, "Slice": _slice, "Output": _output, "Compare": _compare,
    "GradCheck": _grad_check, "AdjointCheck": _adjoint_check,
}


def _emitter(spec) -> Emitter | None:
    if spec.op in CONV_OPS:
        return _conv
    return EMITTERS.get(spec.type_id)


def refusal(plan: Plan, target: str) -> str | None:
    """Why ``plan`` cannot be exported to ``target`` (naming the block), or None."""
    if target not in TARGETS:
        return f"unknown export target {target!r} (known: numpy, {', '.join(TARGETS)})"
    for step in plan.steps:
        if _emitter(step.spec) is None:
            return (f"block {plan.label(step.node_id)} ({step.spec.type_id}) has no {target} "
                    "translation")
    return None


def export_framework_script(plan: Plan, target: str, source: str = "canvas",
                            titles: Mapping[str, str] | None = None,
                            script_name: str = "script.py") -> FrameworkExport:
    """The ``target`` script for ``plan`` (no errors) and its source values, the script to be
    saved as ``script_name`` (a file name: its companion is named after it); raises
    :class:`ExportRefused` naming a block without a translation."""
    if plan.errors:
        raise ValueError("cannot export a canvas with problems")
    problem = refusal(plan, target)
    if problem:
        raise ExportRefused(problem)
    module = TARGETS[target]
    titles = titles or {}
    ctx = _Context(plan, {}, {})
    blocks: list[str] = []
    body: list[str] = []
    for index, step in enumerate(plan.steps):
        inputs, outputs = step_variables(step, ctx.var)
        blocks.append(block_entry(step, titles))
        body += ["", f"# step {index + 1} of {len(plan.steps)}"]
        emit = _emitter(step.spec)
        assert emit is not None  # refusal(plan, target) found every step's
        body += emit(ctx, step, inputs, outputs)
    results = result_entries(plan, ctx.var)
    companion = companion_name(script_name, sources_digest(ctx.sources))
    script = "\n".join([
        (f'"""Generated by `gradblocks export --to {target}` on {date.today().isoformat()} '
         "from the canvas file named in SOURCE."),
        "",
        (f"Recomputes every block of the canvas with {module.MODULE}'s own ops (it does not "
        "import GradBlocks)."),
        "The source tensors' values are loaded from the companion file named in SOURCES_FILE,",
        "beside this script (its real path), written by the exporter with it: the exact",
        "values GradBlocks used. `results` holds each Output block's value under its",
        "name (without Output blocks: every output under its block's title), as `gradblocks",
        "run --out` stores them. Run: python script.py [results.npz]",
        '"""',
        script_common.COMMON,
        module.PRELUDE,
        f"SOURCE = {literal(source)}",
        f"{SOURCES_LINE}{literal(companion)}",
        "#: node id -> (block type, title, text attributes such as an Output's name), in step order",
        "BLOCKS = {",
        *blocks,
        "}",
        "_sources = _load_sources()",
        *body,
        "",
        "results = {",
        *results,
        "}",
        _MAIN,
    ])
    try:
        ast.parse(script)
    except SyntaxError as err:  # an emitter is broken: an engine bug, not the user's
        raise RuntimeError(f"exported script does not parse (line {err.lineno}): {err.msg}") \
            from None
    return FrameworkExport(script, ctx.sources, companion)


def known_defects(plan: Plan, target: str) -> dict[str, str]:
    """``{node_id: defect}`` for blocks whose ``target`` computation hits a known framework
    defect, and every block downstream of one."""
    module = TARGETS[target]
    found: dict[str, str] = {}
    for step in plan.steps:
        defect = None
        if step.spec.op in CONV_OPS:
            g = conv_step_geometry(step, plan.specs)
            defect = module.known_defect(g["op"], g["depthwise"], dilated(g))
        elif step.spec.type_id == "AdjointCheck":
            g = check_step_geometry(step, plan.specs)
            defect = module.known_defect("filter", g["depthwise"], dilated(g))
        if defect is None:
            defect = next((found[src[0]] for src in step.inputs.values() if src[0] in found),
                          None)
        if defect is not None:
            found[step.node_id] = defect
    return found


def __getattr__(name: str) -> str:
    """``COMMON``: :data:`engine.export.script_common.COMMON`, made on first use."""
    if name == "COMMON":
        return script_common.COMMON
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
