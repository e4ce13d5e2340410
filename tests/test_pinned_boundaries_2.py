"""More boundaries the issue 32 point 7 mutation probe left unpinned: each test asserts computed
results on both sides of one line (the mutant it kills is in its docstring, checked by applying
it): --weights .npz members (.npy only, a running total), MAX_FOLD_NODES, the check blocks'
out_backprop dtype and gradient shape, MAX_PATH, MAX_COORD, a depth of 0 in the layout hint and
a perm with a duplicate."""

from __future__ import annotations

import io
import itertools
import zipfile

import numpy as np
import pytest

from blocks.registry import get_spec
from blocks.spec import MAX_PATH, AttrError, AttrSpec, TensorSpec
from engine.base.errors import InvalidArgumentError
from engine.graph import canvas_document
from engine.graph.canvas_document import MAX_COORD, block_position
from engine.io.models.model_import import ModelImportError
from engine.io.models.onnx_tensors import read_weights_npz


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _npz(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w") as z:
        for name, raw in members.items():
            z.writestr(name, raw)
    return path


# -- engine.io.models.onnx_tensors.read_weights_npz -----------------------------------------------

def test_a_weights_npz_member_must_be_named_npy(tmp_path):
    """Mutant: the ``endswith(".npy")`` check removed or inverted: a valid .npy array stored as
    'b.txt' is refused naming the member; the same bytes as 'b.npy' are read."""
    a = np.arange(6, dtype=np.float32)
    good = _npz(tmp_path / "g.npz", {"a.npy": _npy(a), "b.npy": _npy(a)})
    got = read_weights_npz(str(good))
    assert sorted(got) == ["a", "b"]
    np.testing.assert_array_equal(got["b"], a)
    bad = _npz(tmp_path / "b.npz", {"a.npy": _npy(a), "b.txt": _npy(a)})
    with pytest.raises(ModelImportError) as err:
        read_weights_npz(str(bad))
    assert str(err.value) == (f"--weights {str(bad)!r}: member 'b.txt' is not a .npy array "
                              "(an .npz holds .npy arrays only)")


def test_weights_npz_members_are_a_running_total_against_the_limit(tmp_path):
    """Mutant: ``left`` not a running total (reset to ``limit`` per member, or ``limit -
    nbytes``): three 40-byte members fit 120 bytes exactly; under 119 the third is refused with
    the 39 bytes the first two leave."""
    path = _npz(tmp_path / "w.npz", {k + ".npy": _npy(np.ones(10, np.float32)) for k in "abc"})
    assert {k: v.nbytes for k, v in read_weights_npz(str(path), limit=120).items()} == {
        "a": 40, "b": 40, "c": 40}
    with pytest.raises(ModelImportError) as err:
        read_weights_npz(str(path), limit=119)
    assert str(err.value) == (f"--weights {str(path)!r}: member 'c.npy': [10] float32 needs 40 "
                              "bytes, more than the memory limit leaves (39 bytes): not read")


# -- engine.io.models.onnx_fold: MAX_FOLD_NODES ---------------------------------------------------

@pytest.mark.parametrize("count, folds", [(3, True), (4, False)])
def test_a_subgraph_of_exactly_max_fold_nodes_folds_and_one_more_is_refused(
        tmp_path, monkeypatch, count, folds):
    """Mutants ``len(state) > MAX_FOLD_NODES`` / ``>= MAX_FOLD_NODES - 1`` in ``_subgraph``: with
    MAX_FOLD_NODES 3 a chain of 3 Identity nodes folds to w0, one of 4 is refused naming it."""
    pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    from engine.io.models import onnx_fold
    from tests.test_import_onnx_models import W, fold_model
    from tests.test_models_pinned import _constants

    monkeypatch.setattr(onnx_fold, "MAX_FOLD_NODES", 3)
    names = ["w0", *(f"t{i}" for i in range(count - 1)), "W"]
    nodes = [helper.make_node("Identity", [a], [b]) for a, b in itertools.pairwise(names)]
    path = fold_model(tmp_path / "m.onnx", nodes, [numpy_helper.from_array(W, "w0")])
    constants = _constants(path, 10**6)
    if folds:
        np.testing.assert_array_equal(constants.value("W", "layer 'c': weights 'W'"), W)
        return
    with pytest.raises(ModelImportError) as err:
        constants.value("W", "layer 'c': weights 'W'")
    assert str(err.value) == "layer 'c': weights 'W': computed by more than 3 nodes: not folded"


# -- blocks: AdjointCheck's out_backprop dtype, GradCheck's gradient shape ------------------------

def _inputs(**dtypes) -> dict[str, TensorSpec]:
    return {"input": TensorSpec((2, 6, 5, 4), dtypes.get("input", "float32")),
            "filter": TensorSpec((3, 3, 4, 3), "float32"),
            "out_backprop": TensorSpec((2, 6, 5, 3), dtypes.get("out_backprop", "float32"))}


def test_an_adjoint_check_out_backprop_of_another_dtype_is_refused_naming_it():
    """Mutant: ``shared_dtype(input, out_backprop)`` removed from AdjointCheck's infer: a
    float64 out_backprop with float32 input and filter is refused at out_backprop."""
    spec = get_spec("AdjointCheck")
    attrs, _ = spec.resolve_attrs({"op": "Conv2D"})
    assert spec.infer(attrs, _inputs())["ok"] == TensorSpec((), "bool")
    with pytest.raises(AttrError) as err:
        spec.infer(attrs, _inputs(out_backprop="float64"))
    assert (err.value.attr, err.value.message) == (
        "out_backprop", "out_backprop dtype float64 does not match input dtype float32")


@pytest.mark.parametrize("wrt, want, wrong", [
    ("input", (2, 6, 5, 4), [(1, 6, 5, 4), (3, 6, 5, 4), (2, 6, 5, 3), (6, 5, 4)]),
    ("filter", (3, 3, 4, 3), [(2, 3, 4, 3), (3, 3, 4, 4), (1, 3, 3, 4, 3)])])
def test_a_gradcheck_gradient_must_have_the_wrt_shape_batch_included(wrt, want, wrong):
    """Mutant: GradCheck's infer comparing ``grad.shape[1:]`` (the batch not checked) or a
    prefix: each shape off by one on an axis (the batch first) or in rank is refused at wrt
    with both shapes; the right one gives float64 numeric and error of that shape."""
    spec = get_spec("GradCheck")
    attrs, _ = spec.resolve_attrs({"op": "Conv2D", "wrt": wrt})
    out = spec.infer(attrs, {**_inputs(), "gradient": TensorSpec(want, "float32")})
    assert (out["numeric"].shape, out["numeric"].dtype) == (want, "float64")
    for shape in wrong:
        with pytest.raises(AttrError) as err:
            spec.infer(attrs, {**_inputs(), "gradient": TensorSpec(shape, "float32")})
        assert (err.value.attr, err.value.message) == (
            "wrt", (f"gradient shape {list(shape)} does not match the {wrt} shape (wrt={wrt}): "
                   f"expected {list(want)}, got {list(shape)}"))


# -- blocks.spec: MAX_PATH --------------------------------------------------------------------------

def test_a_path_of_exactly_max_path_characters_is_accepted_and_one_more_refused():
    """Mutants ``len(value) >= MAX_PATH`` / ``> MAX_PATH + 1``: 4096 characters pass, 4097 are
    refused naming the attribute."""
    attr = AttrSpec("path", "path", "")
    assert MAX_PATH == 4096
    exact = "a" * MAX_PATH
    assert attr.validate(exact) == exact
    with pytest.raises(AttrError) as err:
        attr.validate(exact + "a")
    assert err.value.attr == "path"
    assert err.value.message.startswith(
        "path must be a file path without NUL of at most 4096 characters, got 'aaa")


# -- engine.graph.canvas_document: MAX_COORD --------------------------------------------------------

@pytest.mark.parametrize("pos", [[1e9, -1e9], [-1e9, 1e9], (1e9, 1e9), [10**9, -10**9],
                                 [-10**9, 10**9], [10**9, 1e9]])
def test_a_pos_of_exactly_max_coord_is_accepted(pos):
    """Mutant ``abs(x) < MAX_COORD`` (the int branch, also taken by a float beside an int):
    +-1e9 on each axis, as floats and as ints, are read as those floats."""
    assert MAX_COORD == 1e9
    got = block_position(pos)
    assert got == (float(pos[0]), float(pos[1]))
    assert all(type(v) is float for v in got)


def test_float_positions_within_max_coord_take_the_fast_path(monkeypatch):
    """The float branch is the common case "cheaply": a mutant narrowing it (``<`` for ``<=``)
    falls through to the slow path, which must not be reached for two floats at +-MAX_COORD."""
    def slow(_value):
        raise AssertionError("slow path")
    monkeypatch.setattr(canvas_document.items, "is_finite", slow)
    assert block_position([1e9, -1e9]) == (1e9, -1e9)
    assert block_position([-1e9, 1e9]) == (-1e9, 1e9)


@pytest.mark.parametrize("pos", [[1e9 + 1, 0.0], [0.0, -1e9 - 1], [-1e9 - 1, 0.0],
                                 [0.0, 1e9 + 1], [10**9 + 1, 0], [0, -10**9 - 1]])
def test_a_pos_just_past_max_coord_is_refused_naming_pos(pos):
    """Mutants ``abs(x) <= MAX_COORD + 1`` / a bound dropped on one side of either branch: one
    unit past 1e9 on either axis and side, float or int, is refused at pos."""
    with pytest.raises(InvalidArgumentError) as err:
        block_position(pos)
    assert err.value.argument == "pos"
    assert str(err.value) == f"pos must lie within 1e+09 of the origin on each axis, got {pos!r}"


# -- blocks.conv: the layout hint for a depth of 0 ----------------------------------------------------

def test_a_depth_of_zero_read_the_other_way_is_no_layout_hint():
    """Mutant: ``depth > 0 and`` dropped from ``_depth_misfits``' fits (0 % in_channels is 0):
    an NHWC input [1, 0, 5, 5] (depth 5, 0 read as NCHW) against 3 in_channels gets no hint
    that NCHW depth 0 "fits the filter"."""
    spec = get_spec("Conv2D")
    attrs, _ = spec.resolve_attrs({"data_format": "NHWC"})
    w = TensorSpec((3, 3, 3, 2), "float32")
    with pytest.raises(AttrError) as err:
        spec.infer(attrs, {"input": TensorSpec((1, 0, 5, 5), "float32"), "filter": w})
    assert (err.value.attr, err.value.message) == (
        "input", "input depth 5 must be a positive multiple of filter in_channels 3")


# -- blocks.tensors / keras: a perm with a duplicate ---------------------------------------------

@pytest.mark.parametrize("perm, ndim", [([0, 1, 2, 2], 3), ([0, 3, 1, 2, 3], 4), ([1, 1], 2)])
def test_a_perm_with_a_duplicate_is_not_a_permutation(perm, ndim):
    """Mutants ``set(perm)`` for ``sorted(perm)`` (then every perm is refused: a set never equals
    a list) and ``set(perm) != set(range(ndim))`` / ``list(set(perm))`` (duplicates pass):
    [0, 3, 1, 2] transposes NHWC to NCHW; a perm whose set is 0..ndim-1 but which repeats an
    axis is refused naming perm."""
    spec = get_spec("Transpose")
    attrs, _ = spec.resolve_attrs({"perm": [0, 3, 1, 2]})
    out = spec.infer(attrs, {"input": TensorSpec((2, 3, 4, 5), "float32")})["output"]
    assert out.shape == (2, 5, 3, 4)
    attrs, _ = spec.resolve_attrs({"perm": perm})
    with pytest.raises(AttrError) as err:
        spec.infer(attrs, {"input": TensorSpec(tuple(range(2, 2 + ndim)), "float32")})
    assert (err.value.attr, err.value.message) == (
        "perm", (f"perm {perm} is not a permutation of 0..{ndim - 1} (input has {ndim} "
                "dimensions)"))


def test_a_keras_permute_with_a_duplicate_is_refused():
    """The same mutants in ``keras_shapes.permute``: dims (2, 1) swap, [1, 2, 2] is refused."""
    from engine.io.models.keras_shapes import ShapeStop, permute

    assert permute({"dims": [2, 1]}, [(None, 4, 5)]) == (None, 5, 4)
    with pytest.raises(ShapeStop) as err:
        permute({"dims": [1, 2, 2]}, [(None, 4, 5)])
    assert str(err.value) == "dims is [1, 2, 2], expected a permutation of 1..2"
