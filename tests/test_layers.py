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
    assert {"numpy", "engine.graph.executor", "engine.export", "blocks.conv"} <= names
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
    assert code == 0 and "engine.graph.compiler" in names
    assert qt_modules(names) == []


def test_import_parse_sees_qt_when_it_is_imported(tmp_path):
    """The check above can fail: importing the app's main window shows up as Qt modules."""
    code, names = imported_modules(["-c", "import app.main_window"], tmp_path)
    assert code == 0
    assert {"PySide6", "NodeGraphQt", "app"} <= {n.split(".")[0] for n in qt_modules(names)}


#: engine/ is a front page: the notebook API and at most this many entries in all.
MAX_ENGINE_ENTRIES = 12


def test_every_engine_package_has_a_layer():
    """Each entry of engine/ (a package, or the notebook API module) is placed in the layers
    contract, or lint-imports would ignore it; siblings in a layer are independent ("|", never
    ":"); and the contracts inside packages are exhaustive (every module placed)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    top = next(c for c in contracts if c["id"] == "layers")
    assert not any(":" in layer for c in contracts if c["type"] == "layers"
                   for layer in c["layers"])
    placed = {m.strip() for layer in top["layers"] for m in layer.split("|")}
    engine = ROOT / "engine"
    entries = {p.stem for p in engine.glob("*.py") if p.stem != "__init__"}
    entries |= {p.name for p in engine.iterdir() if (p / "__init__.py").is_file()}
    assert {f"engine.{e}" for e in entries} - placed == set()
    assert {"app", "blocks"} <= placed
    assert len(entries) <= MAX_ENGINE_ENTRIES
    inner = [c for c in contracts if c.get("containers")]
    assert {"engine.kernels", "engine.kernels._compiled"} <= {
        name for c in inner for name in c["containers"]}
    assert all(c.get("exhaustive") for c in inner)


#: The engine packages that import no block module (the "engine-not-blocks" contract).
NOT_BLOCKS = {"engine.base", "engine.shapes", "engine.kernels", "engine.io", "engine.view",
              "engine.explain", "engine.verify", "engine.export"}


def test_the_engine_below_the_graph_imports_no_block_module():
    """The tolerance rule is the engine's (engine.base.tolerance): the contract names the
    packages that must not import blocks, and ignores only the exporter's copies of the check
    blocks' code."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"]
                    if c["id"] == "engine-not-blocks")
    assert contract["type"] == "forbidden" and contract["forbidden_modules"] == ["blocks"]
    assert set(contract["source_modules"]) == NOT_BLOCKS
    assert all(i.startswith("engine.export.") for i in contract["ignore_imports"])


@pytest.mark.parametrize("module", ["engine/verify/verdicts.py", "engine/base/tolerance.py"])
def test_lint_imports_fails_on_an_engine_import_of_blocks(module, tmp_path):
    """The contract bites: a copy of the sources with ``import blocks.check_support`` added to
    an engine.verify or engine.base module fails lint-imports, naming that import."""
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.skip("lint-imports is not installed next to this python")
    for name in ("app", "blocks", "engine"):
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([lint, "--no-cache"], check=False, capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=300)

    assert run().returncode == 0
    target = tmp_path / module
    target.write_text(target.read_text(encoding="utf-8") + "\nimport blocks.check_support\n",
                      encoding="utf-8")
    proc = run()
    dotted = module.removesuffix(".py").replace("/", ".")
    assert proc.returncode != 0
    assert f"{dotted} -> blocks.check_support" in proc.stdout
