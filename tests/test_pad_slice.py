"""The Pad and Slice blocks (tf.raw_ops.Pad with zeros, tf.raw_ops.Slice): their outputs
against the definitions written out element by element, their one-line refusals naming the
attribute, and a canvas of both run by ``gradblocks run --out``, exported to NumPy and
cross-checked with TensorFlow and JAX where installed."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest

from blocks.registry import get_spec
from blocks.spec import AttrError, TensorSpec
from engine.graph.canvas import Canvas
from engine.graph.canvas_file import save_canvas
from tests.crosscheck_support import REPO, crosscheck_cli, framework_python, report


def _padded(x: np.ndarray, pairs) -> np.ndarray:
    """Zeros of the padded shape, x copied in at the before-offsets: element by element."""
    out = np.zeros([n + b + a for n, (b, a) in zip(x.shape, pairs)], x.dtype)
    for idx in itertools.product(*map(range, x.shape)):
        out[tuple(i + b for i, (b, _) in zip(idx, pairs))] = x[idx]
    return out


def _run(type_id: str, attrs: dict, x: np.ndarray) -> np.ndarray:
    spec = get_spec(type_id)
    resolved, errors = spec.resolve_attrs(attrs)
    assert errors == []
    inferred = spec.infer(resolved, {"input": TensorSpec(x.shape, str(x.dtype))})["output"]
    out = spec.run(resolved, {"input": x})["output"]
    assert out.shape == inferred.shape and out.dtype == x.dtype
    return out


@pytest.mark.parametrize("paddings", [[0, 0, 1, 2, 0, 3, 0, 0], [2, 0, 0, 0, 1, 1, 0, 1]])
def test_pad_puts_zeros_before_and_after_each_dimension(paddings):
    x = np.arange(1, 1 + 2 * 3 * 4 * 2, dtype=np.float32).reshape(2, 3, 4, 2)
    pairs = [paddings[i:i + 2] for i in range(0, 8, 2)]
    np.testing.assert_array_equal(_run("Pad", {"paddings": paddings}, x), _padded(x, pairs))


def test_slice_takes_size_elements_from_begin_and_minus_one_takes_the_rest():
    x = np.arange(5 * 6 * 7, dtype=np.float64).reshape(5, 6, 7)
    out = _run("Slice", {"begin": [1, 0, 2], "size": [3, -1, 4]}, x)
    want = np.array([[[x[i, j, k] for k in range(2, 6)] for j in range(6)] for i in range(1, 4)])
    np.testing.assert_array_equal(out, want)
    assert out.flags.c_contiguous


def test_slice_undoes_pad():
    x = np.random.default_rng(0).standard_normal((1, 3, 4, 5, 2)).astype(np.float32)
    p = _run("Pad", {"paddings": [0, 0, 1, 2, 0, 1, 3, 0, 0, 0]}, x)
    back = _run("Slice", {"begin": [0, 1, 0, 3, 0], "size": list(x.shape)}, p)
    np.testing.assert_array_equal(back, x)


@pytest.mark.parametrize(("type_id", "attrs", "attr", "message"), [
    ("Pad", {"paddings": [1, 1]}, "paddings", ("paddings [1, 1] has 2 entries: the input has 4 "
     "dimensions, so it takes 8 (before, after per dimension)")),
    ("Slice", {"begin": [0, 0, 5, 0], "size": [-1, -1, -1, -1]}, "begin",
     "begin[2] = 5 is past dimension 2 of the input [1, 3, 4, 2] (at most 4)"),
    ("Slice", {"begin": [0, 1, 0, 0], "size": [-1, 3, -1, -1]}, "size",
     ("size[1] = 3: begin 1 + size 3 must lie within dimension 1 of the input [1, 3, 4, 2] (3; "
     "size -1 takes the rest)")),
    ("Slice", {"begin": [0, 0], "size": [1, 1]}, "begin",
     "begin [0, 0] has 2 entries: the input has shape [1, 3, 4, 2], 4 dimensions"),
])
def test_a_bad_attribute_is_one_message_naming_it(type_id, attrs, attr, message):
    spec = get_spec(type_id)
    resolved, _ = spec.resolve_attrs(attrs)
    with pytest.raises(AttrError) as err:
        spec.infer(resolved, {"input": TensorSpec((1, 3, 4, 2), "float32")})
    assert (err.value.attr, str(err.value)) == (attr, message)


def test_negative_paddings_are_refused_by_the_attribute_rule():
    _, errors = get_spec("Pad").resolve_attrs({"paddings": [0, 0, -1, 0, 0, 0, 0, 0]})
    assert [e.attr for e in errors] == ["paddings"] and ">= 0" in str(errors[0])


def _canvas(path):
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": [1, 2, 3, 4, 2], "fill": "random_normal", "seed": 3,
                                "dtype": "float32"}, id="x")
    c.add_node("Pad", attrs={"paddings": [0, 0, 1, 0, 0, 2, 1, 1, 0, 0]}, id="pad")
    c.add_node("Slice", attrs={"begin": [0, 1, 1, 0, 0], "size": [-1, 2, 3, -1, 1]}, id="cut")
    c.add_node("Output", attrs={"name": "padded"}, id="o1")
    c.add_node("Output", attrs={"name": "cut"}, id="o2")
    for src, dst in (("x", "pad"), ("pad", "cut"), ("pad", "o1"), ("cut", "o2")):
        c.connect((src, "output"), (dst, "input"))
    save_canvas(c, path)
    return path


def _gb(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)], check=False,
                          capture_output=True, text=True, cwd=REPO)


def test_a_canvas_of_pad_and_slice_runs_and_exports_with_the_same_numbers(tmp_path):
    canvas = _canvas(tmp_path / "ps.gbc.json")
    proc = _gb("run", canvas, "--out", tmp_path / "r.npz")
    assert proc.returncode == 0, proc.stderr
    with np.load(tmp_path / "r.npz") as got:
        padded, cut = got["padded"], got["cut"]
    x = np.asarray(padded[:, 1:, :3, 1:5])  # the input, read back out of its padding
    np.testing.assert_array_equal(padded, _padded(x, [(0, 0), (1, 0), (0, 2), (1, 1), (0, 0)]))
    np.testing.assert_array_equal(cut, padded[:, 1:3, 1:4, :, :1])
    assert _gb("export", canvas, "-o", tmp_path / "s.py").returncode == 0
    script = subprocess.run([sys.executable, str(tmp_path / "s.py"), str(tmp_path / "s.npz")],
                            check=False, capture_output=True, text=True, cwd=tmp_path)
    assert script.returncode == 0, script.stderr
    with np.load(tmp_path / "s.npz") as by_script:
        np.testing.assert_array_equal(by_script["cut"], cut)


def test_crosscheck_of_pad_and_slice_agrees(tmp_path):
    ran = [n for n in ("tensorflow", "jax") if framework_python(n)]
    if not ran:
        pytest.skip("neither TensorFlow nor JAX is installed")
    proc = crosscheck_cli(_canvas(tmp_path / "ps.gbc.json"))
    rows = [r for r in report(proc)["rows"] if r["framework"] in ran]
    assert len(rows) == len(ran) * 2 and [r for r in rows if not r["agree"]] == [], proc.stdout


def test_the_pytorch_script_of_pad_and_slice_with_a_stand_in_torch_agrees(tmp_path):
    """F.pad's last-dimension-first order and the slices, run by the stand-in torch."""
    from tests.test_export_conv3d import _run_with_fake_torch

    canvas = _canvas(tmp_path / "ps.gbc.json")
    assert _gb("run", canvas, "--out", tmp_path / "r.npz").returncode == 0
    assert _gb("export", canvas, "--to", "pytorch", "-o", tmp_path / "t.py").returncode == 0
    got = _run_with_fake_torch(tmp_path / "t.py", tmp_path / "t.npz")
    with np.load(tmp_path / "r.npz") as want:
        for key in ("padded", "cut"):
            np.testing.assert_array_equal(got[key], want[key])


# -- outputs beyond the array limits ---------------------------------------------------------

#: (input shape, paddings, the output shape named): a product of dimensions past 2**63 bytes.
HUGE = [([1, 2], [0, 2**31 - 1, 0, 2**31 - 1], "[2147483648, 2147483649]"),
        ([4, 4, 4, 4], [2**31 - 1] * 8, "[4294967298, 4294967298, 4294967298, 4294967298]"),
        ([0, 4, 4], [0, 0, *[2**31 - 1] * 4], "[0, 4294967298, 4294967298]")]


def _pad_canvas(shape: list[int], paddings: list[int]) -> Canvas:
    """Tensor ``x`` (zeros of ``shape``) -> Pad "huge pad" -> Output; ``paddings`` set without
    the attribute check (as a canvas file can hold them)."""
    c = Canvas()
    c.add_node("Tensor", attrs={"shape": shape, "fill": "zeros", "dtype": "float32"}, id="x")
    c.add_node("Pad", id="pad", title="huge pad")
    c.nodes["pad"].attrs["paddings"] = paddings
    c.add_node("Output", attrs={"name": "padded"}, id="o1")
    c.connect(("x", "output"), ("pad", "input"))
    c.connect(("pad", "output"), ("o1", "input"))
    return c


@pytest.mark.parametrize(("shape", "paddings", "output"), HUGE)
def test_a_pad_whose_output_numpy_cannot_make_is_refused_naming_the_paddings(shape, paddings,
                                                                             output):
    from engine.graph.compiler import compile_canvas
    from engine.graph.report import problem_lines

    spec = get_spec("Pad")
    resolved, errors = spec.resolve_attrs({"paddings": paddings})
    assert errors == []
    with pytest.raises(AttrError) as err:
        spec.infer(resolved, {"input": TensorSpec(tuple(shape), "float32")})
    assert err.value.attr == "paddings"
    assert str(err.value).startswith(f"paddings {paddings}: the output shape {output} is too big")
    lines = problem_lines(compile_canvas(_pad_canvas(shape, paddings)))
    assert lines[0] == f"huge pad.paddings: {err.value}" and "\n" not in lines[0]
    assert lines[1:] == ["o1.input: input waits for huge pad, which has a problem"]


def test_paddings_past_int32_are_refused_by_the_attribute_rule():
    _, errors = get_spec("Pad").resolve_attrs({"paddings": [0, 2**62, 0, 0]})
    assert [e.attr for e in errors] == ["paddings"]
    assert str(errors[0]) == (f"paddings [0, {2**62}, 0, 0]: every entry must be <= 2147483647 "
                              f"(TensorFlow's int32 range), got {2**62}")
    with pytest.raises(AttrError, match="paddings"):
        Canvas().add_node("Pad", attrs={"paddings": [0, 2**62, 0, 0]})


def _write_text(canvas: Canvas, path):
    """``canvas`` written as its file text (no check of the attributes: a file may hold any)."""
    from engine.graph.canvas_file import dumps

    path.write_text(dumps(canvas))
    return path


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize(("shape", "paddings", "want"), [
    ([1, 2], [0, 2**62, 0, 0], "every entry must be <= 2147483647"),
    *[(s, p, f"the output shape {o} is too big") for s, p, o in HUGE[:2]]])
def test_the_cli_refuses_a_huge_pad_in_one_line_naming_it(tmp_path, command, shape, paddings,
                                                          want):
    path = _write_text(_pad_canvas(shape, paddings), tmp_path / "huge.gbc.json")
    proc = _gb(command, path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "paddings" in ln]
    assert line.strip().startswith(f"huge pad.paddings: paddings {paddings}: ") and want in line

