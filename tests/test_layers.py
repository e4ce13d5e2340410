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
    """The installed ``gradblocks`` script (app.launch:main, which imports nothing of the app
    but itself before a subcommand runs) as well as ``python -m``."""
    script = shutil.which("gradblocks", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the gradblocks console script is not installed next to this python")
    code, names = imported_modules([script, "check", str(EXAMPLE)], tmp_path)
    assert code == 0 and "engine.graph.compiler" in names
    assert qt_modules(names) == ["app", "app.launch"]


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


class LintedCopy:
    """A copy of the sources (app, blocks, engine, pyproject.toml) that ``lint-imports`` checks:
    :meth:`injected` adds an import to one module, runs it and puts the module back."""

    def __init__(self, root: Path, lint: str):
        self.root, self.lint = root, lint
        for name in ("app", "blocks", "engine"):
            shutil.copytree(ROOT / name, root / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        shutil.copy(ROOT / "pyproject.toml", root)

    def run(self) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(self.root)}
        return subprocess.run([self.lint, "--no-cache"], check=False, capture_output=True,
                              text=True, cwd=self.root, env=env, timeout=300)

    def injected(self, module: str, imported: str) -> subprocess.CompletedProcess:
        target = self.root / module
        source = target.read_text(encoding="utf-8")
        target.write_text(f"{source}\nimport {imported}\n", encoding="utf-8")
        try:
            return self.run()
        finally:
            target.write_text(source, encoding="utf-8")


@pytest.fixture(scope="module")
def linted_copy(tmp_path_factory) -> LintedCopy:
    """One copy for the injection tests below; lint-imports passes on it as it is."""
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.skip("lint-imports is not installed next to this python")
    copy = LintedCopy(tmp_path_factory.mktemp("linted"), lint)
    proc = copy.run()
    assert proc.returncode == 0, proc.stdout
    return copy


def contract_broken(report: str, name: str) -> bool:
    """Whether lint-imports' ``report`` lists the contract named ``name...`` as broken (its
    names are short enough to fit on one line)."""
    return any(line.startswith(name) and " BROKEN" in line for line in report.splitlines())


def _dotted(module: str) -> str:
    return module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


@pytest.mark.parametrize("module", ["engine/verify/verdicts.py", "engine/base/tolerance.py"])
def test_lint_imports_fails_on_an_engine_import_of_blocks(module, linted_copy):
    """The contract bites: a copy of the sources with ``import blocks.check_support`` added to
    an engine.verify or engine.base module fails lint-imports, naming that import."""
    proc = linted_copy.injected(module, "blocks.check_support")
    assert proc.returncode != 0
    assert f"{_dotted(module)} -> blocks.check_support" in proc.stdout


#: Imports each contract inside a package forbids: (the module given the import, the module it
#: imports, the contract that breaks). The first: the circle engine.cli had (issue 32, point 3).
CIRCLES = [
    ("engine/cli/geometry.py", "engine.cli.commands", "cli: "),
    ("engine/cli/import_model.py", "engine.cli.commands", "cli: "),
    ("engine/cli/geometry.py", "engine.cli.explain", "cli: "),  # siblings are independent
    ("engine/cli/common.py", "engine.cli.canvas_commands", "cli: "),
    ("engine/verify/report.py", "engine.verify.sweep", "verify: "),
    ("engine/verify/serve.py", "engine.verify.runner", "verify: "),
    # the worker <-> serve circle: the case (de)serialisation both share is case_io's now
    ("engine/verify/serve.py", "engine.verify.worker", "verify: "),
    ("engine/verify/case_io.py", "engine.verify.serve", "verify: "),
    ("engine/explain/element_index.py", "engine.explain.terms", "explain: "),
    ("engine/explain/terms.py", "engine.explain.reverse", "explain: "),
    # the canvas split by job: the file format's reading below the model, the files above
    ("engine/graph/canvas_document.py", "engine.graph.canvas", "graph: "),
    ("engine/graph/canvas.py", "engine.graph.canvas_file", "graph: "),
    ("engine/graph/canvas_items.py", "engine.graph.canvas", "graph: "),
    ("engine/graph/import_files.py", "engine.graph.layer_canvas", "graph: "),
    ("engine/verify/call_model.py", "engine.verify.mistakes", "verify: "),
    ("engine/verify/unwritten.py", "engine.verify.diagnose", "verify: "),
    ("engine/io/models/keras_weights.py", "engine.io.models.keras_reader", "models: "),
    ("engine/io/models/onnx_reader.py", "engine.io.models.keras_reader", "models: "),
    ("engine/io/models/model_import.py", "engine.io.models.onnx_tensors", "models: "),
    ("app/document.py", "app.main_window", "app: "),
    ("app/viewer/image.py", "app.startup", "app: "),
]


@pytest.mark.parametrize("module, imported, contract", CIRCLES,
                         ids=[f"{m}->{i}" for m, i, _c in CIRCLES])
def test_lint_imports_fails_on_an_import_up_a_package(module, imported, contract, linted_copy):
    """The contracts inside engine.cli, engine.verify, engine.explain, engine.io.models and app
    bite: an import from a lower module up (or across independent siblings) fails lint-imports,
    naming it."""
    proc = linted_copy.injected(module, imported)
    assert proc.returncode != 0
    assert f"{_dotted(module)} -> {imported}" in proc.stdout
    assert contract_broken(proc.stdout, contract), proc.stdout


@pytest.mark.parametrize("module", ["engine/cli/commands.py", "engine/graph/report.py",
                                    "engine/__init__.py"])
def test_lint_imports_fails_on_an_engine_import_of_the_app(module, linted_copy):
    """Nothing in the engine imports the app, the command line included: the console script is
    app.launch, which hands the app's start-up to engine.cli (no ignored import any more)."""
    proc = linted_copy.injected(module, "app.startup")
    assert proc.returncode != 0
    assert f"{_dotted(module)} -> app.startup" in proc.stdout
    assert contract_broken(proc.stdout, "nothing outside app imports app or Qt"), proc.stdout


def test_the_package_contracts_of_the_engine_excuse_no_import():
    """engine.cli, engine.verify, engine.explain and engine.io.models hold without exceptions:
    no circle is left to excuse."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}
    for name in ("cli", "verify", "explain", "models", "graph"):
        assert contracts[name].get("exhaustive") is True, name
        assert not contracts[name].get("ignore_imports"), name


def test_no_contract_excuses_an_engine_import_of_the_app():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for contract in config["tool"]["importlinter"]["contracts"]:
        assert not [i for i in contract.get("ignore_imports", [])
                    if i.split(" -> ")[0].split(".")[0] == "engine"
                    and i.split(" -> ")[1].split(".")[0] == "app"]
    assert config["project"]["scripts"]["gradblocks"] == "app.launch:main"
