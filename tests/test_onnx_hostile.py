"""Hostile ONNX files (built here with onnx.helper): attributes of the wrong type or given twice,
weights whose dims lie about their data, external data outside the model's folder or of the
wrong size, protobuf bombs, and a seeded fuzz of byte flips and field mutations. Every one is a
clean one-line :class:`ModelImportError` (exit 2 on the CLI) or a correct import, never a
traceback, a hang or a read outside the folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from engine.graph.layer_canvas import build_canvas, plan_layer
from engine.io.models.model_import import ModelImportError, list_rows
from engine.io.models.onnx_reader import MAX_MODEL_BYTES, read_onnx
from tests import model_files as mf
from tests.cli_support import no_controls, one_error

ROOT = Path(__file__).parents[1]
#: The weights of the conv: OIHW [3, 2, 3, 3], distinct values.
W = (np.arange(54, dtype=np.float32).reshape(3, 2, 3, 3) - 27) / 8
X_SHAPE = (1, 2, 5, 5)
A = helper.make_attribute


# -- model builders and checks (also used by tests/test_import_messages.py) ---------------------

def conv_model(path: Path, *, attrs=(), weights=None, bias=None, name: str = "c",
               x_shape=X_SHAPE, op: str = "Conv", extra_nodes=(), extra_inits=()) -> Path:
    """One node ``name`` (op ``op``) on input X [x_shape] with weights ``W`` and maybe bias
    ``B`` (arrays or TensorProtos, so dims may lie); ``attrs`` are AttributeProtos appended as
    they are (wrong types and duplicates included)."""

    def tensor(value, tname):
        return value if isinstance(value, TensorProto) else numpy_helper.from_array(value, tname)

    w = tensor(W if weights is None else weights, "W")
    inits, ins = [w, *extra_inits], ["X", w.name]
    if bias is not None:
        b = tensor(bias, "B")
        inits.append(b)
        ins.append(b.name)
    node = helper.make_node(op, ins, ["Y"], name=name)
    node.attribute.extend(attrs)
    graph = helper.make_graph(
        [node, *extra_nodes], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path.write_bytes(model.SerializeToString())
    return path


def raw_tensor(name: str, dims, data_type: int = TensorProto.FLOAT, **fields) -> TensorProto:
    """A TensorProto with exactly these dims and data fields (nothing checked)."""
    t = TensorProto(name=name, data_type=data_type, **fields)
    t.dims.extend(dims)
    return t


def external_tensor(name: str, dims, **entries: str) -> TensorProto:
    """A float TensorProto whose data lives in an external file (entries: location, offset,
    length, or any other key)."""
    t = raw_tensor(name, dims)
    t.data_location = TensorProto.EXTERNAL
    for key, value in entries.items():
        e = t.external_data.add()
        e.key, e.value = key, value
    return t


def gb(*args) -> subprocess.CompletedProcess:
    """``gradblocks ARGS`` in a subprocess (arguments may hold control characters)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "engine.cli", *map(str, args)],
                          capture_output=True, text=True, encoding="utf-8", check=False,
                          cwd=ROOT, timeout=300, env=env)






def refusal(path: Path, name: str = "c") -> str:
    """Why the model's layer ``name`` cannot be imported (it must not be importable)."""
    found = read_onnx(str(path))
    assert [la.name for la in found.layers if la.name == name] == []
    reason = found.refused[name]
    assert "\n" not in reason and no_controls(reason), repr(reason)
    return reason


def the_layer(path: Path, name: str = "c"):
    found = read_onnx(str(path))
    assert not found.refused, found.refused
    (layer,) = [la for la in found.layers if la.name == name]
    return layer


# -- a clean model imports; every change below is then what makes it fail ----------------------

def test_the_unchanged_model_imports_with_its_weights(tmp_path):
    layer = the_layer(conv_model(tmp_path / "m.onnx", attrs=[A("strides", [1, 1])]))
    np.testing.assert_array_equal(layer.weights, W.transpose(2, 3, 1, 0))
    assert (layer.input_hw, layer.strides, layer.groups) == ((5, 5), (1, 1), 1)


# -- 1. attributes of the wrong type, given twice, or unreadable -------------------------------

def _undefined_strides() -> AttributeProto:
    return AttributeProto(name="strides", ints=[1, 1])  # type left UNDEFINED


WRONG_TYPES = {
    "strides as a tensor": (A("strides", numpy_helper.from_array(np.array([1, 1], np.int64))),
                            "'strides' has type TENSOR, expected INTS"),
    "strides as a graph": (A("strides", helper.make_graph([], "sub", [], [])),
                           "'strides' has type GRAPH, expected INTS"),
    "strides as strings": (A("strides", [b"1", b"1"]), "'strides' has type STRINGS, expected INTS"),
    "strides as a type": (A("strides", helper.make_tensor_type_proto(1, [1])),
                          "'strides' has type TYPE_PROTO, expected INTS"),
    "strides of no type": (_undefined_strides(), "'strides' has type UNDEFINED, expected INTS"),
    "pads as floats": (A("pads", [1.0, 1.0, 1.0, 1.0]), "'pads' has type FLOATS, expected INTS"),
    "dilations as a float": (A("dilations", 1.0), "'dilations' has type FLOAT, expected INTS"),
    "dilations as an int": (A("dilations", 1), "'dilations' has type INT, expected INTS"),
    "kernel_shape as a string": (A("kernel_shape", "3x3"),
                                 "'kernel_shape' has type STRING, expected INTS"),
    "group as a string": (A("group", "1"), "'group' has type STRING, expected INT"),
    "group as a float": (A("group", 1.0), "'group' has type FLOAT, expected INT"),
    "group as a list": (A("group", [1]), "'group' has type INTS, expected INT"),
    "auto_pad as an int": (A("auto_pad", 1), "'auto_pad' has type INT, expected STRING"),
    "auto_pad as strings": (A("auto_pad", [b"VALID"]),
                            "'auto_pad' has type STRINGS, expected STRING"),
    "auto_pad as a tensor": (A("auto_pad", numpy_helper.from_array(np.array([1.0]))),
                             "'auto_pad' has type TENSOR, expected STRING"),
}


@pytest.mark.parametrize("case", WRONG_TYPES)
def test_an_attribute_of_the_wrong_type_is_refused_naming_it(tmp_path, case):
    attr, words = WRONG_TYPES[case]
    reason = refusal(conv_model(tmp_path / "m.onnx", attrs=[attr]))
    assert reason.startswith("layer 'c': attribute ")
    assert words in reason
    assert reason.endswith("(as ONNX Conv defines it)")


@pytest.mark.parametrize(("attrs", "words"), [
    ([A("strides", [2, 2]), A("strides", [1, 1])], "attribute 'strides' is given more than once"),
    ([A("group", 1), A("group", 1)], "attribute 'group' is given more than once"),
    ([A("auto_pad", "VALID"), A("auto_pad", "SAME_UPPER")],
     "attribute 'auto_pad' is given more than once"),
    ([A("pads", [0, 0, 0, 0]), A("strides", [1, 1]), A("pads", [1, 1, 1, 1])],
     "attribute 'pads' is given more than once"),
    ([A("frobnicate", 1), A("frobnicate", 1)], "attribute 'frobnicate' is given more than once"),
    ([AttributeProto(name="strides", type=AttributeProto.INTS, ints=[1, 1],
                     ref_attr_name="s")], "refers to a function attribute 's'"),
    ([AttributeProto(name="auto_pad", type=AttributeProto.STRING, s=b"\xff\xfeVALID")],
     "unknown auto_pad b'\\xff\\xfeVALID' (expected one of NOTSET, SAME_UPPER"),
    ([A("auto_pad", "same_upper")], "unknown auto_pad 'same_upper'"),
    ([A("\x1b[31mevil\x07", 1)], "unknown Conv attribute(s) '\\x1b[31mevil\\x07'"),
    ([A("strides", [1, 1, 1])], "strides [1, 1, 1] has 3 numbers, expected 2"),
    ([A("pads", [1, 1])], "pads [1, 1] has 2 numbers, expected 4"),
])
def test_duplicate_unknown_and_unreadable_attributes_are_refused(tmp_path, attrs, words):
    reason = refusal(conv_model(tmp_path / "m.onnx", attrs=attrs))
    assert reason.startswith("layer 'c': ")
    assert words in reason


def test_an_empty_auto_pad_is_notset_as_onnx_runtime_reads_it(tmp_path):
    layer = the_layer(conv_model(tmp_path / "m.onnx",
                                 attrs=[A("auto_pad", ""), A("pads", [1, 0, 1, 2])]))
    assert (layer.padding, layer.pads) == ("EXPLICIT", (1, 1, 0, 2))


@pytest.mark.parametrize(("attrs", "weights", "words"), [
    # each imported silently before: a float group, float pads, a second strides
    ([A("group", 2.0)], np.ones((4, 1, 3, 3), np.float32), "'group' has type FLOAT"),
    ([A("pads", [1.0, 1.0, 1.0, 1.0])], None, "'pads' has type FLOATS"),
    ([A("strides", [2, 2]), A("strides", [1, 1])], None, "'strides' is given more than once"),
])
def test_cli_refuses_what_was_silently_accepted(tmp_path, attrs, weights, words):
    path = conv_model(tmp_path / "m.onnx", attrs=attrs, weights=weights)
    out = tmp_path / "out.gbc.json"
    one_error(gb("import", path, "--layer", "c", "-o", out), "layer 'c'", words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    listed = gb("import", path, "--list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[-1].startswith("cannot import: layer 'c': attribute")
    assert words in listed.stdout


# -- 2. weights whose dims lie about their data -------------------------------------------------

F32 = TensorProto.FLOAT
LYING = {
    "5 floats for [3, 2, 3, 3]": (
        raw_tensor("W", [3, 2, 3, 3], raw_data=np.ones(5, np.float32).tobytes()),
        ("weights 'W': dims [3, 2, 3, 3] need 54 FLOAT elements (216 bytes, more than the "
        "whole file (110 bytes)), but its data has 20 bytes")),
    "one byte too many": (
        raw_tensor("W", [3, 2, 3, 3], raw_data=W.tobytes() + b"\0"),
        "(216 bytes), but its data has 217 bytes"),
    "float_data of 5": (
        raw_tensor("W", [3, 2, 3, 3], float_data=[1.0] * 5),
        ("dims [3, 2, 3, 3] need 54 FLOAT elements (216 bytes, more than the whole file "
        "(110 bytes)), but its float_data holds 5")),
    "no data at all": (raw_tensor("W", [3, 2, 3, 3]), "its float_data holds 0"),
    "a negative dim": (raw_tensor("W", [3, -2, 3, 3], raw_data=b""),
                       "weights 'W': negative dims [3, -2, 3, 3]"),
    "two negative dims": (raw_tensor("W", [-3, -2, 3, 3], raw_data=W.tobytes()),
                          "negative dims [-3, -2, 3, 3]"),
    "2^60 elements": (raw_tensor("W", [2**40, 2**20, 1, 1], raw_data=b"\0" * 16),
                      ("need 1152921504606846976 FLOAT elements (4611686018427387904 bytes, "
                      "more than the whole file (113 bytes)), but its data has 16 bytes")),
    "2^248 elements": (raw_tensor("W", [2**62, 2**62, 2**62, 2**62], float_data=[1.0]),
                       "more than the whole file"),
    "int64 weights": (raw_tensor("W", [3, 2, 3, 3], TensorProto.INT64, int64_data=[1] * 54),
                      "element type INT64 is not a float type"),
    "string weights": (raw_tensor("W", [1], TensorProto.STRING, string_data=[b"x"]),
                       "element type STRING is not a float type"),
    "undefined type": (raw_tensor("W", [3, 2, 3, 3], 0, raw_data=W.tobytes()),
                       "element type UNDEFINED is not a float type"),
    "type 999": (raw_tensor("W", [3, 2, 3, 3], 999, raw_data=W.tobytes()),
                 "element type type 999 is not a float type"),
    "4-bit floats": (raw_tensor("W", [3, 2, 3, 3], TensorProto.FLOAT4E2M1, raw_data=b"\0" * 27),
                     "element type FLOAT4E2M1 is not a float type"),
    "float16 bits of 53": (raw_tensor("W", [3, 2, 3, 3], TensorProto.FLOAT16,
                                      int32_data=[15360] * 53),
                           "need 54 FLOAT16 elements (108 bytes), but its int32_data holds 53"),
    "double_data of 55": (raw_tensor("W", [3, 2, 3, 3], TensorProto.DOUBLE,
                                     double_data=[1.0] * 55),
                          "its double_data holds 55"),
    "a segment": (raw_tensor("W", [3, 2, 3, 3], raw_data=W.tobytes(),
                             segment=TensorProto.Segment(begin=0, end=10)),
                  "a segment of a tensor cannot be imported"),
    "name with escapes": (raw_tensor("W\x1b[2J\x07", [3, 2, 3, 3], raw_data=b"\0"),
                          "weights 'W\\x1b[2J\\x07': dims [3, 2, 3, 3]"),
}


@pytest.mark.parametrize("case", LYING)
def test_weights_whose_dims_lie_are_refused_before_any_array(tmp_path, case):
    tensor, words = LYING[case]
    reason = refusal(conv_model(tmp_path / "m.onnx", weights=tensor))
    assert reason.startswith("layer 'c': weights ")
    assert words in reason


def test_a_lying_bias_is_named(tmp_path):
    bias = raw_tensor("B", [3], raw_data=b"\0" * 8)
    reason = refusal(conv_model(tmp_path / "m.onnx", bias=bias))
    assert reason == ("layer 'c': bias 'B': dims [3] need 3 FLOAT elements (12 bytes), but its "
                      "data has 8 bytes")


def test_lying_dims_through_the_cli_are_one_line(tmp_path):
    """The issue's traceback: 'cannot reshape array of size 5 into shape (3,2,3,3)'."""
    path = conv_model(tmp_path / "m.onnx",
                      weights=raw_tensor("W", [3, 2, 3, 3], float_data=[1.0] * 5))
    one_error(gb("import", path, "--layer", "c", "-o", tmp_path / "o.gbc.json"),
              "layer 'c': weights 'W': dims [3, 2, 3, 3] need 54 FLOAT elements (216 bytes",
              "but its float_data holds 5")
    listed = gb("import", path, "--list")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    assert "cannot import: layer 'c': weights 'W'" in listed.stdout


@pytest.mark.parametrize(("data_type", "bits"), [
    (TensorProto.BFLOAT16, lambda w: w.astype(ml_dtypes.bfloat16)),
    (TensorProto.FLOAT8E4M3FN, lambda w: w.astype(ml_dtypes.float8_e4m3fn)),
    (TensorProto.FLOAT16, lambda w: w.astype(np.float16)),
])
def test_narrow_float_weights_import_exactly(tmp_path, data_type, bits):
    """The weights' values are the narrow type's own (ml_dtypes' conversion as reference)."""
    narrow = bits(W)
    tensor = raw_tensor("W", [3, 2, 3, 3], data_type, raw_data=narrow.tobytes())
    layer = the_layer(conv_model(tmp_path / "m.onnx", weights=tensor))
    assert layer.weights.dtype in (np.float16, np.float32)
    np.testing.assert_array_equal(layer.weights.astype(np.float64),
                                  narrow.astype(np.float64).transpose(2, 3, 1, 0))


# -- 2b. external data: only inside the folder, only as many bytes as the dims need ------------

def ext_model(folder: Path, **entries: str) -> Path:
    return conv_model(folder / "m.onnx", weights=external_tensor("W", [3, 2, 3, 3], **entries))


def test_external_data_inside_the_folder_imports(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\0" * 8 + W.tobytes())
    layer = the_layer(ext_model(tmp_path, location="w.bin", offset="8", length="216"))
    np.testing.assert_array_equal(layer.weights, W.transpose(2, 3, 1, 0))
    layer = the_layer(ext_model(tmp_path, location="w.bin", offset="8"))  # length from dims
    np.testing.assert_array_equal(layer.weights, W.transpose(2, 3, 1, 0))


def _outside(tmp_path: Path) -> Path:
    """The model's folder (a child of tmp_path) and a secret beside it."""
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    return folder


@pytest.mark.parametrize(("setup", "entries", "words"), [
    (None, {"location": "../secret.bin"}, "points outside the directory"),
    (None, {"location": "PLACEHOLDER_ABSOLUTE"}, "should be a relative path"),
    ("symlink", {"location": "link.bin"}, "it is a symbolic link"),
    ("dirlink", {"location": "up/secret.bin"}, "outside model directory"),
    ("fifo", {"location": "fifo"}, "not regular file"),
    ("dir", {"location": "sub"}, "not regular file"),
    (None, {"location": "missing.bin"}, "not regular file"),
    (None, {"location": ""}, "should not be empty"),
    ("short", {"location": "short.bin"}, ("External data length (216) exceeds available data "
                                         "(20 bytes from offset 0)")),
    ("short", {"location": "short.bin", "offset": "4096"}, "offset (4096) exceeds file size"),
    ("short", {"location": "short.bin", "length": "20"},
     "external data of 20 bytes, but its dims need 216 bytes"),
    ("short", {"location": "short.bin", "length": "9" * 5000},
     "9999... (5002 characters) is not a number of bytes"),
    ("short", {"location": "short.bin", "length": "\u00b2"}, "length '\\xb2' is not a number"),
    ("short", {"location": "short.bin", "offset": "-1"}, "offset '-1' is not a number of bytes"),
    ("short", {"location": "short.bin", "length": "1e3"}, "length '1e3' is not a number"),
    ("short", {"location": "short.bin", "\x1b[31mkey": "x"},
     "unknown external data key '\\x1b[31mkey'"),
])
def test_external_data_elsewhere_or_of_the_wrong_size_is_refused(tmp_path, setup, entries,
                                                                  words):
    folder = _outside(tmp_path)
    if entries["location"] == "PLACEHOLDER_ABSOLUTE":
        entries = {"location": str(tmp_path / "secret.bin")}
    if setup == "symlink":
        (folder / "link.bin").symlink_to(tmp_path / "secret.bin")
    elif setup == "dirlink":
        (folder / "up").symlink_to(tmp_path)
    elif setup == "fifo":
        os.mkfifo(folder / "fifo")
    elif setup == "dir":
        (folder / "sub").mkdir()
    elif setup == "short":
        (folder / "short.bin").write_bytes(b"\0" * 20)
    reason = refusal(ext_model(folder, **entries))
    assert reason.startswith("layer 'c': weights 'W': ")
    assert words in reason


def test_astronomic_dims_with_external_data_read_nothing(tmp_path):
    (tmp_path / "w.bin").write_bytes(W.tobytes())
    path = conv_model(tmp_path / "m.onnx", weights=external_tensor(
        "W", [2**40, 2**20, 3, 3], location="w.bin"))
    reason = refusal(path)
    assert "External data length (41505174165846491136)" in reason
    assert "exceeds available data (216 bytes" in reason


def test_external_data_of_other_tensors_is_never_read(tmp_path):
    """Only a Conv's weights and bias are read: an initializer of another node pointing
    outside the folder does not stop the import (and is not loaded)."""
    other = external_tensor("K", [4], location="../../../etc/passwd")
    relu = helper.make_node("Add", ["Y", "K"], ["Z"], name="add")
    layer = the_layer(conv_model(tmp_path / "m.onnx", extra_nodes=[relu], extra_inits=[other]))
    np.testing.assert_array_equal(layer.weights, W.transpose(2, 3, 1, 0))


def test_external_data_outside_through_the_cli(tmp_path):
    folder = _outside(tmp_path)
    path = ext_model(folder, location="../secret.bin")
    one_error(gb("import", path, "--layer", "c", "-o", folder / "o.gbc.json"),
              "layer 'c': weights 'W': external data refused", "outside the directory")
    assert sorted(p.name for p in folder.iterdir()) == ["m.onnx"]


# -- protobuf bombs ------------------------------------------------------------------------------

def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    size, n = b"", len(payload)
    while True:
        size += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            return bytes([number << 3 | 2]) + size + payload


def test_graphs_nested_beyond_protobufs_depth_limit_are_unreadable(tmp_path):
    """A graph in an If node's attribute in a graph ... 2,000 deep, written byte by byte
    (GraphProto.node = 1, NodeProto.op_type = 4 and .attribute = 5, AttributeProto.g = 6)."""
    graph = b""
    for _ in range(2000):
        attr = _field(1, b"then_branch") + bytes([20 << 3, AttributeProto.GRAPH]) + _field(6, graph)
        graph = _field(1, _field(4, b"If") + _field(5, attr))
    path = tmp_path / "deep.onnx"
    path.write_bytes(bytes([1 << 3, 8]) + _field(7, graph))
    with pytest.raises(ModelImportError, match=r"deep.onnx: not a readable ONNX model"):
        read_onnx(str(path))


def test_a_file_beyond_protobufs_limit_is_refused_unread(tmp_path):
    path = tmp_path / "huge.onnx"
    with open(path, "wb") as f:  # sparse: no block is written
        f.truncate(MAX_MODEL_BYTES + 1)
    with pytest.raises(ModelImportError, match=r"huge.onnx: not a readable ONNX model "
                                               r"\(2147483648 bytes, more than protobuf's limit"):
        read_onnx(str(path))


def test_a_fifo_or_missing_model_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "pipe.onnx")
    with pytest.raises(ModelImportError, match=r"pipe.onnx: not a regular file"):
        read_onnx(str(tmp_path / "pipe.onnx"))
    with pytest.raises(ModelImportError, match=r"gone.onnx: cannot read the model \(No such"):
        read_onnx(str(tmp_path / "gone.onnx"))


def test_weights_two_initializers_define_are_refused(tmp_path):
    twin = numpy_helper.from_array(np.zeros_like(W), "W")
    reason = refusal(conv_model(tmp_path / "m.onnx", extra_inits=[twin]))
    assert reason == ("layer 'c': weights 'W': 2 initializers have this name (which one is "
                      "meant?)")


# -- 6. fuzz: byte flips and field mutations of a valid model ------------------------------------

FUZZ_SEED = 20
BYTE_CASES = 300
FIELD_CASES = 300
#: Strings a mutation puts in names, op types and locations.
NASTY = ["", "\x1b[31m", "\x07", "a" * 300, "\u202e", "..", "../x", "/etc/passwd", "Conv",
         "X", "W", "\x00", "c", "node 0"]


def _survives(path: Path) -> str:
    """Read the file as the CLI does (list, then plan and build every layer); a clean refusal
    is fine, any other exception fails the test. Returns what happened."""
    try:
        found = read_onnx(str(path))
    except ModelImportError as err:
        assert "\n" not in str(err) and no_controls(str(err)), repr(str(err))
        return "refused"
    for text in [*found.refused.values(), *found.others.values()]:
        assert "\n" not in text and no_controls(text), repr(text)
    for row in list_rows(found.layers):
        assert no_controls(" ".join(row))
    for layer in found.layers:
        try:
            conv, out = plan_layer(layer, (7, 6))
        except ModelImportError as err:
            assert no_controls(str(err)), repr(str(err))
            continue
        paths = {"filter": "f.npy", **({"bias": "b.npy"} if layer.bias is not None else {})}
        build_canvas(layer, conv, out, paths)  # titles valid whatever the name
    return "read"


def _flip(data: bytes, rng: np.random.Generator) -> bytes:
    b = bytearray(data)
    kind = int(rng.integers(5))
    at = int(rng.integers(len(b)))
    if kind == 0:
        for i in rng.integers(len(b), size=int(rng.integers(1, 9))):
            b[int(i)] ^= 1 << int(rng.integers(8))
    elif kind == 1:
        del b[at:]
    elif kind == 2:
        b[at:at] = rng.bytes(int(rng.integers(1, 32)))
    elif kind == 3:
        size = int(rng.integers(1, 64))
        b[at:at] = b[at:at + size] * int(rng.integers(2, 5))
    else:
        b[at:at + int(rng.integers(1, 16))] = b"\xff" * 8
    return bytes(b)


def _mutate(model, rng: np.random.Generator) -> None:
    """One random change to a field of the model (in place)."""
    g = model.graph
    pick = lambda seq: seq[int(rng.integers(len(seq)))]
    kind = int(rng.integers(12))
    if kind == 0 and g.initializer:
        t = pick(g.initializer)
        del t.dims[:]
        t.dims.extend(int(v) for v in rng.choice([-3, -1, 0, 1, 2, 3, 2**31, 2**62],
                                                 size=int(rng.integers(0, 6))))
    elif kind == 1 and g.initializer:
        pick(g.initializer).data_type = int(rng.integers(0, 26))
    elif kind == 2 and g.initializer:
        t = pick(g.initializer)
        t.raw_data = t.raw_data[: int(rng.integers(len(t.raw_data) + 1))]
    elif kind == 3 and g.initializer:
        t = pick(g.initializer)
        t.ClearField("raw_data")
        t.float_data.extend([1.0] * int(rng.integers(0, 80)))
    elif kind == 4 and g.initializer:
        t = pick(g.initializer)
        t.data_location = TensorProto.EXTERNAL
        for key in rng.permutation(["location", "offset", "length", "checksum"])[
                : int(rng.integers(0, 4))]:
            e = t.external_data.add()
            e.key, e.value = str(key), pick(NASTY + ["0", "8", "-1", "9" * 25])
    elif kind == 5:
        node = pick(g.node)
        name = pick(["strides", "pads", "dilations", "group", "kernel_shape", "auto_pad"])
        value = pick([1, 2.0, "SAME_UPPER", [1, 1], [0, 0, 0, 0], [1.0, 1.0], [b"a"], -5,
                      2**62, [2**40, 1], ""])
        node.attribute.append(A(name, value))
    elif kind == 6:
        node = pick(g.node)
        if node.attribute:
            a = pick(node.attribute)
            a.type = int(pick(list(AttributeProto.AttributeType.values())))
    elif kind == 7:
        pick(g.node).name = pick(NASTY)
    elif kind == 8:
        pick(g.node).op_type = pick(["Conv", "ConvTranspose", "\x1b]0;x\x07", "Relu", ""])
    elif kind == 9 and g.input:
        dims = pick(g.input).type.tensor_type.shape.dim
        if dims:
            pick(dims).dim_value = int(pick([-5, 0, 1, 2**31, 2**40, 2**62]))
    elif kind == 10 and g.initializer:
        del g.initializer[int(rng.integers(len(g.initializer)))]
    else:
        node = pick(g.node)
        if node.input:
            node.input[int(rng.integers(len(node.input)))] = pick(NASTY)


@pytest.fixture(scope="module")
def valid_model(tmp_path_factory) -> Path:
    return mf.write_onnx(tmp_path_factory.mktemp("fuzz") / "small.onnx")


def test_fuzz_byte_flips_are_clean(valid_model, tmp_path):
    rng = np.random.default_rng(FUZZ_SEED)
    data = valid_model.read_bytes()
    path = tmp_path / "f.onnx"
    seen = {"refused": 0, "read": 0}
    for _ in range(BYTE_CASES):
        path.write_bytes(_flip(data, rng))
        seen[_survives(path)] += 1
    print(f"byte flips: {BYTE_CASES} files, {seen}")
    assert sum(seen.values()) == BYTE_CASES


def test_fuzz_field_mutations_are_clean(valid_model, tmp_path):
    rng = np.random.default_rng(FUZZ_SEED + 1)
    base = onnx.load(str(valid_model))
    path = tmp_path / "f.onnx"
    (tmp_path / "w.bin").write_bytes(b"\0" * 64)
    seen = {"refused": 0, "read": 0}
    for _ in range(FIELD_CASES):
        model = onnx.ModelProto()
        model.CopyFrom(base)
        for _ in range(int(rng.integers(1, 4))):
            _mutate(model, rng)
        path.write_bytes(model.SerializeToString())
        seen[_survives(path)] += 1
    print(f"field mutations: {FIELD_CASES} files, {seen}")
    assert sum(seen.values()) == FIELD_CASES
