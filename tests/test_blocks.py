"""Block specs: attribute validation, inference equals the kernels' actual results."""

import numpy as np
import pytest

from blocks.registry import REGISTRY, categories, get_spec
from blocks.spec import AttrError, TensorSpec
from engine.base.errors import InvalidArgumentError

MAIN = ("Conv2DBackpropFilter", "Conv2DBackpropInput", "DepthwiseBackpropFilter")


def test_registry_has_every_block_of_the_issue():
    assert set(REGISTRY) == {"Conv2DBackpropFilter", "Conv2DBackpropInput",
                             "DepthwiseBackpropFilter", "Conv2D", "DepthwiseConv2D",
                             "DepthwiseBackpropInput", "Tensor", "IntVector", "ShapeOf",
                             "Transpose", "Pad", "Slice", "Compare", "Output", "GradCheck", "AdjointCheck",
                             "Conv3D", "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2"}
    assert next(iter(categories())) == "Gradients"
    for type_id in MAIN:
        spec = get_spec(type_id)
        assert [a.name for a in spec.attrs][:5] == ["strides", "padding", "explicit_paddings",
                                                    "data_format", "dilations"]
    assert get_spec("Conv2DBackpropFilter").input_names() == ("input", "filter_sizes",
                                                              "out_backprop")
    assert get_spec("Conv2DBackpropInput").input_names() == ("input_sizes", "filter",
                                                             "out_backprop")
    with pytest.raises(InvalidArgumentError, match="unknown block type 'Conv4D'"):
        get_spec("Conv4D")


@pytest.mark.parametrize("name, value, match", [
    ("strides", [1, 2, 1], "strides must have 4 elements, got 3"),
    ("strides", [1, 0, 1, 1], r"strides \[1, 0, 1, 1\]: every entry must be >= 1"),
    ("padding", "FULL", "padding 'FULL' is not one of SAME, VALID, EXPLICIT"),
    ("data_format", "NWHC", "data_format 'NWHC' is not one of NHWC, NCHW"),
    ("use_cudnn_on_gpu", 1, "use_cudnn_on_gpu must be true or false"),
    ("explicit_paddings", [0, 0, 1, 1], "explicit_paddings must have 8 elements"),
])
def test_invalid_attribute_values_are_named(name, value, match):
    with pytest.raises(AttrError, match=match) as info:
        get_spec("Conv2DBackpropFilter").attr(name).validate(value)
    assert info.value.attr == name


def _ivec(values):
    v = np.asarray(values, np.int32)
    return TensorSpec(v.shape, "int32", None, v)


def test_inference_of_the_main_blocks_matches_their_run():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 7, 6, 4)).astype(np.float32)
    w = rng.standard_normal((3, 3, 4, 5)).astype(np.float32)
    attrs = dict(get_spec("Conv2DBackpropFilter").defaults(), strides=[1, 2, 2, 1],
                 padding="EXPLICIT", explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0])
    y = get_spec("Conv2D").run(attrs, {"input": x, "filter": w})["output"]
    specs = {"input": TensorSpec(x.shape, "float32"), "out_backprop": TensorSpec(y.shape,
                                                                                 "float32")}
    bf = get_spec("Conv2DBackpropFilter")
    inferred = bf.infer(attrs, {**specs, "filter_sizes": _ivec(w.shape)})["output"]
    actual = bf.run(attrs, {"input": x, "filter_sizes": np.array(w.shape), "out_backprop": y})
    assert inferred.shape == actual["output"].shape == w.shape
    assert inferred.axes == ("kh", "kw", "in", "out")
    bi = get_spec("Conv2DBackpropInput")
    inferred = bi.infer(attrs, {"input_sizes": _ivec(x.shape), "filter": TensorSpec(
        w.shape, "float32"), "out_backprop": specs["out_backprop"]})["output"]
    assert inferred.shape == bi.run(attrs, {"input_sizes": np.array(x.shape), "filter": w,
                                            "out_backprop": y})["output"].shape == x.shape


def test_inference_errors_name_the_attribute_or_port():
    spec = get_spec("Conv2DBackpropFilter")
    attrs = dict(spec.defaults(), strides=[2, 1, 1, 1])
    inputs = {"input": TensorSpec((1, 5, 5, 2), "float32"), "filter_sizes": _ivec([3, 3, 2, 4]),
              "out_backprop": TensorSpec((1, 5, 5, 4), "float32")}
    with pytest.raises(AttrError) as info:
        spec.infer(attrs, inputs)
    assert info.value.attr == "strides" and "batch and depth" in info.value.message
    with pytest.raises(AttrError) as info:
        spec.infer(spec.defaults(), {**inputs, "out_backprop": TensorSpec((1, 4, 5, 4),
                                                                          "float32")})
    assert info.value.attr == "out_backprop"
    assert "out_backprop height 4 does not match the computed output height 5" in str(info.value)
    unknown = {**inputs, "filter_sizes": TensorSpec((4,), "int32")}
    with pytest.raises(AttrError, match="filter_sizes must be known before running"):
        spec.infer(spec.defaults(), unknown)


def test_explicit_paddings_are_ignored_unless_padding_is_explicit():
    spec = get_spec("Conv2D")
    x, w = np.ones((1, 4, 4, 1)), np.ones((3, 3, 1, 1))
    attrs = dict(spec.defaults(), padding="VALID", explicit_paddings=[0, 0, 2, 2, 2, 2, 0, 0])
    assert spec.run(attrs, {"input": x, "filter": w})["output"].shape == (1, 2, 2, 1)
    attrs["padding"] = "EXPLICIT"
    assert spec.run(attrs, {"input": x, "filter": w})["output"].shape == (1, 6, 6, 1)


@pytest.mark.parametrize("fill, expect", [
    ("zeros", np.zeros((2, 3))), ("ones", np.ones((2, 3))),
    ("arange", np.arange(1, 7, dtype=np.float64).reshape(2, 3)),
])
def test_tensor_fills(fill, expect):
    spec = get_spec("Tensor")
    attrs = dict(spec.defaults(), shape=[2, 3], dtype="float64", fill=fill)
    assert spec.infer(attrs, {})["output"].shape == (2, 3)
    np.testing.assert_array_equal(spec.run(attrs, {})["output"], expect)


def test_tensor_random_is_seeded_and_values_and_files_load(tmp_path):
    spec = get_spec("Tensor")
    attrs = dict(spec.defaults(), shape=[3, 4], fill="random_normal", seed=5)
    a, b = spec.run(attrs, {})["output"], spec.run(attrs, {})["output"]
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.float32 and a.std() > 0
    assert not np.array_equal(a, spec.run(dict(attrs, seed=6), {})["output"])
    vals = dict(spec.defaults(), fill="values", values=[[1, 2], [3, 4]], dtype="float16")
    assert spec.infer(vals, {})["output"].shape == (2, 2)
    assert spec.run(vals, {})["output"].tolist() == [[1, 2], [3, 4]]
    np.save(tmp_path / "w.npy", np.arange(6.0).reshape(1, 2, 3))
    f = dict(spec.defaults(), fill="file", path=str(tmp_path / "w.npy"), dtype="float64")
    assert spec.infer(f, {})["output"].shape == (1, 2, 3)
    np.testing.assert_array_equal(spec.run(f, {})["output"], np.arange(6.0).reshape(1, 2, 3))
    with pytest.raises(AttrError, match="no such .npy file") as info:
        spec.infer(dict(f, path=str(tmp_path / "missing.npy")), {})
    assert info.value.attr == "path"


def test_shapeof_transpose_and_compare():
    x = TensorSpec((2, 5, 6, 3), "float32", ("N", "H", "W", "C"))
    shape = get_spec("ShapeOf").infer({}, {"input": x})["output"]
    assert shape.value.tolist() == [2, 5, 6, 3] and shape.dtype == "int32"
    t = get_spec("Transpose").infer({"perm": [0, 3, 1, 2]}, {"input": x})["output"]
    assert t.shape == (2, 3, 5, 6) and t.axes == ("N", "C", "H", "W")
    with pytest.raises(AttrError, match="not a permutation"):
        get_spec("Transpose").infer({"perm": [0, 1, 1, 2]}, {"input": x})
    cmp = get_spec("Compare")
    a = np.array([1.0, 2.0, 3.0], np.float32)
    out = cmp.run({}, {"a": a, "b": a + np.float32(1e-6)})
    assert bool(out["agree"]) and float(out["max_abs_error"]) == pytest.approx(1e-6, rel=0.2)
    out = cmp.run({}, {"a": a, "b": a + 1})
    assert not bool(out["agree"]) and float(out["max_rel_error"]) == pytest.approx(1 / 4)
    with pytest.raises(AttrError, match=r"b shape \[2\] does not match a shape \[3\]"):
        cmp.infer({}, {"a": TensorSpec((3,), "float32"), "b": TensorSpec((2,), "float32")})


def test_main_output_and_verdict_name_outputs_and_a_verdict_is_a_bool_scalar():
    for spec in REGISTRY.values():
        names = spec.output_names()
        assert spec.main_output_name() == (spec.main_output or (names[0] if names else None))
        assert spec.main_output_name() in names or not names, spec.type_id
        assert spec.verdict is None or spec.verdict in names, spec.type_id
    cmp = get_spec("Compare")
    assert (cmp.main_output_name(), cmp.verdict) == ("output", "agree")
    a = TensorSpec((2, 3), "float32")
    assert cmp.infer({}, {"a": a, "b": a})[cmp.verdict] == TensorSpec((), "bool")
    assert get_spec("Conv2DBackpropFilter").verdict is None
