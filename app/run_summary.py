"""What a run's outcome reads as: the summary line the log and the progress bar end on
(``"3 ok, 1 skipped (invalid: dW), 0 failed"``), the check blocks whose verdict is FAIL, and
how many output elements each block makes (auto-run scales a block's last time by it)."""

from __future__ import annotations

from engine.graph.labels import block_labels, label_list
from engine.graph.report import verdict


def element_counts(plan) -> dict[str, int]:
    """Node -> how many elements its outputs have in ``plan``."""
    counts: dict[str, int] = {}
    for (nid, _port), spec in (plan.specs.items() if plan is not None else ()):
        n = 1
        for d in spec.shape:
            n *= int(d)
        counts[nid] = counts.get(nid, 0) + n
    return counts


def run_summary(result, plan, canvas) -> str:
    """``"3 ok, 1 skipped (invalid: dW), 0 failed"``: blocks that ran or came from the cache,
    blocks not run (invalid in the plan, or after a failed input), and blocks that failed, named
    by title (:mod:`engine.graph.labels`; the id where a node is gone)."""
    labels = block_labels(canvas)
    ok = [n for n in result.times if n not in result.errors]
    after_failure = [n for n, m in result.errors.items() if m.startswith("skipped")]
    failed = [n for n in result.errors if n not in after_failure]
    invalid = list(plan.errors) if plan is not None else []
    parts = []
    if invalid:
        parts.append(f"invalid: {label_list(labels, invalid)}")
    if after_failure:
        parts.append(f"after a failed input: {label_list(labels, after_failure)}")
    skipped = len(invalid) + len(after_failure)
    text = f"{len(ok)} ok, {skipped} skipped" + (f" ({'; '.join(parts)})" if parts else "")
    text += f", {len(failed)} failed" + (f" ({label_list(labels, failed)})" if failed else "")
    verdicts = failed_checks(result, plan)
    if verdicts:  # a check that ran and says FAIL is no failed run, but must not read as fine
        text += f"; {len(verdicts)} check(s) FAIL ({label_list(labels, verdicts)})"
    return text


def failed_checks(result, plan) -> list[str]:
    """The check blocks (:attr:`blocks.spec.BlockSpec.verdict`) whose verdict this run is
    FAIL (:func:`engine.graph.report.verdict`)."""
    out = []
    for step in plan.steps if plan is not None else ():
        value = result.outputs.get((step.node_id, step.spec.verdict)) if step.spec.verdict \
            else None
        if value is not None and verdict(value) == "FAIL":
            out.append(step.node_id)
    return out
