"""One place for each fact (issue 21, point 7): the tolerance tables are written only in
``engine/base/dtypes.py`` (docstrings, the guide's table, exported scripts take them from there),
and an exported script's Compare, GradCheck and AdjointCheck verdicts are computed by the blocks'
own code: at the tolerance boundary (one step of the dtype inside and outside), with NaN and
infinities, the NumPy script and a framework script give exactly the blocks' numbers.

The framework scripts run here with a NumPy stand-in for the framework's ops (``PRELUDE`` over
:mod:`engine.kernels`): the script's own helpers and the blocks' code copied into it run as
written, and the TensorFlow, PyTorch and JAX scripts are checked to carry that code verbatim."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
import textwrap
import types
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from blocks.adjointcheck import ADJOINT_CHECK
from blocks.check_support import VERDICT_CODE
from blocks.checks import COMPARE, COMPARE_CODE
from blocks.gradcheck import GRAD_CHECK, sample_indices
from engine.base.dtypes import CHECK_TOLERANCE, RTOL, tolerance_text
from engine.export import frameworks, script_common
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import load_canvas, save_canvas
from engine.graph.compiler import compile_canvas
from engine.io.npz import write_npz
from tests.export_support import (
    REPO,
    assert_bitwise_equal,
    executor_outputs,
    run_script,
    script_env,
)

DTYPES = ("float64", "float32", "float16", "bfloat16")
EPS = {"float64": Fraction(2) ** -52, "float32": Fraction(2) ** -23,
       "float16": Fraction(2) ** -10, "bfloat16": Fraction(2) ** -7}

# --- the numbers in one place -----------------------------------------------------------------

#: Where the tables' numbers may be written: the file that defines them. The guide's table
#: (kernels.md, "Tolerances") is allowed too, line by line, because
#: :func:`test_the_guide_table_is_the_constants` checks it against them.
DEFINED_IN = Path("engine/base/dtypes.py")
GUIDE_TABLE = Path("assets/guide/kernels.md")
#: What is scanned: everything but the tests (which hold their own, independent reference
#: tolerances) and binary files.
ROOTS = ("engine", "blocks", "app", "assets", ".ci")
TOP_FILES = ("README.md", "pyproject.toml")
TEXT = {".py", ".md", ".toml", ".txt", ".cfg", ".json", ".sh", ""}

_NUMBER = r"(?<![\w.])(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])"
_DTYPE = r"\b(?:bfloat16|float16|float32|float64)\b"
#: A number next to a dtype name, either way round (``float32 2e-5``, ``"float32": 2e-5``,
#: ``2e-5 float32``, a table cell), or near a word naming a tolerance (``rtol=2e-5``,
#: ``_RTOL.get(dtype, 1e-12)``: within :data:`NEAR` characters on its line).
BESIDE_DTYPE = re.compile(rf"{_DTYPE}[\"'\s:=,|]{{1,8}}({_NUMBER})|({_NUMBER})[\"'\s:,|]{{1,8}}"
                          rf"{_DTYPE}")
TOLERANCE_WORD = re.compile(r"rtol|atol|toleran", re.IGNORECASE)
NEAR = 32
NUMBER = re.compile(_NUMBER)


def table_numbers() -> set[float]:
    return set(RTOL.values()) | set(CHECK_TOLERANCE.values())


def restated(text: str) -> list[tuple[int, str]]:
    """``(line, number)`` of every tolerance-table number ``text`` states (once per line):
    next to a dtype name (across line breaks too) or near a word naming a tolerance."""
    numbers = table_numbers()
    found = set()
    for m in BESIDE_DTYPE.finditer(text):
        token = m.group(1) or m.group(2)
        if float(token) in numbers:
            found.add((text.count("\n", 0, m.start(1) if m.group(1) else m.start(2)) + 1,
                       token))
    for i, line in enumerate(text.splitlines(), 1):
        for word in TOLERANCE_WORD.finditer(line):
            near = line[max(word.start() - NEAR, 0):word.end() + NEAR]
            found |= {(i, t) for t in NUMBER.findall(near) if float(t) in numbers}
    return sorted(found)


def scanned_files() -> list[Path]:
    files = [Path(name) for name in TOP_FILES]
    for root in ROOTS:
        files += sorted(p.relative_to(REPO) for p in (REPO / root).rglob("*")
                        if p.is_file() and p.suffix in TEXT and "__pycache__" not in p.parts)
    return files


def guide_table() -> tuple[dict[str, tuple[float, float]], set[int]]:
    """The rows of the table under "## Tolerances" in kernels.md (dtype -> (RTOL,
    CHECK_TOLERANCE)) and their line numbers."""
    lines = (REPO / GUIDE_TABLE).read_text(encoding="utf-8").splitlines()
    start = lines.index("## Tolerances")
    rows, numbers = {}, set()
    for i, line in enumerate(lines[start + 1:], start + 2):
        if line.startswith("## "):
            break
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] in DTYPES:
            rows[cells[0]] = (float(cells[1]), float(cells[2]))
            numbers.add(i)
        elif line.startswith("|"):
            assert cells in (["dtype", "RTOL", "CHECK_TOLERANCE"], ["-" * len(c) for c in cells])
    return rows, numbers


def test_the_scanner_finds_each_way_a_table_was_restated():
    """It bites: each restatement this issue removed is found (the old export template, block
    docstrings and guide sentences), the same numbers elsewhere are not."""
    old = {
        '_RTOL = {"float64": 1e-12, "float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2}': 4,
        "    rtol = max(_RTOL.get(dtype_a, 1e-12), _RTOL.get(dtype_b, 1e-12))": 1,
        "    ok = _verdict(max_abs, scale, rel, _CHECK_TOLERANCE.get(dtype, 1e-7))": 1,
        '"within the gradient dtype\'s tolerance (float64 1e-7, float32 1e-4, bfloat16 3e-2, "\n'
        '"float16 1e-2). Each sample costs two convolutions"': 4,
        "held to `RTOL[dtype] * max(|ours|, |theirs|)` (float32 2e-5, float64\n  1e-12, ...)": 2,
        "sum of the absolute values of its terms: 1e-12 float64, 2e-5 float32": 2,
        "| float32 | 2e-5 |": 1,
    }
    for text, count in old.items():
        assert len(restated(text)) == count, text
    assert restated('AttrSpec("epsilon", "float", 1e-3, minimum=1e-12, maximum=1e6)') == []
    assert restated("about 1e-7 for float32, a few 1e-4 for float16 (11 bits). All PASS "
                    "their own dtype's tolerance.") == []
    assert restated("ShapeOf  output  [4]  int32  2  4  2.75  0.03  filter_sizes") == []


def test_the_tolerance_numbers_are_written_only_in_engine_base_dtypes():
    _, table_lines = guide_table()
    files = scanned_files()
    assert DEFINED_IN in files and GUIDE_TABLE in files and Path("blocks/checks.py") in files
    found = []
    for path in files:
        try:
            text = (REPO / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if path == DEFINED_IN:
            assert len(restated(text)) >= len(RTOL) + len(CHECK_TOLERANCE)  # the definitions
            continue
        found += [f"{path}:{line}: {number}" for line, number in restated(text)
                  if not (path == GUIDE_TABLE and line in table_lines)]
    assert found == []


def test_the_guide_table_is_the_constants():
    rows, _ = guide_table()
    assert rows == {d: (RTOL[d], CHECK_TOLERANCE[d]) for d in DTYPES}
    assert set(RTOL) == set(CHECK_TOLERANCE) == set(DTYPES)


def test_block_docs_state_the_tables_made_from_the_constants():
    assert f"({tolerance_text(RTOL)})" in COMPARE.doc
    for spec in (GRAD_CHECK, ADJOINT_CHECK):
        assert f"({tolerance_text(CHECK_TOLERANCE)})" in spec.doc
    assert tolerance_text({"float32": 2.5e-5, "float16": 0.125}) == ("float32 2.5e-5, "
                                                                      "float16 1.25e-1")


def test_a_changed_table_changes_docs_verdicts_and_exported_scripts_alike():
    """Change the constants before anything reads them: the block docs, the Compare verdict,
    the GradCheck tolerance and the code an exported script carries all follow."""
    code = textwrap.dedent("""
        import numpy as np
        import engine.base.dtypes as d
        d.RTOL["float32"] = 7.5e-5
        d.CHECK_TOLERANCE["float16"] = 0.0625
        from blocks.checks import COMPARE, compare
        from blocks.adjointcheck import ADJOINT_CHECK
        from blocks.check_support import tolerance
        from engine.export.script_common import CHECK_CODE
        a, b = np.float32([1 + 2 ** -14]), np.float32([1])  # 6.1e-5 apart
        script = {"np": np}
        exec(CHECK_CODE, script)
        print("float32 7.5e-5" in COMPARE.doc, "float16 6.25e-2" in ADJOINT_CHECK.doc,
              bool(compare(a, b)["agree"]), tolerance(np.dtype(np.float16)),
              bool(script["compare_float64"](
                  a.astype(float), b.astype(float),
                  script["compare_rtol"]("float32", "float32"))["agree"]),
              script["check_tolerance"]("float16"))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, env=script_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True", "True", "0.0625", "True", "0.0625"]


# --- the exported scripts' verdicts are the blocks' --------------------------------------------

def _steps(dtype: str, tol: float) -> tuple[int, int]:
    """The largest ``k`` whose ``1 + k * eps`` is within ``tol`` of 1 (relative to the larger,
    exactly: Compare's ``max|a - b| <= tol * max|a|``) and ``k + 1``, which is not."""
    eps, t = EPS[dtype], Fraction(tol)
    k = int(t / (eps * (1 - t)))
    assert k * eps <= t * (1 + k * eps) < (k + 1) * eps
    return k, k + 1


def _check_steps(dtype: str) -> tuple[int, int]:
    """The largest ``k`` with ``k * eps <= CHECK_TOLERANCE`` (the relative error of
    ``1 + k * eps`` against 1) and ``k + 1``."""
    eps, t = EPS[dtype], Fraction(CHECK_TOLERANCE[dtype])
    k = int(t / eps)
    return k, k + 1


class _Canvas:
    """A canvas of check blocks at the boundaries, and the verdict each must give."""

    def __init__(self) -> None:
        self.c = Canvas()
        self.want: dict[str, bool] = {}  # result key of a verdict -> the definition's verdict
        self.n = 0

    def tensor(self, dtype: str, values: list, shape: list[int] | None = None) -> str:
        self.n += 1
        node = f"t{self.n}"
        nested = np.reshape(np.array(values, np.float64), shape or [len(values)]).tolist()
        self.c.add_node("Tensor", id=node, attrs={"dtype": dtype, "fill": "values",
                                                  "values": nested})
        return node

    def compare(self, name: str, a: str, b: str, agree: bool) -> None:
        self.c.add_node("Compare", id=name)
        self.c.connect((a, "output"), (name, "a"))
        self.c.connect((b, "output"), (name, "b"))
        self.want[f"{name}.agree"] = agree

    def check(self, kind: str, name: str, ports: dict[str, str], ok: bool | None,
              **attrs) -> None:
        self.c.add_node(kind, id=name, attrs=attrs)
        for port, node in ports.items():
            self.c.connect((node, "output"), (name, port))
        if ok is not None:
            self.want[f"{name}.ok"] = ok


def boundary_canvas(path: Path) -> tuple[Path, dict[str, bool]]:
    b = _Canvas()
    nan, inf = float("nan"), float("inf")
    # Compare: one step of each dtype inside and outside RTOL, and mixed dtypes (the looser)
    for dtype in DTYPES:
        eps = float(EPS[dtype])
        ref = b.tensor(dtype, [1.0, 0.5])
        for side, k in zip(("in", "out"), _steps(dtype, RTOL[dtype]), strict=True):
            b.compare(f"cmp_{dtype}_{side}", b.tensor(dtype, [1 + k * eps, 0.5]), ref,
                      side == "in")
    k_in, k_out = _steps("float16", max(RTOL["float16"], RTOL["float32"]))
    eps16 = float(EPS["float16"])
    b.compare("cmp_mixed_in", b.tensor("float16", [1 + k_in * eps16]),
              b.tensor("float32", [1.0]), True)
    b.compare("cmp_mixed_out", b.tensor("float16", [1 + k_out * eps16]),
              b.tensor("float32", [1.0]), False)
    # Compare: NaN, infinities (inf - inf is NaN), zeros
    for name, a, c, agree in (("nan", [nan, 1.0], [nan, 1.0], False),
                              ("inf_inf", [inf, 1.0], [inf, 1.0], False),
                              ("inf_one", [inf, 1.0], [1.0, 1.0], False),
                              ("one_minus_inf", [1.0, 1.0], [-inf, 1.0], False),
                              ("zeros", [0.0, -0.0], [0.0, 0.0], True)):
        b.compare(f"cmp_{name}", b.tensor("float32", a), b.tensor("float32", c), agree)

    # GradCheck of L = <conv(x, w), dy> with a 1x1 filter: dL/dw = 1 and dL/dx = [1, 0, 0, 0],
    # exact in float64 for the block's central differences (epsilon 1) and the script's L(e_i)
    shape = [1, 2, 2, 1]
    x = b.tensor("float64", [1.0, 2.0, 3.0, 4.0], shape)
    w = b.tensor("float64", [1.0], [1, 1, 1, 1])
    dy = b.tensor("float64", [1.0, 0.0, 0.0, 0.0], shape)
    dy0 = b.tensor("float64", [0.0, 0.0, 0.0, 0.0], shape)
    conv = {"strides": [1, 1, 1, 1], "padding": "VALID", "epsilon": 1.0}
    for dtype in DTYPES:
        eps = float(EPS[dtype])
        for side, k in zip(("in", "out"), _check_steps(dtype), strict=True):
            grad = b.tensor(dtype, [1 + k * eps], [1, 1, 1, 1])
            b.check("GradCheck", f"gc_{dtype}_{side}",
                    {"input": x, "filter": w, "out_backprop": dy, "gradient": grad},
                    side == "in", wrt="filter", samples=0, **conv)
            grad = b.tensor(dtype, [1 + k * eps, 0.0, 0.0, 0.0], shape)
            b.check("GradCheck", f"gcx_{dtype}_{side}",
                    {"input": x, "filter": w, "out_backprop": dy, "gradient": grad},
                    side == "in", wrt="input", samples=0, **conv)
    tol = CHECK_TOLERANCE["float32"]
    for name, value, ok in (("nan", nan, False), ("inf", inf, False),
                            ("zero_scale_in", tol / 2, True), ("zero_scale_out", tol * 2, False)):
        grad = b.tensor("float32", [value], [1, 1, 1, 1])
        b.check("GradCheck", f"gc_{name}", {"input": x, "filter": w, "gradient": grad,
                                            "out_backprop": dy0 if "zero" in name else dy},
                ok, wrt="filter", samples=0, **conv)
    # sampled: 2 of the 4 input elements, the sample drawn by the block's code in both
    grad = b.tensor("float32", [1.0, 0.0, 0.0, 0.0], shape)
    b.check("GradCheck", "gc_sampled", {"input": x, "filter": w, "out_backprop": dy,
                                        "gradient": grad}, True, wrt="input", samples=2, seed=3,
            **conv)

    # AdjointCheck: random data in three dtypes, and a NaN and an infinity in x
    rng = np.random.default_rng(21)
    for dtype in ("float32", "float16", "bfloat16"):
        xs, ws, dys = (rng.standard_normal(s).tolist() for s in (18, 16, 8))
        for name, first in (("", None), ("_nan", nan), ("_inf", inf)):
            if first is not None and dtype != "float32":
                continue
            xs = [first, *xs[1:]] if first is not None else xs
            b.check("AdjointCheck", f"adj_{dtype}{name}",
                    {"input": b.tensor(dtype, xs, [1, 3, 3, 2]),
                     "filter": b.tensor(dtype, ws, [2, 2, 2, 2]),
                     "out_backprop": b.tensor(dtype, dys, [1, 2, 2, 2])},
                    False if first is not None else None, strides=[1, 1, 1, 1],
                    padding="VALID")
    save_canvas(b.c, path)
    return path, b.want


@pytest.fixture(scope="module")
def boundary(tmp_path_factory):
    folder = tmp_path_factory.mktemp("boundary")
    path, want = boundary_canvas(folder / "boundary.gbc.json")
    plan = compile_canvas(load_canvas(path), folder)
    assert not plan.errors, plan.errors
    ours = executor_outputs(plan)  # the blocks' runs
    for key, verdict in want.items():
        assert bool(ours[key]) is verdict, key  # the definition, at the boundary
    adj = [k for k in ours if k.startswith("adj_") and k.endswith(".ok") and "_n" not in k
           and "_i" not in k]
    assert adj and all(bool(ours[k]) for k in adj)  # right kernels pass
    return folder, path, plan, ours


def test_the_numpy_script_gives_the_blocks_numbers_and_verdicts_bit_for_bit(boundary):
    folder, path, _, ours = boundary
    script = folder / "numpy_script.py"
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "export", str(path), "-o",
                           str(script)], capture_output=True, text=True, cwd=REPO,
                          env=script_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    text = script.read_text(encoding="utf-8")
    assert "from blocks.checks import compare" in text  # the block's own function
    run_script(script, folder / "numpy_out.npz")
    assert_bitwise_equal(folder / "numpy_out.npz", ours)


#: A NumPy stand-in for a framework: the ops a target's PRELUDE defines, over engine.kernels
#: with the same calls the blocks make, so the script's numbers can be compared bit for bit.
STAND_IN = types.SimpleNamespace(NAME="numpy-stand-in", MODULE="numpy (stand-in)",
                                 known_defect=lambda op, depthwise, dilated: None, PRELUDE='''
from engine import kernels
from engine.base.dtypes import DTYPES


def _tensor(a, dtype):
    return np.asarray(a).astype(DTYPES[dtype])


def _fw(t):
    return t


def _np(t):
    a = np.asarray(t)
    return a.astype(np.float32) if a.dtype == DTYPES["bfloat16"] else a


def _transpose(t, perm):
    return np.ascontiguousarray(np.transpose(t, perm))


def _cast(t, dtype):
    return np.asarray(t).astype(DTYPES[dtype])


def _kw(g):
    (t, b), (left, right) = g["pads"]
    nhwc = g["data_format"] == "NHWC"
    four = (lambda r, c: [1, r, c, 1]) if nhwc else (lambda r, c: [1, 1, r, c])
    pads = [0, 0, t, b, left, right, 0, 0] if nhwc else [0, 0, 0, 0, t, b, left, right]
    return {"strides": four(*g["strides"]), "padding": g["padding"],
            "explicit_paddings": pads if g["padding"] == "EXPLICIT" else [],
            "data_format": g["data_format"], "dilations": four(*g["dilations"])}


def _forward(x, w, g):
    op = kernels.depthwise_conv2d_native if g["depthwise"] else kernels.conv2d
    return op(x, w, **_kw(g))


def _backprop_filter(x, dy, g):
    op = (kernels.depthwise_conv2d_native_backprop_filter if g["depthwise"]
          else kernels.conv2d_backprop_filter)
    return op(x, np.array(g["filter_shape"]), dy, **_kw(g))


def _backprop_input(w, dy, g):
    op = (kernels.depthwise_conv2d_native_backprop_input if g["depthwise"]
          else kernels.conv2d_backprop_input)
    return op(np.array(g["input_shape"]), w, dy, **_kw(g))
''')


def test_a_framework_script_gives_the_blocks_numbers_and_verdicts_bit_for_bit(boundary,
                                                                            monkeypatch):
    """The framework template (COMMON: the script's Compare, GradCheck and AdjointCheck helpers
    and the blocks' code it carries) run with the stand-in's ops equals the blocks' runs."""
    folder, _, plan, ours = boundary
    monkeypatch.setitem(frameworks.TARGETS, STAND_IN.NAME, STAND_IN)
    exported = frameworks.export_framework_script(plan, STAND_IN.NAME,
                                                  script_name="framework_script.py")
    script = folder / "framework_script.py"
    script.write_text(exported.script, encoding="utf-8")
    with open(folder / exported.companion, "wb") as f:
        write_npz(f, exported.sources)
    run_script(script, folder / "framework_out.npz")
    assert_bitwise_equal(folder / "framework_out.npz", ours)


def _functions() -> list:
    return [*COMPARE_CODE, *VERDICT_CODE, sample_indices]


@pytest.mark.parametrize("target", sorted(frameworks.TARGETS))
def test_the_framework_scripts_carry_the_blocks_code_verbatim_and_no_other_numbers(boundary,
                                                                                    target):
    """Without the framework: the script's text holds each function the blocks' runs call,
    exactly as its module defines it, the two tables as literals equal to the constants, no
    name defined twice, and no tolerance number anywhere else."""
    _, _, plan, _ = boundary
    text = frameworks.export_framework_script(plan, target).script
    for function in _functions():
        assert textwrap.dedent(inspect.getsource(function)) in text, function.__name__
    tree = ast.parse(text)
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    names += [t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Name) and t.id in {*names, "RTOL", "CHECK_TOLERANCE"}]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    tables = {t.id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
              for t in n.targets if isinstance(t, ast.Name) and t.id in ("RTOL",
                                                                         "CHECK_TOLERANCE")}
    assert tables == {"RTOL": RTOL, "CHECK_TOLERANCE": CHECK_TOLERANCE}
    in_tables = {id(c) for n in tree.body if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", "") in tables for c in ast.walk(n.value)}
    strays = [c.value for c in ast.walk(tree) if isinstance(c, ast.Constant)
              and isinstance(c.value, float) and c.value in table_numbers()
              and id(c) not in in_tables]
    assert strays == []
    # the helpers judge with the blocks' functions
    helpers = {n.name: {c.func.id for c in ast.walk(n) if isinstance(c, ast.Call)
                        and isinstance(c.func, ast.Name)}
               for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"compare_float64", "compare_rtol"} <= helpers["_compare"]
    assert {"sample_indices", "gradient_errors", "check_tolerance"} <= helpers["_grad_check"]
    assert {"adjoint_errors", "check_tolerance"} <= helpers["_adjoint_check"]


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # generator expressions, comprehensions
            names |= _global_names(const)
    return names


def test_the_script_code_needs_nothing_but_numpy_and_the_tables():
    """The copied functions use no global of their modules but NumPy, the two tables and one
    another, so a script defines them without GradBlocks (then run, to be sure)."""
    allowed = {f.__name__ for f in _functions()} | {"np", "RTOL", "CHECK_TOLERANCE"}
    for function in _functions():
        used = {n for n in _global_names(function.__code__) if n in function.__globals__}
        assert used <= allowed, (function.__name__, used - allowed)
    namespace: dict = {"np": np}
    exec(script_common.CHECK_CODE, namespace)  # noqa: S102 - the exporter's own text
    got = namespace["gradient_errors"](np.float32([1, 2]), np.arange(2), np.array([1.0, 2.0]),
                                       namespace["check_tolerance"]("float32"))
    assert bool(got["ok"]) and float(got["max_abs_error"]) == 0
    got = namespace["adjoint_errors"](1.0, float("nan"), 1.0, 1.0)
    assert not bool(got["ok"]) and np.isnan(got["max_rel_error"])
