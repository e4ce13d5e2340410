"""engine.shapes.memo: a shape rule answers a repeated call from its table, by value."""

import numpy as np
import pytest

from engine.shapes import memo


def counting_rule():
    calls = []

    def rule(*args, **kwargs):
        calls.append((args, kwargs))
        if kwargs.get("fail"):
            raise ValueError(f"bad strides {args[0]}")
        return ("result", len(calls))

    return memo.memoized(rule), calls


def test_a_repeated_call_is_answered_from_the_table_and_other_values_are_not():
    rule, calls = counting_rule()
    first = rule((1, 4, 4, 16), [1, 2, 2, 1], "SAME", depthwise=True)
    assert rule((1, 4, 4, 16), [1, 2, 2, 1], "SAME", depthwise=True) is first
    assert len(calls) == 1
    for other in (((1, 4, 4, 16), [1, 1, 1, 1], "SAME"), ((1, 4, 4, 16), [1, 2, 2, 1], "VALID"),
                  ((1, 4, 4, 16), (1, 2, 2, 1), "SAME")):  # a tuple is not the list
        assert rule(*other, depthwise=True) != first
    assert rule((1, 4, 4, 16), [1, 2, 2, 1], "SAME", depthwise=False) != first
    assert len(calls) == 5
    sizes = np.array([1, 4, 4, 16], np.int32)
    a = rule(sizes, "SAME")
    assert rule(sizes.copy(), "SAME") is a
    assert rule(sizes.astype(np.int64), "SAME") is not a  # the dtype is part of the key
    assert len(calls) == 7


def test_errors_and_unkeyable_arguments_are_never_remembered():
    rule, calls = counting_rule()
    for _ in range(2):
        with pytest.raises(ValueError, match=r"bad strides \[1, 0\]"):
            rule([1, 0], fail=True)
    for value in ([np.int64(1), 2], 1.5, np.ones((2, 2), np.int32), object()):
        rule(value)
        rule(value)
    assert len(calls) == 2 + 8


def test_the_table_forgets_its_oldest_call_beyond_its_size(monkeypatch):
    monkeypatch.setattr(memo, "SIZE", 3)
    rule, calls = counting_rule()
    for n in range(4):
        rule(n)
    rule(3)
    assert len(calls) == 4
    rule(0)  # forgotten
    assert len(calls) == 5


def test_the_ops_answer_repeated_and_changed_shapes_alike():
    from engine import kernels

    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 3, 2, 1)).astype(np.float32)
    for shape, strides, expect in (((1, 5, 5, 2), [1, 2, 2, 1], (1, 3, 3, 2)),
                                   ((1, 5, 5, 2), [1, 1, 1, 1], (1, 5, 5, 2)),
                                   ((1, 5, 5, 2), [1, 2, 2, 1], (1, 3, 3, 2)),
                                   ((2, 4, 6, 2), [1, 2, 2, 1], (2, 2, 3, 2))):
        x = rng.standard_normal(shape).astype(np.float32)
        y = kernels.depthwise_conv2d_native(input=x, filter=w, strides=strides, padding="SAME")
        assert y.shape == expect
