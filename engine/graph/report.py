"""The tables ``gradblocks check`` and ``run`` print, as rows, text and HTML: one definition for
the CLI and the notebook API (:mod:`engine.api`).

Rows are lists of strings, the header first. Blocks are named by label (:mod:`engine.graph.labels`),
the last column is the node id. In HTML every cell is escaped (titles and messages are user
text).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from blocks.registry import get_spec
from engine.base.dtypes import dtype_name
from engine.base.names import escaped
from engine.graph.canvas import CanvasError
from engine.graph.compiler import Plan, place
from engine.graph.executor import RunResult
from engine.graph.labels import block_labels
from engine.view.stats import SMALL_TENSOR, format_value, min_max_mean


def check_rows(plan: Plan) -> list[list[str]]:
    """block, type, port, shape, dtype, id of every output of the plan's steps."""
    rows = [["block", "type", "port", "shape", "dtype", "id"]]
    for step in plan.steps:
        for port in step.spec.output_names():
            ts = plan.specs[(step.node_id, port)]
            rows.append([plan.label(step.node_id), step.spec.type_id, port,
                         str(list(ts.shape)), ts.dtype, step.node_id])
    return rows


def _stats(a: np.ndarray, seen: dict[tuple[np.dtype, bytes], tuple[str, str, str]]
           ) -> tuple[str, str, str]:
    """min, max, mean over the finite values (as the app's viewer shows them), as text.

    ``seen`` holds the text of the small tensors (at most :data:`SMALL_TENSOR` elements)
    already done, by dtype and bytes: the figures depend on nothing else."""
    key = (a.dtype, a.tobytes()) if a.size <= SMALL_TENSOR else None
    text = seen.get(key) if key is not None else None
    if text is None:
        lo, hi, mean = min_max_mean(a)
        text = (format_value(lo), format_value(hi), format_value(mean))
        if key is not None:
            seen[key] = text
    return text


def verdict(value: np.ndarray) -> str:
    """PASS or FAIL for a check block's bool verdict (:attr:`blocks.spec.BlockSpec.verdict`)."""
    return "PASS" if bool(np.all(value)) else "FAIL"


def run_rows(plan: Plan, result: RunResult) -> list[list[str]]:
    """block, type, port, shape, dtype, min, max, mean, [verdict], ms, id of every output the
    run made (the verdict column only when the plan has check blocks)."""
    checks = any(step.spec.verdict for step in plan.steps)
    seen: dict[tuple[np.dtype, bytes], tuple[str, str, str]] = {}
    rows = [["block", "type", "port", "shape", "dtype", "min", "max", "mean",
             *(["verdict"] if checks else []), "ms", "id"]]
    for step in plan.steps:
        for port in step.spec.output_names():
            value = result.outputs.get((step.node_id, port))
            if value is None:
                continue
            ms = f"{1e3 * result.times.get(step.node_id, 0.0):.2f}"
            mark = [verdict(value) if port == step.spec.verdict else ""] if checks else []
            array = np.asarray(value)
            rows.append([plan.label(step.node_id), step.spec.type_id, port,
                         str(list(array.shape)), dtype_name(array.dtype),
                         *_stats(array, seen), *mark, ms, step.node_id])
    return rows


def problem_lines(plan: Plan) -> list[str]:
    """Every problem of the plan, one line each (``label.attr: message``)."""
    return [str(e) for errs in plan.errors.values() for e in errs]


def canvas_error_lines(err: CanvasError, plan: Plan | None = None) -> list[str]:
    """Every problem of a canvas that did not load, one line each: a block attribute's named
    as the compiler names it (``dW.strides: ...``, :func:`engine.graph.compiler.place`), any
    other by its JSON path (``$.edges[0].src: ...``).

    ``plan``, the compiled :attr:`CanvasError.canvas` (only meaningful when every problem is a
    block attribute's), adds the compiler's problems of the blocks the loader found nothing
    wrong with (an unknown attribute is dropped: its block is read as it runs), in blocks
    whose inputs come from such blocks only: every problem of the file at once."""
    labels = block_labels(err.canvas) if err.canvas is not None else {}
    lines, bad = [], set()
    for path, message in err.problems:
        where = err.places.get(path)
        if where is None or err.canvas is None:  # places come with the canvas they point in
            lines.append(f"{path}: {message}" if path else message)
        else:
            node_id, attr = where
            if any(a.name == attr for a in get_spec(err.canvas.nodes[node_id].type).attrs):
                bad.add(node_id)  # read with its default instead: what follows may be off
            lines.append(f"{place(labels.get(node_id, node_id), attr)}: {message}")
    if plan is not None and err.canvas is not None and attribute_problems_only(err):
        for node_id, errs in plan.errors.items():
            if node_id not in bad and not bad & err.canvas.upstream(node_id):
                lines += [str(e) for e in errs]
    return lines


def file_problem(err: CanvasError) -> str | None:
    """The one problem of a file that could not be read as a canvas at all (missing, a folder,
    too large, not UTF-8, not JSON: the whole document, ``$``), said as ``cannot open FILE:
    ...`` rather than as a list of the canvas's problems; None for any other error."""
    if len(err.problems) == 1 and err.problems[0][0] == "$":
        return err.problems[0][1]
    return None


def attribute_problems_only(err: CanvasError) -> bool:
    """True when every problem of ``err`` is a block attribute's: the canvas read is whole
    (every block, every wire) but for those values, so compiling it finds the other problems."""
    return err.canvas is not None and all(path in err.places for path, _ in err.problems)


def text_table(rows: list[list[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart; each cell :func:`escaped`
    (a title may hold a bidi override, a layer name read from a file anything)."""
    rows = [[escaped(c) for c in r] for r in rows]
    if any(len(r) != len(rows[0]) for r in rows):  # a ragged table: the checks below raise
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                         for r in rows)
    widths = [max(map(len, column)) for column in zip(*rows)]
    return "\n".join(["  ".join(map(str.ljust, r, widths)).rstrip() for r in rows])


def html_table(rows: list[list[str]], caption: str = "",
               notes: Sequence[str] = ()) -> str:
    """An HTML table of ``rows`` (header first), an optional caption and lines below it; all
    text escaped."""
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in rows[0]) if rows else ""
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>"
                   for r in rows[1:])
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    table = f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" \
        if rows else ""
    below = "".join(f"<div>{esc(n)}</div>" for n in notes)
    return table + below
