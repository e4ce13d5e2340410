"""A sweep: run the cases (:mod:`engine.verify.cases`) through a :class:`~engine.verify.runner.
Pool`, judge each (:mod:`engine.verify.verdicts`), shrink the smallest failure of each verdict
(:mod:`engine.verify.shrink`), try it on structured values, and diagnose it.

Repeats: catalogue cases, and every :data:`RECHECK_EVERY`-th random case, run twice (the
``nondeterministic`` check); so do the shrinking runs of a nondeterministic failure. A class of
cases that timed out :data:`MAX_CLASS_TIMEOUTS` times is not tried again in the sweep; a
timeout is not shrunk (each try could cost the case timeout).

Cancel: with ``cancel`` set (a :class:`threading.Event`), or inside an
:func:`engine.base.cancel.scope` whose event is set, the sweep raises
:class:`engine.base.cancel.Cancelled` at once (the running cases' worker processes are killed,
the others stopped; a callable run in this process finishes its running case first).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from engine.base import cancel as cancelling
from engine.verify import cases as case_gen
from engine.verify.conventions import Call, from_tf_layout, reference, to_tf_layout
from engine.verify.conventions import bound as bound_of
from engine.verify.diagnosis import Diagnosis, diagnose_failure
from engine.verify.report import Failure, Minimal, VerifyReport
from engine.verify.runner import Pool
from engine.verify.shrink import elements, key, shrink
from engine.verify.support import Support
from engine.verify.values import Case, call
from engine.verify.verdicts import FAILURES, Verdict, judge

RECHECK_EVERY = 4
MAX_CLASS_TIMEOUTS = 2


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
          target_text: str = "", cancel: threading.Event | None = None) -> VerifyReport:
    """Run the whole sweep; ``progress(done, total)`` is called after each case; ``cancel``
    set stops it (:class:`~engine.base.cancel.Cancelled`, see the module docstring)."""
    start = time.monotonic()
    report = VerifyReport(op, convention, dtypes, target_text, seed=seed, total=total,
                          spec_kind=spec[0], path=spec[3][0] if spec[0] == "python" else "")
    scope = cancelling.scope(cancel) if cancel is not None else contextlib.nullcontext()
    with scope, Pool(spec, jobs, timeout) as pool:  # Cancelled stops the workers first
        ev = Evaluator(pool)
        plan = ((c, c.edge != "random" or i % RECHECK_EVERY == 0)
                for i, c in enumerate(case_gen.generate(op, convention, dtypes, total, seed,
                                                        support)))
        for p, v, got in ev.many(plan):
            report.count(p.case.edge, v.verdict)
            if v.verdict in FAILURES:
                report.failures.append(_failure(p, v, got))
                report.found_after.setdefault(v.verdict, time.monotonic() - start)
            if progress is not None:
                progress(report.cases, total)
            cancelling.checkpoint()
        for verdict in sorted({f.verdict.verdict for f in report.failures},
                              key=FAILURES.index):
            report.minimal_failures.append(_minimize(ev, report, verdict, support))
    report.minimal_failures.sort(key=lambda m: key(m.failure.case))
    report.seconds = time.monotonic() - start
    return report


#: Failures diagnosed to find the mistake a shrink keeps (the smallest, then larger ones up to
#: CONSENSUS_ELEMENTS elements).
CONSENSUS_FAILURES = 7
CONSENSUS_ELEMENTS = 4000
#: Verdicts whose diagnosis names a mistake: their shrinking keeps the mistake's id.
DIAGNOSED = ("wrong_values", "wrong_shape", "nonfinite")


def _minimize(ev: Evaluator, report: VerifyReport, verdict: str, support: Support) -> Minimal:
    """Shrink the smallest failure of ``verdict`` while it fails the same way: the same verdict
    and, when the first failure's diagnosis names a mistake, the same mistake (at the smallest
    sizes several mistakes can give the same numbers)."""
    failures = sorted((f for f in report.failures if f.verdict.verdict == verdict),
                      key=lambda f: key(f.case))
    repeat = verdict == "nondeterministic"
    tries = 3 if repeat else 1
    first, first_diagnosis = failures[0], diagnose_failure(failures[0], to_tf_layout)
    want: str | None = None
    if verdict in DIAGNOSED:
        first, first_diagnosis, want = _consensus(failures)
    best: dict = {"failure": first, "diagnosis": first_diagnosis}

    def still_fails(case: Case) -> bool:
        cancelling.checkpoint()
        for _ in range(tries):
            got = ev.one(case, repeat)
            if got is not None and got[1].verdict == verdict:
                failure = _failure(*got)
                d = diagnose_failure(failure, to_tf_layout) if verdict in DIAGNOSED else None
                if verdict in DIAGNOSED and (d is None or d.id != want):
                    return False
                best["failure"], best["diagnosis"] = failure, d
                return True
        return False

    calls = 0
    if verdict != "timeout":
        case, calls = shrink(first.case, still_fails, support)
        structured = case.with_(values="structured")
        if not still_fails(structured) and best["failure"].case != case:
            still_fails(case)  # the failure object of the minimal case itself
    failure = best["failure"]
    diagnosis: Diagnosis = best["diagnosis"] or diagnose_failure(failure, to_tf_layout)
    return Minimal(failure, diagnosis, calls)


def _consensus(failures: list[Failure]) -> tuple[Failure, Diagnosis, str | None]:
    """The mistake most of a few failures (spread from the smallest up) are diagnosed with (None:
    no known mistake), ties going to the larger case (more elements tell mistakes apart), and
    the smallest failure with it."""
    small = [f for f in failures if elements(f.case) <= CONSENSUS_ELEMENTS] or failures[:1]
    step = max(1, len(small) // (CONSENSUS_FAILURES - 1))
    picked = small[::step][:CONSENSUS_FAILURES - 1]
    if small[-1] is not picked[-1]:
        picked.append(small[-1])
    found = [(f, diagnose_failure(f, to_tf_layout)) for f in picked]
    votes: dict[str | None, int] = {}
    for _, d in found:
        votes[d.id] = votes.get(d.id, 0) + 1
    top = max(votes.values())
    want = next(d.id for _, d in reversed(found) if votes[d.id] == top)
    first, diagnosis = next((f, d) for f, d in found if d.id == want)
    return first, diagnosis, want
