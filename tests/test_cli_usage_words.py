"""Issue 31 point 5, the command line's half: a mistyped subcommand, ``gradblocks help`` and
``guide`` with more than one topic are one line (or the help) and the right exit status, with
or without a screen. Run as a user runs it: a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli_support import one_error

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "assets" / "examples" / "training_step.gbc.json"


def gradblocks(*args: str, screen: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    if screen:
        env["QT_QPA_PLATFORM"] = "offscreen"
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                          text=True, timeout=120, check=False, env=env, cwd=ROOT)


def test_a_mistyped_subcommand_is_named_with_the_nearest_one():
    proc = gradblocks("chek", str(EXAMPLE))
    line = one_error(proc, "unknown command 'chek'", "did you mean 'check'?")
    assert "unrecognized arguments" not in line


def test_a_mistyped_subcommand_is_refused_with_a_screen_too():
    # with a screen the app must not open on it (the word is no canvas file)
    one_error(gradblocks("expotr", str(EXAMPLE), "-o", "x.py", screen=True),
              "unknown command 'expotr'", "did you mean 'export'?")


def test_a_word_like_no_subcommand_lists_them():
    line = one_error(gradblocks("frobnicate"), "unknown command 'frobnicate'")
    assert "check" in line and "verify" in line and "did you mean" not in line


def test_help_prints_the_help_without_a_screen():
    proc = gradblocks("help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: gradblocks"), proc.stdout
    assert "no screen" not in proc.stderr


def test_help_of_a_subcommand():
    proc = gradblocks("help", "run")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: gradblocks run"), proc.stdout


def test_guide_refuses_what_follows_its_topic():
    proc = gradblocks("guide", "cli", "app", "--json")
    one_error(proc, "guide", "'app'", "--json")


def test_a_canvas_file_still_opens_the_app_route():
    # an existing file that is no subcommand goes to the app (refused here: no screen)
    proc = gradblocks(str(EXAMPLE))
    assert proc.returncode == 2 and "no screen" in proc.stderr, proc.stderr
