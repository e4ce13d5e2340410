"""``gradblocks crosscheck`` without real frameworks: a fake framework (NumPy posing as one,
whose convolutions are wrong on purpose) drives the whole pipeline; skip logic, the JSON
object, the table and the exit codes."""

import json
import types

import pytest

from engine.cli import commands
from engine.cli import crosscheck as cli_crosscheck
from engine.export import crosscheck, frameworks
from tests.crosscheck_support import conventions_canvas

#: A framework that imports (it is NumPy) and gets every convolution wrong (zeros) except
#: the forward op, so sources and forward results agree and gradients do not.
FAKE_PRELUDE = '''
def _tensor(a, dtype):
    return np.asarray(a, {"bfloat16": np.float32}.get(dtype, dtype))


def _fw(t):
    return np.asarray(t)


def _np(t):
    return np.asarray(t)


def _transpose(t, perm):
    return np.ascontiguousarray(np.transpose(t, perm))


def _cast(t, dtype):
    return np.asarray(t, dtype)


def _forward(x, w, g):
    return np.zeros(g["output_shape"], np.asarray(x).dtype)


def _backprop_filter(x, dy, g):
    return np.zeros(g["filter_shape"], np.asarray(x).dtype)


def _backprop_input(w, dy, g):
    return np.zeros(g["input_shape"], np.asarray(w).dtype)
'''


def _fake(name: str, module: str, defect: str | None = None) -> types.ModuleType:
    fake = types.ModuleType(name)
    fake.NAME, fake.MODULE, fake.PRELUDE = name, module, FAKE_PRELUDE
    fake.known_defect = lambda op, depthwise, dilated: defect if op == "filter" else None
    return fake


@pytest.fixture
def fakes(monkeypatch):
    """Two fake targets: ``fakefw`` (NumPy, runs) and ``absentfw`` (not installed)."""
    targets = {"fakefw": _fake("fakefw", "numpy", "fake defect in filter gradients"),
               "absentfw": _fake("absentfw", "gradblocks_no_such_framework")}
    for name, module in targets.items():
        monkeypatch.setitem(frameworks.TARGETS, name, module)
    names = tuple(targets)
    monkeypatch.setattr(cli_crosscheck, "FRAMEWORKS", names)
    monkeypatch.setattr(crosscheck, "FRAMEWORKS", names)
    return names


def _crosscheck(capsys, *args: str) -> tuple[int, str, str]:
    status = commands.main(["crosscheck", *args])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_a_wrong_framework_disagrees_on_its_gradients_and_names_the_known_defect(
        tmp_path, fakes, capsys):
    canvas = conventions_canvas(tmp_path / "conv.gbc.json")
    status, out, err = _crosscheck(capsys, str(canvas), "--with", "fakefw,absentfw", "--json")
    assert status == 1, err
    report = json.loads(out)  # exactly one JSON object
    assert set(report) == {"frameworks", "rows"}
    assert report["frameworks"]["fakefw"] == "ran"
    assert report["frameworks"]["absentfw"].startswith("skipped: gradblocks_no_such_framework")
    rows = {r["output"]: r for r in report["rows"]}
    assert all(r["framework"] == "fakefw" for r in report["rows"])  # skipped: no rows
    for row in report["rows"]:
        assert set(row) == {"output", "framework", "max_abs_error", "max_rel_error", "agree",
                            "known_defect", "error"}
    # sources are loaded bit for bit: they agree exactly
    for source in ("x.output", "w.output", "xd.output", "x_shape.output", "wd_sizes.output"):
        assert rows[source]["agree"] and rows[source]["max_abs_error"] == 0, source
    # the zero gradients disagree; filter gradients carry the framework's known defect
    assert not rows["dw.output"]["agree"] and rows["dw.output"]["max_rel_error"] == 1.0
    assert rows["dw.output"]["known_defect"] == "fake defect in filter gradients"
    assert rows["ddw.output"]["known_defect"] == "fake defect in filter gradients"
    assert not rows["dx.output"]["agree"] and rows["dx.output"]["known_defect"] is None
    assert not rows["conv.output"]["agree"]
    # downstream of a defective block, disagreeing rows name it too
    assert rows["adj.via_filter"]["known_defect"] == "fake defect in filter gradients"


def test_the_text_table_has_a_row_per_output_and_lists_skipped_frameworks(tmp_path, fakes,
                                                                            capsys):
    canvas = conventions_canvas(tmp_path / "conv.gbc.json")
    status, out, _ = _crosscheck(capsys, str(canvas), "--with", "fakefw,absentfw")
    assert status == 1
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["output", "framework", "max"]
    dw = next(line for line in lines if line.endswith("dw.output") and line.startswith("dw "))
    assert " NO " in dw and "known defect: fake defect in filter gradients" in dw
    x = next(line for line in lines if line.startswith("x ") and line.endswith("x.output"))
    assert " yes " in x
    assert "fakefw: ran" in lines
    assert any(line.startswith("absentfw: skipped:") for line in lines)


def test_only_skipped_frameworks_is_success_with_no_rows(tmp_path, fakes, capsys):
    canvas = conventions_canvas(tmp_path / "conv.gbc.json")
    status, out, _ = _crosscheck(capsys, str(canvas), "--with", "absentfw", "--json")
    assert status == 0
    assert json.loads(out)["rows"] == []


def test_a_framework_whose_script_fails_is_failed_with_its_error(tmp_path, fakes, capsys,
                                                               monkeypatch):
    broken = _fake("fakefw", "numpy")
    broken.PRELUDE = FAKE_PRELUDE + "\nraise RuntimeError('framework exploded')\n"
    monkeypatch.setitem(frameworks.TARGETS, "fakefw", broken)
    canvas = conventions_canvas(tmp_path / "conv.gbc.json")
    status, out, _ = _crosscheck(capsys, str(canvas), "--with", "fakefw", "--json")
    report = json.loads(out)
    assert status == 1
    assert report["frameworks"]["fakefw"] == (
        "failed: the script failed: RuntimeError: framework exploded")
    assert report["rows"] and all(r["error"] and not r["agree"] for r in report["rows"])


@pytest.mark.parametrize("args, message", [
    (["--with", "mxnet"], "unknown framework 'mxnet'"),
    (["--with", ","], "unknown framework (none given)"),
    (["--python", "tensorflow=/no/such/python"], "no Python interpreter at '/no/such/python'"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, capsys, args, message):
    canvas = conventions_canvas(tmp_path / "conv.gbc.json")
    status, out, err = _crosscheck(capsys, str(canvas), *args)
    assert status == 2
    assert message in err and "Traceback" not in err
    assert out == ""


def test_an_invalid_canvas_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.gbc.json"
    bad.write_text("{}", encoding="utf-8")
    status, out, err = _crosscheck(capsys, str(bad), "--json")
    assert status == 2
    assert "bad.gbc.json" in err and out == ""


def test_nan_and_infinity_are_strings_in_the_json():
    report = crosscheck.Report({"x": "ran"}, [crosscheck.Row("n.output", "x", float("nan"),
                                                             float("inf"))])
    data = json.loads(cli_crosscheck.as_json(report))
    assert data["rows"][0]["max_abs_error"] == "NaN"
    assert data["rows"][0]["max_rel_error"] == "Infinity"
