"""Issue 31 point 5, the API half: every public function of the notebook API (engine.api, and
the verify/assert_conformant it re-exports) checks each argument's type at the boundary and
answers a wrong one with one InvalidArgumentError line naming the argument, what it must be and
what it is, before any work: no case of a sweep runs, no block is added."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable

import numpy as np
import pytest

import engine
from engine import api, kernels
from engine.base.errors import InvalidArgumentError
from tests.test_api_hostile import small

CALLS: list[object] = []


def recording_fn():
    """A conv a worker cannot import (a closure): it would run in this process, recorded."""

    def conv(*args, **kwargs):
        CALLS.append(args)
        raise AssertionError("no case may run")

    return conv


# (the argument, a bad value, words the message holds besides the argument's name)
VERIFY_BAD = [
    ("dtype", None, "got NoneType None"),
    ("dtype", 5, "got int 5"),
    ("dtype", 1.5, "got float"),
    ("dtype", np.float32, "got type"),
    ("dtype", {"float32"}, "got set"),
    ("dtype", b"float32", "got bytes"),
    ("dtype", "nope", "'nope'"),
    ("dtype", ["float32", 5], "5"),
    ("dtype", [], "at least one"),
    ("support", 123, "got int 123"),
    ("support", ["strides<=2"], "got list"),
    ("support", b"strides<=2", "got bytes"),
    ("support", True, "got bool"),
    ("progress", "x", "got str 'x'"),
    ("progress", 5, "got int 5"),
    ("progress", True, "got bool"),
    ("cancel", "yes", "got str 'yes'"),
    ("cancel", True, "got bool"),
    ("cancel", 1, "got int"),
    ("cancel", threading.Event, "got type"),  # the class, not an event
    ("cases", "3", "'3'"),
    ("cases", True, "True"),
    ("cases", 3.0, "3.0"),
    ("cases", None, "None"),
    ("cases", 0, "0"),
    ("seed", "1", "'1'"),
    ("jobs", None, "None"),
    ("jobs", 1.0, "1.0"),
    ("max_failures", "1", "'1'"),
    ("memory", "5", "'5'"),
    ("case_timeout", "1", "'1'"),
    ("case_timeout", None, "None"),
    ("path", 123, "123"),
    ("op", 5, "5"),
    ("op", None, "None"),
    ("convention", 5, "5"),
]


def _verify_call(entry: Callable, name: str, value: object) -> None:
    kwargs: dict[str, object] = {"op": "Conv2D", "cases": 2}
    kwargs[name] = value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the in-process warning
        entry(recording_fn(), **kwargs)


@pytest.mark.parametrize("entry", [api.verify, api.assert_conformant],
                         ids=["verify", "assert_conformant"])
@pytest.mark.parametrize("name, value, words", VERIFY_BAD,
                         ids=[f"{n}={v!r}" for n, v, _ in VERIFY_BAD])
def test_verify_refuses_a_bad_argument_before_any_case_runs(entry, name, value, words):
    CALLS.clear()
    with pytest.raises(InvalidArgumentError) as caught:
        _verify_call(entry, name, value)
    err = caught.value
    text = str(err)
    assert type(err) is InvalidArgumentError, type(err)
    assert err.argument == name, (err.argument, text)
    assert name in text and words in text and "\n" not in text, text
    assert CALLS == []  # refused before any case ran


def test_verify_refuses_a_framework_with_a_bad_support_before_looking_it_up():
    for fw in ("tensorflow", "onnxruntime", "jax"):
        with pytest.raises(InvalidArgumentError) as caught:
            api.verify(fw, op="Conv2D", cases=1, support=5)
        assert caught.value.argument == "support", str(caught.value)


def test_assert_conformant_names_an_unknown_option():
    with pytest.raises(InvalidArgumentError) as caught:
        api.assert_conformant(recording_fn(), op="Conv2D", cases=1, nope=1)
    assert caught.value.argument == "nope" and "nope" in str(caught.value)
    assert "cases" in str(caught.value)  # the options it has are listed


GOOD_VERIFY = [
    ("dtype", ("float32",)), ("dtype", ["float32", "float64"]), ("dtype", "float32,float64"),
    ("support", None), ("support", "strides<=2"), ("progress", None), ("cancel", None),
    ("cancel", threading.Event()),
]


@pytest.mark.parametrize("name, value", GOOD_VERIFY, ids=[f"{n}={v!r}" for n, v in GOOD_VERIFY])
def test_verify_accepts_the_documented_forms(name, value):
    kwargs: dict[str, object] = {"op": "Conv2D", "cases": 1, name: value}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        report = api.verify(lambda **kw: kernels.conv2d(**kw), **kwargs)
    assert report.cases == 1


def test_verify_calls_a_progress_callable_and_reads_an_event_like_cancel():
    class Flag:  # an Event-like: is_set() only
        def is_set(self) -> bool:
            return False

    seen: list[tuple[int, int]] = []

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        report = api.verify(lambda **kw: kernels.conv2d(**kw), op="Conv2D", cases=2,
                            progress=lambda d, t: seen.append((d, t)), cancel=Flag())
    assert report.cases == 2 and seen[-1] == (2, 2)


# (what, call on small(), the argument, words of the message)
CANVAS_BAD = [
    ("add an int type", lambda c: c.add(5), "type_id", "got int 5"),
    ("add a None type", lambda c: c.add(None), "type_id", "got NoneType None"),
    ("add a list type", lambda c: c.add(["Tensor"]), "type_id", "got list"),
    ("add a title list", lambda c: c.add("Tensor", title=["a"]), "title", "must be a string"),
    ("set a list id", lambda c: c.set(["x"], seed=1), "id", "got list"),
    ("connect an int src", lambda c: c.connect(1, "t"), "src", "got int 1"),
    ("connect a None src", lambda c: c.connect(None, "t"), "src", "got NoneType None"),
    ("connect a tuple src", lambda c: c.connect(("x", "output"), "t"), "src", "got tuple"),
    ("connect an int dst", lambda c: c.connect("x", 2), "dst", "got int 2"),
    ("connect a bytes dst", lambda c: c.connect("x", b"t"), "dst", "got bytes"),
    ("result key int", lambda c: c.run()[0], "key", "got int 0"),
    ("result key None", lambda c: c.run()[None], "key", "got NoneType None"),
    ("result axes of a list", lambda c: c.run().axes(["t"]), "key", "got list"),
    ("result picture of bytes", lambda c: c.run().picture(b"t"), "key", "got bytes"),
    ("save None", lambda c: c.save(None), "path", "got NoneType None"),
    ("load an int", lambda c: engine.load(5), "path", "got int 5"),
    ("picture of None", lambda c: api.picture(None), "array", "got NoneType None"),
    ("picture size str", lambda c: api.picture(np.ones((2, 2)), size="ab"), "size", "got str"),
    ("picture axes int", lambda c: api.picture(np.ones((2, 2)), axes=5), "axes", "got int 5"),
]


@pytest.mark.parametrize("what, call, name, words", CANVAS_BAD, ids=[b[0] for b in CANVAS_BAD])
def test_canvas_calls_name_the_bad_argument(what, call, name, words):
    c = small()
    before = c.canvas.to_json()
    with pytest.raises(InvalidArgumentError) as caught:
        call(c)
    err, text = caught.value, str(caught.value)
    assert err.argument == name, (err.argument, text)
    assert text.startswith(f"{name} must be "), text
    assert words in text and "\n" not in text, text
    assert c.canvas.to_json() == before
