"""Hostile weight files (.safetensors and .npz, built here from bytes), and .npy headers that
lie: every one is a one-line error naming the file, the tensor and what was expected, checked
before anything is allocated; a tensor of the wrong rank says how many dimensions a layer needs."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from engine.base.errors import InvalidArgumentError
from engine.graph.canvas import Canvas
from engine.graph.compiler import compile_canvas
from engine.io import npy
from engine.io.models.model_import import ModelImportError
from engine.io.models.weights_reader import read_weights
from tests.cli_support import one_error
from tests.test_keras_hostile import _raw_zip, _zeros_member

ROOT = Path(__file__).parents[1]
W = np.random.default_rng(4).standard_normal((4, 3, 2, 2)).astype(np.float32)  # OIHW
B = np.arange(4, dtype=np.float32)


def st_bytes(tensors: dict[str, tuple[str, list[int], bytes]], length: int | None = None,
             header: bytes | None = None) -> bytes:
    """A .safetensors file: 8-byte header length, the JSON header, the data (each tensor's
    bytes in order, offsets as the format defines them)."""
    meta, data = {}, b""
    for key, (dtype, shape, raw) in tensors.items():
        meta[key] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data),
                                                                      len(data) + len(raw)]}
        data += raw
    text = json.dumps(meta).encode() if header is None else header
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def good_tensors() -> dict:
    return {"c.weight": ("F32", list(W.shape), W.tobytes()), "c.bias": ("F32", [4], B.tobytes())}


def npy_bytes(array: np.ndarray | None = None, header: str | None = None,
              data: bytes = b"") -> bytes:
    if header is None:
        buf = io.BytesIO()
        np.save(buf, array, allow_pickle=False)
        return buf.getvalue()
    text = header.encode("latin1")
    text += b" " * (-(11 + len(text)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + data


def write_npz(path: Path, members: dict[str, bytes], method=zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", method) as z:
        for name, raw in members.items():
            z.writestr(name, raw)
    return path


def good_members() -> dict[str, bytes]:
    return {"c.weight.npy": npy_bytes(W), "c.bias.npy": npy_bytes(B)}


def one_line(text: str) -> str:
    assert "\n" not in text and "Traceback" not in text, text
    return text


def refusal(path: Path, layer: str = "c", attrs: dict | None = None, **kw) -> str:
    found = read_weights(str(path), attrs or {}, **kw)
    assert layer not in [la.name for la in found.layers]
    assert layer in found.refused, (found.refused, found.others)
    return one_line(found.refused[layer])


def whole_file_error(path: Path) -> str:
    with pytest.raises(ModelImportError) as err:
        read_weights(str(path), {})
    return one_line(str(err.value))


def gb(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)],
                          capture_output=True, text=True, check=False, cwd=ROOT, timeout=300)




def test_the_good_files_import(tmp_path):
    (tmp_path / "w.safetensors").write_bytes(st_bytes(good_tensors()))
    for path in (tmp_path / "w.safetensors", write_npz(tmp_path / "w.npz", good_members())):
        (layer,) = read_weights(str(path), {}).layers
        np.testing.assert_array_equal(layer.weights, W.transpose(2, 3, 1, 0))
        np.testing.assert_array_equal(layer.bias, B)


# -- safetensors ----------------------------------------------------------------------------


#: safetensors dtypes GradBlocks cannot hold (no NumPy or ml_dtypes type, or not floats), and
#: their bits per value.
ODD_DTYPES = {"F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "BOOL": 8, "C64": 64}


@pytest.mark.parametrize("dtype", sorted(ODD_DTYPES))
def test_a_safetensors_dtype_numpy_lacks_is_named_with_the_tensor(tmp_path, dtype):
    tensors = {"c.weight": (dtype, list(W.shape), bytes(W.size * ODD_DTYPES[dtype] // 8))}
    path = tmp_path / "w.safetensors"
    path.write_bytes(st_bytes(tensors))
    lacks = " (a float type NumPy lacks)" if dtype[0] in "FB" and dtype != "BOOL" else ""
    assert refusal(path) == (f"layer 'c': tensor 'c.weight' has dtype '{dtype}'{lacks}: conv "
                             "weights must be F16, F32, F64, BF16, F8_E4M3 or F8_E5M2 "
                             f"(in {path})")


@pytest.mark.parametrize("dtype, kind", [("BF16", "bfloat16"), ("F8_E4M3", "float8_e4m3fn"),
                                         ("F8_E5M2", "float8_e5m2")])
def test_bfloat16_and_float8_weights_import_widened_exactly_to_float32(tmp_path, dtype, kind):
    narrow = np.dtype(getattr(ml_dtypes, kind))
    w = W.astype(narrow)  # values the narrow type holds; each is a float32 exactly
    b = B.astype(narrow)
    assert not np.array_equal(w.astype(np.float32), W)  # the narrowing did round
    path = tmp_path / "w.safetensors"
    path.write_bytes(st_bytes({"c.weight": (dtype, list(W.shape), w.tobytes()),
                               "c.bias": (dtype, [4], b.tobytes())}))
    (layer,) = read_weights(str(path), {}).layers
    assert layer.weights.dtype == np.float32 and layer.bias.dtype == np.float32
    np.testing.assert_array_equal(layer.weights, w.astype(np.float32).transpose(2, 3, 1, 0))
    np.testing.assert_array_equal(layer.bias, b.astype(np.float32))


def test_widened_weights_whose_offsets_lie_are_refused(tmp_path):
    w = W.astype(ml_dtypes.bfloat16)
    good = st_bytes({"c.weight": ("BF16", list(W.shape), w.tobytes())})
    # the header says [2, 3, 2, 2] but the bytes hold [4, 3, 2, 2]: safetensors itself refuses
    lying = good.replace(b"[4, 3, 2, 2]", b"[2, 3, 2, 2]")
    path = tmp_path / "w.safetensors"
    path.write_bytes(lying)
    assert "not a readable .safetensors file" in whole_file_error(path)


def test_a_dtype_safetensors_does_not_know_is_named(tmp_path):
    path = tmp_path / "w.safetensors"
    path.write_bytes(st_bytes({"c.weight": ("Q4", list(W.shape), bytes(W.size))}))
    assert "unknown variant `Q4`" in whole_file_error(path)


def test_an_unreadable_bias_refuses_its_layer_instead_of_dropping_the_bias(tmp_path):
    tensors = {**good_tensors(), "c.bias": ("F8_E8M0", [4], bytes(4))}
    path = tmp_path / "w.safetensors"
    path.write_bytes(st_bytes(tensors))
    assert "tensor 'c.bias' has dtype 'F8_E8M0'" in refusal(path)


def test_cli_float8_weights_are_one_line(tmp_path):
    path = tmp_path / "w.safetensors"
    path.write_bytes(st_bytes({"c.weight": ("F8_E8M0", list(W.shape), bytes(W.size))}))
    one_error(gb("import", path, "--layer", "c", "-o", tmp_path / "x.gbc.json"),
              "layer 'c'", "'c.weight'", "F8_E8M0", str(path))


GOOD = st_bytes(good_tensors())
ST_LIES = {
    "header length 2**60": (st_bytes(good_tensors(), length=2**60),
                            ("the safetensors header claims 1152921504606846976 bytes but the "
                            f"file has {len(GOOD) - 8} after the header length")),
    "header length past the end": (st_bytes(good_tensors(), length=len(GOOD)),
                                   "the safetensors header claims"),
    "shorter than 8 bytes": (b"\x05\x00\x00", "shorter than its 8-byte header length"),
    "offsets beyond the file": (GOOD[:-8], ("not a readable .safetensors file (Error while "
                                           "deserializing header")),
    "data beyond the offsets": (GOOD + b"\0" * 8, "not a readable .safetensors file"),
    "overlapping offsets": (st_bytes({}, header=json.dumps({
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()) + bytes(8),
                            "not a readable .safetensors file"),
    "shape overflow": (st_bytes({"c.weight": ("F32", [2**40, 2**30, 1, 1], b"")}),
                       "not a readable .safetensors file"),
    "header a list": (st_bytes({}, header=b"[1, 2]"), "not a readable .safetensors file"),
    "header not JSON": (st_bytes({}, header=b"{'a': 1}"), "not a readable .safetensors file"),
    "empty file": (b"", "shorter than its 8-byte header length"),
}


@pytest.mark.parametrize("kind", sorted(ST_LIES))
def test_safetensors_headers_that_lie_are_one_line(tmp_path, kind):
    data, words = ST_LIES[kind]
    path = tmp_path / "w.safetensors"
    path.write_bytes(data)
    message = whole_file_error(path)
    assert message.startswith(str(path)) and words in message


def test_cli_safetensors_header_claiming_an_exabyte_is_one_line(tmp_path):
    path = tmp_path / "w.safetensors"
    path.write_bytes(ST_LIES["header length 2**60"][0])
    one_error(gb("import", path, "--list"), "header claims 1152921504606846976 bytes")


def test_integer_weights_are_named(tmp_path):
    path = tmp_path / "w.safetensors"
    path.write_bytes(st_bytes({"c.weight": ("I32", list(W.shape),
                                            W.astype(np.int32).tobytes())}))
    assert "weights dtype int32 is not a float type" in refusal(path)


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_weights_read_together_stay_within_the_memory_limit(tmp_path, suffix):
    w = np.ones((100, 100, 1, 1), np.float32)  # 40000 bytes each
    path = tmp_path / f"w{suffix}"
    if suffix == ".npz":
        write_npz(path, {"a.npy": npy_bytes(w), "b.npy": npy_bytes(w)})
    else:
        path.write_bytes(st_bytes({k: ("F32", list(w.shape), w.tobytes()) for k in "ab"}))
    found = read_weights(str(path), {}, memory_limit=60_000)
    assert [la.name for la in found.layers] == ["a"]
    assert ("tensor 'b' of shape [100, 100, 1, 1] needs 39.1 KiB, more than the memory "
            "limit (58.6 KiB) with the 39.1 KiB read before it: not read"
            ) in found.refused["b"]


# -- .npz -----------------------------------------------------------------------------------


NPZ_CASES = {
    "not a .npy member": ({"c": b"just some text"},
                          "member 'c' is not a .npy array (an .npz holds .npy arrays only)"),
    "4 TiB header": ({"c.npy": npy_bytes(header="{'descr': '<f4', 'fortran_order': False, "
                                                "'shape': (1024, 1024, 1024, 1024), }")},
                     ("member 'c.npy': [1024, 1024, 1024, 1024] float32 needs 4398046511104 "
                     "bytes of data but the file has 0 after its header (truncated)")),
    "16 TiB header": ({"c.npy": npy_bytes(header="{'descr': '<f8', 'fortran_order': False, "
                                                 "'shape': (2048, 1024, 1024, 1024), }",
                                          data=bytes(64))},
                      "needs 17592186044416 bytes of data but the file has 64"),
    "truncated data": ({"c.npy": npy_bytes(W)[:-4]}, "(truncated)"),
    "extra data": ({"c.npy": npy_bytes(W) + b"\0" * 4}, "196 after its header"),
    "object array": ({"c.npy": npy_bytes(header="{'descr': '|O', 'fortran_order': False, "
                                                "'shape': (1, 1, 1, 2), }", data=bytes(16))},
                     "holds object values"),
    "no magic": ({"c.npy": b"PK" + bytes(100)}, "is not a .npy file (no \\x93NUMPY magic)"),
    "code in header": ({"c.npy": npy_bytes(header="__import__('os').system('false')")},
                       "not a Python literal"),
    "bool shape": ({"c.npy": npy_bytes(header="{'descr': '<f4', 'fortran_order': False, "
                                              "'shape': (True, 1, 1, 1), }", data=bytes(4))},
                   "shape must be a tuple of integers"),
}


@pytest.mark.parametrize("kind", sorted(NPZ_CASES))
def test_npz_members_that_lie_are_named_before_anything_is_allocated(tmp_path, kind):
    members, words = NPZ_CASES[kind]
    path = write_npz(tmp_path / "w.npz", {**members, "ok.npy": npy_bytes(W)})
    message = refusal(path)
    assert message.startswith("layer 'c': ") and words in message and str(path) in message
    assert [la.name for la in read_weights(str(path), {}).layers] == ["ok"]


def test_a_broken_bias_member_refuses_its_layer_instead_of_dropping_the_bias(tmp_path):
    path = write_npz(tmp_path / "w.npz", {"c.weight.npy": npy_bytes(W),
                                          "c.bias.npy": npy_bytes(B)[:-2]})
    found = read_weights(str(path), {})
    assert found.layers == [] and list(found.refused) == ["c"]
    assert "member 'c.bias.npy'" in found.refused["c"] and "(truncated)" in found.refused["c"]


def test_a_member_whose_declared_size_passes_the_memory_limit_is_not_read(tmp_path, monkeypatch):
    """A 3 GiB member of zeros (a few MB deflated) is refused by its declared size."""
    path = tmp_path / "w.npz"
    ok = npy_bytes(W)
    _raw_zip(path, [_zeros_member("c.npy", 3 * 2**30),
                    ("ok.npy", zipfile.ZIP_STORED, zlib.crc32(ok), len(ok), ok)])
    opened = []
    real_open = zipfile.ZipFile.open
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, name, *a, **k: (
        opened.append(getattr(name, "filename", name)), real_open(self, name, *a, **k))[1])
    message = refusal(path)
    assert "member 'c.npy' is 3.00 GiB uncompressed, more than the memory limit (2.00 GiB)" \
        in message
    assert "c.npy" not in opened


def test_a_corrupt_deflated_member_is_named(tmp_path):
    path = write_npz(tmp_path / "w.npz", {"c.npy": npy_bytes(W), "ok.npy": npy_bytes(W)},
                     zipfile.ZIP_DEFLATED)
    data = bytearray(path.read_bytes())
    at = data.find(b"c.npy") + len("c.npy") + 20  # inside c.npy's compressed bytes
    data[at:at + 40] = bytes(range(40))
    path.write_bytes(bytes(data))
    assert "member 'c.npy' cannot be read (" in refusal(path)


@pytest.mark.parametrize(("kind", "words"), [
    ("duplicate", "member 'c.npy' appears twice"),
    ("not a zip", "not a readable .npz file"),
])
def test_npz_archives_that_lie_are_one_line(tmp_path, kind, words):
    path = tmp_path / "w.npz"
    if kind == "duplicate":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("c.npy", npy_bytes(W))
            with pytest.warns(UserWarning):
                z.writestr("c.npy", npy_bytes(W))
    else:
        path.write_bytes(b"PK\x03\x04" + bytes(64))
    message = whole_file_error(path)
    assert message.startswith(str(path)) and words in message


def test_fortran_order_members_read_as_numpy_reads_them(tmp_path):
    w = np.asfortranarray(W)
    path = write_npz(tmp_path / "w.npz", {"c.weight.npy": npy_bytes(w)})
    (layer,) = read_weights(str(path), {}).layers
    np.testing.assert_array_equal(layer.weights, W.transpose(2, 3, 1, 0))


def test_cli_npz_of_a_16_tib_header_is_one_line(tmp_path):
    members, _ = NPZ_CASES["16 TiB header"]
    path = write_npz(tmp_path / "w.npz", members)
    one_error(gb("import", path, "--layer", "c", "-o", tmp_path / "x.gbc.json"),
              "layer 'c'", "17592186044416 bytes", "(truncated)")
    proc = gb("import", path, "--list")
    assert proc.returncode == 0 and "cannot import: layer 'c'" in proc.stdout


# -- 7. a tensor of the wrong rank ------------------------------------------------------------


OIHW_DIMS = ("3 dimensions (out, in / groups, W), 4 (out, in / groups, H, W) or 5 (out, "
             "in / groups, D, H, W)")
HWIO_DIMS = ("3 dimensions (W, in / groups, out), 4 (H, W, in / groups, out) or 5 (D, H, W, "
             "in / groups, out)")


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize(("shape", "layout", "dims"), [
    ((3,), "OIHW", OIHW_DIMS), ((), "OIHW", OIHW_DIMS), ((2, 3), "HWIO", HWIO_DIMS),
    ((1, 1, 1, 1, 1, 1), "OIHW", OIHW_DIMS)])
def test_weights_of_another_rank_say_how_many_dimensions_a_layer_needs(tmp_path, suffix,
                                                                       shape, layout, dims):
    """3-, 4- and 5-D tensors are 1-, 2- and 3-D conv layers (tests/test_import_weights_nd.py);
    a tensor of another rank is listed with the dimensions each of those takes."""
    a = np.ones(shape, np.float32)
    path = tmp_path / f"w{suffix}"
    if suffix == ".npz":
        write_npz(path, {"k.npy": npy_bytes(a)})
    else:
        path.write_bytes(st_bytes({"k": ("F32", list(shape), a.tobytes())}))
    found = read_weights(str(path), {"weights": layout})
    shown = [1] if shape == () and suffix == ".npz" else list(shape)  # .npy: a 0-d array is [1]
    assert found.others["k"] == (f"tensor 'k' has shape {shown}, expected {dims} with "
                                 f"weights={layout}: not conv weights (in {path})")
    assert "-D conv" not in found.others["k"]


def test_cli_rank_1_weights_are_one_line(tmp_path):
    path = write_npz(tmp_path / "w.npz", {"k.npy": npy_bytes(np.ones(3, np.float32))})
    one_error(gb("import", path, "--layer", "k", "-o", tmp_path / "x.gbc.json"),
              "tensor 'k' has shape [3], expected 3 dimensions (out, in / groups, W), 4 (out, "
              "in / groups, H, W) or 5")


# -- .npy canvas inputs: the same header checks ------------------------------------------------


@pytest.mark.parametrize(("shape", "descr", "size"), [
    ("(1024, 1024, 1024, 1024)", "<f4", "4398046511104"),
    ("(2048, 1024, 1024, 1024)", "<f8", "17592186044416")])
def test_npy_headers_claiming_terabytes_are_refused_by_their_size(tmp_path, shape, descr, size):
    path = tmp_path / "x.npy"
    path.write_bytes(npy_bytes(header=f"{{'descr': '{descr}', 'fortran_order': False, "
                                      f"'shape': {shape}, }}", data=bytes(16)))
    with pytest.raises(InvalidArgumentError) as err:
        npy.read_header(str(path))
    assert f"needs {size} bytes of data but the file has 16 after its header (truncated)" in str(
        err.value)


def test_a_sparse_4_tib_npy_is_refused_by_the_memory_limit_before_it_is_read(tmp_path):
    """The header and the file size agree (a sparse file): the run's memory limit refuses it
    at check time, so nothing is allocated."""
    path = tmp_path / "x.npy"
    path.write_bytes(npy_bytes(header="{'descr': '<f4', 'fortran_order': False, "
                                      "'shape': (1024, 1024, 1024, 1024), }"))
    try:
        os.truncate(path, path.stat().st_size + 4 * 2**40)
    except OSError:
        pytest.skip("this file system cannot hold a sparse 4 TiB file")
    assert npy.read_header(str(path)).data_bytes == 4 * 2**40
    c = Canvas()
    c.add_node("Tensor", attrs={"fill": "file", "path": str(path), "dtype": "float32"}, id="x")
    c.add_node("Output", id="out")
    c.connect(("x", "output"), ("out", "input"))
    plan = compile_canvas(c)
    messages = [e.message for errs in plan.errors.values() for e in errs]
    assert any("memory limit" in m and "4096.00 GiB" in m for m in messages), messages
