"""The README's one install command installs what the app's menus need (issue 34 2.10): every
package the model readers import on demand is a dependency, not an extra."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _dependency_names() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0].lower().replace("_", "-")
            for dep in project["dependencies"]}


def _imported_on_demand() -> set[str]:
    found = set()
    for path in (ROOT / "engine").rglob("*.py"):
        for name in re.findall(r'need_module\("([\w.]+)"', path.read_text()):
            found.add(name.split(".")[0].lower())
    return found


def test_the_model_readers_packages_are_dependencies():
    needed = _imported_on_demand()
    assert needed >= {"onnx", "h5py", "safetensors"}  # the scan found the readers
    assert needed <= _dependency_names(), needed - _dependency_names()


def test_the_readme_installs_the_app_with_one_plain_command():
    text = (ROOT / "README.md").read_text()
    line = next(ln for ln in text.splitlines() if "pip install" in ln and "gradblocks" in ln)
    assert "pip install . && gradblocks" in line
