"""The report of a sweep: the terminal summary, the JSON of ``--json`` and the notebook object.

Failures come in *groups*, one per :func:`group_key` (the verdict and the diagnosis's mistake
id, or for ``raised`` the message with its numbers taken out, so one refusal is shown once),
each with its minimal case, diagnosis and one-line reproduction
(:mod:`engine.verify.command_line`), listed in the order of
:data:`engine.verify.verdicts.FAILURES` (most severe first), then the largest group first.

JSON (top level): ``ok``, ``op``, ``convention``, ``cases`` (tried), ``failed``,
``unsupported``, ``failures`` (each ``case``, ``verdict``, ``max_abs_error``, ``max_rel_error``,
``message``), ``groups`` (each ``verdict``, ``count``, ``minimal``, ``diagnosis``,
``reproduce``), ``diagnosed`` (verdict -> failures grouped, where the sweep diagnosed a sample),
``minimal`` and ``diagnosis`` (``{"id", "text"}``): the first group's (null when every case
passed). A case holds every argument under the convention's names (arrays as
``{"shape", "dtype"}``, the rest as JSON values) and ``dtype``.
"""

from __future__ import annotations

import functools
import html
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.verify import command_line
from engine.verify.conventions import Call
from engine.verify.diagnose import refusal_key
from engine.verify.values import Case, array_sizes
from engine.verify.verdicts import Verdict


@dataclass
class Failure:
    case: Case
    verdict: Verdict
    call: Call
    got: np.ndarray | None
    reference: np.ndarray

    def case_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in self.call.kwargs.items():
            if isinstance(v, np.ndarray):
                out[k] = {"shape": list(v.shape), "dtype": self.case.dtype}
            else:
                out[k] = list(v) if isinstance(v, tuple) else v
        out["dtype"] = self.case.dtype
        return out

    def to_json(self) -> dict[str, Any]:
        message = self.verdict.message
        if self.case.memory != "contiguous":
            message += f" ({self.case.memory} inputs)"
        return {"case": self.case_json(), "verdict": self.verdict.verdict,
                "max_abs_error": _number(self.verdict.max_abs_error),
                "max_rel_error": _number(self.verdict.max_rel_error), "message": message}


def _number(v: float | None) -> float | str | None:
    """JSON has no inf or NaN: those are written as the strings "inf", "nan"."""
    if v is None or math.isfinite(v):
        return v
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def group_key(failure: Failure, diagnosis: Any) -> tuple[str, str]:
    """``(verdict, what)``: for ``raised`` the message with its numbers taken out
    (:func:`engine.verify.diagnose.refusal_key`: one refusal, whatever the sizes), else the
    diagnosis's mistake id when it names one, else ``""``."""
    v = failure.verdict
    if v.verdict == "raised":
        return v.verdict, refusal_key(v.message)
    return v.verdict, diagnosis.id if diagnosis is not None and diagnosis.id else ""


@dataclass
class Minimal:
    """A group of failures: its minimal case and diagnosis, the failures it holds (``count``)
    and its ``stem`` (unique in the report: file names of ``--repro`` and IN.npz)."""

    failure: Failure
    diagnosis: Any  # engine.verify.diagnosis.Diagnosis
    count: int = 1
    stem: str = ""

    @property
    def size(self) -> int:
        return sum(array_sizes(self.failure.case))


#: What the class table says of an edge class the ``--support`` spec excludes.
EXCLUDED = "excluded by --support"


@dataclass
class VerifyReport:
    """What :func:`engine.verify.verify` returns (``ok``, ``failures``, ``minimal``,
    ``diagnosis``; ``str()`` the terminal summary, ``_repr_html_`` the notebook table)."""

    op: str
    convention: str
    dtypes: list[str]
    target: str = ""
    seed: int = 0
    total: int = 0
    cases: int = 0
    unsupported: int = 0
    failures: list[Failure] = field(default_factory=list)
    minimal_failures: list[Minimal] = field(default_factory=list)
    classes: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Edge classes the ``--support`` spec excludes (not tried: no case it allows).
    excluded: tuple[str, ...] = ()
    found_after: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    spec_kind: str = ""  # python, cmd, serve or inprocess
    path: str = ""  # the folder a python target was imported from
    #: verdict -> failures diagnosed and grouped, where that is fewer than the verdict's
    #: failures (:data:`engine.verify.sweep.DIAGNOSED_PER_VERDICT`).
    diagnosed: dict[str, int] = field(default_factory=dict)
    max_failures: int | None = None
    case_timeout: float = 0.0
    #: where each group's IN.npz is (--cmd): written by write_inputs, or by --repro there
    inputs_folder: str = ""

    def count(self, edge: str, verdict: str) -> None:
        self.cases += 1
        self.unsupported += verdict == "unsupported"
        row = self.classes.setdefault(edge, {"tried": 0, "passed": 0, "unsupported": 0})
        row["tried"] += 1
        row["passed"] += verdict == "pass"
        row["unsupported"] += verdict == "unsupported"

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def minimal(self) -> Failure | None:
        return self.minimal_failures[0].failure if self.minimal_failures else None

    @property
    def diagnosis(self):
        return self.minimal_failures[0].diagnosis if self.minimal_failures else None

    @property
    def stopped(self) -> bool:
        """Whether ``max_failures`` ended the search before every case was tried."""
        return self.max_failures is not None and self.failed >= self.max_failures \
            and self.cases < self.total

    def inputs_path(self, m: Minimal) -> str:
        """Where group ``m``'s inputs are written: ``STEM.in.npz`` (``--cmd``) or the folder
        ``STEM.in`` of one ``NAME.npy`` per argument (``--cmd-serve``); '' when not written."""
        suffix = ".in" if self.spec_kind == "serve" else ".in.npz"
        return os.path.join(self.inputs_folder, m.stem + suffix) if self.inputs_folder else ""

    def reproduce(self, m: Minimal) -> str:
        """The one-line reproduction of group ``m`` (:mod:`engine.verify.command_line`)."""
        if self.spec_kind == "cmd":
            return command_line.cmd_command(self.target, self.inputs_path(m) or None)
        if self.spec_kind == "serve":
            return command_line.serve_command(self.target, self.inputs_path(m) or None)
        if self.spec_kind == "inprocess":
            return command_line.inprocess_code(m.failure, self.target)
        return command_line.python_command(m.failure, self.target, self.path)

    def write_inputs(self, folder: str) -> list[str]:
        """``--cmd`` and ``--cmd-serve``: write each group's inputs (the exact IN.npz its
        command was given, or the serve protocol's IN folder) into the existing ``folder``, so
        that :meth:`reproduce` names them; the paths."""
        from engine.base.atomic import write_atomically
        from engine.verify.case_io import npz_arguments

        self.inputs_folder = os.path.abspath(folder)
        written = []
        for m in self.minimal_failures:
            c = m.failure.case
            members = npz_arguments(m.failure.call.kwargs, {
                "op": c.op, "convention": c.convention, "dtype": c.dtype})
            where = self.inputs_path(m)
            if self.spec_kind == "serve":
                os.makedirs(where, exist_ok=True)
                for name, value in members.items():
                    write_atomically(os.path.join(where, f"{name}.npy"),
                                     functools.partial(np.save, arr=value, allow_pickle=False))
            else:
                arrays: dict[str, Any] = members  # Any: np.savez's ** takes arrays
                write_atomically(where, functools.partial(np.savez, **arrays))
            written.append(where)
        return written

    def group_json(self, m: Minimal) -> dict[str, Any]:
        d = m.diagnosis
        return {"verdict": m.failure.verdict.verdict, "count": m.count,
                "minimal": m.failure.to_json(), "diagnosis": {"id": d.id, "text": d.text},
                "reproduce": self.reproduce(m)}

    def to_json(self) -> dict[str, Any]:
        groups = [self.group_json(m) for m in self.minimal_failures]
        first = groups[0] if groups else {"minimal": None, "diagnosis": None}
        return {"ok": self.ok, "op": self.op, "convention": self.convention,
                "cases": self.cases, "failed": self.failed, "unsupported": self.unsupported,
                "failures": [f.to_json() for f in self.failures], "groups": groups,
                "diagnosed": self.diagnosed, "excluded": list(self.excluded),
                "minimal": first["minimal"],
                "diagnosis": first["diagnosis"]}

    def json_text(self) -> str:
        return json.dumps(self.to_json(), indent=1, allow_nan=False) + "\n"

    def _head(self) -> str:
        state = "ok" if self.ok else f"{self.failed} failed"
        if self.stopped:
            state += f" (stopped after {self.max_failures} failing case(s))"
        return (f"verify {self.target or 'fn'} as {self.convention} {self.op} "
                f"({', '.join(self.dtypes)}): {self.cases} case(s), {state}, "
                f"{self.unsupported} unsupported ({self.seconds:.1f} s, seed {self.seed})")

    def class_rows(self) -> list[list[str]]:
        return [[name, f"{r['passed']}/{r['tried']}",
                 str(r["unsupported"]) if r["unsupported"] else ""]
                for name, r in self.classes.items()] + [
                    [name, "-", EXCLUDED] for name in self.excluded]

    def __str__(self) -> str:
        lines = [self._head(), "", "edge class                  passed   unsupported"]
        lines += [f"  {a:<26}{b:<9}{c}" for a, b, c in self.class_rows()]
        by_verdict: dict[str, int] = {}
        for f in self.failures:
            by_verdict[f.verdict.verdict] = by_verdict.get(f.verdict.verdict, 0) + 1
        if by_verdict:
            lines += ["", "failures: " + ", ".join(f"{n} {v}" for v, n in by_verdict.items())
                      + f"; {len(self.minimal_failures)} distinct group(s)"]
            lines += [f"  {n} of the {by_verdict.get(v, n)} {v} failures were diagnosed and "
                      "grouped" for v, n in self.diagnosed.items()]
        for m in self.minimal_failures:
            lines += ["", *self.group_lines(m)]
        return "\n".join(lines)

    def group_lines(self, m: Minimal) -> list[str]:
        """A group as the terminal shows it: the minimal case, its diagnosis, the
        reproduction."""
        f = m.failure
        return [(f"minimal {f.verdict.verdict} ({m.size} elements, {f.case.values} values, "
                 f"edge class {f.case.edge}; {m.count} failing case(s) in this group): "
                 f"{f.verdict.message}"),
                f"  diagnosis: {m.diagnosis.id or '(no known mistake)'}: {m.diagnosis.text}",
                f"  reproduce: {self.reproduce(m)}"]

    __repr__ = __str__

    def _repr_html_(self) -> str:
        esc = html.escape
        rows = "".join(f"<tr><td>{esc(a)}</td><td>{esc(b)}</td><td>{esc(c)}</td></tr>"
                       for a, b, c in self.class_rows())
        parts = [f"<p><b>{esc(self._head())}</b></p>",
                 ("<table><tr><th>edge class</th><th>passed</th><th>unsupported</th></tr>"
                  f"{rows}</table>")]
        for m in self.minimal_failures:
            f = m.failure
            parts.append(f"<p><b>minimal {esc(f.verdict.verdict)}</b> ({m.size} elements; "
                         f"{m.count} failing case(s) in this group): "
                         f"{esc(f.verdict.message)}<br>diagnosis "
                         f"<code>{esc(str(m.diagnosis.id))}</code>: {esc(m.diagnosis.text)}"
                         f"<br>reproduce: <code>{esc(self.reproduce(m))}</code></p>")
            picture = _error_map(f)
            if picture:
                parts.append(picture)
        return "\n".join(parts)


def _error_map(f: Failure) -> str:
    """The |got - reference| map of a wrong-values failure as an inline PNG (the viewer's
    colour map, :func:`engine.view.thumbnail.thumbnail`), or ''."""
    if f.got is None or f.got.shape != f.reference.shape or f.got.size == 0:
        return ""
    import base64
    import io

    from PIL import Image

    from engine.view.thumbnail import thumbnail

    err = np.abs(np.nan_to_num(f.got - f.reference, nan=np.inf, posinf=1e300))
    rgba = thumbnail(err, None, (320, 240))
    buf = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buf, "PNG")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<p>error map |got - reference|:<br><img src="data:image/png;base64,{data}"></p>'
