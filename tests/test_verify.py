"""gradblocks verify through the API (engine.api.verify / assert_conformant): every zoo bug
(tests/verify_zoo.py) caught, shrunk and named; misbehaving targets get their verdicts while
the sweep goes on; correct implementations in both conventions give no false alarm."""

from __future__ import annotations

import os

import numpy as np
import pytest

from engine import api
from engine.base.errors import InvalidArgumentError
from engine.verify.defaults import OPS
from engine.verify.values import array_sizes
from tests import verify_zoo as zoo

ZOO = "tests.verify_zoo"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Cases per sweep in the suite (the default budget is engine.verify.DEFAULT_CASES): the
#: catalogue (17-18 cases) and a few random ones catch every zoo bug; BUDGET raises it for the
#: bugs only larger random cases show.
CASES = 30
BUDGET = {"tf11092": 80}


def _verify(target, op, convention="tf", **options):
    options.setdefault("cases", CASES)
    return api.verify(f"{ZOO}:{target}", op=op, convention=convention, path=ROOT, **options)


@pytest.fixture(scope="module")
def swept():
    """``swept(target, op, convention, **options)``: the report of that sweep, run once per
    module (several tests check the same sweep)."""
    done = {}

    def get(target, op, convention="tf", **options):
        k = (target, op, convention, tuple(sorted(options.items())))
        if k not in done:
            done[k] = _verify(target, op, convention, **options)
        return done[k]
    return get


def _assert_minimal(report, limit=64):
    assert not report.ok
    m = report.minimal_failures[0]
    assert all(n <= limit for n in array_sizes(m.failure.case)), array_sizes(m.failure.case)
    return m


@pytest.mark.parametrize("mistake", sorted(zoo.DIAGNOSIS_BUGS))
def test_each_diagnosis_id_is_caught_shrunk_and_named(mistake, swept):
    report = swept(mistake, zoo.DIAGNOSIS_BUGS[mistake])
    m = _assert_minimal(report)
    assert m.diagnosis.id == mistake, m.diagnosis.text
    assert report.to_json()["diagnosis"]["id"] == mistake


@pytest.mark.parametrize("bug", sorted(zoo.PUBLIC_BUGS))
def test_each_public_bug_is_caught_and_shrunk(bug):
    target, op, convention = zoo.PUBLIC_BUGS[bug]
    report = _verify(target, op, convention, cases=BUDGET.get(bug, CASES))
    m = _assert_minimal(report)
    assert m.failure.verdict.verdict in ("wrong_values", "wrong_shape", "raised")
    if bug == "backpack30":  # the size lost with the remainder
        assert m.failure.verdict.verdict == "wrong_shape"
        assert m.diagnosis.id == "output_size_off_by_one"


def test_a_segfault_is_crashed_and_the_sweep_goes_on():
    report = _verify("segfaults", "Conv2D", cases=8, support="dilations<=2")
    verdicts = {f.verdict.verdict for f in report.failures}
    assert verdicts == {"crashed"}
    assert report.cases == 8 and report.failed < 8  # cases after each crash ran and passed
    assert "SIGSEGV" in report.minimal.verdict.message


def test_a_hang_is_a_timeout_and_a_class_that_timed_out_twice_stops():
    report = _verify("hangs", "Conv2D", cases=24, case_timeout=0.25)
    assert {f.verdict.verdict for f in report.failures} == {"timeout"}
    per_class = {}
    for f in report.failures:
        per_class[f.case.edge] = per_class.get(f.case.edge, 0) + 1
    assert per_class["random"] == 2 and max(per_class.values()) == 2
    assert report.cases < 24  # the random cases after the second timeout were not tried
    assert any(r["passed"] for r in report.classes.values())


@pytest.mark.parametrize("target, verdict", [("wrong_shape", "wrong_shape"),
                                             ("returns_nan", "nonfinite"),
                                             ("nondeterministic", "nondeterministic")])
def test_misbehaving_targets_get_their_verdict(target, verdict):
    report = _verify(target, "Conv2D", cases=20)
    assert report.minimal.verdict.verdict == verdict or verdict in {
        m.failure.verdict.verdict for m in report.minimal_failures}
    if verdict == "nondeterministic":  # one ulp: within tolerance, so no other verdict
        assert {f.verdict.verdict for f in report.failures} == {"nondeterministic"}


def test_not_implemented_is_unsupported_not_failed():
    report = _verify("no_dilation_support", "Conv2D", cases=20)
    assert report.ok and report.unsupported > 0
    assert report.to_json()["unsupported"] == report.unsupported


@pytest.mark.parametrize("convention, op", [(c, op) for c in ("tf", "torch") for op in OPS[c]])
def test_correct_implementations_give_no_false_alarm(convention, op):
    """In this process (a callable no worker imports): the point is the verdicts; the worker
    round trip is what every other sweep here goes through. The 2,000-case run per op and
    dtype is ``python -m engine.bench.verify --false-alarms``."""
    names = (zoo.CORRECT_TF if convention == "tf" else zoo.CORRECT_TORCH)[op]
    for name in names:
        fn = getattr(zoo, name)
        for dtype in ("float32", "float16,float64") if name == names[1] else ("float32",):
            report = api.verify(lambda **kw: fn(**kw), op=op, convention=convention,  # noqa: B023
                                cases=50, dtype=dtype, seed=7)
            assert report.ok, str(report)
            assert report.cases == 50


def test_a_notebook_callable_runs_in_process():
    from engine import kernels

    report = api.verify(lambda **kw: kernels.conv2d(**kw), op="Conv2D", convention="tf",
                        cases=20)
    assert report.ok and report.cases == 20
    bad = api.verify(lambda **kw: kernels.conv2d(**kw) * 2, op="Conv2D", convention="tf",
                     cases=20)
    assert bad.minimal.verdict.verdict == "wrong_values"


def test_assert_conformant_message_has_the_diagnosis_and_the_case():
    with pytest.raises(AssertionError) as info:
        api.assert_conformant(f"{ZOO}:batch_averaged", op="Conv2DBackpropFilter",
                              convention="tf", cases=CASES, path=ROOT)
    text = str(info.value)
    assert "batch_averaged" in text and "minimal case:" in text and "filter_sizes" in text
    # the reproduction a user can paste: python -c importing the target from --path
    assert "reproduce: " in text and " -c " in text and "batch_averaged(input=" in text
    report = api.assert_conformant(f"{ZOO}:kernels_conv2d", op="Conv2D", convention="tf",
                                   cases=30, path=ROOT)
    assert report.ok


def test_report_json_and_html(swept):
    report = swept("padding_ignored", "Conv2D")
    j = report.to_json()
    assert set(j) == {"ok", "op", "convention", "cases", "failed", "unsupported", "failures",
                      "minimal", "diagnosis", "groups", "diagnosed", "excluded"}
    assert j["failed"] == len(j["failures"]) > 0
    f = j["minimal"]
    assert set(f) == {"case", "verdict", "max_abs_error", "max_rel_error", "message"}
    assert f["case"]["dtype"] == "float32"
    assert f["case"]["input"]["shape"] and f["case"]["filter"]["dtype"] == "float32"
    html = report._repr_html_()
    assert "<table>" in html and "data:image/png;base64," in html


def test_structured_values_of_the_minimal_case(swept):
    report = swept("batch_averaged", "Conv2DBackpropFilter")
    f = report.minimal
    assert f.case.values == "structured"
    x = np.asarray(f.call.kwargs["input"], np.float64)
    assert np.array_equal(x.ravel(), np.arange(1, x.size + 1))


@pytest.mark.parametrize("options, word", [
    ({"support": "strides<<2"}, "strides<<2"), ({"support": "colour=red"}, "colour"),
    ({"support": "padding<=SAME"}, "padding"), ({"dtype": "int8"}, "int8"),
    ({"cases": 0}, "cases"), ({"case_timeout": -1}, "case_timeout"),
    ({"op": "conv2d"}, "conv2d")])
def test_bad_options_name_what_is_wrong(options, word):
    kwargs = {"op": "Conv2D", "convention": "tf", **options}
    with pytest.raises(InvalidArgumentError, match=word):
        api.verify(f"{ZOO}:kernels_conv2d", path=ROOT, **kwargs)


def test_support_narrows_the_cases():
    report = _verify("loops_conv2d", "Conv2D", cases=30,
                     support="strides<=2 dilations=1 groups=1 layouts=NHWC padding=SAME,VALID")
    assert report.ok and report.cases == 30
    assert "layout_nchw" not in report.classes and "asymmetric_explicit" not in report.classes
