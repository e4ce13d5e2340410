"""Bad options of ``gradblocks verify`` (issue 30 item 7): one line on stderr, exit status 2,
before any case runs (the target module, which leaves a marker when imported, is never
imported); the same checks in the API raise InvalidArgumentError naming the argument."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine.base.errors import InvalidArgumentError
from engine.verify import api

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def folder(tmp_path):
    """A --path folder with the target (leaving ``imported`` when imported), another Python
    file, a script that is not executable and a subfolder."""
    (tmp_path / "target.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\n"
        "from tests.verify_zoo import loops_conv2d as f\n")
    (tmp_path / "helper.py").write_text("X = 1\n")
    (tmp_path / "plain.sh").write_text("exit 0\n")
    (tmp_path / "sub").mkdir()
    return tmp_path


def _gb(folder, *args):
    env = {**os.environ, "PYTHONPATH": ROOT, "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run([sys.executable, "-m", "engine.cli", "verify", *args, "--op", "Conv2D",
                           "--convention", "tf", "--cases", "3"], capture_output=True,
                          check=False, text=True, cwd=folder, env=env, timeout=300)


CASES = [
    # (arguments, with the target, word in the message)
    (["--json", ""], True, "--json"),
    (["--json", "missing/r.json"], True, "does not exist"),
    (["--json", "target.py"], True, "refusing to overwrite"),
    (["--json", "helper.py"], True, "refusing to overwrite"),
    (["--json", "sub"], True, "is a folder"),
    (["--repro", ""], True, "--repro"),
    (["--repro", "missing/repro"], True, "does not exist"),
    (["--repro", "target.py"], True, "is a file"),
    (["--path", "target.py"], True, "is a file"),
    (["--path", "nowhere"], True, "no such folder"),
    (["--cmd", "python 'unbalanced"], False, "no closing quotation"),
    (["--cmd", "no-such-command-here --flag"], False, "no such command on PATH"),
    (["--cmd", "./plain.sh"], False, "not executable"),
    (["--cmd", "./sub"], False, "is a folder"),
    (["--cmd", "./missing.sh"], False, "no such file"),
    (["--memory", "0"], True, "--memory"),
    (["--cmd", "sh plain.sh", "--json", "plain.sh"], False, "refusing to overwrite"),
]


@pytest.mark.parametrize("args, with_target, word", CASES,
                         ids=[" ".join(a) or "empty" for a, _, _ in CASES])
def test_a_bad_option_is_one_line_exit_2_before_any_case(folder, args, with_target, word):
    p = _gb(folder, *(["target:f", "--path", str(folder)] if with_target and "--path" not in args
                      else ["target:f"] if with_target else []), *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert word in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert not (folder / "imported").exists()


def test_good_output_paths_are_accepted(folder):
    p = _gb(folder, "target:f", "--path", str(folder), "--json", "r.json", "--repro", "new")
    assert p.returncode == 0, p.stderr
    assert (folder / "r.json").is_file() and (folder / "imported").exists()


@pytest.mark.parametrize("options, argument", [
    ({"cmd": "python 'unbalanced"}, "cmd"), ({"cmd": "no-such-command-here"}, "cmd"),
    ({"cmd": "./plain.sh"}, "cmd"), ({"cmd": "./sub"}, "cmd"), ({"cmd": ""}, "cmd"),
    ({"fn": "target:f", "path": "target.py"}, "path"),
    ({"fn": "target:f", "path": "nowhere"}, "path"), ({"fn": "target:f", "path": ""}, "path")])
def test_the_api_names_the_argument(folder, monkeypatch, options, argument):
    monkeypatch.chdir(folder)
    with pytest.raises(InvalidArgumentError) as info:
        api.verify(op="Conv2D", convention="tf", cases=3, **options)
    assert info.value.argument == argument
    assert not (folder / "imported").exists()


def test_output_path_names_the_option(folder):
    with pytest.raises(InvalidArgumentError) as info:
        api.output_path(str(folder / "target.py"), "--json", "target:f", str(folder), False)
    assert info.value.argument == "--json"
    pkg = folder / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    with pytest.raises(InvalidArgumentError, match="refusing"):
        api.output_path(str(pkg / "__init__.py"), "--json", "pkg:f", str(folder), False)
    assert api.output_path(str(folder / "r.json"), "--json", "target:f", str(folder),
                           False) == str(folder / "r.json")
