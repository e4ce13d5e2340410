"""Modules and functions of engine/, blocks/ and app/ stay small enough to read whole (issue
32 point 4): no module over :data:`MAX_MODULE_LINES` lines, no function or method over
:data:`MAX_FUNCTION_LINES` lines, counted from its first decorator (or its ``def``) to its last
line, docstring and comments included. Measured with ast, so it needs no import of the code. A
module that grows past the limit splits by job; a function, into named steps."""

import ast
from pathlib import Path

ROOT = Path(__file__).parents[1]
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

#: Nothing is excused: every module of engine/, blocks/ and app/ is held to the rule.
CHECKED = ("engine", "blocks", "app")
#: Functions that stay long, and why: each is one compiled unit, a numba loop nest or an LLVM
#: code generator, whose parts split into functions would change what LLVM inlines and
#: vectorizes (the register tiles and the depthwise forward's tap loop).
LONG_COMPILED = {
    "engine/kernels/_compiled/numba_depthwise.py _forward",
    "engine/kernels/_compiled/tap_sums.py _codegen",
    "engine/kernels/_compiled/numba_simd.py _gemm_codegen",
    "engine/kernels/_compiled/numba_simd.py _gemm_codegen.codegen",
}


def _modules() -> list[Path]:
    return [path for top in CHECKED for path in sorted((ROOT / top).rglob("*.py"))]


def function_lengths(source: str) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, lines)`` of every function and method of ``source``."""
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}."
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                assert child.end_lineno is not None
                found.append((name[:-1], first, child.end_lineno - first + 1))
            visit(child, name)

    visit(ast.parse(source), "")
    return found


def test_no_module_is_over_the_limit():
    big = []
    for path in _modules():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            big.append(f"{path.relative_to(ROOT).as_posix()}: {lines} lines")
    assert big == [], f"split these by job (at most {MAX_MODULE_LINES} lines each)"


def test_no_function_is_over_the_limit():
    long = []
    for path in _modules():
        for name, first, lines in function_lengths(path.read_text(encoding="utf-8")):
            where = f"{path.relative_to(ROOT).as_posix()} {name}"
            if lines > MAX_FUNCTION_LINES and where not in LONG_COMPILED:
                long.append(f"{path.relative_to(ROOT).as_posix()}:{first} {name}: {lines} lines")
    assert long == [], f"split these into named steps (at most {MAX_FUNCTION_LINES} lines)"


def test_the_count_takes_decorators_and_nested_functions():
    source = ("@decorator\n@other(1)\ndef f():\n    def inner():\n        pass\n    return 1\n\n"
              "class C:\n    def m(self):\n        return 2\n")
    assert function_lengths(source) == [("f", 1, 6), ("f.inner", 4, 2), ("C.m", 9, 2)]


def test_each_long_compiled_function_is_there_and_still_long():
    """An excused function that was split or removed leaves the list."""
    for entry in LONG_COMPILED:
        path, name = entry.split(" ")
        lengths = {n: lines for n, _, lines in
                   function_lengths((ROOT / path).read_text(encoding="utf-8"))}
        assert lengths.get(name, 0) > MAX_FUNCTION_LINES, entry
