"""engine.explain.reverse.feeds is exactly the inverse relation of explain_element's terms: over
random geometries of all six ops, the output elements an input element feeds are those whose
listed terms have it as a factor (hypothesis), plus cases by hand and the errors."""

import numpy as np
import pytest
from hypothesis import given

from engine.base.errors import InvalidArgumentError
from engine.explain.reverse import feeds, output_shape
from engine.explain.terms import OPS, explain_element
from tests.test_explain import _run, explained_cases


def _shapes(inputs):
    return {p: (a.tolist() if p.endswith("_sizes") else a.shape) for p, a in inputs.items()}


@given(explained_cases())
def test_feeds_is_the_inverse_of_the_listed_terms(case):
    type_id, g, attrs, _dtype, seed, _ = case
    form = OPS[type_id]
    rng = np.random.default_rng(seed)
    x, w, dy = (rng.standard_normal(s).astype(np.float32)
                for s in (g.input_shape, g.filter_shape, g.output_shape))
    out, inputs = _run(type_id, g, attrs, x, w, dy)
    shapes = _shapes(inputs)
    assert output_shape(type_id, attrs, shapes) == out.shape
    # the relation from the explanations of every output element
    forward = {p: set() for p in form.operands}
    for y in np.ndindex(*out.shape):
        e = explain_element(type_id, attrs, inputs, y)
        for f in e.factors:
            forward[f.port].update((tuple(i), y) for i in f.index.tolist())
    for port in form.operands:
        reverse = set()
        for i in np.ndindex(*inputs[port].shape):
            got = feeds(type_id, attrs, shapes, port, i)
            assert got.dtype == np.int64 and got.shape[1:] == (4,)
            rows = [tuple(r) for r in got.tolist()]
            assert len(rows) == len(set(rows)) and rows == sorted(rows)
            reverse.update((i, y) for y in rows)
        assert reverse == forward[port]


def test_backprop_filter_input_element_feeds_by_hand():
    """x [1,4,4,1], 2x2 filter, stride 2, VALID: x[0,1,3,0] is read by tap (1,1) only."""
    shapes = {"input": (1, 4, 4, 1), "filter_sizes": [2, 2, 1, 3], "out_backprop": (1, 2, 2, 3)}
    attrs = {"strides": [1, 2, 2, 1], "padding": "VALID"}
    got = feeds("Conv2DBackpropFilter", attrs, shapes, "input", (0, 1, 3, 0))
    assert got.tolist() == [[1, 1, 0, 0], [1, 1, 0, 1], [1, 1, 0, 2]]
    got = feeds("Conv2DBackpropFilter", attrs, shapes, "out_backprop", (0, 1, 0, 2))
    assert got.tolist() == [[0, 0, 0, 2], [0, 1, 0, 2], [1, 0, 0, 2], [1, 1, 0, 2]]


@pytest.mark.parametrize("port, index, message", [
    ("filter_sizes", (0,), "no array operand 'filter_sizes'"),
    ("input", (0, 9, 0, 0), "out of range"),
    ("input", (0, 0, 0), "has 3 entries"),
])
def test_bad_port_or_index_is_a_clear_error(port, index, message):
    shapes = {"input": (1, 4, 4, 1), "filter_sizes": [2, 2, 1, 3], "out_backprop": (1, 3, 3, 3)}
    with pytest.raises(InvalidArgumentError, match=message):
        feeds("Conv2DBackpropFilter", {}, shapes, port, index)


def test_a_non_conv_block_is_an_error():
    with pytest.raises(InvalidArgumentError, match="Tensor is not a conv block"):
        feeds("Tensor", {}, {}, "input", (0,))
