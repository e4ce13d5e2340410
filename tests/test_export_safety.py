"""Export is code generation: user text (ids, titles, names, paths, file names) reaches the script
only as string literals, values (NaN and infinities included) round-trip bit for bit, and the
exporter knows no block type."""

import ast
import dataclasses
import math
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blocks.registry import REGISTRY
from blocks.spec import BlockSpec, PortSpec
from engine.base.dtypes import DTYPES
from engine.base.literal import literal
from engine.export.to_numpy import export_script
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import load_canvas, save_canvas
from engine.graph.compiler import compile_canvas
from engine.graph.result_names import result_name_problem
from tests.export_support import (
    REPO,
    assert_bitwise_equal,
    code_shape,
    executor_outputs,
    relabel,
    run_script,
    run_scripts,
    string_constants,
)

ATTACKS = [
    "x\nimport os; os._exit(3)\n#",
    "y\rraise SystemExit(4)\r",
    '"""; raise SystemExit(5); """',
    "q'\"\\",
    "back\\",
    "#c",
    "\u00fc\u202e\U0001f600 \u2028\u2029",
    "a-b",
    "a_b",
    "v0",
    "results",
    "{0}%s",
]


def _bits(x: int) -> float:
    return struct.unpack("<d", x.to_bytes(8, "little"))[0]


NONFINITE = [math.nan, -math.nan, _bits(0x7FF8000000000123), math.inf, -math.inf, -0.0, 5e-324,
             0.1]


def _canvas(npy: str, values: list) -> Canvas:
    """Every kind of block, ids n0..n10: values (with NaN/Inf) and a .npy file feed Conv2D,
    its gradients, a transpose, a comparison and two Outputs."""
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "values", "values": values, "dtype": "float32"}, id="n0")
    c.add_node("Tensor", attrs={"fill": "file", "path": npy, "dtype": "float32"}, id="n1")
    c.add_node("Conv2D", attrs={"padding": "VALID"}, id="n2")
    c.add_node("ShapeOf", id="n3")
    c.add_node("IntVector", attrs={"values": [2, 2, 1, 1]}, id="n4")
    c.add_node("Conv2DBackpropInput", attrs={"padding": "VALID"}, id="n5")
    c.add_node("Conv2DBackpropFilter", attrs={"padding": "VALID"}, id="n6")
    c.add_node("Transpose", attrs={"perm": [0, 3, 1, 2]}, id="n7")
    c.add_node("Compare", id="n8")
    c.add_node("Output", attrs={"name": "r9"}, id="n9")
    c.add_node("Output", attrs={"name": "r10"}, id="n10")
    for src, dst in [("n0", ("n2", "input")), ("n1", ("n2", "filter")), ("n0", ("n3", "input")),
                     ("n3", ("n5", "input_sizes")), ("n1", ("n5", "filter")),
                     ("n2", ("n5", "out_backprop")), ("n0", ("n6", "input")),
                     ("n4", ("n6", "filter_sizes")), ("n2", ("n6", "out_backprop")),
                     ("n0", ("n7", "input")), ("n5", ("n8", "a")), ("n0", ("n8", "b")),
                     ("n6", ("n9", "input")), ("n7", ("n10", "input"))]:
        c.connect((src, "output"), dst)
    return c


def _plan(tmp_path: Path, npy_dir: str, ids: list[str], names: list[str]):
    """The canvas above compiled, then given ids and Output names the loader would refuse."""
    folder = tmp_path / npy_dir
    folder.mkdir(parents=True)
    np.save(folder / "w\r.npy", np.array([1.5, -2, 0.25, 3], np.float32).reshape(2, 2, 1, 1))
    values = np.array(NONFINITE + [1.0], np.float64).reshape(1, 3, 3, 1).tolist()
    plan = compile_canvas(_canvas(str(folder / "w\r.npy"), values), tmp_path)
    assert plan.ok, plan.errors
    plan = relabel(plan, {f"n{i}": ids[i] for i in range(11)})
    named = iter(names)
    plan.steps = [dataclasses.replace(s, attrs={**s.attrs, "name": next(named)})
                  if s.spec.type_id == "Output" else s for s in plan.steps]
    return plan


def test_hostile_ids_titles_names_paths_and_values_export_a_script_that_runs_exactly(tmp_path):
    ids = ATTACKS[:11]
    titles = dict(zip(ids, reversed(ATTACKS), strict=False))
    names = ['"""\nimport os; os._exit(6)\n"""', "o\\'\r"]
    source = 'c"""\n\r\\\'#\u00fc.gbc.json'
    plan = _plan(tmp_path, 'd"""\n\\\'#\u00fc\u202e', ids, names)
    script = export_script(plan, source, titles)

    # same code, docstring and comments as with tame text: user text changed only literals
    tame = _plan(tmp_path / "tame", "d", [f"i{i}" for i in range(11)], ["n", "n"])
    assert code_shape(script) == code_shape(export_script(tame, "s", {}))
    # ... and each piece of user text is a whole string literal
    constants = string_constants(script)
    for text in [*ids, *titles.values(), *names, source]:
        assert text in constants, text
    assert script.isascii()

    path = tmp_path / "s.py"
    path.write_text(script, encoding="utf-8")
    run_script(path, tmp_path / "out.npz")
    assert_bitwise_equal(tmp_path / "out.npz", executor_outputs(plan))
    with np.load(tmp_path / "out.npz") as data:
        assert sorted(data.files) == sorted(names)  # the Outputs' names, nothing else


def test_gradblocks_export_of_a_hostile_canvas_file_reproduces_gradblocks_run(tmp_path):
    """Through the real CLI: a canvas file name with a newline and triple quotes, hostile
    (valid) titles and Output names, a .npy in a hostile folder, NaN/Inf values."""
    folder = tmp_path / 'd"""\n\\\'#\u00fc'
    folder.mkdir()
    np.save(folder / "w.npy", np.array([1.5, -2, 0.25, 3], np.float32).reshape(2, 2, 1, 1))
    values = np.array(NONFINITE + [1.0], np.float64).reshape(1, 3, 3, 1).tolist()
    c = _canvas(str(folder / "w.npy"), values)
    for node_id, title in zip(c.nodes, ATTACKS[2:] + ['"""'] * 11, strict=False):
        if "\n" not in title and "\r" not in title and "\u2028" not in title:
            c.set_title(node_id, title)
    c.set_attr("n9", "name", '""" + __import__("os")._exit(7) + """')
    c.set_attr("n10", "name", "'#\"\u00fc")
    canvas = tmp_path / 'c"""\n#\'\\\u00fc.gbc.json'
    save_canvas(c, canvas)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for args in (["run", str(canvas), "--out", "r.npz"], ["export", str(canvas), "-o", "s.py"]):
        proc = subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=tmp_path,
                              env=env, capture_output=True, check=False)
        assert proc.returncode == 0, proc.stderr
    script = (tmp_path / "s.py").read_text()
    assert {canvas.name, '"""', c.nodes["n9"].attrs["name"]} <= string_constants(script)
    run_script(tmp_path / "s.py", tmp_path / "o.npz")
    with np.load(tmp_path / "r.npz") as run:
        assert_bitwise_equal(tmp_path / "o.npz", {k: run[k] for k in run.files})


@pytest.mark.parametrize("target", ["tensorflow", "pytorch", "jax"])
def test_hostile_text_stays_data_in_framework_scripts(tmp_path, target):
    """``export --to`` a framework: user text changes only string literals, each whole."""
    from engine.export.frameworks import export_framework_script

    ids = ATTACKS[:11]
    titles = dict(zip(ids, reversed(ATTACKS), strict=False))
    names = ['"""\nimport os; os._exit(6)\n"""', "o\\'\r"]
    source = 'c"""\n\r\\\'#\u00fc.gbc.json'
    plan = _plan(tmp_path, 'd"""\n\\\'#\u00fc\u202e', ids, names)
    exported = export_framework_script(plan, target, source, titles)
    tame = _plan(tmp_path / "tame", "d", [f"i{i}" for i in range(11)], ["n", "n"])
    assert code_shape(exported.script) == code_shape(
        export_framework_script(tame, target, "s", {}).script)
    constants = string_constants(exported.script)
    for text in [*ids, *titles.values(), *names, source]:
        assert text in constants, text
    assert exported.script.isascii()
    assert list(exported.sources) == ["s0", "s1"]  # generated keys, never user text


def test_hostile_names_and_paths_survive_a_framework_script_run(tmp_path, monkeypatch,
                                                                capsys):
    """Through the CLI with a NumPy stand-in framework: a hostile script path (its companion
    beside it), Output names as keys, and no injected code runs (it would exit 6 or 7)."""
    import types

    from engine.cli import commands
    from engine.export import frameworks
    from tests.test_crosscheck import FAKE_PRELUDE

    fake = types.ModuleType("fakefw")
    fake.NAME, fake.MODULE, fake.PRELUDE = "jax", "numpy", FAKE_PRELUDE
    monkeypatch.setitem(frameworks.TARGETS, "jax", fake)
    folder = tmp_path / 'd"""\n\\\'#\u00fc'
    folder.mkdir()
    np.save(folder / "w.npy", np.array([1.5, -2, 0.25, 3], np.float32).reshape(2, 2, 1, 1))
    values = np.array(NONFINITE + [1.0], np.float64).reshape(1, 3, 3, 1).tolist()
    c = _canvas(str(folder / "w.npy"), values)
    c.set_attr("n9", "name", '""" + __import__("os")._exit(7) + """')
    c.set_attr("n10", "name", "'#\"\u00fc")
    canvas = tmp_path / "c.gbc.json"
    save_canvas(c, canvas)
    script = folder / 's"""\n#.py'
    assert commands.main(["export", str(canvas), "--to", "jax", "-o", str(script)]) == 0
    companion = frameworks.sources_path(script)  # named in the script, beside it
    assert companion.parent == folder and companion.is_file()
    assert re.fullmatch(r's"""\n#\.sources\.[0-9a-f]{12}\.npz', companion.name)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "o.npz")],
                          capture_output=True, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    with np.load(tmp_path / "o.npz") as data:
        assert sorted(data.files) == sorted(c.nodes[n].attrs["name"] for n in ("n9", "n10"))
        # as saved (JSON keeps no NaN sign)
        want = executor_outputs(compile_canvas(load_canvas(canvas), tmp_path))["'#\"\u00fc"]
        assert data["'#\"\u00fc"].tobytes() == want.tobytes()  # the transposed source


def test_variables_are_generated_so_similar_ids_keep_their_own_values(tmp_path):
    """``a-b`` and ``a_b`` once became the same variable: the script returned the wrong tensor."""
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "arange", "shape": [2]}, id="a-b")
    c.add_node("Tensor", attrs={"fill": "ones", "shape": [2]}, id="a_b")
    plan = compile_canvas(c)
    script = export_script(plan)
    path = tmp_path / "s.py"
    path.write_text(script)
    run_script(path, tmp_path / "o.npz")
    with np.load(tmp_path / "o.npz") as data:
        np.testing.assert_array_equal(data["a-b"], [1, 2])
        np.testing.assert_array_equal(data["a_b"], [1, 1])
    names = {n.id for n in ast.walk(ast.parse(script)) if isinstance(n, ast.Name)}
    assert not {"a_b", "v_a_b_output"} & names


def test_nan_and_infinities_in_values_round_trip_exactly_in_every_dtype(tmp_path):
    c = Canvas()
    for dtype in DTYPES:
        c.add_node("Tensor", attrs={"fill": "values", "values": [NONFINITE], "dtype": dtype},
                   id=dtype)
    plan = compile_canvas(c)
    path = tmp_path / "s.py"
    path.write_text(export_script(plan))
    run_script(path, tmp_path / "o.npz")
    expected = executor_outputs(plan)
    assert all(np.isnan(v).sum() == 3 and np.isinf(v).sum() == 2 for v in expected.values())
    assert_bitwise_equal(tmp_path / "o.npz", expected)


class _Sneaky(str):
    def __repr__(self):
        return "x\nimport os"


@pytest.mark.parametrize("value", [
    None, True, 7, -(2**70), -0.0, 5e-324, 1e308, math.inf, -math.inf, math.nan, -math.nan,
    _bits(0x7FF0000000000001), _bits(0xFFF4000000000000), np.float32(0.1), np.int64(-3),
    "", 'a"""\n\r\\\'\x00\ud800\u202e\U0001f600', _Sneaky("s"), [1, [2.5, "x"]], (1,), (),
    {"k\n": (None, [math.nan])}, np.array([[1.0, math.inf]]),
])
def test_literal_evaluates_to_the_same_bits(value):
    text = literal(value)
    assert text.isascii() and "\n" not in text and "\r" not in text

    def canon(v):
        if isinstance(v, (np.ndarray, np.generic)):
            v = v.tolist()
        if isinstance(v, float):
            return ("f", struct.pack("<d", v))
        if isinstance(v, (list, tuple)):
            return (type(v).__name__, [canon(x) for x in v])
        if isinstance(v, dict):
            return ("d", [(canon(k), canon(x)) for k, x in v.items()])
        return (type(v).__name__ if not isinstance(v, str) else "str", str(v) if
                isinstance(v, str) else v)

    assert canon(eval(text, {})) == canon(value)


def test_literal_refuses_other_objects():
    for value in (object(), {1, 2}, b"bytes", Path("p")):
        with pytest.raises(TypeError):
            literal(value)


# -- a new block type needs no exporter change ----------------------------------------------

def test_a_new_block_type_exports_through_its_emit_rule_alone(tmp_path, monkeypatch):
    negate = BlockSpec(
        type_id="NegateForTest", title="Negate", category="Tensors", op="Neg", doc="-x",
        inputs=(PortSpec("input"),), outputs=(PortSpec("output"),), attrs=(),
        infer=lambda attrs, inputs: {"output": inputs["input"]},
        run=lambda attrs, inputs: {"output": np.negative(inputs["input"])},
        emit=lambda attrs, inputs, outputs: [
            f"{outputs['output']} = operator.neg({inputs['input']})"],
        imports=("import operator",),
    )
    monkeypatch.setitem(REGISTRY, negate.type_id, negate)
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "arange", "shape": [3]}, id="x")
    c.add_node("NegateForTest", id="neg")
    c.connect(("x", "output"), ("neg", "input"))
    plan = compile_canvas(c)
    script = export_script(plan)
    assert "import operator" in script
    path = tmp_path / "s.py"
    path.write_text(script)
    run_script(path, tmp_path / "o.npz")
    assert_bitwise_equal(tmp_path / "o.npz", executor_outputs(plan))


def test_the_exporter_names_no_block_type():
    source = (Path(__file__).parents[1] / "engine" / "export" / "to_numpy.py").read_text()
    code = ast.parse(source)
    strings = {n.value for n in ast.walk(code) if isinstance(n, ast.Constant)
               and isinstance(n.value, str)}
    names = {n.id for n in ast.walk(code) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(code) if isinstance(n, ast.Attribute)}
    for type_id in REGISTRY:
        assert type_id not in strings and type_id not in names, type_id
        assert not any(f"'{type_id}'" in s or f'"{type_id}"' in s for s in strings)
    assert "blocks" not in {a.module.split(".")[0] for a in ast.walk(code)
                            if isinstance(a, ast.ImportFrom) and a.module}


def test_every_block_type_has_an_emit_rule():
    assert all(callable(spec.emit) for spec in REGISTRY.values())


# -- random canvases with hostile titles and names ------------------------------------------

_TOKENS = ['"""', "'''", "'", '"', "\\", "#", "\\n", "{}", "%s", "\u00fc", "\u202e", "\U0001f600"]
HOSTILE_TEXT = st.lists(
    st.one_of(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
              st.sampled_from(_TOKENS)), max_size=12).map("".join)
#: Hostile text that is a valid result name (no / or \\, not blank, no outer spaces).
HOSTILE_NAME = HOSTILE_TEXT.map(
    lambda t: t.replace("/", "").replace("\\", "").strip() or "r").filter(
    lambda t: result_name_problem(t) is None)
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)


@st.composite
def canvases(draw) -> Canvas:
    """A valid random chain: two sources, a (depthwise) conv, some of its gradients, a
    transpose there and back compared with the conv output, and an Output, all with hostile
    titles and names."""
    c = Canvas()

    def add(type_id, attrs=None, **inputs):
        node = c.add_node(type_id, attrs=attrs or {}, title=draw(HOSTILE_TEXT))
        for port, src in inputs.items():
            c.connect((src, "output"), (node.id, port))
        return node.id

    def source(shape):
        fill = draw(st.sampled_from(["random_normal", "arange", "values"]))
        attrs = {"fill": fill, "shape": shape, "dtype": dtype, "seed": draw(st.integers(0, 9))}
        if fill == "values":
            flat = draw(st.lists(FLOATS, min_size=int(np.prod(shape)),
                                 max_size=int(np.prod(shape))))
            arr = np.array(flat, np.float64)
            with np.errstate(over="ignore"):  # a finite literal the dtype cannot hold is an
                over = np.isinf(arr.astype(DTYPES[dtype])) & np.isfinite(arr)  # error: say inf
            arr[over] = np.copysign(np.inf, arr[over])
            attrs["values"] = arr.reshape(shape).tolist()
        return add("Tensor", attrs)

    dtype = draw(st.sampled_from(list(DTYPES)))
    fmt = draw(st.sampled_from(["NHWC", "NCHW"]))
    n, h, w, cin, cout = (draw(st.integers(1, k)) for k in (2, 5, 5, 3, 3))
    kh, kw, s = draw(st.integers(1, h)), draw(st.integers(1, w)), draw(st.integers(1, 2))
    depthwise = draw(st.booleans())
    x_shape = [n, h, w, cin] if fmt == "NHWC" else [n, cin, h, w]
    conv = {"strides": [1, s, s, 1] if fmt == "NHWC" else [1, 1, s, s],
            "padding": draw(st.sampled_from(["SAME", "VALID"])), "data_format": fmt}
    x, f = source(x_shape), source([kh, kw, cin, cout])
    y = add("DepthwiseConv2D" if depthwise else "Conv2D", conv, input=x, filter=f)
    prefix = "DepthwiseBackprop" if depthwise else "Conv2DBackprop"
    if draw(st.booleans()):
        add(prefix + "Filter", conv, input=x, filter_sizes=add("ShapeOf", input=f),
            out_backprop=y)
    if draw(st.booleans()):
        sizes = add("IntVector", {"values": x_shape})
        add(prefix + "Input", conv, input_sizes=sizes, filter=f, out_backprop=y)
    perm = draw(st.permutations(range(4)))
    back = add("Transpose", {"perm": list(np.argsort(perm).tolist())},
               input=add("Transpose", {"perm": list(perm)}, input=y))
    add("Compare", a=y, b=back)
    if draw(st.booleans()):  # with an Output only its value is stored, else every output
        add("Output", {"name": draw(HOSTILE_NAME)}, input=y)
    return c


def _tamed(canvas: Canvas) -> Canvas:
    tame = canvas.copy()
    for node in tame.nodes.values():
        node.title = "t"
        if node.type == "Output":
            node.attrs["name"] = "n"
    return tame


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(canvases(), min_size=4, max_size=4))
def test_random_canvases_with_hostile_titles_export_scripts_that_reproduce_the_run(
        tmp_path_factory, batch):
    folder = tmp_path_factory.mktemp("batch")
    pairs, expected = [], []
    for i, canvas in enumerate(batch):
        plan = compile_canvas(canvas)
        assert plan.ok, plan.errors
        titles = {k: n.title for k, n in canvas.nodes.items()}
        script = export_script(plan, "c.gbc.json", titles)
        tame = _tamed(canvas)
        assert code_shape(script) == code_shape(
            export_script(compile_canvas(tame), "c.gbc.json", {k: "t" for k in tame.nodes}))
        constants = string_constants(script)
        assert set(titles.values()) <= constants
        path = folder / f"s{i}.py"
        path.write_text(script, encoding="utf-8")
        pairs.append((path, folder / f"o{i}.npz"))
        expected.append(executor_outputs(plan))
    run_scripts(pairs, folder)
    for (_, npz), want in zip(pairs, expected, strict=True):
        assert_bitwise_equal(npz, want)
