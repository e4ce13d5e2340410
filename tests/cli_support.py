"""What every hostile-input test of the command line checks of a refused command."""

from __future__ import annotations

import subprocess


def no_controls(text: str) -> bool:
    """No character ``str.isprintable`` refuses (BEL, ESC, bidi, ...), line ends aside."""
    return all(ch.isprintable() for ch in text.replace("\n", ""))


def one_error(proc: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, nothing on stdout, one line on stderr holding ``words``, no traceback, no
    control character; returns the line."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert no_controls(proc.stderr), repr(proc.stderr)
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    return proc.stderr
