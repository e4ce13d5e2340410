"""The third round of boundaries the issue 32 point 7 mutation probe left unpinned: each test
asserts computed results on both sides of one line (the mutant it kills is in its docstring,
checked by applying it). Keras shapes (Conv2DTranspose's default and explicit output_padding,
Cropping2D down to one row: the probe found Keras's own refusal missing, concatenating on axis
-rank, rank-2 shapes, arguments MAX_ARG_DEPTH lists deep, models nested MAX_MODEL_DEPTH deep),
HDF5 external storage in three files, a --weights member of exactly the memory limit and a
tensor named only by its suffix, MAX_CONFIG_BYTES in both containers, temporary names of 40
characters and old members that are not plain names, the GradCheck run-time warning's bounds,
1-D integer vectors, FLOAT_MAX_INT, finiteness at the largest magnitude, ShapeOf at INT32_MAX,
frame and note size bounds, ties in the memory message, a pasted 200-character result name, id
prefixes of long names, the count of a layer's other refused blocks and NAME_MAX."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from engine.io.models.keras_graph import MAX_ARG_DEPTH, MAX_MODEL_DEPTH, layer_inputs
from engine.io.models.keras_shapes import ShapeStop, output_shape
from engine.io.models.model_import import ModelImportError

# -- engine.io.models.keras_shapes ----------------------------------------------------------------

# The expected shapes are Keras 3's own compute_output_shape (checked with keras 3 once; Keras
# is not imported here: it takes seconds).


@pytest.mark.parametrize("kernel, strides, size, want", [
    (3, 2, 5, 11),  # a kernel longer than the stride: no extra rows
    (1, 3, 4, 12),  # a stride longer than the kernel: stride - kernel extra rows
])
def test_a_valid_conv2d_transpose_without_output_padding_adds_what_the_stride_passes(
        kernel, strides, size, want):
    """Mutant ``max(k_eff, s) - s`` for ``- k_eff`` (the default output_padding of a valid
    Conv2DTranspose): 5 rows, kernel 3, stride 2 give 11; 4 rows, kernel 1, stride 3 give 12."""
    config = {"filters": 2, "kernel_size": kernel, "strides": strides, "padding": "valid"}
    assert output_shape("Conv2DTranspose", config, [(None, size, size, 3)]) == (
        None, want, want, 2)


def test_a_same_conv2d_transpose_with_output_padding_counts_the_kernels_parity():
    """Mutant ``k_eff // 2`` for ``k_eff % 2``: same padding, output_padding 1, stride 2 on 5
    rows: a kernel of 4 gives 9 rows, one of 5 gives 10."""
    config = {"filters": 2, "kernel_size": [4, 5], "strides": 2, "padding": "same",
              "output_padding": 1}
    assert output_shape("Conv2DTranspose", config, [(None, 5, 5, 3)]) == (None, 9, 10, 2)


def test_cropping_down_to_one_row_is_a_shape_and_to_none_is_refused():
    """Mutant ``size <= 0`` for ``size < 0``, which showed the rule wrong: Keras refuses a
    Cropping2D that is not smaller than the size, the rule let it leave 0 rows. 5 rows cropped
    by 4 leave 1; by 5 (or more) they are refused naming the cropping."""
    assert output_shape("Cropping2D", {"cropping": [[2, 2], [1, 0]]}, [(None, 5, 6, 3)]) == (
        None, 1, 5, 3)
    for cropping in ([[2, 3], [0, 0]], [[0, 0], [3, 3]], [[4, 4], [0, 0]]):
        with pytest.raises(ShapeStop) as err:
            output_shape("Cropping2D", {"cropping": cropping}, [(None, 5, 6, 3)])
        amounts = tuple(tuple(p) for p in cropping)
        assert str(err.value) == (f"cropping {amounts} leaves no rows or columns of an input "
                                  "of [None, 5, 6, 3] (Keras needs it smaller than the size)")


def test_concatenate_takes_axis_minus_rank_and_refuses_one_below():
    """Mutant ``-rank < axis`` for ``-rank <= axis``: axis -4 of rank-4 inputs is the batch
    axis (Keras: (5, 5, 5, 3)); -5 is refused."""
    shapes = [(2, 5, 5, 3), (3, 5, 5, 3)]
    assert output_shape("Concatenate", {"axis": -4}, shapes) == (5, 5, 5, 3)
    with pytest.raises(ShapeStop) as err:
        output_shape("Concatenate", {"axis": -5}, shapes)
    assert str(err.value) == "axis -5 does not fit its inputs [[2, 5, 5, 3], [3, 5, 5, 3]]"


# -- engine.io.models.keras_graph -------------------------------------------------------------------

def _tensor(layer: str, shape: list | None = None) -> dict:
    config = {"dtype": "float32", "keras_history": [layer, 0, 0]}
    if shape is not None:
        config["shape"] = shape
    return {"class_name": "__keras_tensor__", "config": config}


def _conv(name: str, **entry) -> dict:
    return {"class_name": "Conv2D", "config": {"name": name, "filters": 2, "kernel_size": 1},
            **entry}


def _input(name: str, shape: list) -> dict:
    return {"class_name": "InputLayer", "config": {"name": name, "batch_shape": shape},
            "inbound_nodes": []}


def test_a_rank_2_input_shape_is_a_shape():
    """Mutant ``len(value) > 2`` for ``>= 2`` in ``as_shape``: a model whose input is [None,
    12] (reshaped to 2x2x3 before its conv) gives the conv [None, 2, 2, 3]; a rank-1 batch_shape
    is no shape."""
    def model(shape):
        reshape = {"class_name": "Reshape", "config": {"name": "r", "target_shape": [2, 2, 3]},
                   "inbound_nodes": [{"args": [_tensor("in")], "kwargs": {}}]}
        conv = _conv("c", inbound_nodes=[{"args": [_tensor("r")], "kwargs": {}}])
        return {"class_name": "Functional",
                "config": {"layers": [_input("in", shape), reshape, conv]}}, conv
    config, conv = model([None, 12])
    assert layer_inputs(config)[id(conv)] == (None, 2, 2, 3)
    config, conv = model([12])
    assert layer_inputs(config)[id(conv)] == "input layer 'in' states no shape"


def _nested_args(depth: int) -> list:
    args: object = _tensor("in", [None, 4, 4, 3])
    for _ in range(depth):
        args = [args]
    return args


def test_arguments_are_searched_for_tensors_max_arg_depth_lists_deep_and_no_deeper():
    """Mutant ``depth <= MAX_ARG_DEPTH``: a conv whose input tensor is inside MAX_ARG_DEPTH
    nested lists (the args list counted) gets its shape; one list deeper is a plain argument,
    so the conv's call names no input."""
    assert MAX_ARG_DEPTH == 4
    for depth, found in ((MAX_ARG_DEPTH, True), (MAX_ARG_DEPTH + 1, False)):
        node = {"args": _nested_args(depth), "kwargs": {}}
        conv = _conv("c", inbound_nodes=[node])
        config = {"class_name": "Functional",
                  "config": {"layers": [_input("in", [None, 4, 4, 3]), conv]}}
        got = layer_inputs(config)[id(conv)]
        if found:
            assert got == (None, 4, 4, 3)
        else:
            assert isinstance(got, str)
            assert got.startswith("its inbound_nodes ") and got.endswith(
                " name no input it can be traced to")


def _nest(levels: int) -> tuple[dict, dict]:
    """A model holding a Sequential model ``levels`` deep whose only layer is a conv stating its
    input shape; (the top model's config, the conv's entry)."""
    conv = _conv("c", build_config={"input_shape": [None, 4, 4, 3]})
    entry = conv
    for i in range(levels):
        entry = {"class_name": "Sequential", "config": {"name": f"m{i}", "layers": [entry]}}
    return {"class_name": "Sequential", "config": {"name": "top", "layers": [entry]}}, conv


def test_nested_models_are_walked_max_model_depth_deep_and_no_deeper():
    """Mutant ``self.depth > MAX_MODEL_DEPTH`` for ``>=``: a conv in a model nested
    MAX_MODEL_DEPTH times inside the top model (its walk MAX_MODEL_DEPTH below the top one)
    gets its input shape; one level deeper it is not reached."""
    assert MAX_MODEL_DEPTH == 32
    config, conv = _nest(MAX_MODEL_DEPTH)
    assert layer_inputs(config)[id(conv)] == (None, 4, 4, 3)
    config, conv = _nest(MAX_MODEL_DEPTH + 1)
    assert id(conv) not in layer_inputs(config)


# -- engine.io.models.hdf5_guard: external storage, named three files at most -----------------------

@pytest.mark.parametrize("files, others", [(3, False), (4, True)])
def test_external_storage_in_three_files_names_them_all_and_in_four_adds_and_others(
        tmp_path, files, others):
    """Mutant ``count >= 3`` for ``count > 3``: a kernel kept in 3 external files is refused
    naming the three, with no "and others"; in 4 files the first three "and others"."""
    pytest.importorskip("h5py")
    from tests import test_keras_hostile as kh

    names = [f"part{i}.bin" for i in range(files)]
    size = kh.KERNEL.nbytes // files

    def fill(h5):
        group = h5.create_group("model_weights/c")
        group.create_dataset("c/kernel:0", shape=kh.KERNEL.shape, dtype="f4",
                             external=[(n, 0, size) for n in names])
        group.create_dataset("c/bias:0", data=kh.BIAS)
        group.attrs["weight_names"] = [b"c/kernel:0", b"c/bias:0"]

    path = kh.write_legacy(tmp_path / "m.h5", fill=fill)
    message = kh.whole_file_error(path)
    shown = ", ".join(repr(n) for n in names[:3])
    assert (f"dataset '/model_weights/c/c/kernel:0' keeps its data in the file {shown}"
            f"{' and others' if others else ''} (HDF5 external storage); refused: a model file "
            "must not read other files") in message


# -- engine.io.models.weights_reader ------------------------------------------------------------------

W = np.arange(48, dtype=np.float32).reshape(4, 3, 2, 2) / 8  # OIHW


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _weights_npz(tmp_path, members: dict):
    path = tmp_path / "w.npz"
    with zipfile.ZipFile(path, "w") as z:
        for name, array in members.items():
            z.writestr(name, _npy(array))
    return path


def test_a_weights_member_of_exactly_the_memory_limit_uncompressed_is_read(tmp_path):
    """Mutant ``info.file_size >= limit``: a member whose .npy file (header and data) is exactly
    the memory limit is read; one byte less is refused by its uncompressed size."""
    from engine.io.models.weights_reader import read_weights

    path = _weights_npz(tmp_path, {"c.weight.npy": W})
    size = len(_npy(W))
    (layer,) = read_weights(str(path), {}, memory_limit=size).layers
    np.testing.assert_array_equal(layer.weights, W.transpose(2, 3, 1, 0))
    found = read_weights(str(path), {}, memory_limit=size - 1)
    assert found.layers == []
    assert found.refused["c"] == (
        f"layer 'c': member 'c.weight.npy' is {size} bytes uncompressed, more than the memory "
        f"limit ({size - 1} bytes) (in {path})")


def test_a_tensor_named_only_by_a_suffix_keeps_its_whole_name(tmp_path):
    """Mutant ``len(key) >= len(suffix)`` in ``_stem``: 'c.weight' is layer 'c', but a tensor
    named '.weight' (nothing before the suffix) is layer '.weight', not a layer without a name."""
    from engine.io.models.weights_reader import read_weights

    path = _weights_npz(tmp_path, {".weight.npy": W, "c.weight.npy": W})
    assert sorted(la.name for la in read_weights(str(path), {}).layers) == [".weight", "c"]


# -- engine.base.atomic -------------------------------------------------------------------------------

def test_a_temporary_name_keeps_exactly_temp_name_chars_of_the_name_and_is_recognised():
    """Mutant ``name[:TEMP_NAME_CHARS - 1]``: a 41-character name is cut to its first 40 in
    the temporary file's name, which temp_pid reads back; a 40-character one is kept whole."""
    from engine.base import atomic

    assert atomic.TEMP_NAME_CHARS == 40
    random = bytes(range(atomic.TEMP_RANDOM_BYTES))
    for name in ("n" * 40, "n" * 40 + "x"):
        got = atomic.temp_name(name, 4242, random)
        assert got == ".nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn.4242-000102030405.tmp"
        assert atomic.temp_pid(got) == 4242


def test_old_members_that_are_not_plain_names_are_never_removed(tmp_path):
    """Mutant: ``if _plain_name(n)`` dropped from the old members ``owned_before`` names: an old
    main file naming '../outside.npy' and 'sub/inner.npy' besides its stale 'old.npy' loses
    only old.npy when the new set is written; the files outside its folder stay."""
    from engine.base import atomic

    folder = tmp_path / "set"
    (folder / "sub").mkdir(parents=True)
    outside, inner = tmp_path / "outside.npy", folder / "sub" / "inner.npy"
    for p in (outside, inner, folder / "old.npy"):
        p.write_bytes(b"keep me")
    main = folder / "main.json"
    main.write_text("old")
    written = atomic.write_file_set(
        main, atomic.bytes_writer(b"new"), [atomic.Member.of_bytes("new.npy", b"n")],
        owned_before=lambda _real: ["old.npy", "../outside.npy", "sub/inner.npy"])
    assert written == [folder / "new.npy", main]
    assert main.read_bytes() == b"new"
    assert sorted(p.name for p in folder.iterdir()) == ["main.json", "new.npy", "sub"]
    assert outside.read_bytes() == inner.read_bytes() == b"keep me"


# -- engine.io.models.keras_open: MAX_CONFIG_BYTES ------------------------------------------------------

@pytest.mark.parametrize("container", ["keras", "legacy"])
def test_a_config_of_exactly_max_config_bytes_is_read_and_one_byte_more_refused(
        tmp_path, monkeypatch, container):
    """Mutants ``info.file_size >= limit`` in ``_member`` (the .keras config.json) and
    ``len(raw) >= MAX_CONFIG_BYTES`` (a legacy .h5's model_config): with MAX_CONFIG_BYTES the
    config's own size, the model reads; one byte less and it is refused with both sizes."""
    import json

    pytest.importorskip("h5py")
    from engine.io.models import keras_open
    from engine.io.models.keras_reader import read_keras
    from tests import test_keras_hostile as kh

    path = kh.write_either(container, tmp_path / "m")
    size = len(json.dumps(kh.model_config(kh.conv_entry())))
    monkeypatch.setattr(keras_open, "MAX_CONFIG_BYTES", size)
    (layer,) = read_keras(str(path)).layers
    assert layer.name == "c"
    monkeypatch.setattr(keras_open, "MAX_CONFIG_BYTES", size - 1)
    message = kh.whole_file_error(path)
    if container == "keras":
        assert message == (f"{path}: config.json is {size} bytes uncompressed, more than a "
                           f"config may be ({size - 1} bytes): not read")
    else:
        assert message == (f"{path}: the model_config attribute has {size} bytes, more "
                           f"than a config may have ({size - 1} bytes)")



# -- blocks.gradcheck: the run-time warning --------------------------------------------------------------

def _gradcheck(monkeypatch, seconds: float, n: int = 100, macs: int = 1000):
    """cost_warning of a GradCheck on the usual geometry whose estimate is ``seconds`` for
    ``n`` elements (the estimate's model is not what these tests pin)."""
    from blocks import gradcheck
    from blocks.registry import get_spec
    from blocks.spec import TensorSpec

    monkeypatch.setattr(gradcheck, "estimated_seconds", lambda _a, _i: (seconds, n, macs))
    attrs, _ = get_spec("GradCheck").resolve_attrs({"op": "Conv2D", "samples": n})
    inputs = {"input": TensorSpec((2, 6, 5, 4), "float32"),
              "filter": TensorSpec((3, 3, 4, 3), "float32"),
              "out_backprop": TensorSpec((2, 6, 5, 3), "float32"),
              "gradient": TensorSpec((2, 6, 5, 4), "float32")}
    return gradcheck.cost_warning(attrs, inputs)


def test_a_gradcheck_of_exactly_slow_check_seconds_is_not_warned_about(monkeypatch):
    """Mutant ``seconds < SLOW_CHECK_SECONDS`` for ``<=``: an estimate of exactly 60 s gives
    no warning, the next float above it does."""
    import math

    from blocks.gradcheck import SLOW_CHECK_SECONDS

    assert SLOW_CHECK_SECONDS == 60.0
    assert _gradcheck(monkeypatch, 60.0) is None
    attr, message = _gradcheck(monkeypatch, math.nextafter(60.0, 61.0))
    assert attr == "samples" and "about 60 s by the estimate" in message


@pytest.mark.parametrize("seconds, said", [(119.4, "119 s"), (120.0, "2 min"),
                                           (7199.0, "120 min"), (7200.0, "2.0 h"),
                                           (172800.0, "2 days")])
def test_the_warning_says_seconds_below_two_minutes_and_minutes_from_two(monkeypatch, seconds,
                                                                         said):
    """Mutant ``seconds <= 120`` for ``< 120`` in ``_duration``: 120 s is said as 2 min."""
    _, message = _gradcheck(monkeypatch, seconds)
    assert f"about {said} by the estimate" in message


def test_when_one_element_alone_passes_the_limit_the_warning_still_offers_samples_1(
        monkeypatch):
    """Mutant ``max(fast, 0)``: 10 elements estimated at 1000 s (100 s each, more than the 60 s
    limit alone) give 0 fast samples; the warning offers samples=1, never samples=0 (which
    means every element)."""
    _, message = _gradcheck(monkeypatch, 1000.0, n=10)
    assert message.endswith("samples=1 or fewer stays under 60 s")
    _, message = _gradcheck(monkeypatch, 1000.0, n=100)  # 10 s each: 6 fit in 60 s
    assert message.endswith("samples=6 or fewer stays under 60 s")


# -- blocks.port_kinds, blocks.spec, blocks.tensors ------------------------------------------------------------

@pytest.mark.parametrize("shape, dtype, kind", [((3,), "int32", "int_vector"),
                                                ((0,), "int64", "int_vector"),
                                                ((), "int32", "other"), ((2, 2), "int32", "other"),
                                                ((), "float32", "float")])
def test_only_a_1d_integer_tensor_is_an_integer_vector(shape, dtype, kind):
    """Mutant ``len(ts.shape) <= 1``: a scalar int32 is no int_vector (a size port refuses its
    wire); [3] and [0] int tensors are."""
    from blocks.port_kinds import OTHER, tensor_kind
    from blocks.spec import TensorSpec

    assert tensor_kind(TensorSpec(shape, dtype)) == (OTHER if kind == "other" else kind)


def test_an_integer_value_of_exactly_the_float_range_is_a_value_and_one_more_is_not():
    """Mutant ``abs(int(v)) >= FLOAT_MAX_INT``: the integer equal to float64's largest finite
    value is a Tensor value (read as that float), on both signs; one more is refused."""
    import sys

    from blocks.registry import get_spec
    from blocks.spec import FLOAT_MAX_INT, AttrError

    assert FLOAT_MAX_INT == int(sys.float_info.max)
    attr = get_spec("Tensor").attr("values")
    assert attr.validate([FLOAT_MAX_INT, -FLOAT_MAX_INT]) == [sys.float_info.max,
                                                              -sys.float_info.max]
    with pytest.raises(AttrError) as err:
        attr.validate([1, -FLOAT_MAX_INT - 1])
    assert err.value.attr == "values"
    assert err.value.message.startswith("values: -1797693134862315") and err.value.message.endswith(
        " is beyond the float range")


@pytest.mark.parametrize("dtype, largest", [("float16", 65504.0), ("float32", 3.4028234663852886e38)])
def test_values_of_the_largest_finite_magnitude_are_known_finite(dtype, largest):
    """Mutant ``self.bound < largest_finite`` for ``<=`` in ``TensorSpec.finite``: a Tensor of
    values +-65504 in float16 (+-FLT_MAX in float32) is known to be finite; Infinity is not."""
    from blocks.registry import get_spec

    spec = get_spec("Tensor")
    for values, finite in (([largest, -largest, 0.0], True), ([1.0, float("inf")], False)):
        attrs, errors = spec.resolve_attrs({"fill": "values", "values": values, "dtype": dtype})
        assert errors == []
        out = spec.infer(attrs, {})["output"]
        assert (out.bound, out.finite) == ((largest, True) if finite else (float("inf"), False))


def test_shapeof_takes_a_dimension_of_exactly_int32_max():
    """Mutant ``s >= INT32_MAX``: ShapeOf an input with a dimension of 2**31 - 1 is that int32
    vector; 2**31 is refused naming the input."""
    from blocks.registry import get_spec
    from blocks.spec import TensorSpec
    from engine.base.errors import InvalidArgumentError

    spec = get_spec("ShapeOf")
    attrs, _ = spec.resolve_attrs({})
    out = spec.infer(attrs, {"input": TensorSpec((1, 2**31 - 1), "float32")})["output"]
    assert (out.shape, out.dtype) == ((2,), "int32")
    np.testing.assert_array_equal(out.value, [1, 2**31 - 1])
    with pytest.raises(InvalidArgumentError) as err:
        spec.infer(attrs, {"input": TensorSpec((1, 2**31), "float32")})
    assert str(err.value) == ("input shape [1, 2147483648]: dimension 2147483648 does not fit the "
                              "int32 shape vector (at most 2147483647)")


# -- engine.graph: frames and notes, the memory message, the file limit, names ---------------------------------

def test_a_frame_of_exactly_max_size_is_accepted_and_one_past_refused():
    """Mutant ``float(v) < MAX_SIZE`` for ``<=``: a frame 100000 x 100000 (and 40 x 40, the
    least) is added with that size; the next float past 100000 on either axis is refused naming
    size."""
    import math

    from engine.base.errors import InvalidArgumentError
    from engine.graph.annotations import MAX_SIZE, MIN_SIZE
    from engine.graph.canvas import Canvas

    assert (MIN_SIZE, MAX_SIZE) == (40.0, 100_000.0)
    c = Canvas()
    assert c.add_frame((0.0, 0.0), (MAX_SIZE, MAX_SIZE)).size == (MAX_SIZE, MAX_SIZE)
    assert c.add_frame((0.0, 0.0), (MIN_SIZE, MAX_SIZE)).size == (MIN_SIZE, MAX_SIZE)
    past = math.nextafter(MAX_SIZE, math.inf)
    for size in ((past, 100.0), (100.0, past)):
        with pytest.raises(InvalidArgumentError) as err:
            c.add_frame((0.0, 0.0), size)
        assert err.value.argument == "size"
    assert len(c.frames) == 2


def test_a_note_of_exactly_max_note_text_characters_is_kept_and_one_more_refused():
    """Mutant ``len(value) >= MAX_NOTE_TEXT``: a note of 10000 characters is added and saved
    with its text; 10001 are refused with the count."""
    from engine.base.errors import InvalidArgumentError
    from engine.graph.annotations import MAX_NOTE_TEXT
    from engine.graph.canvas import Canvas

    assert MAX_NOTE_TEXT == 10_000
    c = Canvas()
    text = "ab\n" * 3333 + "c"
    assert c.add_note((0.0, 0.0), text).text == text
    assert Canvas.from_json(c.to_json()).notes == c.notes
    with pytest.raises(InvalidArgumentError) as err:
        c.add_note((0.0, 0.0), text + "d")
    assert "text has 10001 characters, more than 10000" in str(err.value)


def test_the_memory_message_names_the_earliest_of_outputs_of_the_same_size():
    """Mutants ``len(self._biggest) <= NAMED`` and ``size >= self._biggest[0][0]`` in
    ``Budget.charge``: four earlier outputs of 100 bytes each, then a step one byte past the
    limit: the message names the three first (a, b, c), never the fourth (d), which came
    later with no more bytes."""
    from engine.graph.budget import NAMED, Budget

    assert NAMED == 3
    budget = Budget(400)
    for block in "abcd":
        assert budget.charge(block, {"output": 100}, 0) is None
    message = budget.charge("e", {"output": 1}, 0)
    assert message.startswith("the run would need about 401 bytes while this block runs, more "
                              "than the memory limit 400 bytes: 400 bytes of outputs of earlier "
                              "blocks (every output is kept), 1 bytes of this block's outputs "
                              "and 0 bytes of workspace; biggest: ")
    named = message.split("; biggest: ")[1].split(", ")
    assert sorted(named) == [f"output {b}.output 100 bytes" for b in "abc"]


def test_a_pasted_output_with_a_name_of_max_title_characters_gets_a_name_that_fits():
    """Mutant ``stem[:MAX_TITLE]`` for ``[:MAX_TITLE - 12]`` in ``unused_result_name``: copying
    an Output whose name has the full 200 characters and pasting it names the copy with the
    first 188 and " 2" (a name of 201 characters would be refused, and the paste with it)."""
    from engine.base.names import MAX_TITLE
    from engine.graph.canvas import Canvas

    assert MAX_TITLE == 200
    c = Canvas()
    c.add_node("Output", attrs={"name": "r" * 200}, id="out")
    (new,) = c.paste(c.fragment(["out"]), (10.0, 10.0))
    assert c.nodes[new].attrs["name"] == "r" * 188 + " 2"
    assert c.result_names() == {"r" * 200, "r" * 188 + " 2"}


def test_id_prefixes_of_one_long_name_stay_prefix_chars_long():
    """Mutant ``PREFIX_CHARS - len(str(k))`` for ``... - 1`` in ``id_prefixes``: three layers
    with the same 50-character name get three distinct prefixes of exactly 40 characters, the
    later ones ending in _2 and _3."""
    from engine.graph.merged_canvas import PREFIX_CHARS, id_prefixes

    assert PREFIX_CHARS == 40
    got = id_prefixes(["a" * 50] * 3 + ["b" * 40] * 2)
    assert [len(p) for p in got] == [40] * 5
    assert len(set(got)) == 5
    assert got[1].endswith("_2") and got[2].endswith("_3") and got[4] == "b" * 38 + "_2"


def test_a_layer_whose_canvas_check_refuses_several_blocks_counts_the_others(tmp_path):
    """Mutant ``len(lines)`` for ``len(lines) - 1`` in ``_check_like_check``: under a memory
    limit of 4000 bytes the layer's three conv blocks (each with a 1 MiB workspace) are refused:
    the first is named "and 2 more"; under 1 byte every one of its 13 blocks is: "and 12
    more"; with the default limit the layer plans."""
    from engine.graph.layer_canvas import plan_layer
    from engine.io.models.weights_reader import read_weights

    (layer,) = read_weights(str(_weights_npz(tmp_path, {"c.weight.npy": W})), {}).layers
    assert plan_layer(layer, (5, 5))[1] == (1, 4, 4, 4)
    for limit, first, more in ((4000, "c (Conv2D): the run would need about 1.0 MiB", 2),
                               (1, "input 1x3x5x5 (random_normal).shape: output output", 12)):
        with pytest.raises(ModelImportError) as err:
            plan_layer(layer, (5, 5), memory_limit=limit)
        message = str(err.value)
        assert message.startswith("layer 'c' on input [1, 3, 5, 5]: `gradblocks check` would "
                                  f"refuse its canvas: {first}")
        assert message.endswith(f" (and {more} more)")


def test_an_output_file_name_of_exactly_name_max_bytes_is_writable(tmp_path):
    """Mutant ``>= NAME_MAX`` for ``> NAME_MAX`` in ``target_problem``: an output file named
    with exactly the folder's NAME_MAX bytes (255 on the usual file systems) may be written,
    and is; one byte more is refused with its length."""
    import os

    from engine.graph.targets import DEFAULT_NAME_MAX, target_problem

    try:
        name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):
        name_max = DEFAULT_NAME_MAX
    exact = tmp_path / ("n" * (name_max - 4) + ".npz")
    assert target_problem(str(exact)) is None
    exact.write_bytes(b"ok")  # the system agrees
    longer = tmp_path / ("n" * (name_max - 3) + ".npz")
    assert target_problem(str(longer)) == (f"has a file name of {name_max + 1} bytes, longer "
                                           "than this system allows")
