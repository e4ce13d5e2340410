"""The third round of boundaries the issue 32 point 7 mutation probe left unpinned: each test
asserts computed results on both sides of one line (the mutant it kills is in its docstring,
checked by applying it). Keras shapes (Conv2DTranspose's default and explicit output_padding,
Cropping2D down to one row, Concatenate on axis -rank, rank-2 shapes, how deep arguments and
nested models are walked), ... (see each section)."""

from __future__ import annotations

import pytest

from engine.io.models.keras_graph import MAX_ARG_DEPTH, MAX_MODEL_DEPTH, layer_inputs
from engine.io.models.keras_shapes import ShapeStop, output_shape

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
