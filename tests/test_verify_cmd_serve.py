"""``--cmd-serve``: one long-lived process per worker (engine.verify.serve). A correct Python
and C command pass; a process that crashes, hangs or answers garbage fails exactly the case it
did that on, is restarted and the rest pass; error and unsupported answers are verdicts with
their message (escaped); nothing the process started outlives the sweep."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from engine.base.errors import InvalidArgumentError
from engine.verify.api import verify

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "verify_serve_conv.py")


def _serve(mode: str, tmp_path, **options):
    cmd = f"{sys.executable} {SCRIPT} {mode} {tmp_path / 'state'}"
    return verify(cmd_serve=cmd, op="Conv2D", convention="tf", **{"cases": 30, **options})


def _script(tmp_path, body: str) -> str:
    path = tmp_path / "serve.py"
    path.write_text(textwrap.dedent(body))
    return f"{sys.executable} {path}"


def test_a_correct_python_command_passes_every_case(tmp_path):
    report = _serve("correct", tmp_path)
    assert report.ok and report.cases == 30 and report.failed == 0


@pytest.mark.parametrize(("mode", "verdict", "message"), [
    ("crash", "crashed", "the serve process died of signal 11 before answering"),
    ("garbage", "crashed", ("the serve process answered 'hello there': expected one line, ok, "
                           "unsupported MESSAGE or error MESSAGE")),
    ("hang", "timeout", "the serve process gave no answer within 4.5 s")])
def test_a_misbehaving_process_fails_that_case_only_and_is_restarted(tmp_path, mode, verdict,
                                                                     message):
    report = _serve(mode, tmp_path, case_timeout=5.0)
    assert report.failed == 1
    (failure,) = report.failures
    assert failure.verdict.verdict == verdict and failure.verdict.message == message
    assert report.cases == 30 and not report.unsupported  # every other case ran and passed


def test_error_and_unsupported_answers_are_verdicts_with_their_message(tmp_path):
    cmd = _script(tmp_path, """\
        import sys
        for n, line in enumerate(sys.stdin):
            print("unsupported not today" if n % 2 else "error bad \\x1b[31m input", flush=True)
        """)
    report = verify(cmd_serve=cmd, op="Conv2D", convention="tf", cases=20)
    kinds = {f.verdict.verdict for f in report.failures}
    assert kinds == {"raised"} and report.unsupported > 0
    assert {f.verdict.message for f in report.failures} == {"bad \\x1b[31m input"}


def test_two_lines_for_one_request_is_a_protocol_error(tmp_path):
    cmd = _script(tmp_path, """\
        import sys
        import numpy as np
        for line in sys.stdin:
            np.save(line.split()[1], np.zeros(1))
            print("ok\\nok", flush=True)
        """)
    report = verify(cmd_serve=cmd, op="Conv2D", convention="tf", cases=5)
    assert {f.verdict.message for f in report.failures} == {
        ("the serve process answered more than one line: expected one line, ok, unsupported "
        "MESSAGE or error MESSAGE")}


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_nothing_the_process_started_outlives_the_sweep(tmp_path):
    report = _serve("child", tmp_path, cases=10)
    assert report.ok
    pids = [int(p) for p in (tmp_path / "state").read_text().split()]
    assert pids  # the worker's process and the standby's each started a child
    assert all(_gone(pid) for pid in pids)


def test_the_c_program_passes_and_refuses_float16(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    exe = tmp_path / "serve_conv2d"
    subprocess.run([cc, "-O2", "-o", str(exe), os.path.join(ROOT, "tests",
                                                           "verify_serve_conv2d.c")], check=True)
    report = verify(cmd_serve=str(exe), op="Conv2D", convention="tf", cases=200)
    assert report.ok and report.failed == 0 and report.unsupported == 0
    report = verify(cmd_serve=str(exe), op="Conv2D", convention="tf", cases=10, dtype="float16")
    assert report.ok and report.unsupported == 10


def test_bad_options_are_one_error_each():
    with pytest.raises(InvalidArgumentError, match="give one of a TARGET, --cmd or --cmd-serve"):
        verify("m:f", op="Conv2D", cmd_serve="prog")
    with pytest.raises(InvalidArgumentError, match="expected a command and its arguments"):
        verify(op="Conv2D", cmd_serve="  ")
    with pytest.raises(InvalidArgumentError, match="No closing quotation"):
        verify(op="Conv2D", cmd_serve="prog 'a")


def test_the_cli_runs_a_serve_command_and_refuses_it_with_a_target():
    env = {**os.environ, "PYTHONPATH": ROOT}
    run = [sys.executable, "-m", "engine.cli", "verify", "--op", "Conv2D", "--convention", "tf",
           "--cases", "10", "--cmd-serve", f"{sys.executable} {SCRIPT}"]
    p = subprocess.run(run, capture_output=True, text=True, env=env, check=False, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"verify {sys.executable} {SCRIPT} as tf Conv2D (float32): 10 "
                               "case(s), ok")
    p = subprocess.run([*run, "verify_zoo:loops_conv2d"], capture_output=True, text=True,
                       env=env, check=False, timeout=300)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        ('gradblocks: verify: give one of a TARGET (MODULE:FUNCTION), --cmd "COMMAND ARGS" or '
        '--cmd-serve "COMMAND ARGS"')]
