"""No module of engine/, blocks/ or app/ reaches into another's private names (issue 32 point 3): a
leading underscore means "this module's own", so a helper two modules share is a public name
of the module that owns it (with its docstring), never ``from X import _helper`` nor
``X._helper``. Walked with ast, so it needs no import of the code."""

import ast
from pathlib import Path

ROOT = Path(__file__).parents[1]
FIRST_PARTY = ("engine", "blocks", "app")

#: The private names still shared, as "file: module.name". engine/kernels/ is another change's
#: (its compiled helpers share numba_simd's intrinsics); every other module is held to the rule,
#: and an import added to the kernels fails here too.
KNOWN = (
    "engine/kernels/_compiled/depthwise_simd.py: engine.kernels._compiled.numba_simd._fmuladd",
    "engine/kernels/_compiled/depthwise_simd.py: engine.kernels._compiled.numba_simd._operands",
    "engine/kernels/_compiled/simd_runs.py: engine.kernels._compiled.numba_simd._operands",
    "engine/kernels/_compiled/winograd_simd.py: engine.kernels._compiled.numba_simd._operands",
)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    """Whether ``dotted`` names a module or package of this repository (not a function)."""
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _absolute(node: ast.ImportFrom, path: Path) -> str:
    """The module an ``ImportFrom`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = _module_of(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def private_reaches(path: Path) -> list[str]:
    """``module.name`` for each private name of another first-party module that ``path``
    imports (``from X import _name``) or reads off an imported module (``X._name``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    own = _module_of(path)
    found: list[str] = []
    modules: dict[str, str] = {}  # local name -> first-party module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FIRST_PARTY:
                    local = alias.asname or alias.name.split(".")[0]
                    modules[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, path)
            if source.split(".")[0] not in FIRST_PARTY or source == own:
                continue
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{source}.{alias.name}")
                else:
                    modules[alias.asname or alias.name] = f"{source}.{alias.name}"
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in modules
                and modules[node.value.id] != own and _is_module(modules[node.value.id])):
            found.append(f"{modules[node.value.id]}.{node.attr}")
    return sorted(set(found))


def test_no_module_imports_another_modules_private_name():
    reaches = [f"{path.relative_to(ROOT).as_posix()}: {name}"
               for top in FIRST_PARTY for path in sorted((ROOT / top).rglob("*.py"))
               for name in private_reaches(path)]
    assert sorted(set(reaches) - set(KNOWN)) == [], (
        "make the shared helper a public name of the module that owns it")


def test_the_check_sees_both_ways_in(tmp_path, monkeypatch):
    """A planted ``from engine.cli.common import _x`` and ``common._y`` are both found; a
    module's own private names and the standard library's are not."""
    package = tmp_path / "engine" / "cli"
    package.mkdir(parents=True)
    (package / "common.py").write_text("", encoding="utf-8")
    planted = package / "planted.py"
    planted.write_text("import _thread\nfrom engine.cli import common\n"
                       "from engine.cli.common import _x, say\nfrom . import _z\n"
                       "from engine.cli.planted import _own\n"
                       "common._y()\nsay._attr\n_thread._local\n", encoding="utf-8")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert private_reaches(planted) == ["engine.cli._z", "engine.cli.common._x",
                                        "engine.cli.common._y"]
