"""Everything the User Guide shows is installed with the package: each page and each picture a
page links to matches the package data that pyproject.toml declares (Help > User Guide and
`gradblocks guide` read them from the installed package)."""

import fnmatch
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]
PICTURE = re.compile(r"!\[[^\]]*\]\(\s*([^)\s]+)\s*\)")


def _shipped() -> list[str]:
    """Glob patterns, relative to the project root, of the installed data files."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = config["tool"]["setuptools"]
    packages = setuptools["packages"]["find"]["include"]
    patterns = []
    for package, globs in setuptools["package-data"].items():
        assert package in packages, f"{package} has package data but is not a package"
        patterns += [f"{package.replace('.', '/')}/{g}" for g in globs]
    return patterns


def test_every_guide_page_and_picture_ships():
    patterns = _shipped()
    pages = sorted((ROOT / "assets" / "guide").glob("*.md"))
    assert len(pages) >= 9
    wanted = [p.relative_to(ROOT).as_posix() for p in pages]
    for page in pages:
        for link in PICTURE.findall(page.read_text(encoding="utf-8")):
            if "://" in link:
                continue
            target = (page.parent / link).resolve()
            assert target.is_file(), f"{page.name}: {link} is missing"
            wanted.append(target.relative_to(ROOT).as_posix())
    assert any("screenshots" in w for w in wanted)
    missing = [w for w in wanted if not any(fnmatch.fnmatch(w, p) for p in patterns)]
    assert not missing, f"not installed: {missing}"
