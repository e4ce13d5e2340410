"""The report of a sweep: the terminal summary, the JSON of ``--json`` and the notebook object.

JSON (top level): ``ok``, ``op``, ``convention``, ``cases`` (tried), ``failed``,
``unsupported``, ``failures`` (each ``case``, ``verdict``, ``max_abs_error``, ``max_rel_error``,
``message``), ``minimal`` (the smallest failure, or null) and ``diagnosis`` (``{"id", "text"}``
for it, or null). A case holds every argument under the convention's names (arrays as
``{"shape", "dtype"}``, the rest as JSON values) and ``dtype``.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.verify.conventions import Call
from engine.verify.shrink import array_sizes
from engine.verify.values import Case
from engine.verify.verdicts import Verdict

#: Failures listed in the terminal summary (the JSON has them all).
SHOWN_FAILURES = 5


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


@dataclass
class Minimal:
    failure: Failure
    diagnosis: Any  # engine.verify.diagnosis.Diagnosis
    shrink_calls: int = 0

    @property
    def size(self) -> int:
        return sum(array_sizes(self.failure.case))


def call_text(target: str, failure: Failure) -> str:
    """A one-line reproduction: the call with arrays as NumPy expressions where the values are
    structured, else as ``<dtype shape random seed S>``."""
    parts = []
    for k, v in failure.call.kwargs.items():
        if isinstance(v, np.ndarray):
            if failure.case.values == "structured":
                vals = np.asarray(v, np.float64)
                if np.array_equal(vals.ravel(), np.arange(1, vals.size + 1)):
                    text = (f"np.arange(1, {vals.size + 1}, dtype='{failure.case.dtype}')"
                            f".reshape({list(v.shape)})")
                else:
                    text = f"np.eye(1, {vals.size}, dtype='{failure.case.dtype}')" \
                           f".reshape({list(v.shape)})"
            else:
                text = f"<{failure.case.dtype} {list(v.shape)} random seed {failure.case.seed}>"
            parts.append(f"{k}={text}")
        else:
            parts.append(f"{k}={v!r}")
    return f"{target or 'fn'}({', '.join(parts)})"


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
    found_after: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    spec_kind: str = ""  # python, cmd or inprocess
    path: str = ""  # the folder a python target was imported from

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

    def to_json(self) -> dict[str, Any]:
        d = self.diagnosis
        return {"ok": self.ok, "op": self.op, "convention": self.convention,
                "cases": self.cases, "failed": self.failed, "unsupported": self.unsupported,
                "failures": [f.to_json() for f in self.failures],
                "minimal": self.minimal.to_json() if self.minimal else None,
                "diagnosis": {"id": d.id, "text": d.text} if d is not None else None}

    def json_text(self) -> str:
        return json.dumps(self.to_json(), indent=1, allow_nan=False) + "\n"

    def _head(self) -> str:
        state = "ok" if self.ok else f"{self.failed} failed"
        return (f"verify {self.target or 'fn'} as {self.convention} {self.op} "
                f"({', '.join(self.dtypes)}): {self.cases} case(s), {state}, "
                f"{self.unsupported} unsupported ({self.seconds:.1f} s, seed {self.seed})")

    def class_rows(self) -> list[list[str]]:
        return [[name, f"{r['passed']}/{r['tried']}",
                 str(r["unsupported"]) if r["unsupported"] else ""]
                for name, r in self.classes.items()]

    def __str__(self) -> str:
        lines = [self._head(), "", "edge class                  passed   unsupported"]
        lines += [f"  {a:<26}{b:<9}{c}" for a, b, c in self.class_rows()]
        by_verdict: dict[str, int] = {}
        for f in self.failures:
            by_verdict[f.verdict.verdict] = by_verdict.get(f.verdict.verdict, 0) + 1
        if by_verdict:
            lines += ["", "failures: " + ", ".join(f"{n} {v}" for v, n in by_verdict.items())]
        for m in self.minimal_failures:
            f = m.failure
            lines += ["", (f"minimal {f.verdict.verdict} ({m.size} elements, "
                           f"{f.case.values} values, edge class {f.case.edge}): "
                           f"{f.verdict.message}"),
                      (f"  diagnosis: {m.diagnosis.id or '(no known mistake)'}: "
                       f"{m.diagnosis.text}"),
                      f"  reproduce: {call_text(self.target, f)}"]
        return "\n".join(lines)

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
            parts.append(f"<p><b>minimal {esc(f.verdict.verdict)}</b> ({m.size} elements): "
                         f"{esc(f.verdict.message)}<br>diagnosis "
                         f"<code>{esc(str(m.diagnosis.id))}</code>: {esc(m.diagnosis.text)}"
                         f"<br><code>{esc(call_text(self.target, f))}</code></p>")
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
