"""Cross-check a canvas against TensorFlow, PyTorch and JAX (``gradblocks crosscheck``, the
app's Run > Cross-check).

For each framework: is its module importable by the chosen Python (no: ``skipped``)? Export
the canvas for it (:mod:`engine.export.frameworks`), run ``python SCRIPT.py OUT.npz`` in a
subprocess in a temporary folder, and compare every stored output (the keys of
:mod:`engine.graph.result_names`) with GradBlocks's own value, one :class:`Row` per output and
framework.

Tolerances (:func:`tolerance`), by what an output is:

- a value (conv results, sources, transposes): ``rtol(dtype) * max(max|ours|, max|theirs|)``
  with :func:`engine.base.dtypes.rtol`; integers and booleans must be equal;
- a difference (Compare's ``output`` and ``max_abs_error``, GradCheck's ``error`` and
  ``max_abs_error``): an absolute tolerance scaled to the compared inputs' magnitude, ``rtol``
  of their (looser, :func:`blocks.checks.compare_rtol`) dtype times their largest magnitude; a
  relative error (``max_rel_error``): that ``rtol`` itself;
- GradCheck's float64 ``numeric`` and AdjointCheck's inner products: the check's own tolerance
  (:func:`engine.base.tolerance.check_tolerance`) times their magnitude (finite differences and
  reduced-precision ops round differently in each framework).

NaN and infinities must sit at the same elements with the same values. Known framework
defects (:func:`engine.export.frameworks.known_defects`) are named on the rows that disagree;
they still disagree.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from blocks.checks import compare_rtol
from engine.base.dtypes import rtol as dtype_rtol
from engine.base.tolerance import check_tolerance
from engine.export.frameworks import (
    TARGETS,
    ExportRefused,
    export_framework_script,
    known_defects,
    sources_path,
)
from engine.graph.compiler import Plan
from engine.graph.report import text_table
from engine.graph.result_names import result_keys
from engine.io.npz import write_npz

FRAMEWORKS = tuple(TARGETS)
#: Environment variables naming the Python that runs one framework's scripts (a venv that has
#: it); without one, the running interpreter is used.
PYTHON_ENV = {"tensorflow": "GRADBLOCKS_TF_PYTHON", "pytorch": "GRADBLOCKS_TORCH_PYTHON",
              "jax": "GRADBLOCKS_JAX_PYTHON"}
PortKey = tuple[str, str]
#: Seconds a framework script may run.
TIMEOUT = 1800


@dataclass
class Row:
    """One output compared for one framework (the issue's JSON row, plus the tolerance)."""

    output: str  # NODE.PORT
    framework: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    agree: bool = False
    known_defect: str | None = None
    error: str | None = None
    tolerance: float | None = None
    key: str = ""  # the result name

    def as_json(self) -> dict:
        return {"output": self.output, "framework": self.framework,
                "max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error,
                "agree": self.agree, "known_defect": self.known_defect, "error": self.error}


@dataclass
class Report:
    """``frameworks``: name -> ``ran`` / ``skipped: why`` / ``failed: why``; ``rows``."""

    frameworks: dict[str, str] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every row agrees and no framework failed."""
        return all(r.agree for r in self.rows) and not any(
            s.startswith("failed") for s in self.frameworks.values())


def _source(plan: Plan, ref: PortKey) -> PortKey:
    """The port an Output block passes through (followed to its origin)."""
    steps = {s.node_id: s for s in plan.steps}
    while steps[ref[0]].spec.passthrough:
        ref = steps[ref[0]].inputs["input"]
    return ref


def _max(a: np.ndarray) -> float:
    a = np.asarray(a, np.float64)
    finite = a[np.isfinite(a)]
    return float(np.max(np.abs(finite))) if finite.size else 0.0


def tolerance(plan: Plan, values: Mapping[PortKey, np.ndarray], ref: PortKey,
              theirs: np.ndarray) -> float:
    """The absolute tolerance of output ``ref`` (see the module docstring); ``values``: every
    output GradBlocks computed, ``theirs``: the framework's value."""
    ref = _source(plan, ref)
    step = next(s for s in plan.steps if s.node_id == ref[0])
    kind, port = step.spec.type_id, ref[1]
    spec = plan.specs[ref]
    ours = values[ref]
    if spec.dtype == "bool" or spec.dtype.startswith("int"):
        return 0.0

    def dtype(p: str) -> str:
        return plan.specs[step.inputs[p]].dtype

    if kind == "Compare":
        rtol = compare_rtol(dtype("a"), dtype("b"))
        if port == "max_rel_error":
            return rtol
        return rtol * max(_max(values[step.inputs["a"]]), _max(values[step.inputs["b"]]))
    if kind == "GradCheck":
        rtol = dtype_rtol(dtype("gradient"))
        if port == "max_rel_error":
            return rtol
        if port == "numeric":
            return check_tolerance("float64") * max(_max(ours), _max(theirs))
        return rtol * _max(values[step.inputs["gradient"]])
    if kind == "AdjointCheck":
        check = check_tolerance(dtype("input"))
        if port == "max_rel_error":
            return check
        return check * max(_max(values[(ref[0], p)])
                           for p in ("forward", "via_input", "via_filter"))
    return dtype_rtol(spec.dtype) * max(_max(ours), _max(theirs))


def compare(ours: np.ndarray, theirs: np.ndarray, tol: float) -> tuple[float, float, bool,
                                                                       str | None]:
    """``(max_abs, max_rel, agree, error)`` of a framework's value against ours."""
    a = np.asarray(ours)
    b = np.asarray(theirs)
    if a.shape != b.shape:
        return math.nan, math.nan, False, (f"shape {list(b.shape)} instead of "
                                           f"{list(a.shape)}")
    if a.dtype == bool or b.dtype == bool:
        diff = float(np.sum(a != b))
        return diff, diff, diff == 0, None
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    nan_a, nan_b = np.isnan(a64), np.isnan(b64)
    finite = np.isfinite(a64) & np.isfinite(b64)
    same_special = np.array_equal(nan_a, nan_b) and np.array_equal(
        a64[~finite & ~nan_a], b64[~finite & ~nan_b])
    if not same_special:
        return math.nan, math.nan, False, "NaN or infinite values at different elements"
    max_abs = float(np.max(np.abs(a64[finite] - b64[finite]))) if finite.any() else 0.0
    scale = _max(a64)
    rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    return max_abs, rel, bool(max_abs <= tol), None


def importable(python: str, module: str) -> str | None:
    """Why ``python`` cannot import ``module`` (None when it can)."""
    try:
        proc = subprocess.run([python, "-c", f"import {module}"], check=False, capture_output=True,
                              text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"cannot start {python}: {err}"
    if proc.returncode != 0:
        return f"{module} is not installed for {python}"
    return None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no message"


def _run_script(python: str, plan: Plan, target: str, source: str,
                titles: Mapping[str, str], folder: Path) -> tuple[dict[str, np.ndarray] | None,
                                                                  str | None]:
    """Export and run one framework's script: ``(results, None)`` or ``(None, why)``."""
    try:
        exported = export_framework_script(plan, target, source, titles)
    except ExportRefused as err:
        return None, str(err)
    script, out = folder / f"crosscheck_{target}.py", folder / f"{target}_results.npz"
    script.write_text(exported.script, encoding="utf-8")
    with open(sources_path(script), "wb") as f:
        write_npz(f, exported.sources)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("PYTHONPATH", None)  # the script must not need GradBlocks
    try:
        proc = subprocess.run([python, str(script), str(out)], check=False, capture_output=True,
                              text=True, cwd=folder, env=env, timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"the script did not run: {err}"
    if proc.returncode != 0:
        return None, f"the script failed: {_last_line(proc.stderr)}"
    with np.load(out, allow_pickle=False) as f:
        return {key: f[key] for key in f.files}, None


def crosscheck(plan: Plan, values: Mapping[PortKey, np.ndarray], frameworks: list[str],
               pythons: Mapping[str | None, str], source: str = "canvas",
               titles: Mapping[str, str] | None = None,
               progress: Callable[[str], None] | None = None) -> Report:
    """Compare ``values`` (every output GradBlocks computed for ``plan``) with each of
    ``frameworks``; ``pythons``: framework (or None for all) -> interpreter path."""
    report = Report()
    keys = result_keys(plan.steps, plan.labels)
    for name in frameworks:
        module = TARGETS[name]
        python = pythons.get(name) or pythons.get(None) or sys.executable
        if progress:
            progress(name)
        why = importable(python, module.MODULE)
        if why:
            report.frameworks[name] = f"skipped: {why}"
            continue
        with tempfile.TemporaryDirectory(prefix="gradblocks-crosscheck-") as tmp:
            results, why = _run_script(python, plan, name, source, titles or {}, Path(tmp))
        report.frameworks[name] = "ran" if why is None else f"failed: {why}"
        defects = known_defects(plan, name)
        for ref, key in keys.items():
            row = Row(f"{ref[0]}.{ref[1]}", name, key=key)
            report.rows.append(row)
            if ref not in values:
                row.error = "GradBlocks computed no value (the block failed)"
                continue
            if results is None:
                row.error = f"no {name} result (framework failed)"
                continue
            if key not in results:
                row.error = f"the {name} script wrote no {key!r}"
                continue
            row.tolerance = tolerance(plan, values, ref, results[key])
            row.max_abs_error, row.max_rel_error, row.agree, row.error = compare(
                values[ref], results[key], row.tolerance)
            if not row.agree:
                row.known_defect = defects.get(ref[0])
    return report


def env_pythons() -> dict[str | None, str]:
    """``{framework: python}`` from the :data:`PYTHON_ENV` variables that are set."""
    return {name: os.environ[var] for name, var in PYTHON_ENV.items() if os.environ.get(var)}


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def table_lines(report: Report, ids: bool = True) -> list[str]:
    """The table: a header, then one line per row of ``report.rows`` in order (none without
    rows); with ``ids`` the last column is the row's ``NODE.PORT``."""
    if not report.rows:
        return []
    rows = [["output", "framework", "max abs", "max rel", "tolerance", "agree", "note",
             "node.port"][: 8 if ids else 7]]
    for r in report.rows:
        note = r.error or (f"known defect: {r.known_defect}" if r.known_defect else "")
        rows.append([r.key, r.framework, _g(r.max_abs_error), _g(r.max_rel_error),
                     _g(r.tolerance), "yes" if r.agree else "NO", note, r.output][
                         : 8 if ids else 7])
    return text_table(rows).splitlines()


def status_lines(report: Report) -> list[str]:
    """``NAME: ran | skipped: why | failed: why`` per framework."""
    return [f"{name}: {status}" for name, status in report.frameworks.items()]
