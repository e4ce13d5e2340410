"""A sweep: run the cases (:mod:`engine.verify.cases`) through a :class:`~engine.verify.runner.
Pool`, judge each (:mod:`engine.verify.verdicts`), group the failures, shrink one
representative of each group (:mod:`engine.verify.shrink`), try it on structured values, and
diagnose it.

Groups: :func:`engine.verify.report.group_key` of each failure. A failure whose verdict names a
mistake (:data:`DIAGNOSED`) needs a diagnosis for its key; those are computed for a sample of at
most :data:`DIAGNOSED_PER_VERDICT` failures per verdict (every failure when there are no more;
else spread from the smallest up to :data:`SAMPLE_ELEMENTS` elements), and the report says how
many were (:attr:`~engine.verify.report.VerifyReport.diagnosed`). The shrink of a group keeps
its key (the same verdict and mistake id, or the same refusal). Then the minimal case of a
wrong-values or non-finite group runs :data:`RERUNS` more times before its mistake is named: if
an output differs from the first, or holds values no order of the terms gives
(:func:`engine.verify.unwritten.unwritten_memory`), the group is ``nondeterministic`` and its
diagnosis :data:`UNWRITTEN` with no mistake id.

Repeats: catalogue cases, and every :data:`RECHECK_EVERY`-th random case, run twice (the
``nondeterministic`` check); so do the shrinking runs of a nondeterministic failure. A class of
cases that timed out :data:`MAX_CLASS_TIMEOUTS` times is not tried again in the sweep; a
timeout is not shrunk (each try could cost the case timeout). ``max_failures`` stops sending
cases once that many have failed (cases already running finish: up to ``jobs - 1`` more).

Cancel: with ``cancel`` set (a :class:`threading.Event`), or inside an
:func:`engine.base.cancel.scope` whose event is set, the sweep raises
:class:`engine.base.cancel.Cancelled` at once (the running cases' worker processes are killed,
the others stopped; a callable run in this process finishes its running case first).
"""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from engine.base import cancel as cancelling
from engine.verify import cases as case_gen
from engine.verify.conventions import Call, from_tf_layout, reference, to_tf_layout
from engine.verify.conventions import bound as bound_of
from engine.verify.diagnosis import Diagnosis, diagnose_failure
from engine.verify.report import Failure, Minimal, VerifyReport, group_key
from engine.verify.runner import Pool
from engine.verify.shrink import key as key_of
from engine.verify.shrink import shrink
from engine.verify.support import Support
from engine.verify.unwritten import unwritten_memory
from engine.verify.values import Case, array_sizes, call
from engine.verify.verdicts import FAILURES, Verdict, judge

RECHECK_EVERY = 4
MAX_CLASS_TIMEOUTS = 2
#: Failures of one verdict diagnosed to group them (the smallest, then larger ones up to
#: SAMPLE_ELEMENTS elements).
DIAGNOSED_PER_VERDICT = 16
SAMPLE_ELEMENTS = 4000
#: Verdicts whose diagnosis names a mistake: their groups and shrinks keep the mistake's id.
DIAGNOSED = ("wrong_values", "wrong_shape", "nonfinite")
#: Runs of a wrong-values or non-finite minimal case after the shrink, before a mistake is
#: named (each output must equal the first, bit for bit).
RERUNS = 5
UNWRITTEN = "reads memory it never wrote"


@dataclass
class _Prepared:
    case: Case
    call: Call
    ref: np.ndarray
    bound: np.ndarray


@dataclass
class Evaluator:
    """Runs cases on a pool and judges them."""

    pool: Pool
    timeouts: dict[str, int] = field(default_factory=dict)

    def prepare(self, case: Case) -> _Prepared:
        c = call(case)
        return _Prepared(case, c, from_tf_layout(case.op, case.convention, reference(c)),
                         from_tf_layout(case.op, case.convention, bound_of(c)))

    def many(self, cases: Iterable[tuple[Case, bool]]) -> Iterator[tuple[_Prepared, Verdict,
                                                                         np.ndarray | None]]:
        prepared: dict[int, _Prepared] = {}

        def jobs():
            for i, (case, repeat) in enumerate(cases):
                p = self.prepare(case)
                prepared[i] = p
                meta = {"op": case.op, "convention": case.convention, "dtype": case.dtype}
                yield i, p.call.kwargs, case.memory, repeat, meta

        def skip(i: int) -> bool:
            skipped = self.timeouts.get(prepared[i].case.edge, 0) >= MAX_CLASS_TIMEOUTS
            if skipped:
                del prepared[i]
            return skipped

        for i, outcome in self.pool.run(jobs(), skip):
            p = prepared.pop(i)
            v = judge(outcome.kind, outcome.first, outcome.second, p.ref, p.bound,
                      p.case.dtype)
            if v.verdict == "timeout":
                self.timeouts[p.case.edge] = self.timeouts.get(p.case.edge, 0) + 1
            got = outcome.first if outcome.kind == "ok" else None
            yield p, v, got

    def one(self, case: Case, repeat: bool = False):
        return next(iter(self.many([(case, repeat)])), None)


def _failure(p: _Prepared, v: Verdict, got) -> Failure:
    return Failure(p.case, v, p.call, got, p.ref)


def sweep(spec: tuple, op: str, convention: str, dtypes: list[str], total: int, seed: int,
          jobs: int, timeout: float, support: Support, progress=None,
          target_text: str = "", cancel: threading.Event | None = None,
          max_failures: int | None = None, memory: int | None = None) -> VerifyReport:
    """Run the whole sweep; ``progress(done, total)`` is called after each case; ``cancel``
    set stops it (:class:`~engine.base.cancel.Cancelled`, see the module docstring)."""
    start = time.monotonic()
    report = VerifyReport(op, convention, dtypes, target_text, seed=seed, total=total,
                          spec_kind=spec[0], path=spec[3][0] if spec[0] == "python" else "",
                          max_failures=max_failures, case_timeout=timeout,
                          excluded=case_gen.excluded_classes(op, convention, support))
    scope = cancelling.scope(cancel) if cancel is not None else contextlib.nullcontext()
    with scope, Pool(spec, jobs, timeout, memory) as pool:  # Cancelled stops the workers first
        ev = Evaluator(pool)
        plan: Iterator[tuple[Case, bool]] = ((c, c.edge != "random" or i % RECHECK_EVERY == 0)
                for i, c in enumerate(case_gen.generate(op, convention, dtypes, total, seed,
                                                        support)))
        if max_failures is not None:
            plan = itertools.takewhile(lambda _: report.failed < max_failures, plan)
        for p, v, got in ev.many(plan):
            report.count(p.case.edge, v.verdict)
            if v.verdict in FAILURES:
                report.failures.append(_failure(p, v, got))
                report.found_after.setdefault(v.verdict, time.monotonic() - start)
            if progress is not None:
                progress(report.cases, total)
            cancelling.checkpoint()
        for key, members in _groups(report).items():
            m = _minimize(ev, key, members, support)
            m.count = len(members)
            report.minimal_failures.append(_confirm(ev, m))
    report.minimal_failures.sort(key=lambda m: (FAILURES.index(m.failure.verdict.verdict),
                                                -m.count, key_of(m.failure.case)))
    seen: dict[str, int] = {}
    for m in report.minimal_failures:
        name = m.failure.verdict.verdict
        seen[name] = seen.get(name, 0) + 1
        m.stem = f"minimal_{name}" + (f"_{seen[name]}" if seen[name] > 1 else "")
    report.seconds = time.monotonic() - start
    return report


def _sample(failures: list[Failure]) -> list[Failure]:
    """At most DIAGNOSED_PER_VERDICT of ``failures`` (sorted smallest first): all of them,
    or a spread from the smallest up to the largest of SAMPLE_ELEMENTS elements or fewer."""
    if len(failures) <= DIAGNOSED_PER_VERDICT:
        return failures
    small = [f for f in failures if sum(array_sizes(f.case)) <= SAMPLE_ELEMENTS] or failures[:1]
    step = max(1, len(small) // (DIAGNOSED_PER_VERDICT - 1))
    picked = small[::step][:DIAGNOSED_PER_VERDICT - 1]
    if small[-1] is not picked[-1]:
        picked.append(small[-1])
    return picked


def _diagnosis(f: Failure) -> Diagnosis:
    return diagnose_failure(f, to_tf_layout)


def _groups(report: VerifyReport) -> dict[tuple[str, str],
                                          list[tuple[Failure, Diagnosis | None]]]:
    """The failures (of the diagnosed sample) by :func:`group_key`, each group's smallest
    first; records the sample sizes in ``report.diagnosed``. A failure whose diagnosis says
    other mistakes give the same numbers goes to the one most failures are named with."""
    groups: dict[tuple[str, str], list[tuple[Failure, Diagnosis | None]]] = {}
    for verdict in FAILURES:
        failures = sorted((f for f in report.failures if f.verdict.verdict == verdict),
                          key=lambda f: key_of(f.case))
        if verdict in DIAGNOSED:
            picked = _sample(failures)
            if len(picked) < len(failures):
                report.diagnosed[verdict] = len(picked)
            found: list[tuple[Failure, Diagnosis | None]] = [(f, _diagnosis(f)) for f in picked]
        else:
            found = [(f, None) for f in failures]
        votes: dict[str, int] = {}
        for _, d in found:
            for c in _candidates(d):
                votes[c] = votes.get(c, 0) + 1
        for f, d in found:
            if d is not None and d.id:  # the mistake most failures it matches were named
                named = d.id
                d = replace(d, id=max(_candidates(d), key=lambda c: (votes[c], c == named)))
            groups.setdefault(group_key(f, d), []).append((f, d))
    return groups


def _candidates(d: Diagnosis | None) -> set[str]:
    """The mistake ids ``d`` names: its own and those it says are indistinguishable here."""
    if d is None or not d.id:
        return set()
    also = re.search(r"indistinguishable here from (.*)", d.text)
    return {d.id, *(re.findall(r"(?:^|; )(\w+) \(", also.group(1)) if also else [])}


def _minimize(ev: Evaluator, want: tuple[str, str],
              members: list[tuple[Failure, Diagnosis | None]], support: Support) -> Minimal:
    """Shrink the smallest failure of a group while it fails the same way: the same
    :func:`group_key` (at the smallest sizes several mistakes can give the same numbers: the
    shrink keeps the group's)."""
    verdict = want[0]
    first, first_diagnosis = members[0]
    repeat = verdict == "nondeterministic"
    tries = 3 if repeat else 1
    best: dict = {"failure": first, "diagnosis": first_diagnosis}

    def still_fails(case: Case) -> bool:
        cancelling.checkpoint()
        for _ in range(tries):
            got = ev.one(case, repeat)
            if got is not None and got[1].verdict == verdict:
                failure = _failure(*got)
                d = _diagnosis(failure) if verdict in DIAGNOSED else None
                if group_key(failure, d) != want:
                    return False
                best["failure"], best["diagnosis"] = failure, d
                return True
        return False

    if verdict != "timeout":
        case, _ = shrink(first.case, still_fails, support)
        structured = case.with_(values="structured")
        if not still_fails(structured) and best["failure"].case != case:
            still_fails(case)  # the failure object of the minimal case itself
    failure = best["failure"]
    diagnosis: Diagnosis = best["diagnosis"] or _diagnosis(failure)
    return Minimal(failure, diagnosis)


def _confirm(ev: Evaluator, m: Minimal) -> Minimal:
    """``m`` itself when its minimal case gives the same output RERUNS more times and no value
    the reference cannot produce; else the group as ``nondeterministic`` (see the module
    docstring). Groups of other verdicts are returned as they are."""
    f = m.failure
    if f.verdict.verdict not in ("wrong_values", "nonfinite") or f.got is None:
        return m
    outputs = [r[2] for r in (ev.one(f.case) for _ in range(RERUNS))
               if r is not None and r[2] is not None]  # a rerun that timed out tells nothing
    changed = sum(o.shape != f.got.shape or not np.array_equal(o, f.got, equal_nan=True)
                  for o in outputs)
    if changed:
        why = f"{changed} of {RERUNS} reruns gave a different output"
    elif unwritten_memory(f.call.tf_op, f.call.tf_args, f.got):
        why = "it returned values no sum of the terms gives"
    else:
        return m
    text = f"{UNWRITTEN}: {why} ({f.verdict.message})"
    verdict = Verdict("nondeterministic", f.verdict.max_abs_error, f.verdict.max_rel_error,
                      text)
    return replace(m, failure=replace(f, verdict=verdict), diagnosis=Diagnosis(None, text))
