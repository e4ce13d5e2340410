"""The notebook API (engine.api) given what a hostile or careless caller passes: every public
function type-checks its arguments and answers a bad one with one InvalidArgumentError line
naming it (expected vs actual), never a traceback from NumPy or Pillow, never a huge
allocation; masked arrays are refused (their mask would be ignored); the arrays a run returns
are read-only, so a second run cannot return a value a caller wrote."""

from __future__ import annotations

import datetime
import math
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import api
from engine.base.errors import InvalidArgumentError
from engine.graph.canvas import Canvas


def small() -> api.NotebookCanvas:
    c = engine.new_canvas()
    c.add("Tensor", id="x", shape=[2, 3], fill="arange")
    c.add("Transpose", id="t", perm=[1, 0])
    c.connect("x", "t")
    return c


def deep_list(depth: int) -> list:
    value: list = [1.0]
    for _ in range(depth):
        value = [value]
    return value


# (what, array, words the message must hold)
ARRAYS = [
    ("a string", "abc", "got str 'abc'"),
    ("None", None, "got NoneType None"),
    ("bytes", b"\x00\x01", "got bytes"),
    ("a dict", {"a": 1}, "got dict"),
    ("a set", {1, 2}, "got set"),
    ("a generator", (i for i in range(3)), "got generator"),
    ("a complex number", 1j, "got complex"),
    ("a datetime", datetime.datetime(2020, 1, 1), "got datetime"),
    ("a date", datetime.date(2020, 1, 1), "got date"),
    ("a ragged list", [[1, 2], [3]], "rows of equal length"),
    ("a ragged 3-D list", [[[1.0]], [2.0]], "rows of equal length"),
    ("a list 100,000 deep", deep_list(100_000), "rows of equal length"),
    ("a list of datetimes", [datetime.datetime(2020, 1, 1)], "dtype object"),
    ("a list with None", [1.0, None], "dtype object"),
    ("a list of strings", ["a", "b"], "dtype <U1: text"),
    ("a list of bytes", [b"a"], "dtype |S1: bytes"),
    ("an int beyond int64", 2**70, "dtype object"),
    ("a list of complex", [1j, 2.0], "complex numbers"),
    ("a complex array", np.ones((2, 2), np.complex64), "dtype complex64: complex numbers"),
    ("an object array", np.array([1, "a"], object), "dtype object"),
    ("a numeric object array", np.array([1.0, 2.0], object), "dtype object"),
    ("an array of arrays", np.array([np.zeros(2), np.zeros(3)], object), "dtype object"),
    ("a text array", np.array(["x", "y"]), "text"),
    ("a bytes array", np.array([b"x"]), "bytes"),
    ("a datetime64 array", np.array(["2020-01-01"], "datetime64[D]"), "dates"),
    ("a timedelta64 array", np.array([1], "timedelta64[s]"), "time spans"),
    ("a structured array", np.zeros(3, [("a", "f4"), ("b", "i4")]), "structured records"),
    ("a raw-bytes array", np.zeros(3, "V4"), "raw bytes"),
    ("a masked array", np.ma.array([1.0, 2.0], mask=[False, True]), "masked array"),
    ("a masked array without a mask", np.ma.array([1.0, 2.0]), "masked array"),
    ("a masked 0-d array", np.ma.masked_array(3.0, mask=True), "masked array"),
    ("a list of masked arrays", [np.ma.array([1.0], mask=[True])], "masked array"),
    ("10^12 broadcast elements", np.broadcast_to(np.float32(1), (10**6, 10**6)),
     "at most 2,147,483,648 elements (a picture reads each one), got 1,000,000,000,000"),
]


@pytest.mark.parametrize("what, array, words", ARRAYS, ids=[a[0] for a in ARRAYS])
def test_picture_refuses_what_is_not_an_array_of_numbers(what, array, words):
    with pytest.raises(InvalidArgumentError) as caught:
        api.picture(array)
    err = caught.value
    assert type(err) is InvalidArgumentError and err.argument == "array"
    text = str(err)
    assert text.startswith("array must ") and "\n" not in text and words in text, text


SIZES = [(-5, 10), (10, -5), (0, 0), (10**9, 10**9), (4097, 10), (10, 2**63), (10.5, 10),
         (10.0, 10), (np.float64(3), 4), (True, True), ([1], 2), (5,), (1, 2, 3), "ab", 7,
         None, {"w": 1, "h": 2}]


@pytest.mark.parametrize("size", SIZES, ids=[repr(s) for s in SIZES])
def test_picture_refuses_a_bad_size_before_allocating(size):
    tracemalloc.start()
    try:
        with pytest.raises(InvalidArgumentError) as caught:
            api.picture(np.ones((4, 4), np.float32), size=size)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.argument == "size" and peak < 2**20  # no image was made
    assert str(caught.value).startswith("size must be (width, height): two whole numbers of "
                                        "pixels in 1..4096, got ")


def test_the_largest_size_is_drawn_within_it():
    image = api.picture(np.ones((2, 2), np.float32), size=(api.MAX_PICTURE_SIDE, 1))
    assert image.size[0] <= api.MAX_PICTURE_SIDE and image.size[1] == 1


AXES = ["khkw", ("kh", "kw"), (1, 2, 3, 4), ("kh", None, "in", "out"), 5,
        ("kh", "kw", "in", "out", "x")]


@pytest.mark.parametrize("axes", AXES, ids=[repr(a) for a in AXES])
def test_picture_refuses_bad_axes(axes):
    with pytest.raises(InvalidArgumentError) as caught:
        api.picture(np.ones((2, 2, 2, 2), np.float32), axes=axes)
    assert caught.value.argument == "axes"
    assert str(caught.value).startswith("axes must be None or 4 axis names (strings), one per "
                                        "dimension of the array, got ")


def test_masked_arrays_are_refused_and_their_filled_values_are_pictured():
    """The mask is not silently dropped: refused, and the message says how to choose."""
    masked = np.ma.array([[1.0, 5.0], [3.0, 4.0]], mask=[[False, True], [False, False]])
    with pytest.raises(InvalidArgumentError, match=r"pass array\.filled\(value\)"):
        api.picture(masked)
    filled = np.asarray(api.picture(masked.filled(0.0), size=(2, 2)))
    plain = np.asarray(api.picture(np.array([[1.0, 0.0], [3.0, 4.0]]), size=(2, 2)))
    np.testing.assert_array_equal(filled, plain)


PATHS = [0, None, 3.5, ["a.gbc.json"], object(), "", "a\x00b.gbc.json", b"a\x00b"]


@pytest.mark.parametrize("path", PATHS, ids=[repr(p) for p in PATHS])
def test_load_and_save_refuse_what_is_not_a_path(path):
    for call in (lambda: engine.load(path), lambda: small().save(path)):
        with pytest.raises(InvalidArgumentError) as caught:
            call()
        assert caught.value.argument == "path" and "\n" not in str(caught.value)
        assert str(caught.value).startswith("path must be a ")


def test_save_into_a_folder_or_a_missing_folder_is_an_error_naming_the_path(tmp_path):
    c = small()
    for target in (tmp_path, tmp_path / "missing" / "c.gbc.json"):
        with pytest.raises(InvalidArgumentError) as caught:
            c.save(target)
        assert caught.value.argument == "path"
        assert str(caught.value).startswith(f"path {str(target)!r}: cannot write the canvas: ")
    assert list(tmp_path.iterdir()) == []


def test_load_of_a_bytes_or_pathlike_path_works(tmp_path):
    path = tmp_path / "c.gbc.json"
    small().save(path)
    for given in (path, str(path), bytes(path)):
        assert engine.load(given).run()["t"].tolist() == [[1, 4], [2, 5], [3, 6]]


CONSTRUCTOR = [
    ({"canvas": "abc"}, "canvas"), ({"canvas": {"nodes": []}}, "canvas"),
    ({"base_dir": 5}, "base_dir"), ({"base_dir": ""}, "base_dir"),
    ({"memory_limit": "2G"}, "memory_limit"), ({"memory_limit": -1}, "memory_limit"),
    ({"memory_limit": 0}, "memory_limit"), ({"memory_limit": True}, "memory_limit"),
    ({"memory_limit": None}, "memory_limit"), ({"memory_limit": math.nan}, "memory_limit"),
    ({"memory_limit": math.inf}, "memory_limit"), ({"memory_limit": 0.5}, "memory_limit"),
]


@pytest.mark.parametrize("kwargs, name", CONSTRUCTOR, ids=[repr(k) for k, _ in CONSTRUCTOR])
def test_the_canvas_constructor_checks_its_arguments(kwargs, name):
    with pytest.raises(InvalidArgumentError) as caught:
        api.NotebookCanvas(**kwargs)
    assert caught.value.argument == name and str(caught.value).startswith(f"{name} must be ")


def _add(**kwargs) -> Callable[[api.NotebookCanvas], object]:
    return lambda c: c.add(kwargs.pop("type_id", "Tensor"), **kwargs)


# (what, call on small(), the argument named, words of the message)
BUILDING = [
    ("add an int type", lambda c: c.add(5), "type_id", "type_id must be a block type name"),
    ("add a None type", lambda c: c.add(None), "type_id", "got NoneType None"),
    ("add an unknown type", lambda c: c.add("Nope"), "type_id", "unknown block type 'Nope'"),
    ("add an int id", _add(id=5), "id", "expected a string id, got 5"),
    ("add an empty id", _add(id=""), "id", "node id '' must be 1-64 characters"),
    ("add an id with BEL", _add(id="a\x07"), "id", "'a\\x07'"),
    ("add a 65-character id", _add(id="x" * 65), "id", "1-64 characters"),
    ("add a taken id", _add(id="x"), "id", "already on the canvas"),
    ("add an int title", _add(title=5), "title", "title must be a string"),
    ("add a string pos", _add(pos="ab"), None, "pos must be [x, y] finite numbers"),
    ("add a NaN pos", _add(pos=(math.nan, 0)), None, "pos must be [x, y] finite numbers"),
    ("add a 3-number pos", _add(pos=(1, 2, 3)), None, "pos must be [x, y] finite numbers"),
    ("add a far pos", _add(pos=(1e300, 0)), None, "within 1e+09 of the origin"),
    ("add an unknown attribute", _add(nope=1), "nope", "Tensor has no attribute 'nope'"),
    ("add a string shape", _add(shape="abc"), "shape", "must be a list of integers"),
    ("add a negative shape", _add(shape=[-1, 2]), "shape", "sizes must be >= 0"),
    ("add a NumPy shape", _add(shape=np.array([1, 2])), "shape", "list of integers"),
    ("add masked values", _add(fill="values", values=np.ma.array([1.0], mask=[1])),
     "values", "attribute values: a masked array is refused (its mask would be ignored)"),
    ("set masked values", lambda c: c.set("x", values=np.ma.array([[1.0]])), "values",
     "a masked array is refused"),
    ("set an int id", lambda c: c.set(5, seed=1), "id",
     "id must be a block id (a string), got int 5"),
    ("set a None id", lambda c: c.set(None, seed=1), "id", "got NoneType None"),
    ("set an unknown block", lambda c: c.set("zz", seed=1), "id", "no block 'zz'"),
    ("set an unknown attribute", lambda c: c.set("x", nope=1), "nope", "no attribute 'nope'"),
    ("set a float seed", lambda c: c.set("x", seed=1.5), "seed", "seed"),
    ("connect ints", lambda c: c.connect(1, 2), "src",
     "written 'block.port' or 'block' (a string), got int 1"),
    ("connect None", lambda c: c.connect(None, "t"), "src", "got NoneType None"),
    ("connect a tuple", lambda c: c.connect(("x", "output"), "t"), "src",
     "got tuple ('x', 'output')"),
    ("connect an unknown block", lambda c: c.connect("zz.output", "t"), "id", "no block 'zz'"),
    ("connect an unknown port", lambda c: c.connect("x.nope", "t"), "port", "no output port"),
    ("connect into an output", lambda c: c.connect("x", "t.output"), "port", "no input port"),
]


@pytest.mark.parametrize("what, call, name, words", BUILDING, ids=[b[0] for b in BUILDING])
def test_building_calls_check_their_arguments(what, call, name, words):
    c = small()
    before = c.canvas.to_json()
    with pytest.raises(InvalidArgumentError) as caught:
        call(c)
    text = str(caught.value)
    assert words in text and "\n" not in text, text
    if name is not None:
        assert caught.value.argument == name
    assert c.canvas.to_json() == before  # nothing changed


RESULT_KEYS = [0, None, 1.5, b"t", ("t", "output"), "zz", "t.nope", ""]


@pytest.mark.parametrize("key", RESULT_KEYS, ids=[repr(k) for k in RESULT_KEYS])
def test_result_access_checks_its_key(key):
    r = small().run()
    for call in (lambda: r[key], lambda: r.axes(key), lambda: r.picture(key)):
        with pytest.raises(InvalidArgumentError) as caught:
            call()
        assert "\n" not in str(caught.value)
        assert isinstance(caught.value, KeyError)  # a Mapping's missing key, too


def test_result_picture_checks_its_size():
    r = small().run()
    for size in ((-1, 5), "big", (10**9, 10**9)):
        with pytest.raises(InvalidArgumentError) as caught:
            r.picture("t", size=size)
        assert caught.value.argument == "size"


def test_results_are_read_only_and_a_second_run_is_unchanged():
    c = small()
    first = c.run()
    for array in (first["t"], first["x"], first["t.output"], first.named["t"]):
        with pytest.raises(ValueError, match="read-only"):
            array[...] = 99
        with pytest.raises(ValueError, match="WRITEABLE"):
            array.flags.writeable = True  # a view of a read-only array stays read-only
    mine = np.array(first["t"])  # a copy is the caller's own
    mine[...] = 99
    second = c.run()
    assert second.result.computed == set()  # served from the cache...
    assert second["t"].tolist() == [[1, 4], [2, 5], [3, 6]]  # ...which nobody changed
    assert first["t"].tolist() == [[1, 4], [2, 5], [3, 6]]


def test_the_check_report_of_a_good_canvas_has_no_warning():
    report = small().check()
    assert report.ok and report.warnings == [] and "warning" not in str(report)


def test_a_canvas_object_is_accepted():
    canvas = Canvas()
    canvas.add_node("Tensor", id="x", attrs={"shape": [1]})
    assert api.NotebookCanvas(canvas, Path("."), 2**30).run()["x"].shape == (1,)
