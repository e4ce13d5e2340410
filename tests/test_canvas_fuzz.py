"""Fuzz: the shipped examples mutated into hostile files, at the JSON level (any value replaced
by junk of another type, keys deleted or added, list items duplicated, node ids swapped) and at
the byte level (truncated, random or non-UTF-8 bytes inserted, a key repeated, a BOM, NaN /
Infinity tokens, huge number literals).

Whatever the bytes: ``load_canvas`` raises only :class:`CanvasError`, whose problems all have a
``$`` path; whatever loads compiles without raising; whatever compiles runs without raising and
without an internal error. ``--hypothesis-show-statistics`` shows how the examples ended.
"""

import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from engine.graph.canvas import Canvas, CanvasError
from engine.graph.canvas_file import load_canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor

EXAMPLE_FILES = sorted((Path(__file__).parents[1] / "assets" / "examples").glob("*.gbc.json"))
EXAMPLES = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in EXAMPLE_FILES}

#: Small enough that no mutation can make a run slow: the run at most 8 MiB (outputs and
#: workspace) ...
MEMORY_LIMIT = 8 * 2**20
#: ... and all outputs together at most this many elements (the largest example has 19883).
MAX_ELEMENTS = 2**16

# -- junk values ----------------------------------------------------------------------------------
HOSTILE_TEXT = st.one_of(
    st.sampled_from(["", " ", "\n", "a\nb", "\x00", "\x1b[31m", "\ud800", "\udfff", "\u2028",
                     "\u202e", "\ufeff", "..", "/dev/null", "SAME\n", "NHWC ", "x" * 300,
                     "output", "input", "Tensor", "float32"]),
    st.text(max_size=12),
)
EDGE_INTS = st.sampled_from([0, -1, 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63, -(2**63) - 1,
                             10**30, -(10**30)])
EDGE_FLOATS = st.sampled_from([1e308, -1e308, 5e-324, 0.5, -0.0, float("nan"), float("inf"),
                               float("-inf")])


def _deep_list(depth: int) -> list:
    out: list = []
    for _ in range(depth):
        out = [out]
    return out


SCALARS = st.one_of(st.none(), st.booleans(), EDGE_INTS, EDGE_FLOATS, st.integers(-2, 8),
                    HOSTILE_TEXT)
#: Junk by JSON type: a value is replaced by junk of another type (or, for a number, by an edge
#: number or a small one: huge, negative, zero, non-finite).
JUNK_BY_TYPE = {
    "null": st.none(),
    "bool": st.booleans(),
    "number": st.one_of(EDGE_INTS, EDGE_FLOATS, st.integers(-2, 8), st.integers(), st.floats()),
    "str": HOSTILE_TEXT,
    "list": st.one_of(st.integers(1, 200).map(_deep_list), st.lists(SCALARS, max_size=6)),
    "dict": st.dictionaries(HOSTILE_TEXT, SCALARS, max_size=3),
}
JUNK = st.one_of(*JUNK_BY_TYPE.values())


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _junk_for(old):
    """Junk of another JSON type than ``old``; a number may also become an edge number."""
    kind = _json_type(old)
    return st.one_of(*(s for k, s in JUNK_BY_TYPE.items() if k != kind or k == "number"))


def _paths(value, path=()) -> list[tuple]:
    """Every JSON path in ``value`` (the root is ``()``), containers and leaves alike."""
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*path, i))
    return out


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


# -- structure-level mutations --------------------------------------------------------------------
@st.composite
def mutated_documents(draw):
    """An example document after one to three structural mutations (and which ones)."""
    name = draw(st.sampled_from(sorted(EXAMPLES)))
    doc = {"root": copy.deepcopy(EXAMPLES[name])}  # a holder, so the root can be replaced too
    kinds = []
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc["root"], ("root",))
        kind = draw(st.sampled_from(["replace", "replace", "replace", "delete", "duplicate",
                                     "swap_ids", "unknown_key"]))
        kinds.append(kind)
        if kind == "swap_ids":
            nodes = doc["root"].get("nodes") if isinstance(doc["root"], dict) else None
            nodes = nodes if isinstance(nodes, list) else []
            ids = [i for i, n in enumerate(nodes) if isinstance(n, dict) and "id" in n]
            if len(ids) >= 2:
                a, b = draw(st.lists(st.sampled_from(ids), min_size=2, max_size=2, unique=True))
                nodes[a]["id"], nodes[b]["id"] = nodes[b]["id"], nodes[a]["id"]
            continue
        # half of the time inside a node's attributes, where compile and run get to see it
        in_attrs = [p for p in paths if len(p) > 4 and p[1] == "nodes" and p[3] == "attrs"]
        path = draw(st.sampled_from(in_attrs if in_attrs and draw(st.booleans()) else paths))
        parent, key = _get(doc, path[:-1]), path[-1]
        if kind == "replace":
            parent[key] = draw(_junk_for(parent[key]))
        elif kind == "delete" and len(path) > 1:
            del parent[key]
        elif kind == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        elif kind == "duplicate" and isinstance(parent, dict) and len(parent) > 1:
            # another key of the same object gets this key's value
            other = draw(st.sampled_from(sorted(k for k in parent if k != key)))
            parent[other] = copy.deepcopy(parent[key])
        elif kind == "unknown_key":
            target = parent[key]
            if isinstance(target, dict):
                target[draw(HOSTILE_TEXT)] = draw(JUNK)
    return doc["root"], kinds


def _to_bytes(doc) -> bytes:
    return json.dumps(doc, indent=1).encode("utf-8", "surrogatepass")


# -- byte-level mutations -------------------------------------------------------------------------
_KEY = re.compile(rb'"([A-Za-z_]+)": ')
_NUMBER = re.compile(rb"(?<![\w.\"])-?\d+(\.\d+)?([eE][-+]?\d+)?(?![\w\"])")
NUMBER_TOKENS = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e400", b"1" + b"0" * 5000,
                 b"9" * 40, b"-" + b"9" * 4400, b"1.5e-400", b"0x10", b"+1", b"01", b"1."]
BAD_BYTES = [b"\xff", b"\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80",
             b"\x00", b"\xef\xbb\xbf"]


@st.composite
def mutated_bytes(draw):
    """A (possibly already structurally mutated) example's bytes after one or two byte-level
    mutations."""
    if draw(st.booleans()):
        doc, _ = draw(mutated_documents())
    else:
        doc = EXAMPLES[draw(st.sampled_from(sorted(EXAMPLES)))]
    data = _to_bytes(doc)
    kinds = []
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["truncate", "insert_bytes", "bad_utf8", "duplicate_key",
                                     "bom", "number_token"]))
        kinds.append(kind)
        at = draw(st.integers(0, len(data)))
        if kind == "truncate":
            data = data[:at]
        elif kind == "insert_bytes":
            data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
        elif kind == "bad_utf8":
            data = data[:at] + draw(st.sampled_from(BAD_BYTES)) + data[at:]
        elif kind == "bom":
            data = b"\xef\xbb\xbf" + data
        elif kind == "duplicate_key":
            keys = list(_KEY.finditer(data))
            if keys:
                m = draw(st.sampled_from(keys))
                value = draw(st.sampled_from([b"0", b"null", b'"x"', b"[]", b"{}", b"true"]))
                data = data[:m.start()] + m.group(0) + value + b", " + data[m.start():]
        elif kind == "number_token":
            numbers = list(_NUMBER.finditer(data))
            if numbers:
                m = draw(st.sampled_from(numbers))
                data = data[:m.start()] + draw(st.sampled_from(NUMBER_TOKENS)) + data[m.end():]
    return data, kinds


# -- the properties -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _load(folder: Path, data: bytes) -> Canvas | None:
    """load_canvas on ``data``; None when it is refused (with every problem at a $ path)."""
    path = folder / "fuzzed.gbc.json"
    path.write_bytes(data)
    try:
        return load_canvas(path)
    except CanvasError as err:
        assert err.problems, "a CanvasError without problems"
        for where, message in err.problems:
            assert isinstance(where, str) and where.startswith("$"), (where, message)
            assert isinstance(message, str) and message, where
        event(f"loader refused (first problem at {_path_head(err.problems[0][0])})")
        return None


def _path_head(path: str) -> str:
    """``$.nodes[3].attrs.shape[1]`` -> ``$.nodes[].attrs``: few classes for the statistics
    (a path through an odd key ends in ``[?]``)."""
    plain = re.match(r"\$(\.[A-Za-z_][A-Za-z0-9_]*|\[\d+\])*", path).group(0)
    head = re.sub(r"(\[\d+\])+", "[]", ".".join(plain.split(".")[:3]))
    return head + ("[?]" if path[len(plain):].startswith("[") else "")


def _compile_and_run(folder: Path, canvas: Canvas) -> None:
    plan = compile_canvas(canvas, folder, memory_limit=MEMORY_LIMIT)
    if not plan.steps:
        event("compiler refused every block")
        return
    elements = sum(int(np.prod(ts.shape, dtype=np.float64)) for ts in plan.specs.values())
    if elements > MAX_ELEMENTS:
        event("compiled, too large to run here")
        return
    result = Executor(memory_limit=MEMORY_LIMIT).run(plan)
    for node_id, message in result.errors.items():
        assert "internal error" not in message, (node_id, message)
    for (node_id, port), value in result.outputs.items():
        assert tuple(np.shape(value)) == tuple(plan.specs[(node_id, port)].shape), node_id
    event("compiled with problems" if plan.errors else "compiled")
    event("a block failed at run time" if result.errors else "every compiled block ran")


#: cheap examples (a few ms each): three times the profile's number
FUZZ = settings(max_examples=3 * settings.default.max_examples)


@FUZZ
@given(mutated_documents())
def test_mutated_documents_are_refused_or_compile_and_run(folder, mutation):
    doc, kinds = mutation
    for kind in kinds:
        event(f"mutation: {kind}")
    canvas = _load(folder, _to_bytes(doc))
    if canvas is not None:
        _compile_and_run(folder, canvas)


@FUZZ
@given(mutated_bytes())
def test_mutated_bytes_are_refused_or_compile_and_run(folder, mutation):
    data, kinds = mutation
    for kind in kinds:
        event(f"mutation: {kind}")
    canvas = _load(folder, data)
    if canvas is not None:
        event("loaded despite byte mutation")
        _compile_and_run(folder, canvas)


def test_the_mutations_reach_every_stage(folder):
    """The unmutated examples load, compile and run: the fuzz starts from working files, so
    refusals above are the mutations' doing."""
    for path in EXAMPLE_FILES:
        canvas = _load(folder, path.read_bytes())
        plan = compile_canvas(canvas, path.parent, memory_limit=MEMORY_LIMIT)
        assert plan.ok and plan.steps
        assert sum(int(np.prod(ts.shape)) for ts in plan.specs.values()) <= MAX_ELEMENTS
        assert not Executor(memory_limit=MEMORY_LIMIT).run(plan).errors
