"""Issue 31 point 9: ``check`` says ok only when ``run`` can run. The shape rules NumPy applies
(engine.base.array_limits) are checked against NumPy itself; the hostile canvases of the earlier
rounds (a ShapeOf of a [0, 2**31] tensor, [0, 2**62, 2**62, 1], 65 dimensions, .npy inputs
holding uint64 max, a negative int64 Fortran-order array, a [0, 2**62] header) get the same
one-line refusal from ``check`` and ``run``, and what ``check`` accepts ``run`` runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.base.array_limits import MAX_DIMS, shape_problem

ROOT = Path(__file__).resolve().parent.parent


def _numpy_makes(shape: tuple[int, ...], dtype) -> bool:
    """NumPy's own verdict, with nothing allocated (a zero-stride view of one element)."""
    try:
        np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape))
    except ValueError:
        return False
    return True


dims = st.one_of(st.integers(0, 4), st.integers(0, 2**63 - 1), st.sampled_from([2**31, 2**62]))


@settings(max_examples=300, deadline=None)
@given(st.lists(dims, min_size=0, max_size=MAX_DIMS + 2),
       st.sampled_from([np.float16, np.float32, np.float64]))
def test_shape_problem_is_numpys_own_rule(shape, dtype):
    shape = tuple(shape)
    assert (shape_problem(shape, np.dtype(dtype).itemsize) is None) == _numpy_makes(shape, dtype)


def _canvas(tmp_path: Path, name: str, nodes: list, edges=()) -> Path:
    doc = {"format": "gradblocks.canvas", "version": 1, "nodes": nodes,
           "edges": [{"src": list(s), "dst": list(d)} for s, d in edges]}
    path = tmp_path / f"{name}.gbc.json"
    path.write_text(json.dumps(doc))
    return path


def _tensor(**attrs) -> dict:
    return {"id": "x", "type": "Tensor", "pos": [0, 0], "attrs": attrs}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True,
                          text=True, timeout=120, check=False, cwd=ROOT)


def _npy_with_header_shape(path: Path, shape: tuple[int, ...]) -> None:
    """A float32 .npy file with no data whose header claims ``shape`` (one dimension 0)."""
    header = repr({"descr": "<f4", "fortran_order": False, "shape": shape})
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
                     + header.encode("latin1"))


def _hostile(tmp_path: Path, name: str) -> Path:
    if name == "shapeof_2_31":
        return _canvas(tmp_path, name, [_tensor(fill="zeros", shape=[0, 2**31]),
                                        {"id": "s", "type": "ShapeOf", "pos": [0, 0],
                                         "attrs": {}}], [(("x", "output"), ("s", "input"))])
    if name == "huge_empty":
        return _canvas(tmp_path, name, [_tensor(fill="zeros", shape=[0, 2**62, 2**62, 1])])
    if name == "dims_65":
        return _canvas(tmp_path, name, [_tensor(fill="ones", shape=[1] * 65)])
    file = tmp_path / f"{name}.npy"
    if name == "uint64_max":
        np.save(file, np.array([np.iinfo(np.uint64).max], np.uint64))
    elif name == "negative_fortran":
        np.save(file, np.asfortranarray(np.array([[-1, -(2**62) - 1], [3, 4]], np.int64)))
    else:
        _npy_with_header_shape(file, (0, 2**62))
    return _canvas(tmp_path, name, [_tensor(fill="file", path=file.name, dtype="float32")])


HOSTILE = {"shapeof_2_31": "s: input shape [0, 2147483648]",
           "huge_empty": "x.shape: shape [0, 4611686018427387904, 4611686018427387904, 1] is "
                         "too big",
           "dims_65": "x.shape: shape has 65 dimensions",
           "uint64_max": "value 18446744073709551615 at index [0] does not convert exactly",
           "negative_fortran": "value -4611686018427387905 at index [0, 1] does not convert",
           "header_2_62": "the .npy header's shape [0, 4611686018427387904] is too big"}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_check_and_run_refuse_alike_in_one_line(tmp_path, name):
    path = _hostile(tmp_path, name)
    for command in ("check", "run"):
        proc = _cli(command, str(path))
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and "bug in GradBlocks" not in proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 2 and lines[0].endswith("1 problem:"), (command, lines)
        assert HOSTILE[name] in lines[1], (command, lines)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["int64", "uint64", "int32", "int16"]),
       st.sampled_from(["float16", "bfloat16", "float32", "float64"]),
       st.lists(st.integers(-(2**63), 2**64 - 1), min_size=1, max_size=6), st.booleans())
def test_what_check_accepts_run_reads(tmp_path_factory, file_dtype, dtype, values, fortran):
    info = np.iinfo(file_dtype)
    values = [min(max(v, info.min), info.max) for v in values]
    tmp = tmp_path_factory.mktemp("ints")
    arr = np.array(values, file_dtype)
    arr = np.asfortranarray(np.stack([arr, arr])) if fortran else arr
    np.save(tmp / "v.npy", arr)
    path = _canvas(tmp, "v", [_tensor(fill="file", path="v.npy", dtype=dtype)])
    checked, ran = _cli("check", str(path)), _cli("run", str(path))
    assert checked.returncode == ran.returncode, (checked.stderr, ran.stderr)
    assert checked.returncode in (0, 2) and "Traceback" not in checked.stderr + ran.stderr
