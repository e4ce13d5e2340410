"""Tests that pin the import and validation code of the last two rounds (issue 32 point 7): each
fails when one line of the rule it names is broken (the mutant is in its docstring, checked by
applying it) and asserts computed results: forward outputs against onnx's own
``onnx.reference.ReferenceEvaluator``, exact messages, exact accepted values."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import AttributeProto, TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import engine
from blocks.registry import get_spec
from blocks.spec import AttrError, TensorSpec
from engine.base.dtypes import RTOL
from engine.graph.canvas import Canvas
from engine.graph.compiler import compile_canvas
from engine.graph.layer_canvas import read_model, write_layer_canvas
from engine.io.models.model_import import ModelImportError
from engine.io.models.onnx_fold import Constants
from engine.io.models.onnx_reader import read_onnx
from engine.io.models.onnx_tensors import FLOAT_TYPES
from tests.test_import_onnx_models import W, fold_model, transpose_model
from tests.test_onnx_hostile import conv_model, refusal

I = numpy_helper.from_array


# -- ConvTranspose: output_padding with SAME_*, output_shape and at the stride ------------------

def _run_transpose(tmp_path: Path, x_shape, w_shape, **attrs):
    """(our forward, onnx's ReferenceEvaluator's forward, the layer) of one ConvTranspose node
    't' with random X and W (float32 data, float64 reference)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    path = transpose_model(tmp_path / "m.onnx", x.shape, w, **attrs)
    found = read_model(str(path))
    assert not found.refused, found.refused
    (layer,) = found.layers
    np.save(tmp_path / "x.npy", x)
    write_layer_canvas(layer, str(tmp_path / "c.gbc.json"), input_path=str(tmp_path / "x.npy"))
    got = engine.load(tmp_path / "c.gbc.json").run()["forward"]
    model = onnx.load(str(path))
    for t in (*model.graph.input, *model.graph.output):
        t.type.tensor_type.elem_type = TensorProto.DOUBLE
    model.graph.initializer[0].CopyFrom(I(w.astype(np.float64), "W"))
    ref = ReferenceEvaluator(model).run(None, {"X": x.astype(np.float64)})[0]
    bound = ReferenceEvaluator(_abs(model, w)).run(None, {"X": np.abs(x).astype(np.float64)})[0]
    return got, ref, bound, layer


def _abs(model, w: np.ndarray):
    """``model`` with |W| (for the bound: the same sum over absolute values)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.graph.initializer[0].CopyFrom(I(np.abs(w).astype(np.float64), "W"))
    return copy


def _close(got, ref, bound) -> None:
    assert got.shape == ref.shape
    err = np.abs(np.asarray(got, np.float64) - ref)
    assert (err <= RTOL["float32"] * bound + 1e-30).all(), float(err.max())


@pytest.mark.parametrize("auto_pad, strides, output_padding, pads, extra", [
    # kernel 3: total = output_padding + 3 - stride, the odd pad after for SAME_UPPER; the
    # layer's pads (top, bottom, left, right) and output_padding are its forward conv's
    ("SAME_UPPER", [2, 2], [1, 1], (1, 0, 1, 0), (0, 0)),
    ("SAME_UPPER", [2, 2], [0, 1], (0, 1, 1, 0), (0, 0)),
    ("SAME_LOWER", [2, 2], [0, 1], (1, 0, 1, 0), (0, 0)),
    ("SAME_UPPER", [3, 2], [1, 0], (0, 0, 0, 1), (0, 0)),
    ("SAME_LOWER", [3, 2], [1, 0], (1, 0, 1, 0), (1, 0)),
    ("SAME_UPPER", [3, 2], [2, 1], (1, 0, 1, 0), (1, 0)),
    ("SAME_UPPER", [3, 3], [0, 0], (0, 0, 0, 0), (0, 0)),  # reach 3 - stride 3: no padding
])
def test_convtranspose_same_with_output_padding_matches_the_reference_evaluator(
        tmp_path, auto_pad, strides, output_padding, pads, extra):
    """Mutants: ``total = reach - s`` (output_padding dropped from SAME's total), the
    SAME_UPPER / SAME_LOWER split swapped, ``total <= 0`` refusing a kernel as long as the
    stride. Output = input x stride (3x4 -> 6x8, 9x8, 9x12) and the numbers of onnx's reference
    evaluator (float64)."""
    got, ref, bound, layer = _run_transpose(tmp_path, (1, 2, 3, 4), (2, 3, 3, 3),
                                            strides=strides, auto_pad=auto_pad,
                                            output_padding=output_padding)
    assert got.shape == (1, 3, 3 * strides[0], 4 * strides[1])
    assert (layer.pads, layer.output_padding) == (pads, extra)
    _close(got, ref, bound)


@pytest.mark.parametrize("output_shape", [[7, 8], [6, 9], [8, 10]])
def test_convtranspose_output_shape_counts_output_padding(tmp_path, output_shape):
    """Mutants: the output_shape branch without its output_padding (``extra`` (0, 0)) and
    :func:`at_input_size`'s total without ``+ op``. X 3x4, kernel 3, stride 2, output_padding
    1: 8 rows and 10 cols reach; the fixed sizes crop 1 and 2, 2 and 1, none: the numbers of
    onnx's reference evaluator."""
    got, ref, bound, layer = _run_transpose(tmp_path, (1, 2, 3, 4), (2, 3, 3, 3),
                                            strides=[2, 2], auto_pad="SAME_UPPER",
                                            output_padding=[1, 1], output_shape=output_shape)
    assert (layer.output_hw, layer.output_padding) == (tuple(output_shape), (1, 1))
    assert got.shape == (1, 3, *output_shape)
    _close(got, ref, bound)


def test_convtranspose_explicit_pads_with_output_padding_below_the_stride(tmp_path):
    """Output_padding stride - 1 (2 at stride 3) imports as zero rows after the kernel's reach:
    9 + 2 - 1 = 10 rows, 9 + 1 cols, the reference evaluator's numbers."""
    got, ref, bound, layer = _run_transpose(tmp_path, (1, 2, 3, 4), (2, 3, 3, 3),
                                            strides=[3, 2], output_padding=[2, 1],
                                            pads=[1, 0, 0, 0])
    assert (layer.pads, layer.output_padding) == ((1, 0, 0, 0), (2, 1))
    assert got.shape == (1, 3, 3 * 2 + 3 + 2 - 1, 2 * 3 + 3 + 1)
    _close(got, ref, bound)


@pytest.mark.parametrize("attrs, axis, rows", [
    ({"strides": [2, 2], "output_padding": [2, 0]}, "rows", 2),
    ({"strides": [2, 3], "output_padding": [0, 3]}, "cols", 3),
    ({"strides": [2, 2], "output_padding": [2, 0], "auto_pad": "VALID"}, "rows", 2),
])
def test_convtranspose_output_padding_equal_to_the_stride_is_refused(tmp_path, attrs, axis,
                                                                     rows):
    """Mutant ``-after > s`` in :func:`transposed_pads`: output_padding equal to the stride was
    imported, though Conv2DBackpropInput cannot express it (its input_sizes would give another
    output size)."""
    w = np.ones((2, 3, 3, 3), np.float32)
    path = transpose_model(tmp_path / "m.onnx", (1, 2, 3, 4), w, **attrs)
    s = attrs["strides"][0 if axis == "rows" else 1]
    assert refusal(path, "t") == (
        f"layer 't': the output has {rows} {axis} after the last the kernel reaches, more "
        f"than stride {s} - 1, which Conv2DBackpropInput cannot express")


# -- constant folding: the memory limit is a running total ----------------------------------------

def _constants(path: Path, limit: int) -> Constants:
    return Constants(onnx, onnx.load(str(path)), os.path.getsize(path), str(path.parent), {},
                     limit=limit)


def test_folding_counts_every_intermediate_together_against_the_limit(tmp_path):
    """Mutant: ``_within_limit`` comparing each size alone (``used + nbytes``) with the limit:
    W = Identity(Identity(w0)) holds w0, a and W (216 bytes each, 648 together) at once."""
    nodes = [helper.make_node("Identity", ["w0"], ["a"]),
             helper.make_node("Identity", ["a"], ["W"])]
    path = fold_model(tmp_path / "m.onnx", nodes, [I(W, "w0")])
    got = _constants(path, 648).value("W", "layer 'c': weights 'W'", FLOAT_TYPES)
    np.testing.assert_array_equal(got, W)
    with pytest.raises(ModelImportError) as err:
        _constants(path, 647).value("W", "layer 'c': weights 'W'", FLOAT_TYPES)
    assert str(err.value) == (
        "layer 'c': weights 'W': computing it would need 648 bytes or more ('a' (op Identity) "
        "alone is 216 bytes), more than the memory limit (647 bytes): refused before running")


def test_folding_node_by_node_keeps_the_running_total(tmp_path):
    """Mutant: the node-by-node loop not carrying ``used`` on (``self._within_limit(...)``
    without ``used =``): ConstantOfShape(Abs(s0)) holds s0 and s (32 bytes each) and W (216)
    at once, 280 bytes."""
    nodes = [helper.make_node("Abs", ["s0"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["W"])]
    path = fold_model(tmp_path / "m.onnx", nodes, [I(np.array([3, 2, 3, 3], np.int64), "s0")])
    got = _constants(path, 280).value("W", "layer 'c': weights 'W'", FLOAT_TYPES)
    np.testing.assert_array_equal(got, np.zeros((3, 2, 3, 3), np.float32))
    with pytest.raises(ModelImportError) as err:
        _constants(path, 279).value("W", "layer 'c': weights 'W'", FLOAT_TYPES)
    assert str(err.value) == (
        "layer 'c': weights 'W': computing it would need 280 bytes or more ('W' (op "
        "ConstantOfShape) alone is 216 bytes), more than the memory limit (279 bytes): refused "
        "before running")


def test_the_leaves_count_against_the_limit(tmp_path):
    """Mutant: ``used = 0`` instead of the leaves' bytes: w0's 216 bytes are held while a and
    W are computed."""
    nodes = [helper.make_node("Identity", ["w0"], ["W"])]
    path = fold_model(tmp_path / "m.onnx", nodes, [I(W, "w0")])
    _constants(path, 432).value("W", "layer 'c': weights 'W'", FLOAT_TYPES)
    with pytest.raises(ModelImportError, match=r"need 432 bytes or more .*limit \(431 bytes\)"):
        _constants(path, 431).value("W", "layer 'c': weights 'W'", FLOAT_TYPES)


# -- ref_attr_name --------------------------------------------------------------------------------

def _ref_attr(name: str, ref: str, kind: int) -> AttributeProto:
    return AttributeProto(name=name, ref_attr_name=ref, type=kind)


def test_a_conv_attribute_referring_to_a_function_attribute_is_refused(tmp_path):
    """Mutant: ``_attrs`` without its ``ref_attr_name`` check: the reference was read as an
    empty value (a 0-number strides, or the default)."""
    path = conv_model(tmp_path / "m.onnx",
                      attrs=[_ref_attr("strides", "s", AttributeProto.INTS)])
    assert refusal(path) == ("layer 'c': attribute 'strides' refers to a function attribute "
                             "'s', which only a function body may do")
    path = conv_model(tmp_path / "g.onnx", attrs=[_ref_attr("group", "g", AttributeProto.INT)])
    assert refusal(path) == ("layer 'c': attribute 'group' refers to a function attribute "
                             "'g', which only a function body may do")


def test_a_folded_node_attribute_referring_to_a_function_attribute_is_refused(tmp_path):
    """Mutant: ``_check_node`` without ``attr.ref_attr_name or``: a Transpose whose perm is a
    reference ran in the evaluator."""
    nodes = [helper.make_node("Transpose", ["w0"], ["W"])]
    nodes[0].attribute.append(_ref_attr("perm", "p", AttributeProto.INTS))
    path = fold_model(tmp_path / "m.onnx", nodes, [I(W.transpose(1, 0, 2, 3).copy(), "w0")])
    assert read_onnx(str(path)).refused["c"] == (
        "layer 'c': weights 'W': computed by Transpose node 'W': attribute 'perm' of type INTS "
        "cannot be folded")


# -- block and graph validation -------------------------------------------------------------------

@pytest.mark.parametrize("value", [[1, -1, 2], [-1], [0, 0, -1]])
def test_a_shape_size_of_minus_one_is_refused(value):
    """Mutants ``v < -1`` / ``v < 0`` dropped in the shape kind: -1 (NumPy's "infer this
    size") was accepted as a size."""
    spec = get_spec("Tensor").attr("shape")
    with pytest.raises(AttrError) as err:
        spec.validate(value)
    assert (err.value.attr, err.value.message) == ("shape", f"shape {value}: sizes must be >= 0")
    assert spec.validate([0] * len(value)) == [0] * len(value)


@pytest.mark.parametrize("type_id, port, sizes, message", [
    ("Conv2DBackpropInput", "input_sizes", [1, 5, -1, 3],
     "input_sizes [1, 5, -1, 3]: every size must be >= 0"),
    ("Conv2DBackpropInput", "input_sizes", [-1, 5],
     "input_sizes [-1, 5]: every size must be >= 0"),
    ("Conv2DBackpropFilter", "filter_sizes", [3, 3, 3, -1],
     ("filter_sizes [3, 3, 3, -1]: filter height, width and in_channels must be > 0 and "
     "out_channels >= 0")),
])
def test_a_size_vector_entry_of_minus_one_is_refused_at_its_port(type_id, port, sizes, message):
    """Mutants ``min(sizes) < -1`` (input_sizes) and ``shape[3] < -1`` (filter_sizes)."""
    spec = get_spec(type_id)
    attrs, _ = spec.resolve_attrs({"padding": "VALID"})
    with pytest.raises(AttrError) as err:
        spec.infer(attrs, _conv_inputs(spec, {port: sizes}))
    assert (err.value.attr, err.value.message) == (port, message)


@pytest.mark.parametrize("type_id, name, value", [
    ("Conv2D", "strides", [1, 2**31 - 1, 1, 1]),
    ("Conv2D", "explicit_paddings", [0, 0, 2**31 - 1, 0, 0, 0, 0, 0]),
    ("GradCheck", "samples", 2**31 - 1),
    ("GradCheck", "epsilon", 1e6),
    ("GradCheck", "epsilon", 1e-12),
    ("Transpose", "perm", [63, 0]),
    ("IntVector", "values", [-(2**31), 2**31 - 1]),
    ("Tensor", "seed", 0),
])
def test_a_value_equal_to_its_bound_is_accepted(type_id, name, value):
    """Mutants ``lo <= v < self.maximum`` / ``lo < v``, ``number >= self.maximum`` /
    ``number <= self.minimum``: bounds are inclusive."""
    assert get_spec(type_id).attr(name).validate(value) == value


@pytest.mark.parametrize("type_id, name, value, message", [
    ("Conv2D", "strides", [1, 2**31, 1, 1],
     ("strides [1, 2147483648, 1, 1]: every entry must be <= 2147483647 (TensorFlow's int32 "
     "range), got 2147483648")),
    ("GradCheck", "samples", 2**31,
     "samples must be <= 2147483647 (TensorFlow's int32 range), got 2147483648"),
    ("GradCheck", "epsilon", float(np.nextafter(1e6, 2e6)),
     "epsilon must be <= 1000000.0, got 1000000.0000000001"),
    ("GradCheck", "epsilon", float(np.nextafter(1e-12, 0)),
     "epsilon must be >= 1e-12, got 9.999999999999998e-13"),
    ("Transpose", "perm", [0, 64], "perm [0, 64]: every entry must be <= 63, got 64"),
    ("IntVector", "values", [-(2**31) - 1],
     "values [-2147483649]: every entry must be >= -2147483648, got -2147483649"),
    ("Tensor", "seed", -1, "seed must be >= 0, got -1"),
])
def test_a_value_one_past_its_bound_is_refused(type_id, name, value, message):
    with pytest.raises(AttrError) as err:
        get_spec(type_id).attr(name).validate(value)
    assert (err.value.attr, err.value.message) == (name, message)


def _conv_inputs(spec, sizes: dict | None = None, fin: int = 3) -> dict[str, TensorSpec]:
    """TensorSpecs for every input port of a conv ``spec``: input [1, 5, 5, 3], filter
    [3, 3, fin, 4], out_backprop [1, 3, 3, 4] (12 deep for a depthwise one; VALID); size
    vectors known."""
    depth = 12 if "Depthwise" in spec.type_id else 4
    sizes = {"filter_sizes": [3, 3, fin, 4], "input_sizes": [1, 5, 5, 3], **(sizes or {})}
    all_ports = {
        "input": TensorSpec((1, 5, 5, 3), "float32"),
        "filter": TensorSpec((3, 3, fin, 4), "float32"),
        "out_backprop": TensorSpec((1, 3, 3, depth), "float32"),
        **{p: TensorSpec((len(v),), "int32", value=np.array(v)) for p, v in sizes.items()},
    }
    return {p.name: all_ports[p.name] for p in spec.inputs}


CONV_TYPES = ["Conv2D", "DepthwiseConv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",
              "DepthwiseBackpropInput", "DepthwiseBackpropFilter"]


@pytest.mark.parametrize("type_id", CONV_TYPES)
def test_a_filter_with_zero_in_channels_is_an_error_naming_the_filter(type_id):
    """Mutant ``min(shape[:3]) < 0`` in ``_filter_dims``: a filter [3, 3, 0, 4] reached
    ``ZeroDivisionError`` (grouping by in_channels) in ``spec.infer`` of Conv2D and its
    backprops."""
    spec = get_spec(type_id)
    attrs, _ = spec.resolve_attrs({"padding": "VALID"})
    port = "filter_sizes" if "filter_sizes" in spec.input_names() else "filter"
    with pytest.raises(AttrError) as err:
        spec.infer(attrs, _conv_inputs(spec, fin=0))
    assert (err.value.attr, err.value.message) == (
        port, (f"{port} [3, 3, 0, 4]: filter height, width and in_channels must be > 0 and "
              "out_channels >= 0"))
    out = spec.infer(attrs, _conv_inputs(spec, fin=3))
    want = {"Conv2D": (1, 3, 3, 4), "DepthwiseConv2D": (1, 3, 3, 12),
            "Conv2DBackpropInput": (1, 5, 5, 3), "DepthwiseBackpropInput": (1, 5, 5, 3),
            "Conv2DBackpropFilter": (3, 3, 3, 4), "DepthwiseBackpropFilter": (3, 3, 3, 4)}
    assert out["output"].shape == want[type_id]


def test_a_canvas_with_a_zero_in_channel_filter_reports_the_node_and_port():
    """The same through the compiler: the node's error names the port, no exception escapes."""
    c = Canvas()
    c.add_node("Tensor", (0, 0), {"shape": [1, 5, 5, 3]}, id="x")
    c.add_node("Tensor", (0, 100), {"shape": [3, 3, 0, 4]}, id="w")
    c.add_node("Conv2D", (300, 0), {"padding": "VALID"}, id="conv")
    c.connect(("x", "output"), ("conv", "input"))
    c.connect(("w", "output"), ("conv", "filter"))
    plan = compile_canvas(c)
    assert not plan.ok
    assert [(e.node_id, e.attr, e.message) for e in plan.errors["conv"]] == [
        ("conv", "filter", ("filter [3, 3, 0, 4]: filter height, width and in_channels must be "
                           "> 0 and out_channels >= 0"))]


def test_a_negative_output_padding_is_refused(tmp_path):
    """Mutant ``min(value) < -1`` in ``_pair``: output_padding -1 (cropping) was imported."""
    path = transpose_model(tmp_path / "m.onnx", (1, 2, 3, 4), np.ones((2, 3, 3, 3), np.float32),
                           strides=[2, 2], output_padding=[-1, 0])
    assert refusal(path, "t") == ("layer 't': negative output_padding [-1, 0] cannot be "
                                  "imported")


def test_a_layer_with_no_output_channels_is_refused():
    """Mutant ``count < 0`` in ``check_layer``: weights [3, 3, 2, 0] were imported as a layer
    with nothing to compute."""
    from engine.io.models.model_import import ConvLayer, check_layer
    layer = ConvLayer(name="c", kernel=(3, 3), strides=(1, 1), dilations=(1, 1),
                      padding="VALID", pads=(0, 0, 0, 0), groups=1, in_channels=2,
                      out_channels=0, data_format="NCHW",
                      weights=np.zeros((3, 3, 2, 0), np.float32))
    with pytest.raises(ModelImportError) as err:
        check_layer(layer)
    assert str(err.value) == ("layer 'c': 0 output channels (weights of shape [3, 3, 2, 0]): "
                              "nothing to compute")
