"""Validation edges the second mutation probe (/work/probe, issue 21 point 6) found unguarded:
each test fails when the named check is weakened (the mutant is in the test's docstring) and
asserts the computed result: the exact message, verdict or value."""

from __future__ import annotations

import numpy as np
import pytest

from blocks.spec import AttrError
from engine.base.atomic import Member, write_file_set
from engine.base.errors import InvalidArgumentError
from engine.graph import targets
from engine.graph.canvas import Canvas, CanvasError
from engine.io import strict_json
from engine.io.models.model_import import (
    ConvLayer,
    ModelImportError,
    check_layer,
    transposed_pads,
)
from engine.io.models.onnx_tensors import read_weights_npz
from engine.io.models.weights_reader import parse_attrs
from engine.shapes.conv import conv2d_geometry
from engine.verify.conventions import Geometry, shapes
from engine.verify.support import parse_support
from engine.verify.verdicts import judge
from tests.test_onnx_hostile import A, conv_model, refusal


def test_a_block_wired_into_itself_is_a_cycle():
    """Mutant: ``_would_cycle`` without ``if src == dst: return True``. A block with no other
    wire has nothing to search from, so its own output into its own input was accepted."""
    c = Canvas()
    c.add_node("Transpose", id="a")
    with pytest.raises(InvalidArgumentError) as err:
        c.connect(("a", "output"), ("a", "input"))
    assert str(err.value) == "connecting a.output to a.input would make a cycle"
    assert c.edges == []


def test_an_output_path_of_exactly_path_max_bytes_is_too_long():
    """Mutant ``len(encoded) > PATH_MAX``: PATH_MAX counts the terminating NUL, so a path of
    exactly 4096 bytes is already too long (its folder missing is not the problem to name)."""
    path = "x/" * 2047 + "yy"
    assert len(path) == targets.DEFAULT_PATH_MAX
    assert targets.target_problem(path) == ("is longer (4096 bytes) than this system allows "
                                            "for a path")
    assert targets.target_problem(path[1:]) == "cannot be written: its folder does not exist"


def _geometry(strides: tuple[int, int]) -> tuple[Geometry, object]:
    g = Geometry(batch=1, height=5, width=5, channels=1, kernel=(3, 3), out_channels=1,
                 strides=strides)
    return g, shapes(g)


def test_support_less_than_is_strict():
    """Mutant ``"<": operator.le``: ``--support strides<2`` allowed stride 2."""
    support = parse_support("strides<2")
    assert [support.allows(*_geometry(s)) for s in [(1, 1), (2, 1), (1, 2)]] == [
        True, False, False]
    support = parse_support("strides>=2")
    assert [support.allows(*_geometry(s)) for s in [(1, 1), (2, 2), (3, 2)]] == [
        False, True, True]


def test_a_comparison_in_support_takes_one_number():
    """Mutant: no ``len(nums) != 1`` check: ``strides<=1,2`` silently meant ``strides<=1``."""
    with pytest.raises(InvalidArgumentError) as err:
        parse_support("strides<=1,2")
    assert str(err.value) == "--support token 'strides<=1,2': <= takes one number"


def test_an_unknown_key_in_an_edge_is_a_problem_at_its_path():
    """Mutant: the unknown-key loop of ``_parse_edge`` dropped: an edge's extra key (a typo such
    as ``"dts"`` beside a valid ``"dst"``, or a comment) was silently ignored while a node's or
    the document's was reported."""
    doc = {"format": "gradblocks.canvas", "version": 2,
           "nodes": [{"id": "x", "type": "Tensor", "attrs": {"shape": [1]}},
                     {"id": "t", "type": "Transpose"}],
           "edges": [{"src": ["x", "output"], "dst": ["t", "input"], "dts": ["t", "input"]}]}
    with pytest.raises(CanvasError) as err:
        Canvas.from_json(doc)
    assert err.value.problems == [("$.edges[0].dts", "unknown key")]
    del doc["edges"][0]["dts"]
    assert Canvas.from_json(doc).inputs_of("t") == {"input": ("x", "output")}


def test_a_path_attribute_with_a_nul_byte_is_refused():
    """Mutant: the ``"\\x00" in value`` check of a ``path`` attribute dropped: the NUL reached
    the file system calls (a ValueError deep in a read) instead of one message naming the
    attribute."""
    with pytest.raises(AttrError) as err:
        Canvas().add_node("Tensor", attrs={"fill": "file", "path": "a\x00b.npy"})
    assert (err.value.attr, str(err.value)) == (
        "path", (r"path must be a file path without NUL of at most 4096 characters, got "
                 r"'a\x00b.npy'"))


@pytest.mark.parametrize("input_depth", [1, 4])
def test_a_depthwise_filter_must_have_the_inputs_depth(input_depth):
    """Mutant ``depth < fin``: a depthwise filter for 2 channels on a 4-channel input passed
    (the output then claims 4 x multiplier channels the filter does not have)."""
    with pytest.raises(InvalidArgumentError) as err:
        conv2d_geometry((1, 5, 5, input_depth), (3, 3, 2, 1), strides=[1, 1, 1, 1],
                        padding="VALID", depthwise=True)
    assert (err.value.argument, str(err.value)) == (
        "filter", (f"filter in_channels 2 does not match input depth {input_depth} "
                   "(depthwise: they must be equal)"))
    g = conv2d_geometry((1, 5, 5, 2), (3, 3, 2, 3), strides=[1, 1, 1, 1], padding="VALID",
                        depthwise=True)
    assert g.output_shape == (1, 3, 3, 6)


def test_one_level_past_the_nesting_limit_is_refused():
    """Mutant ``_depth(data) <= max_depth``: a document exactly one level deeper than
    :data:`MAX_DEPTH` skipped the walk and loaded without a problem."""
    limit = strict_json.MAX_DEPTH
    deepest = "[" * limit + "]" * limit
    assert strict_json.loads(deepest)[1] == []
    _, problems = strict_json.loads("[" + deepest + "]")
    assert problems == [("$" + "[0]" * limit, f"nested more than {limit} levels deep")]


def test_weights_npz_members_together_fit_the_memory_limit(tmp_path):
    """Mutant: ``read_stream`` without its ``data_bytes > limit`` check: ``--weights`` members
    were read past what the memory limit leaves after the earlier ones (each alone fits)."""
    path = tmp_path / "w.npz"
    np.savez(path, a=np.ones(25, np.float32), b=np.ones(25, np.float32))
    assert {k: v.shape for k, v in read_weights_npz(str(path), limit=200).items()} == {
        "a": (25,), "b": (25,)}
    with pytest.raises(ModelImportError) as err:
        read_weights_npz(str(path), limit=150)
    assert str(err.value) == (f"--weights {str(path)!r}: member 'b.npy': [25] float32 needs 100 "
                              "bytes, more than the memory limit leaves (50 bytes): not read")


def test_a_transposed_convs_output_padding_must_be_below_its_stride():
    """Mutant ``-after > s``: rows after the kernel's reach equal to the stride passed as
    output_padding 2 at stride 2, which Conv2DBackpropInput cannot express (its input_sizes
    would give another output size)."""
    assert transposed_pads("t", "rows", 3, 2, 1, 3, 0, 8) == (0, 0, 1)
    with pytest.raises(ModelImportError) as err:
        transposed_pads("t", "rows", 3, 2, 1, 3, 0, 9)
    assert str(err.value) == ("layer 't': the output has 2 rows after the last the kernel "
                              "reaches, more than stride 2 - 1, which Conv2DBackpropInput cannot "
                              "express")


def _layer(bias: np.ndarray | None) -> ConvLayer:
    return ConvLayer(name="c", kernel=(3, 3), strides=(1, 1), dilations=(1, 1), padding="VALID",
                     pads=(0, 0, 0, 0), groups=1, in_channels=2, out_channels=3,
                     data_format="NCHW", weights=np.zeros((3, 3, 2, 3), np.float32), bias=bias)


def test_a_bias_of_the_wrong_length_is_refused():
    """Mutant: ``check_layer`` without its bias shape check: a bias of 2 values for 3 output
    channels was imported (a corrupt file; the canvas's bias would not broadcast)."""
    check_layer(_layer(np.zeros(3, np.float32)))
    with pytest.raises(ModelImportError) as err:
        check_layer(_layer(np.zeros(2, np.float32)))
    assert str(err.value) == "layer 'c': bias has shape [2], expected [3]"


def test_negative_onnx_pads_are_refused(tmp_path):
    """Mutant: the ``min(pads) < 0`` check dropped: cropping pads were imported as explicit
    paddings TensorFlow refuses."""
    assert refusal(conv_model(tmp_path / "m.onnx", attrs=[A("pads", [1, -1, 0, 0])])) == (
        "layer 'c': negative pads [1, -1, 0, 0] (cropping) cannot be imported")


def test_onnx_same_upper_with_dilations_is_refused(tmp_path):
    """Mutant: the dilations check of auto_pad SAME_* dropped: runtimes pad such a layer
    differently, so importing it as TensorFlow's SAME may be silently wrong."""
    path = conv_model(tmp_path / "m.onnx",
                      attrs=[A("auto_pad", "SAME_UPPER"), A("dilations", [2, 1])])
    assert refusal(path) == (
        "layer 'c': auto_pad SAME_UPPER with dilations [2, 1]: runtimes disagree on whether "
        "the padding counts the dilated kernel; re-export the model with explicit pads")


@pytest.mark.parametrize("text, message", [
    ("strides=0,1", "--attrs: strides=0,1 needs 2 positive integer(s)"),
    ("dilations=1,0", "--attrs: dilations=1,0 needs 2 positive integer(s)"),
    ("padding=EXPLICIT", ("--attrs: padding=EXPLICIT needs pads=T,B,L,R (before, after per "
                         "spatial dim; 1-D: L,R; 3-D: front,back,T,B,L,R)")),
])
def test_weights_attrs_are_checked_where_they_are_given(text, message):
    """Mutants: ``--attrs`` accepting a stride or dilation of 0 (``min(nums) < 0``), and
    padding=EXPLICIT without pads (then all zero): the one-line message names the option."""
    with pytest.raises(ModelImportError) as err:
        parse_attrs(text)
    assert str(err.value) == message
    assert parse_attrs("padding=EXPLICIT pads=0,1,0,1 strides=1,2") == {
        "padding": "EXPLICIT", "pads": (0, 1, 0, 1), "strides": (1, 2)}


@pytest.mark.parametrize("change, argument, message", [
    ({"strides": [1, True, 1, 1]}, "strides", "strides must be integers, got [1, True, 1, 1]"),
    ({"padding": "EXPLICIT", "explicit_paddings": [0, 0, 0, -1, 0, 0, 0, 0]},
     "explicit_paddings",
     "explicit_paddings [0, 0, 0, -1, 0, 0, 0, 0]: every element must be nonnegative"),
])
def test_conv_arguments_tensorflow_refuses_are_refused(change, argument, message):
    """Mutants ``_is_int`` without its bool test (``strides=[1, True, 1, 1]`` taken as
    [1, 1, 1, 1]) and ``min(pads) < -1`` (an explicit padding of -1 accepted): the kernels' own
    argument checks, which the canvas's attribute checks do not reach when the notebook API
    or an import calls them."""
    args = {"input_shape": (1, 5, 5, 2), "filter_shape": (3, 3, 2, 1),
            "strides": [1, 1, 1, 1], "padding": "VALID", **change}
    with pytest.raises(InvalidArgumentError) as err:
        conv2d_geometry(**args)
    assert (err.value.argument, str(err.value)) == (argument, message)


@pytest.mark.parametrize("names", [["s.py"], ["../x.npz"], ["d/x.npz"], ["a.npz", "a.npz"]])
def test_file_set_members_are_distinct_plain_names_beside_the_main_file(tmp_path, names):
    """Mutants: ``write_file_set`` without ``real.name in names`` (a member named like the
    main file, which the main file's rename then destroys) or without ``os.sep not in name``
    (a member ``../x.npz`` written outside the main file's folder). Nothing is written."""
    (tmp_path / "d").mkdir()

    def write(data: bytes):
        return lambda f: f.write(data)
    with pytest.raises(ValueError) as err:
        write_file_set(tmp_path / "d" / "s.py", write(b"main"),
                       [Member(n, write(b"member")) for n in names])
    assert str(err.value) == f"member names must be distinct plain file names: {names!r}"
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["d"]


def _verdict(got: np.ndarray, second: np.ndarray | None):
    ref = np.ones((1, 2, 3, 1))
    return judge("ok", got, second, ref, np.ones_like(ref), "float32")


def test_a_nan_returned_the_same_way_twice_is_nonfinite_not_nondeterministic():
    """Mutant ``np.array_equal(got, second)`` without ``equal_nan``: an implementation that
    returns NaN at the same place twice was called nondeterministic, hiding the real
    diagnosis."""
    got = np.ones((1, 2, 3, 1), np.float32)
    got[0, 1, 2, 0] = np.nan
    v = _verdict(got, got.copy())
    assert (v.verdict, v.message) == (
        "nonfinite", ("1 non-finite element(s) where the reference is finite, first at "
                      "[0, 1, 2, 0]"))
    assert _verdict(np.ones((1, 2, 3, 1), np.float32), got).verdict == "nondeterministic"
