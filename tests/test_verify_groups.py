"""Failure groups (engine.verify.sweep / report): every distinct failure of a sweep minimized
and diagnosed, listed most severe first; the verdict order; shape judged before values before
determinism; a minimal case rerun before its mistake is named; --max-failures / --fail-fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from engine import api
from engine.verify import sweep
from engine.verify.diagnose import refusal_key
from engine.verify.report import group_key
from engine.verify.verdicts import FAILURES, VERDICTS, judge

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = "tests.verify_group_targets"


def _verify(target, **options):
    options.setdefault("cases", 60)
    return api.verify(f"{TARGETS}:{target}", op="Conv2D", convention="tf", path=ROOT,
                      **options)


@pytest.fixture(scope="module")
def several():
    return _verify("several_bugs")


def test_the_verdict_order_is_one_tuple_most_severe_first():
    assert VERDICTS == ("pass", "wrong_values", "wrong_shape", "nonfinite", "nondeterministic",
                        "crashed", "timeout", "raised", "unsupported")
    assert FAILURES == VERDICTS[1:-1]


def test_every_distinct_failure_is_a_group_most_severe_first(several):
    groups = several.minimal_failures
    verdicts = [m.failure.verdict.verdict for m in groups]
    assert verdicts == sorted(verdicts, key=FAILURES.index)
    assert {"wrong_values", "wrong_shape", "raised"} <= set(verdicts)
    ids = {m.diagnosis.id for m in groups if m.failure.verdict.verdict == "wrong_values"}
    assert "padding_ignored" in ids
    # the refusal names the shape: one group whatever the numbers, counted once per failure
    [raised] = [m for m in groups if m.failure.verdict.verdict == "raised"]
    n_raised = sum(f.verdict.verdict == "raised" for f in several.failures)
    assert raised.count == n_raised > 1
    assert len({f.verdict.message for f in several.failures
                if f.verdict.verdict == "raised"}) > 1  # several messages, one group
    for m in groups:  # each shrunk, and each minimal case fails the group's way
        assert m.failure.verdict.verdict in FAILURES
        assert sum(m.failure.call.kwargs["input"].shape) <= 8, m.failure.case
    assert len({m.stem for m in groups}) == len(groups)


def test_json_groups_and_the_compatible_top_level(several):
    j = json.loads(several.json_text())
    assert [g["verdict"] for g in j["groups"]] == [m.failure.verdict.verdict
                                                   for m in several.minimal_failures]
    for g in j["groups"]:
        assert set(g) == {"verdict", "count", "minimal", "diagnosis", "reproduce"}
        assert g["count"] >= 1 and g["minimal"]["verdict"] == g["verdict"]
    assert j["minimal"] == j["groups"][0]["minimal"]
    assert j["diagnosis"] == j["groups"][0]["diagnosis"]
    assert j["groups"][0]["verdict"] == "wrong_values"  # not the refusal, found more often
    undiagnosed = sum(j["diagnosed"].values()) + sum(
        f["verdict"] not in j["diagnosed"] for f in j["failures"])
    # every failure is in one group, but for those of a verdict only sampled
    assert sum(g["count"] for g in j["groups"]) == undiagnosed


def test_terminal_and_notebook_list_every_group(several):
    text = str(several)
    html = several._repr_html_()
    for m in several.minimal_failures:
        assert f"{m.count} failing case(s) in this group" in text
        assert several.reproduce(m) in text
        assert f"minimal {m.failure.verdict.verdict}" in html
    assert text.count("\nminimal ") == len(several.minimal_failures)


def test_group_key():
    from engine.verify.diagnosis import Diagnosis
    from engine.verify.verdicts import Verdict

    class F:
        def __init__(self, verdict, message=""):
            self.verdict = Verdict(verdict, message=message)

    assert refusal_key("shape [1, 12, 3] k=3") == "shape [#] k=#"
    assert group_key(F("wrong_values"), Diagnosis("padding_ignored", "t")) == (
        "wrong_values", "padding_ignored")
    assert group_key(F("wrong_values"), Diagnosis(None, "t")) == ("wrong_values", "")
    assert group_key(F("raised", "ValueError: 3 > 2"), None) == \
        group_key(F("raised", "ValueError: 17 > 5"), None) == ("raised", "ValueError: # > #")
    # every refusal is diagnosed refused_valid_case: distinct messages stay distinct groups
    refused = Diagnosis("refused_valid_case", "t")
    assert group_key(F("raised", "NHWC only"), refused) != group_key(F("raised", "equal strides"),
                                                                     refused)
    assert group_key(F("crashed", "signal 11"), None) == ("crashed", "")


def test_shape_is_judged_before_values_and_determinism():
    ref, bound = np.zeros((1, 2, 2, 1)), np.ones((1, 2, 2, 1))
    a, b = np.zeros((1, 3, 2, 1)), np.ones((1, 3, 2, 1))
    assert judge("ok", a, b, ref, bound, "float32").verdict == "wrong_shape"
    # wrong values that also differ between the two runs are wrong values (the reruns of the
    # minimal case say whether they are garbage)
    assert judge("ok", ref + 1, ref + 2, ref, bound, "float32").verdict == "wrong_values"
    # right values, not the same twice
    near = np.nextafter(ref, 1)
    assert judge("ok", ref, near, ref, bound, "float32").verdict == "nondeterministic"
    assert judge("ok", ref, ref.copy(), ref, bound, "float32").verdict == "pass"


def test_garbage_of_a_wrong_shape_is_wrong_shape():
    report = _verify("garbage_shape", cases=20)
    assert {f.verdict.verdict for f in report.failures} == {"wrong_shape"}
    assert {m.failure.verdict.verdict for m in report.minimal_failures} == {"wrong_shape"}


def test_values_that_change_between_reruns_read_memory_never_written():
    report = _verify("reads_unwritten", cases=30)
    [m] = report.minimal_failures
    assert m.failure.verdict.verdict == "nondeterministic"
    assert m.diagnosis.id is None
    assert m.diagnosis.text.startswith("reads memory it never wrote: ")
    assert f"of {sweep.RERUNS} reruns gave a different output" in m.diagnosis.text
    assert report.to_json()["diagnosis"]["id"] is None


def test_values_no_sum_of_terms_gives_read_memory_never_written():
    """The same output every run, but 1e24 where every term is O(1): the diagnosis module's
    rule (engine.verify.diagnose.unwritten_memory) makes it nondeterministic, no mistake named
    (without the rule the group is wrong_values)."""
    report = _verify("huge_first", cases=30)
    [m] = report.minimal_failures
    assert m.failure.verdict.verdict == "nondeterministic" and m.diagnosis.id is None
    assert "reads memory it never wrote: it returned values no sum of the terms gives" in \
        m.diagnosis.text


def test_a_minimal_case_is_rerun_before_its_mistake_is_named(monkeypatch):
    calls = []
    one = sweep.Evaluator.one

    def counted(self, case, repeat=False):
        calls.append(case)
        return one(self, case, repeat)

    monkeypatch.setattr(sweep.Evaluator, "one", counted)
    report = api.verify("tests.verify_zoo:padding_ignored", op="Conv2D", convention="tf",
                        path=ROOT, cases=30)
    [m] = report.minimal_failures
    assert m.failure.verdict.verdict == "wrong_values" and m.diagnosis.id == "padding_ignored"
    assert calls[-sweep.RERUNS:] == [m.failure.case] * sweep.RERUNS >= [m.failure.case] * 5


@pytest.mark.parametrize("limit", [1, 3])
def test_max_failures_stops_the_search(limit):
    report = _verify("several_bugs", max_failures=limit)
    assert report.failed == limit and report.cases < 60
    assert f"stopped after {limit} failing case(s)" in str(report)


def _gb(*args):
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300, check=False)


def test_fail_fast_and_max_failures_on_the_command_line(tmp_path):
    p = _gb("verify", f"{TARGETS}:several_bugs", "--op", "Conv2D", "--convention", "tf",
            "--cases", "60", "--fail-fast", "--json", str(tmp_path / "r.json"))
    assert p.returncode == 1, p.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["failed"] == 1 and data["cases"] < 60 and len(data["groups"]) == 1
    both = _gb("verify", f"{TARGETS}:several_bugs", "--op", "Conv2D", "--convention", "tf",
               "--fail-fast", "--max-failures", "2")
    assert both.returncode == 2 and "--max-failures" in both.stderr
    bad = _gb("verify", f"{TARGETS}:several_bugs", "--op", "Conv2D", "--convention", "tf",
              "--max-failures", "0")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_the_apps_report_view_shows_the_groups(qtbot, several):
    from app.verify_report import ReportView, minimal_text

    view = ReportView()
    qtbot.addWidget(view)
    view.show_report(several)
    groups = several.minimal_failures
    assert view.tabs.tabText(2) == f"Groups ({len(groups)})"
    assert view.group_table.rowCount() == len(groups)
    for r, m in enumerate(groups):
        row = [view.group_table.item(r, c).text() for c in range(5)]
        assert row[:4] == [m.failure.verdict.verdict, str(m.count), str(m.size),
                           m.diagnosis.id or "(no known mistake)"]
        assert view.group_table.item(r, 0).toolTip() == f"reproduce: {several.reproduce(m)}"
    text = view.minimal_edit.toPlainText()
    assert text == minimal_text(several)
    assert text.count("reproduce: ") == len(groups)
    view.show_report(None)
    assert view.group_table.rowCount() == 0 and view.tabs.tabText(2) == "Groups"


def test_reruns_that_give_no_output_tell_nothing():
    """A rerun that timed out or crashed (a loaded machine) is no sign of unwritten memory;
    one that returns other bits is."""
    from engine.verify.conventions import Geometry
    from engine.verify.report import Failure, Minimal
    from engine.verify.values import Case, call
    from engine.verify.verdicts import Verdict

    case = Case("Conv2D", "tf", Geometry(1, 2, 2, 1, (1, 1), 1))
    c = call(case)
    got = np.full((1, 2, 2, 1), 5.0)
    m = Minimal(Failure(case, Verdict("wrong_values", message="off"), c, got, got * 0), None)

    class Reruns:
        def __init__(self, outputs):
            self.outputs = iter(outputs)

        def prepare(self, case):
            return sweep.Evaluator.prepare(self, case)

        def one(self, case, repeat=False):
            return None, None, next(self.outputs)

    quiet = [None, got.copy(), None, got.copy(), None]
    assert sweep._confirm(Reruns(quiet), m) is m
    changed = [got.copy(), got + 1, None, got.copy(), got.copy()]
    confirmed = sweep._confirm(Reruns(changed), m)
    assert confirmed.failure.verdict.verdict == "nondeterministic"
    assert confirmed.diagnosis.text.startswith(
        "reads memory it never wrote: 1 of 5 reruns gave a different output (off)")
