"""``gradblocks explain CANVAS NODE[.PORT] I,J,K,L [--limit N] [--json]``.

Runs what the block needs, then prints the defining sum of one element of a conv block's
output (:mod:`engine.explain.terms`): the formula with the actual indices, the number of terms and
of padding terms, the first ``--limit`` terms as a table, their float64 sum and the block's value.
With ``--json``, exactly one JSON object on stdout::

    {"node": ID, "port": PORT, "index": [..], "value": V, "sum": S, "padding_terms": P,
     "terms": [{"factors": [{"port": P1, "index": [..]}, {"port": P2, "index": [..]}],
                "product": X}, ...]}

every index in its array's own layout, factors in the block's input port order, all terms
(``--limit`` only cuts the table). JSON has no NaN or Infinity: such numbers are written as the
strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (as protobuf's JSON mapping does). The object
is written as it is built, :data:`engine.explain.terms.CHUNK_TERMS` terms at a time (8.4M terms make
0.9 GB of JSON, never held in memory at once).

NODE is a node id, or a block title naming exactly one block. Exit status: 0; 2 for an invalid
canvas, a bad node, port or index (an index entry of more than
:data:`~engine.cli.common.MAX_INDEX_DIGITS` digits included), a ``--limit`` above
:data:`MAX_LIMIT`, an element whose terms would take more memory to list than
``--memory-limit-gib`` (:func:`engine.explain.terms.term_bytes` each), or a block that is not one
of the conv blocks; 1 when the block fails at run time.

The index has one entry per axis of the output: four for the 2-D blocks, five (``N,D,H,W,C`` or
``N,C,D,H,W``) for Conv3D and its two gradients.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from dataclasses import replace
from fractions import Fraction
from typing import SupportsFloat, TextIO

import numpy as np

from blocks.registry import get_spec
from engine.base.errors import InvalidArgumentError
from engine.base.names import article, shown
from engine.cli.common import (
    Subparsers,
    UsageError,
    compile_file,
    count_argument,
    memory_limit_argument,
    print_error,
    resolve_node,
    say,
    shown_path,
    whole_number,
)
from engine.explain.terms import (
    CHUNK_TERMS,
    OPS,
    Explanation,
    TooManyTerms,
    check_index,
    explain_element,
    term_bytes,
)
from engine.graph.budget import gib
from engine.graph.compiler import DEFAULT_MEMORY_LIMIT, Plan, place
from engine.graph.executor import Executor
from engine.graph.report import text_table

#: Terms shown in the text table unless --limit says otherwise, and the most it shows (a table
#: row takes about 0.6 KB while it is built; --json lists every term).
DEFAULT_LIMIT = 20
MAX_LIMIT = 100_000
#: The subcommand this module adds, and what it is doing (for the line that says memory ran
#: out).
COMMANDS = {"explain": "explaining"}
def add_parser(sub: Subparsers) -> None:
    """Add the ``explain`` subcommand to ``gradblocks``' subparsers."""
    p = sub.add_parser(
        "explain", help="list the terms of the sum that defines one element of a conv "
                        "block's output")
    p.add_argument("canvas", help="a .gbc.json canvas file")
    p.add_argument("node", metavar="NODE[.PORT]",
                   help="the conv block: its id, or its title if no other block has it")
    p.add_argument("index", nargs="+", metavar="I,J,K,L",
                   help="the output element, comma-separated in the output's own layout "
                        "(NCHW: N,C,H,W; the 3-D blocks: five entries, N,D,H,W,C or "
                        "N,C,D,H,W); spaces allowed")
    p.add_argument("--limit", type=_table_limit, default=DEFAULT_LIMIT, metavar="N",
                   help=f"terms shown in the table (default {DEFAULT_LIMIT}, at most "
                        f"{MAX_LIMIT}; --json lists all)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    p.add_argument("--memory-limit-gib", dest="memory_limit", type=memory_limit_argument,
                   metavar="GIB",
                   default=str(Fraction(DEFAULT_MEMORY_LIMIT, 2**30)),
                   help="refuse a run that would need more memory than this (default 2)")


def run(opts: argparse.Namespace, executor: Executor) -> int:
    return cmd_explain(opts, executor)


def protect_index(argv: list[str]) -> list[str]:
    """``explain`` arguments with a leading space before a word starting ``-<digit>``, so that
    argparse takes a negative index (``-1,2,0,3``) as the positional it is and the index parser
    reports it, instead of calling it an unknown option (argparse itself treats words
    containing a space as positionals)."""
    return [f" {a}" if re.fullmatch(r"-\d[\d\s,+-]*", a) else a for a in argv]


def _table_limit(text: str) -> int:
    """``--limit``: a count up to :data:`MAX_LIMIT` (argparse type)."""
    value = count_argument(text)
    if value > MAX_LIMIT:
        raise argparse.ArgumentTypeError(
            f"{value} is more than {MAX_LIMIT}, the most terms the table shows (--json lists "
            "every term)")
    return value


def parse_index(words: list[str]) -> tuple[int, ...]:
    """``I,J,K,L`` (one or more words; commas and spaces separate) as a tuple of ints >= 0,
    each of at most :data:`~engine.cli.common.MAX_INDEX_DIGITS` digits;
    :class:`~engine.cli.common.UsageError` saying what is wrong."""
    text = " ".join(words).strip()
    parts = [p for p in re.split(r"\s*,\s*|\s+", text)]
    where = f"index {shown(text, 60)}"
    if not text or any(p == "" for p in parts):
        raise UsageError(f"{where}: expected comma-separated integers such as 0,1,2,3")
    out = []
    for k, p in enumerate(parts):
        if not re.fullmatch(r"[+-]?[0-9]+", p):
            raise UsageError(f"{where}: {shown(p, 30)} is not an integer")
        if p.startswith("-") and p.strip("-0"):
            number = p if len(p) <= 30 else f"{p[:27]}... ({len(p)} characters)"
            raise UsageError(f"{where}: {number} is negative, indices must be >= 0")
        value = whole_number(p)
        if isinstance(value, str):
            raise UsageError(f"{where}: entry {k} is out of range: {value}")
        out.append(value)
    return tuple(out)


def _ancestors(plan: Plan, node_id: str) -> Plan:
    """``plan`` cut to ``node_id`` and the steps it depends on."""
    steps = {s.node_id: s for s in plan.steps}
    need, todo = set(), [node_id]
    while todo:
        n = todo.pop()
        if n not in need and n in steps:
            need.add(n)
            todo.extend(src for src, _ in steps[n].inputs.values())
    return replace(plan, steps=[s for s in plan.steps if s.node_id in need])


def _number(v: float) -> float | str:
    """A JSON number; NaN and infinities as the strings protobuf's JSON mapping uses."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def as_json(node_id: str, port: str, value: float, e: Explanation) -> dict:
    """The ``--json`` object (see the module docstring)."""
    a, b = e.factors
    products = e.products.tolist()
    terms = [
        {"factors": [{"port": a.port, "index": ai}, {"port": b.port, "index": bi}],
         "product": _number(p)}
        for ai, bi, p in zip(a.index.tolist(), b.index.tolist(), products, strict=True)
    ]
    return {"node": node_id, "port": port, "index": list(e.index), "value": _number(value),
            "sum": _number(e.sum), "padding_terms": e.padding_terms, "terms": terms}


def write_json(out: TextIO, node_id: str, port: str, value: float, e: Explanation) -> None:
    """Write the ``--json`` object to ``out`` as one line, :data:`CHUNK_TERMS` terms at a time:
    the same text as ``json.dumps(as_json(...))`` without ever holding all of it."""
    head = {"node": node_id, "port": port, "index": list(e.index), "value": _number(value),
            "sum": _number(e.sum), "padding_terms": e.padding_terms}
    out.write(json.dumps(head, allow_nan=False)[:-1] + ', "terms": [')
    a, b = e.factors
    # json.dumps's own layout, filled in directly (3x faster than dumping dicts); a finite
    # float is written by float.__repr__ there as here
    slots = ", ".join(["%d"] * a.index.shape[1])  # rank + 2 entries per index
    term = (f'{{"factors": [{{"port": {json.dumps(a.port)}, "index": [{slots}]}}, '
            f'{{"port": {json.dumps(b.port)}, "index": [{slots}]}}], "product": %s}}')
    products = e.products
    for start in range(0, e.terms, CHUNK_TERMS):
        part = slice(start, start + CHUNK_TERMS)
        rows = np.concatenate([a.index[part], b.index[part]], axis=1).tolist()
        values = [repr(v) if math.isfinite(v) else json.dumps(_number(v))
                  for v in products[part].tolist()]
        out.write((", " if start else "") + ", ".join(
            [term % (*row, v) for row, v in zip(rows, values, strict=True)]))
    out.write("]}\n")


def _scalar(v: object) -> str:
    """An array element as its dtype prints it (shortest text that reads back the same; a
    NumPy float64 is a float whose repr names its type)."""
    return str(v) if not isinstance(v, float) or isinstance(v, np.generic) else repr(v)


def as_text(label: str, node_id: str, port: str, value: SupportsFloat, e: Explanation,
            limit: int) -> str:
    """The human-readable explanation (see the module docstring)."""
    a, b = e.factors
    lines = [
        f"{label} ({node_id}).{port}{list(e.index)}: {e.dtype}, shape {list(e.output_shape)}",
        e.formula,
        f"  over {e.domain}",
        (f"{e.terms} term(s); {e.padding_terms} padding term(s) (they would read padding, "
         "contribute nothing and are not listed)"),
    ]
    shown_terms = min(limit, e.terms)
    if shown_terms:
        rows = [["#", a.port, "value", b.port, "value", "product"]]
        products = e.products
        for t in range(shown_terms):
            rows.append([str(t), str(a.index[t].tolist()), _scalar(a.values[t]),
                         str(b.index[t].tolist()), _scalar(b.values[t]),
                         f"{products[t]:.10g}"])
        lines.append(text_table(rows))
    if shown_terms < e.terms:
        lines.append(f"... {e.terms - shown_terms} more term(s) (--limit N shows N, --json all)")
    s = e.sum
    lines.append(f"sum of the {e.terms} term(s) (float64): {s!r}")
    lines.append(f"value of the block ({e.dtype}): {_scalar(value)}")
    diff = abs(s - float(value))
    if not math.isnan(diff):
        lines.append(f"|sum - value| = {diff:.3g}")
    return "\n".join(lines)


def cmd_explain(opts: argparse.Namespace, executor: Executor) -> int:
    """The ``explain`` subcommand; returns the exit status."""
    path = opts.canvas
    try:
        index = parse_index(opts.index)
    except UsageError as err:
        print_error(str(err))
        return 2
    compiled = compile_file(path, executor)
    if compiled is None:
        return 2
    canvas, plan = compiled
    try:
        node_id, port = resolve_node(canvas, opts.node)
        node = canvas.nodes[node_id]
        label = place(plan.label(node_id))
        if node.type not in OPS:
            raise UsageError(f"{label} ({node_id}) is {article(node.type)} block, not a conv block: "
                             f"explain takes {', '.join(OPS)}")
        outputs = get_spec(node.type).output_names()
        port = port or outputs[0]
        if port not in outputs:
            raise UsageError(f"{label} ({node_id}) has no output port {shown(port, 40)}; its "
                             f"output: {', '.join(outputs)}")
        try:
            index = check_index(index, plan.specs[(node_id, port)].shape)
        except InvalidArgumentError as err:
            raise UsageError(f"{label} ({node_id}).{port}: {err}") from None
    except UsageError as err:
        print_error(str(err))
        return 2
    result = executor.run(_ancestors(plan, node_id))
    if node_id in result.errors:  # its own error, or a "skipped" after the blocks that failed
        print_error(f"{shown_path(path)}: {label} failed:",
                    [f"{place(plan.label(n))}: {m}" for n, m in result.errors.items()])
        return 1
    step, form = next(s for s in plan.steps if s.node_id == node_id), OPS[node.type]
    inputs = {p: result.outputs[src] for p, src in step.inputs.items()}
    limit, per_term = getattr(opts, "memory_limit", DEFAULT_MEMORY_LIMIT), term_bytes(form.rank)
    try:
        e = explain_element(node.type, step.attrs, inputs, index, max_terms=limit // per_term)
    except TooManyTerms as err:
        print_error(f"{label} ({node_id}).{port}{list(index)} is a sum of {err.terms} terms: "
                    f"listing them needs about {gib(err.terms * per_term)}, more than the "
                    f"memory limit ({gib(limit)}; --memory-limit-gib raises it)")
        return 2
    except InvalidArgumentError as err:  # the block ran, so this is not expected
        print_error(f"{label}: cannot explain {shown(list(index))}: {err}")
        return 1
    value = np.asarray(result.outputs[(node_id, port)])[index]
    try:
        if opts.json:
            write_json(sys.stdout, node_id, port, float(value), e)
        else:
            say(as_text(label, node_id, port, value, e, opts.limit))
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped early (| head): say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0
