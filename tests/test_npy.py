"""Strict .npy inputs (engine.io.npy): the header is checked at compile time, reading takes exactly
the data, integers only when they convert exactly; check and run agree on every file."""

import json
import subprocess
import sys

import numpy as np
import pytest

from engine.base.dtypes import DTYPES
from engine.base.errors import InvalidArgumentError
from engine.graph.canvas import Canvas
from engine.graph.compiler import compile_canvas
from engine.graph.executor import Executor
from engine.io import npy
from engine.io.sources import generate


def npy_bytes(header: str, data: bytes = b"", version: tuple[int, int] = (1, 0)) -> bytes:
    """A .npy file with this header text (padded as NumPy pads it) and data."""
    text = header.encode("latin1")
    width = 2 if version == (1, 0) else 4
    pad = -(8 + width + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    return b"\x93NUMPY" + bytes(version) + len(text).to_bytes(width, "little") + text + data


def header(descr: str = "'<f4'", fortran: str = "False", shape: str = "(1, 5, 5, 2)") -> str:
    return f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, }}"


def file_canvas(path, dtype: str = "float32") -> Canvas:
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "file", "path": str(path), "dtype": dtype}, id="x")
    c.add_node("Output", id="out")
    c.connect(("x", "output"), ("out", "input"))
    return c


F4_DATA = np.zeros(50, np.float32).tobytes()
HOSTILE = {
    "negative dim": (npy_bytes(header(shape="(-1, 5, 5, 2)"), F4_DATA), ">= 0"),
    "2**62 dim": (npy_bytes(header(shape="(2**62, 2)"), F4_DATA), "not a Python literal"),
    "huge dim": (npy_bytes(header(shape=f"({2**62}, {2**62})"), F4_DATA), "is too big"),
    "bool in shape": (npy_bytes(header(shape="(True, 5, 5, 2)"), F4_DATA), "tuple of integers"),
    "list shape": (npy_bytes(header(shape="[1, 5, 5, 2]"), F4_DATA), "tuple of integers"),
    "truncated data": (npy_bytes(header(), F4_DATA[:-4]), "(truncated)"),
    "extra data": (npy_bytes(header(), F4_DATA + b"\0" * 4), "204 after its header"),
    "no magic": (b"PK\x03\x04" + b"\0" * 100, "no \\x93NUMPY magic"),
    "empty": (b"", "no \\x93NUMPY magic"),
    "version 9": (npy_bytes(header(), F4_DATA, (9, 0)), "version 9.0"),
    "truncated header": (npy_bytes(header(), F4_DATA)[:30], "truncated"),
    "header not a dict": (npy_bytes("[1, 2]", F4_DATA), "exactly the keys"),
    "extra key": (npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (50,), "
                            "'x': 1}", F4_DATA), "exactly the keys"),
    "code in header": (npy_bytes("__import__('os').system('true')", F4_DATA), "not a Python"),
    "header too long": (b"\x93NUMPY\x02\x00" + (10**6).to_bytes(4, "little") + b" " * 100,
                        "more than 10000"),
    "fortran_order 1": (npy_bytes(header(fortran="1"), F4_DATA), "True or False"),
    "bad descr": (npy_bytes(header(descr="'<q9'"), F4_DATA), "is not a dtype"),
    "object": (npy_bytes(header(descr="'|O'", shape="(2,)"), b"\0" * 16), "object values"),
    "structured": (npy_bytes(header(descr="[('a', '<f4')]", shape="(50,)"), F4_DATA),
                   "structured values"),
    "void": (npy_bytes(header(descr="'|V4'", shape="(50,)"), F4_DATA), "structured or void"),
    "complex": (npy_bytes(header(descr="'<c8'", shape="(25,)"), F4_DATA), "complex64"),
    "bool": (npy_bytes(header(descr="'|b1'", shape="(200,)"), F4_DATA), "bool values"),
    "datetime": (npy_bytes(header(descr="'<M8[s]'", shape="(25,)"), F4_DATA),
                 "datetime64[s]"),
    "timedelta": (npy_bytes(header(descr="'<m8[s]'", shape="(25,)"), F4_DATA),
                  "timedelta64[s]"),
    "string": (npy_bytes(header(descr="'<U1'", shape="(50,)"), F4_DATA), "string values"),
    "float128": (npy_bytes(header(descr="'<f16'", shape="(50,)"), F4_DATA * 4),
                 "extended-precision"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_npy_files_are_refused_by_check_naming_the_path(tmp_path, name):
    data, words = HOSTILE[name]
    path = tmp_path / "x.npy"
    path.write_bytes(data)
    with pytest.raises(InvalidArgumentError) as info:
        npy.read_header(str(path))
    assert words in str(info.value) and str(info.value).startswith("path ")
    plan = compile_canvas(file_canvas(path))
    (err,) = plan.errors["x"]
    assert err.attr == "path" and words in err.message
    assert "waits for x" in plan.errors["out"][0].message


def test_cli_check_and_run_agree_on_hostile_files(tmp_path):
    for name, (data, words) in HOSTILE.items():
        (tmp_path / "x.npy").write_bytes(data)
        canvas = tmp_path / "c.gbc.json"
        canvas.write_text(json.dumps(file_canvas("x.npy").to_json()))
        for command in ("check", "run"):
            proc = subprocess.run([sys.executable, "-m", "engine.cli", command, str(canvas)],
                                  capture_output=True, text=True, timeout=60, check=False)
            assert proc.returncode == 2, (name, command, proc.stdout, proc.stderr)
            assert "x.path: path" in proc.stderr and words in proc.stderr, (name, proc.stderr)
            assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_0d_array_becomes_shape_1_at_check_and_run(tmp_path):
    np.save(tmp_path / "s.npy", np.float64(2.5))
    plan = compile_canvas(file_canvas(tmp_path / "s.npy"))
    assert plan.ok and plan.specs[("x", "output")].shape == (1,)
    result = Executor().run(plan)
    assert not result.errors
    assert result.outputs[("out", "output")].tolist() == [2.5]
    assert result.outputs[("out", "output")].dtype == np.float32


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("stored", ["<f2", "<f4", ">f8", "<i1", "<u2", ">i4", "<i8", "<u8"])
def test_numbers_are_read_as_numpy_casts_them(tmp_path, stored, dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((3, 4, 5)) * 100).astype(stored)
    if a.dtype.kind in "iu":
        a = np.abs(rng.integers(0, 200, (3, 4, 5))).astype(stored)  # exact in every dtype
    for order in ("C", "F"):
        np.save(tmp_path / "a.npy", np.asarray(a, order=order))
        out = generate("file", (), dtype, path=str(tmp_path / "a.npy"))
        assert out.dtype == DTYPES[dtype] and out.flags.c_contiguous
        assert out.shape == a.shape
        np.testing.assert_array_equal(out.astype(np.float64),
                                      a.astype(DTYPES[dtype]).astype(np.float64))


@pytest.mark.parametrize(("stored", "value", "dtype", "index"), [
    (np.int64, 2**24 + 1, "float32", [1, 2]),
    (np.int32, 2049, "float16", [0, 0]),
    (np.int32, 70000, "float16", [2, 3]),  # beyond float16's range
    (np.int16, 257, "bfloat16", [1, 0]),
    (np.int64, 2**53 + 1, "float64", [2, 1]),
    (np.int64, 2**63 - 1, "float64", [0, 3]),  # rounds to 2**63, beyond int64
    (np.uint64, 2**64 - 1, "float64", [1, 1]),
    (np.int64, -(2**63) + 1, "float32", [2, 2]),
])
def test_integers_that_do_not_convert_exactly_are_named_when_read(tmp_path, stored, value,
                                                                   dtype, index):
    a = np.arange(12, dtype=stored).reshape(3, 4)
    a[tuple(index)] = value
    np.save(tmp_path / "a.npy", a)
    plan = compile_canvas(file_canvas(tmp_path / "a.npy", dtype))
    # check reads the values as the run does (issue 31 point 9), and names the same one
    [error] = plan.errors["x"]
    assert error.attr == "path"
    assert f"value {value} at index {index} does not convert exactly to {dtype}" in error.message
    with pytest.raises(InvalidArgumentError) as info:  # the run's read: the same rule
        generate("file", (), dtype, path=str(tmp_path / "a.npy"))
    assert f"value {value} at index {index} does not convert exactly to {dtype}" in str(
        info.value) and "internal error" not in str(info.value)


def test_exact_integers_at_the_edges_are_accepted(tmp_path):
    a = np.array([2**24, -(2**24), 2**63 - 2**39, -(2**63)], np.int64)  # exact in float32
    np.save(tmp_path / "a.npy", a)
    out = generate("file", (), "float32", path=str(tmp_path / "a.npy"))
    assert [int(v) for v in out.astype(np.float64)] == a.tolist()
    np.save(tmp_path / "u.npy", np.array([2**64 - 2**11, 0], np.uint64))
    out = generate("file", (), "float64", path=str(tmp_path / "u.npy"))
    assert int(out[0]) == 2**64 - 2**11


def test_a_fifo_is_refused_without_reading(tmp_path):
    fifo = tmp_path / "f.npy"
    import os

    os.mkfifo(fifo)
    (err,) = compile_canvas(file_canvas(fifo)).errors["x"]
    assert "not a regular file" in err.message
