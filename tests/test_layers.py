"""The layers hold at run time too: the headless subcommands never import Qt, and every engine
module is placed in the import-linter layers contract (pyproject.toml; CI runs lint-imports)."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
EXAMPLE = ROOT / "assets" / "examples" / "conv2d_backprop_filter.gbc.json"
QT = ("PySide6", "shiboken6", "NodeGraphQt", "pyqtgraph", "app")


def imported_modules(args: list[str], tmp_path: Path) -> tuple[int, set[str]]:
    """Run python -X importtime ARGS; return the exit code and every module it imported."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPROFILEIMPORTTIME"}
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], check=False,
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    names = set()
    for line in proc.stderr.splitlines():
        # "import time: self [us] | cumulative | imported package"
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if not name.startswith("imported package"):
                names.add(name)
    return proc.returncode, names


def qt_modules(names: set[str]) -> list[str]:
    return sorted(n for n in names if n.split(".")[0] in QT)


@pytest.mark.parametrize("command", [["check"], ["run"], ["export", "-o", "out.py"],
                                     ["explain", "grad_filter", "0,0,0,0", "--json"],
                                     ["geometry", "grad_filter", "-o", "g.gif"]])
def test_cli_subcommands_never_import_qt(command, tmp_path):
    args = ["-m", "engine.cli", command[0], str(EXAMPLE), *command[1:]]
    code, names = imported_modules(args, tmp_path)
    assert code == 0
    # the parse sees what ran: the executor for every subcommand, the exporter for export
    assert {"numpy", "engine.executor", "engine.export", "blocks.conv"} <= names
    assert qt_modules(names) == []
    if command[0] == "export":
        assert (tmp_path / "out.py").is_file()
    if command[0] == "geometry":
        assert (tmp_path / "g.gif").is_file() and "PIL" in names


def test_console_entry_point_check_never_imports_qt(tmp_path):
    """The installed ``gradblocks`` script (engine.cli:main) as well as ``python -m``."""
    script = shutil.which("gradblocks", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the gradblocks console script is not installed next to this python")
    code, names = imported_modules([script, "check", str(EXAMPLE)], tmp_path)
    assert code == 0 and "engine.compiler" in names
    assert qt_modules(names) == []


def test_import_parse_sees_qt_when_it_is_imported(tmp_path):
    """The check above can fail: importing the app's main window shows up as Qt modules."""
    code, names = imported_modules(["-c", "import app.main_window"], tmp_path)
    assert code == 0
    assert {"PySide6", "NodeGraphQt", "app"} <= {n.split(".")[0] for n in qt_modules(names)}


def test_every_engine_module_has_a_layer():
    """A new engine module must be placed in the layers contract, or lint-imports ignores it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"]
                    if c["type"] == "layers")
    placed = {m.strip() for layer in contract["layers"]
              for m in layer.replace("|", ":").split(":")}
    modules = {f"engine.{p.stem}" for p in (ROOT / "engine").glob("*.py")
               if p.stem != "__init__"}
    assert modules - placed == set()
    assert "blocks" in placed
